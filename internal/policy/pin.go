package policy

import (
	"fmt"
	"regexp"

	"github.com/actgate/actgate/api/v1alpha1"
)

// maxPinDigests bounds rules[].pin.digests (the CRD's MaxItems).
const maxPinDigests = 64

// pinSHA256 is the API's digest pattern: lowercase hex SHA-256.
var pinSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// pinToolName is the API's pinned tool name pattern (a tool name, no glob).
var pinToolName = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}$`)

// Pin is how a rule pins the definitions of the tools it governs (v1alpha1.ToolPin, docs/api.md
// "Pinned tool definitions").
type Pin struct {
	// Rule names the governing rule.
	Rule string
	// OnFirstUse: the first definition seen of a tool without a Digest is recorded and accepted.
	OnFirstUse bool
	// Digest is the digest the policy lists for the tool on the server ("" = none listed).
	Digest string
	// Audit: the policy runs in mode Audit (a changed definition is reported, not refused).
	Audit bool
	// Named: the policy names the tool itself (an exact rules[].tools entry or a pin digest),
	// not only through a glob; metrics label only such names (a bounded set).
	Named bool
}

// pinSpec is a compiled rules[].pin.
type pinSpec struct {
	onFirstUse bool
	digests    map[pinKey]string // server "" = every server of the rule
}

type pinKey struct{ server, tool string }

func compilePin(ps *problems, c *Compiled, r *rule, f string, in *v1alpha1.ToolPin) {
	if in == nil {
		return
	}
	p := &pinSpec{onFirstUse: in.OnFirstUse, digests: map[pinKey]string{}}
	if len(in.Digests) > maxPinDigests {
		ps.add(f+".digests", ReasonInvalidSpec, fmt.Sprintf("at most %d digests", maxPinDigests))
	}
	for j, d := range in.Digests {
		ff := fmt.Sprintf("%s.digests[%d]", f, j)
		k := pinKey{server: d.Server, tool: d.Tool}
		switch {
		case !pinToolName.MatchString(d.Tool):
			ps.add(ff+".tool", ReasonInvalidSpec, "must be a tool name of 1-128 characters [A-Za-z0-9_.:/-]")
		case d.Server != "" && c.byName[d.Server] == nil:
			ps.add(ff+".server", ReasonUnknownServer, fmt.Sprintf("server %q is not in spec.servers", d.Server))
		case d.Server != "" && r.servers != nil && !r.servers[d.Server]:
			ps.add(ff+".server", ReasonInvalidSpec, fmt.Sprintf("server %q is not one of the rule's servers", d.Server))
		case !pinSHA256.MatchString(d.SHA256):
			ps.add(ff+".sha256", ReasonInvalidSpec, "must be 64 lowercase hex digits (SHA-256)")
		case p.digests[k] != "":
			ps.add(ff, ReasonInvalidSpec, "repeats an earlier digest's server and tool")
		default:
			p.digests[k] = d.SHA256
		}
	}
	r.pin = p
}

// ToolPin returns how the rule governing tool on server pins its definition, and false when
// the policy does not protect server, no rule governs the tool, or the rule pins nothing. It
// holds in mode Audit too: the sink then reports, and does not refuse, a changed definition.
func (c *Compiled) ToolPin(server, tool string) (Pin, bool) {
	if c == nil || c.byName[server] == nil {
		return Pin{}, false
	}
	r := c.match(server, tool)
	if r == nil || r.pin == nil {
		return Pin{}, false
	}
	d := r.pin.digests[pinKey{server: server, tool: tool}]
	if d == "" {
		d = r.pin.digests[pinKey{tool: tool}]
	}
	named := d != ""
	for _, g := range r.tools {
		named = named || (g.kind == globExact && g.pattern == tool)
	}
	return Pin{Rule: r.name, OnFirstUse: r.pin.onFirstUse, Digest: d, Audit: c.audit, Named: named}, true
}
