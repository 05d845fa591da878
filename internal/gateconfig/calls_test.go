package gateconfig

import (
	"errors"
	"strings"
	"testing"
)

// TestMaskArgumentsValidated: the standalone gate's policy file refuses a bad
// maskArguments pointer with its field path, like every other policy defect.
func TestMaskArgumentsValidated(t *testing.T) {
	doc := minimal + "    maskArguments: [\"/account\", \"card\"]\n"
	_, err := Parse([]byte(doc), "")
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "policy.rules[0].maskArguments[1]") {
		t.Fatalf("err %v, want ErrConfig naming policy.rules[0].maskArguments[1]", err)
	}
	if _, err := Parse([]byte(minimal+"    maskArguments: [\"/account\"]\n"), ""); err != nil {
		t.Fatalf("a valid mask: %v", err)
	}
}

// TestNotificationsIncludeCalls: a webhook receives the calls only when it opts in.
func TestNotificationsIncludeCalls(t *testing.T) {
	doc := minimal + `notifications:
  webhooks:
  - url: https://hooks.example/shared
  - url: https://hooks.example/alice-dm
    includeCalls: true
`
	c, err := Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := c.NotifierOptions()
	if len(o.Webhooks) != 2 || o.Webhooks[0].IncludeCalls || !o.Webhooks[1].IncludeCalls {
		t.Fatalf("webhooks %+v", o.Webhooks)
	}
}
