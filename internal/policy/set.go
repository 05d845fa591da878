package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
)

// ErrAmbiguous: more than one policy governs the same server for the same pod. Neither is
// applied; the call is denied (action-evidence-boundary, "Relying-Party Inputs and Pins":
// conflicting or ambiguous required configuration MUST fail closed).
var ErrAmbiguous = errors.New("policy: more than one ToolPolicy governs this server for this pod")

// ErrNoPolicy: no policy in the set governs the server for the pod.
var ErrNoPolicy = errors.New("policy: no ToolPolicy governs this server for this pod")

// SetEntry is one compiled policy and the namespace it lives in.
type SetEntry struct {
	Namespace string
	Policy    *Compiled
}

// Set is the compiled ToolPolicies the authority service serves, for looking up the policy of a
// pod's call. It is immutable and safe for concurrent use; build a new Set when policies change.
type Set struct {
	entries []SetEntry // sorted by namespace, then name
}

// NewSet builds a Set. Entries with a nil Policy, or two entries with the same namespace and
// name, are an error.
func NewSet(entries []SetEntry) (*Set, error) {
	s := &Set{entries: append([]SetEntry(nil), entries...)}
	seen := map[string]bool{}
	for i, e := range s.entries {
		if e.Policy == nil {
			return nil, fmt.Errorf("policy set: entry %d has no policy", i)
		}
		k := e.Namespace + "\x00" + e.Policy.name
		if seen[k] {
			return nil, fmt.Errorf("policy set: %s/%s appears twice", e.Namespace, e.Policy.name)
		}
		seen[k] = true
	}
	sort.Slice(s.entries, func(i, j int) bool {
		a, b := s.entries[i], s.entries[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Policy.name < b.Policy.name
	})
	return s, nil
}

// ForPod returns the policies whose podSelector selects a pod with these labels in namespace,
// in namespace/name order.
func (s *Set) ForPod(namespace string, podLabels map[string]string) []*Compiled {
	if s == nil {
		return nil
	}
	var out []*Compiled
	ls := labels.Set(podLabels)
	for _, e := range s.entries {
		if e.Namespace == namespace && e.Policy.selector != nil && e.Policy.selector.Matches(ls) {
			out = append(out, e.Policy)
		}
	}
	return out
}

// Lookup returns the one policy that governs server for the pod: ErrNoPolicy when none does,
// ErrAmbiguous when more than one selects the pod and lists the server.
func (s *Set) Lookup(namespace string, podLabels map[string]string, server string) (*Compiled, error) {
	var found []*Compiled
	for _, c := range s.ForPod(namespace, podLabels) {
		if c.byName[server] != nil {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil, ErrNoPolicy
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, c := range found {
		names[i] = c.name
	}
	return nil, fmt.Errorf("%w: %s", ErrAmbiguous, strings.Join(names, ", "))
}

// Evaluate evaluates r under the one policy that governs r.Server for the pod. With none, the
// decision is Deny EF_UNKNOWN_TOOL (nothing declares the call); with more than one, Deny
// EF_POLICY_DENIED naming them (ErrAmbiguous). Neither case is subject to a policy's Audit
// mode: there is no single policy to audit under.
func (s *Set) Evaluate(ctx context.Context, namespace string, podLabels map[string]string, r Request) Decision {
	c, err := s.Lookup(namespace, podLabels, r.Server)
	switch {
	case errors.Is(err, ErrNoPolicy):
		return Decision{Outcome: OutcomeDeny, Code: ef.EFUnknownTool,
			Message: fmt.Sprintf("no ToolPolicy governs server %s for this pod", quote(r.Server))}
	case err != nil:
		var names []string
		for _, c := range s.ForPod(namespace, podLabels) {
			if c.byName[r.Server] != nil {
				names = append(names, c.name)
			}
		}
		return Decision{Outcome: OutcomeDeny, Code: ef.EFPolicyDenied, Policy: strings.Join(names, ","),
			Message: fmt.Sprintf("more than one ToolPolicy governs server %s for this pod (%s); none is applied", quote(r.Server), strings.Join(names, ", "))}
	}
	return c.Evaluate(ctx, r)
}

// ServersForPod returns the servers the policies selecting the pod protect, in namespace/name
// then spec order: what the webhook wires the sidecar to. Two policies listing a server of the
// same name is ErrAmbiguous.
func (s *Set) ServersForPod(namespace string, podLabels map[string]string) ([]v1alpha1.ToolServer, error) {
	var out []v1alpha1.ToolServer
	owner := map[string]string{}
	for _, c := range s.ForPod(namespace, podLabels) {
		for _, srv := range c.Servers() {
			if o, dup := owner[srv.Name]; dup {
				return nil, fmt.Errorf("%w: server %q is listed by %s and %s", ErrAmbiguous, srv.Name, o, c.name)
			}
			owner[srv.Name] = c.name
			out = append(out, srv)
		}
	}
	return out, nil
}
