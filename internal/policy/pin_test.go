package policy

import (
	"strings"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
)

func pinnedSpec(pin *v1alpha1.ToolPin, mode v1alpha1.PolicyMode) *v1alpha1.ToolPolicySpec {
	return &v1alpha1.ToolPolicySpec{
		Mode: mode,
		Servers: []v1alpha1.ToolServer{
			{Name: "finance", URL: "https://finance.example/mcp"},
			{Name: "mail", URL: "https://mail.example/mcp"},
		},
		Rules: []v1alpha1.ToolRule{
			{Name: "payments", Tools: []string{"send_payment", "get_*"}, Servers: []string{"finance"}, Pin: pin},
			{Name: "rest", Tools: []string{"*"}},
		},
	}
}

// TestToolPin: the governing rule's pin, a server-specific digest before a rule-wide one,
// Named only for a name the policy holds, nothing for tools a pinless rule governs.
func TestToolPin(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	c, err := Compile("ns/p", pinnedSpec(&v1alpha1.ToolPin{OnFirstUse: true, Digests: []v1alpha1.ToolDigest{
		{Tool: "send_payment", SHA256: a},
		{Tool: "send_payment", Server: "finance", SHA256: b},
		{Tool: "get_rate", SHA256: a},
	}}, v1alpha1.PolicyModeEnforce), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server, tool string
		ok           bool
		want         Pin
	}{
		{"finance", "send_payment", true, Pin{Rule: "payments", OnFirstUse: true, Digest: b, Named: true}},
		{"finance", "get_rate", true, Pin{Rule: "payments", OnFirstUse: true, Digest: a, Named: true}},
		{"finance", "get_balance", true, Pin{Rule: "payments", OnFirstUse: true}},
		{"finance", "delete_all", false, Pin{}},
		{"mail", "send_payment", false, Pin{}},
		{"unknown", "send_payment", false, Pin{}},
	} {
		got, ok := c.ToolPin(tc.server, tc.tool)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ToolPin(%s, %s) = %+v, %v; want %+v, %v", tc.server, tc.tool, got, ok, tc.want, tc.ok)
		}
	}
	audit, err := Compile("ns/p", pinnedSpec(&v1alpha1.ToolPin{OnFirstUse: true}, v1alpha1.PolicyModeAudit), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := audit.ToolPin("finance", "send_payment"); !ok || !got.Audit {
		t.Errorf("audit mode: %+v, %v", got, ok)
	}
}

// TestToolPinRefused: a pin the API would refuse does not compile, each defect named.
func TestToolPinRefused(t *testing.T) {
	a := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name string
		d    v1alpha1.ToolDigest
		want string
	}{
		{"short digest", v1alpha1.ToolDigest{Tool: "t", SHA256: "abc"}, "sha256"},
		{"prefixed digest", v1alpha1.ToolDigest{Tool: "t", SHA256: "sha256:" + a}, "sha256"},
		{"upper-case digest", v1alpha1.ToolDigest{Tool: "t", SHA256: strings.ToUpper(a)}, "sha256"},
		{"glob tool", v1alpha1.ToolDigest{Tool: "get_*", SHA256: a}, "tool"},
		{"empty tool", v1alpha1.ToolDigest{SHA256: a}, "tool"},
		{"unknown server", v1alpha1.ToolDigest{Tool: "t", Server: "nowhere", SHA256: a}, "not in spec.servers"},
		{"server outside the rule", v1alpha1.ToolDigest{Tool: "t", Server: "mail", SHA256: a}, "not one of the rule's servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("ns/p", pinnedSpec(&v1alpha1.ToolPin{Digests: []v1alpha1.ToolDigest{tc.d}}, v1alpha1.PolicyModeEnforce), 1)
			if err == nil || !strings.Contains(err.Error(), "rules[0].pin.digests[0]") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want rules[0].pin.digests[0] and %q", err, tc.want)
			}
		})
	}
	dup := []v1alpha1.ToolDigest{{Tool: "t", SHA256: a}, {Tool: "t", SHA256: a}}
	if _, err := Compile("ns/p", pinnedSpec(&v1alpha1.ToolPin{Digests: dup}, v1alpha1.PolicyModeEnforce), 1); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Fatalf("duplicate digest: %v", err)
	}
}
