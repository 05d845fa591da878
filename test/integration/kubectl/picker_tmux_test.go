package kubectl_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/payment"
)

// terminal is one tmux server with a private socket, running commands in a real pseudo-terminal.
type terminal struct {
	t    *testing.T
	tmux string
	sock string
	env  []string
}

// newTerminal starts nothing yet; it skips t when tmux is missing. The picker's state machine
// and screens are tested without a terminal in internal/kubectlplugin; this exercises the raw
// mode, key decoding and drawing through kubectl on a real pty.
func newTerminal(t *testing.T, env []string) *terminal {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (Debian package tmux), so the picker is not driven on a real terminal; its state machine and screens are still tested in internal/kubectlplugin")
	}
	term := &terminal{t: t, tmux: tmux, sock: filepath.Join(t.TempDir(), "tmux.sock"), env: env}
	t.Cleanup(func() { _ = term.cmd("kill-server").Run() })
	return term
}

func (term *terminal) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(term.tmux, append([]string{"-S", term.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = term.env
	return cmd
}

func (term *terminal) run(args ...string) string {
	term.t.Helper()
	out, err := term.cmd(args...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start runs shell command line in a new 120x80 session; after it ends the shell prints
// "EXIT=<status>" and stays, so the screen can still be read.
func (term *terminal) start(session, line string) {
	term.t.Helper()
	term.run("new-session", "-d", "-s", session, "-x", "120", "-y", "80", line+`; echo "EXIT=$?"; sleep 600`)
}

// waitFor polls the session's screen until it contains want, and returns it.
func (term *terminal) waitFor(session, want string) string {
	term.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var screen string
	for time.Now().Before(deadline) {
		screen = term.run("capture-pane", "-p", "-t", session)
		if strings.Contains(screen, want) {
			return screen
		}
		time.Sleep(100 * time.Millisecond)
	}
	term.t.Fatalf("screen of %s never showed %q; last screen:\n%s", session, want, screen)
	return ""
}

// keys sends tmux key names (Down, Enter, Escape, y …) to the session.
func (term *terminal) keys(session string, keys ...string) {
	term.t.Helper()
	term.run(append([]string{"send-keys", "-t", session}, keys...)...)
}

// text types s literally.
func (term *terminal) text(session, s string) {
	term.t.Helper()
	term.run("send-keys", "-t", session, "-l", s)
}

// TestPickerInARealTerminal runs `kubectl actgate resolve NAME` and `kubectl actgate pick` in a
// tmux pseudo-terminal as alice: arrow keys, Enter and the y confirmation write an option; a,
// typed text, Enter and y write an answer; Esc leaves with exit 4 and writes nothing.
func TestPickerInARealTerminal(t *testing.T) {
	env, pluginDir := setup(t)
	ns := env.Namespace(t)
	payment.GrantPrincipals(t, env, ns, alice)
	a := user(t, env, alice)
	act := paymentAct(t, ns, "send-payment")
	expires := time.Now().Add(time.Hour)
	envs := map[string]string{}
	for _, name := range []string{"pay-arrows", "pay-answer", "pay-escape"} {
		e := paymentEnvelope(t, name)
		envs[name] = e.Digest()
		mustCreate(t, env, moment(ns, name, alice, act.Name, e, expires))
	}
	mustCreate(t, env, act)
	term := newTerminal(t, env.PluginEnv(pluginDir, a.Kubeconfig))
	kubectlBin := filepath.Join(env.BinDir, "kubectl")

	t.Run("arrows, Enter and y select an option", func(t *testing.T) {
		term.start("arrows", fmt.Sprintf("%s actgate resolve pay-arrows -n %s", kubectlBin, ns))
		term.waitFor("arrows", ">   [1] Send the payment as requested")
		screen := term.waitFor("arrows", "Esc quit without resolving")
		for _, want := range []string{"Binding moment " + ns + "/pay-arrows for " + alice, "Synopsis: ", "Findings:", "Recommendations:",
			"Offer: ", "* [2] Dry-run the payment  (recommended)", "Why: Shows the exact effect", "[a] Answer", "[q] Reject", "[d] Decline"} {
			if !strings.Contains(screen, want) {
				t.Errorf("picker screen lacks %q:\n%s", want, screen)
			}
		}
		term.keys("arrows", "Down")
		term.waitFor("arrows", "> * [2] Dry-run the payment")
		term.keys("arrows", "Enter")
		term.waitFor("arrows", `Chosen: option [2] "Dry-run the payment"`)
		if got := get(t, env, ns, "pay-arrows").Spec.Resolution; got != nil {
			t.Fatalf("written before the confirmation: %+v", got)
		}
		term.keys("arrows", "y")
		term.waitFor("arrows", "EXIT=0")
		checkResolution(t, env, ns, "pay-arrows", envs["pay-arrows"], v1alpha1.ResolutionOption, 1, "")
	})

	t.Run("a, text, Enter and y write an answer", func(t *testing.T) {
		term.start("answer", fmt.Sprintf("%s actgate resolve pay-answer -n %s", kubectlBin, ns))
		term.waitFor("answer", "Esc quit without resolving")
		term.keys("answer", "a")
		term.waitFor("answer", "Your answer: _")
		term.text("answer", "Pay after the audit, über Montag")
		term.waitFor("answer", "Your answer: Pay after the audit, über Montag_")
		term.keys("answer", "Enter")
		term.waitFor("answer", `Chosen: answer "Pay after the audit, über Montag"`)
		term.keys("answer", "y")
		term.waitFor("answer", "EXIT=0")
		checkResolution(t, env, ns, "pay-answer", envs["pay-answer"], v1alpha1.ResolutionAnswer, -1, "Pay after the audit, über Montag")
	})

	t.Run("pick opens the only pending moment, and Esc leaves without writing", func(t *testing.T) {
		term.start("escape", fmt.Sprintf("%s actgate pick -n %s", kubectlBin, ns))
		term.waitFor("escape", "Binding moment "+ns+"/pay-escape")
		term.keys("escape", "Down", "Enter")
		term.waitFor("escape", "Chosen: option [2]")
		term.keys("escape", "Escape") // back from the confirmation, not out
		term.waitFor("escape", "Esc quit without resolving")
		term.keys("escape", "Escape")
		screen := term.waitFor("escape", "EXIT=4")
		if !strings.Contains(screen, "nothing was written") {
			t.Errorf("no word that nothing was written:\n%s", screen)
		}
		if got := get(t, env, ns, "pay-escape").Spec.Resolution; got != nil {
			t.Fatalf("Esc wrote %+v", got)
		}
	})
}

// checkResolution asserts the stored spec.resolution: kind, option index (-1: none), answer and
// the envelope digest.
func checkResolution(t *testing.T, env *envtest.Env, ns, name, digest string, kind v1alpha1.ResolutionKind, option int32, answer string) {
	t.Helper()
	got := get(t, env, ns, name).Spec.Resolution
	switch {
	case got == nil:
		t.Fatalf("%s has no resolution", name)
	case got.Kind != kind || string(got.EnvelopeDigest) != digest || got.Answer != answer:
		t.Fatalf("%s resolution %+v, want kind %s, digest %s, answer %q", name, got, kind, digest, answer)
	case option < 0 && got.OptionIdx != nil, option >= 0 && (got.OptionIdx == nil || *got.OptionIdx != option):
		t.Fatalf("%s optionIdx %v, want %d", name, got.OptionIdx, option)
	}
}
