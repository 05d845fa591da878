package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/tooldef"
)

// ErrNoToolChange is AcceptTool's refusal when no changed definition of the tool is recorded
// and no digest is given.
var ErrNoToolChange = errors.New("no changed definition of the tool is recorded in status.toolChanges")

// ErrToolDigestMismatch is AcceptTool's refusal of a digest other than the recorded change's.
var ErrToolDigestMismatch = errors.New("the digest given is not the changed definition's")

// ErrPinnedInSpec is AcceptTool's refusal for a tool whose digest the policy's spec lists: the
// spec overrides status, so accepting there would change nothing.
var ErrPinnedInSpec = errors.New("the policy's rules[].pin.digests lists this tool: edit the policy to accept a new digest")

// toolPolicyFor returns the one ToolPolicy of ns that lists server, or the one named policy.
func (c *Client) toolPolicyFor(ctx context.Context, ns, server, name string) (*v1alpha1.ToolPolicy, error) {
	if name != "" {
		tp := &v1alpha1.ToolPolicy{}
		if err := c.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tp); err != nil {
			return nil, fmt.Errorf("toolpolicy %s/%s: %w", ns, name, err)
		}
		return tp, nil
	}
	l := &v1alpha1.ToolPolicyList{}
	if err := c.c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing toolpolicies in %s: %w", ns, err)
	}
	var found []*v1alpha1.ToolPolicy
	for i := range l.Items {
		for _, s := range l.Items[i].Spec.Servers {
			if s.Name == server {
				found = append(found, &l.Items[i])
				break
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no ToolPolicy in namespace %s lists server %q", ns, server)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, p := range found {
		names[i] = p.Name
	}
	return nil, fmt.Errorf("several ToolPolicies in namespace %s list server %q (%s): pass --policy", ns, server, strings.Join(names, ", "))
}

// AcceptTool accepts the changed definition of tool on server recorded in the policy's
// status.toolChanges (or exactly digest, which must be the recorded change's when one is):
// it moves the entry into status.toolPins, as by, with a compare-and-swap on the
// resourceVersion read. It returns the policy's name and the accepted pin.
func (c *Client) AcceptTool(ctx context.Context, ns, policy, server, tool, digest, by string, now metav1.Time) (string, *v1alpha1.RecordedToolPin, error) {
	if digest != "" && !tooldef.IsDigest(digest) {
		return "", nil, errors.New("--digest must be 64 lowercase hex digits")
	}
	tp, err := c.toolPolicyFor(ctx, ns, server, policy)
	if err != nil {
		return "", nil, err
	}
	for _, r := range tp.Spec.Rules {
		if r.Pin == nil {
			continue
		}
		for _, d := range r.Pin.Digests {
			if d.Tool == tool && (d.Server == "" || d.Server == server) {
				return tp.Name, nil, ErrPinnedInSpec
			}
		}
	}
	ch := -1
	for i, p := range tp.Status.ToolChanges {
		if p.Server == server && p.Tool == tool {
			ch = i
		}
	}
	var pin v1alpha1.RecordedToolPin
	switch {
	case ch < 0 && digest == "":
		return tp.Name, nil, ErrNoToolChange
	case ch >= 0 && digest != "" && tp.Status.ToolChanges[ch].SHA256 != digest:
		return tp.Name, nil, fmt.Errorf("%w (recorded %s)", ErrToolDigestMismatch, tp.Status.ToolChanges[ch].SHA256)
	case ch >= 0:
		pin = *tp.Status.ToolChanges[ch].DeepCopy()
		tp.Status.ToolChanges = append(tp.Status.ToolChanges[:ch], tp.Status.ToolChanges[ch+1:]...)
	default:
		pin = v1alpha1.RecordedToolPin{Server: server, Tool: tool, SHA256: digest}
	}
	pin.AcceptedBy, pin.AcceptedAt = by, now
	replaced := false
	for i, p := range tp.Status.ToolPins {
		if p.Server == server && p.Tool == tool {
			tp.Status.ToolPins[i], replaced = pin, true
		}
	}
	if !replaced {
		tp.Status.ToolPins = append(tp.Status.ToolPins, pin)
	}
	// Update carries the resourceVersion read: a status written since (a sidecar recording a
	// newer change) makes it a conflict, never a lost write.
	if err := c.c.Status().Update(ctx, tp, client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsConflict(err) {
			return tp.Name, nil, fmt.Errorf("toolpolicy %s changed while accepting (run the command again and check the digest): %w", tp.Name, err)
		}
		return tp.Name, nil, fmt.Errorf("toolpolicy %s: %s", tp.Name, apiMessage(err))
	}
	return tp.Name, &pin, nil
}

func (p *plugin) toolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Pinned tool definitions: accept a changed definition",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var server, policy, digest string
	accept := &cobra.Command{
		Use:   "accept TOOL --server SERVER [--policy NAME] [--digest SHA256]",
		Short: "Accept the changed definition of a pinned tool a sidecar saw listed",
		Long: `Accept the changed definition of TOOL on SERVER recorded in the governing ToolPolicy's
status.toolChanges (an Event ToolDefinitionChanged announced it): the entry moves to
status.toolPins, and the sidecars list the tool again and let its calls through. With --digest,
accept exactly that digest, which must be the recorded change's (so a definition that changed
again after you reviewed it is not accepted); with no change recorded, --digest records it. A
digest the policy's rules[].pin.digests lists is accepted by editing the policy instead. Needs
update on toolpolicies/status.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" {
				return usagef("--server is required")
			}
			c, err := p.client()
			if err != nil {
				return err
			}
			ns, err := p.namespace()
			if err != nil {
				return err
			}
			who, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return exitWith(ExitError, err)
			}
			name, pin, err := c.AcceptTool(cmd.Context(), ns, policy, server, args[0], digest, who, metav1.NewTime(p.Now().UTC().Truncate(1e9)))
			switch {
			case errors.Is(err, ErrNoToolChange), errors.Is(err, ErrToolDigestMismatch), errors.Is(err, ErrPinnedInSpec):
				return exitWith(ExitRefused, err)
			case err != nil:
				return exitWith(ExitError, err)
			}
			fmt.Fprintf(p.Streams.Out, "toolpolicy.actgate.io/%s: accepted %s on %s: %s\n", name, pin.Tool, pin.Server, pin.SHA256)
			return nil
		},
	}
	accept.Flags().StringVar(&server, "server", "", "the policy's server (spec.servers[].name) that lists the tool")
	accept.Flags().StringVar(&policy, "policy", "", "the ToolPolicy (default: the one in the namespace that lists --server)")
	accept.Flags().StringVar(&digest, "digest", "", "the exact digest to accept (64 lowercase hex digits)")
	cmd.AddCommand(accept)
	return cmd
}
