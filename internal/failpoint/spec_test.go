package failpoint

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{
		{"before-consume", Spec{Point: BeforeConsume, Action: ActionKill}},
		{"after-consume=kill", Spec{Point: AfterConsume, Action: ActionKill}},
		{"after-pending=sleep:250ms", Spec{Point: AfterPending, Action: ActionSleep, Sleep: 250 * time.Millisecond}},
		{"during-invoke=error", Spec{Point: DuringInvoke, Action: ActionError}},
		{"after-invoke=sleep:0s", Spec{Point: AfterInvoke, Action: ActionSleep}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if again, err := Parse(got.String()); err != nil || again != got {
				t.Fatalf("round trip %q: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"", "after_consume", "AFTER-INVOKE", "after-invoke=", "after-invoke=explode",
		"after-invoke=kill:1s", "after-invoke=error:x", "after-invoke=sleep", "after-invoke=sleep:",
		"after-invoke=sleep:-1s", "after-invoke=sleep:forever", "=kill", "after-invoke=sleep:1s=2",
	} {
		t.Run(in, func(t *testing.T) {
			if s, err := Parse(in); !errors.Is(err, ErrSpec) {
				t.Fatalf("Parse(%q) = %+v, %v; want ErrSpec", in, s, err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"after-invoke", "after-pending=sleep:1s", "during-invoke=error", "x=y:z", "=", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("error without ErrSpec: %v", err)
			}
			return
		}
		again, err := Parse(s.String())
		if err != nil || again != s {
			t.Fatalf("%q parsed to %+v, which does not round-trip: %+v, %v", in, s, again, err)
		}
	})
}
