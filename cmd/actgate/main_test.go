package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.out from the CLI's stdout")

const (
	samples = "../../testdata/envelope/" // the README's sample files
	in      = "testdata/in/"
)

type cliCase struct {
	name  string
	args  []string
	stdin string // file fed on stdin; "" for none
	exit  int
	codes []string // first word of each stderr line, in order
}

func cliCases() []cliCase {
	check := func(env, act string) []string {
		return []string{"resolution", "check", "--envelope", env, "--action", act}
	}
	payEnv, payAct := samples+"payment.json", samples+"payment.action.json"
	return []cliCase{
		// jcs / digest: full RFC 8785 by default, the strict profile with --strict.
		{"jcs-full", []string{"jcs"}, in + "jcs-mixed.json", exitOK, nil},
		{"jcs-strict", []string{"jcs", "--strict"}, in + "jcs-mixed.json", exitOK, nil},
		{"jcs-full-float", []string{"jcs"}, in + "jcs-float.json", exitOK, nil},
		{"jcs-strict-float", []string{"jcs", "--strict"}, in + "jcs-float.json", exitRejected, []string{"JCS_NUMBER_OUT_OF_PROFILE"}},
		{"jcs-duplicate", []string{"jcs"}, in + "duplicate-member.json", exitRejected, []string{"JCS_DUPLICATE_MEMBER"}},
		{"jcs-surrogate", []string{"jcs", "--strict"}, in + "jcs-surrogate.json", exitRejected, []string{"JCS_UNPAIRED_SURROGATE"}},
		{"jcs-not-json", []string{"jcs"}, in + "not-json.txt", exitRejected, []string{"JCS_SYNTAX"}},
		{"jcs-example-canonical", []string{"jcs", "--strict"}, samples + "example.json", exitOK, nil},
		{"digest-strict-example", []string{"digest", "--strict"}, samples + "example.json", exitOK, nil},
		{"digest-full-float", []string{"digest"}, in + "jcs-float.json", exitOK, nil},

		// action-digest: EP-TOOL-CALL-BINDING-v1 vectors simple-payment and numeric-forms.
		{"action-digest-payment", []string{"action-digest", "--tool", "payment.release"}, in + "args-payment.json", exitOK, nil},
		{"action-digest-payment-strict", []string{"action-digest", "--tool", "payment.release", "--strict"}, in + "args-payment.json", exitOK, nil},
		{"action-digest-float-full", []string{"action-digest", "--tool", "ledger.post"}, in + "args-float.json", exitOK, nil},
		{"action-digest-float-strict", []string{"action-digest", "--tool", "ledger.post", "--strict"}, in + "args-float.json", exitRejected, []string{"ACTION_OUT_OF_PROFILE"}},
		{"action-digest-array", []string{"action-digest", "--tool", "x"}, in + "args-array.json", exitRejected, []string{"ACTION_ARGS_NOT_OBJECT"}},
		{"action-digest-no-tool", []string{"action-digest"}, in + "args-payment.json", exitUsage, []string{"USAGE", "Run"}},

		// envelope validate | digest | render, bare or inside a tool result.
		{"envelope-validate-example", []string{"envelope", "validate"}, samples + "example.json", exitOK, nil},
		{"envelope-validate-toolresult", []string{"envelope", "validate"}, samples + "payment.toolresult.json", exitOK, nil},
		{"envelope-validate-many-problems", []string{"envelope", "validate"}, in + "envelope-many-problems.json", exitRejected,
			[]string{"ENV_UNKNOWN_MEMBER", "ENV_ACTION_DIGEST_FORM", "ENV_RECOMMENDED_IDX", "ENV_MISSING_MEMBER"}},
		{"envelope-validate-many-problems-profile", []string{"envelope", "validate", "--profile"}, in + "envelope-many-problems.json", exitRejected,
			[]string{"ENV_UNKNOWN_MEMBER", "ENV_STRING_EMPTY", "ENV_ACTION_DIGEST_FORM", "ENV_RECOMMENDED_IDX", "ENV_MISSING_MEMBER"}},
		{"envelope-validate-duplicate", []string{"envelope", "validate"}, in + "duplicate-member.json", exitRejected, []string{"JCS_DUPLICATE_MEMBER"}},
		{"envelope-validate-not-json", []string{"envelope", "validate"}, in + "not-json.txt", exitRejected, []string{"JCS_SYNTAX"}},
		{"envelope-validate-no-envelope", []string{"envelope", "validate"}, in + "no-envelope.toolresult.json", exitRejected,
			[]string{"ENV_UNKNOWN_MEMBER", "ENV_UNKNOWN_MEMBER", "ENV_MISSING_MEMBER", "ENV_MISSING_MEMBER", "ENV_MISSING_MEMBER", "ENV_MISSING_MEMBER", "ENV_MISSING_MEMBER"}},
		{"envelope-digest-example", []string{"envelope", "digest"}, samples + "example.json", exitOK, nil},
		{"envelope-digest-payment", []string{"envelope", "digest"}, samples + "payment.json", exitOK, nil},
		{"envelope-digest-toolresult", []string{"envelope", "digest"}, samples + "payment.toolresult.json", exitOK, nil},
		{"envelope-digest-malformed", []string{"envelope", "digest"}, in + "toolresult-one-option.json", exitRejected, []string{"ENV_OPTION_COUNT"}},
		{"envelope-render-example", []string{"envelope", "render"}, samples + "example.json", exitOK, nil},
		{"envelope-render-toolresult", []string{"envelope", "render", "--format", "text"}, samples + "payment.toolresult.json", exitOK, nil},
		{"envelope-render-fallback", []string{"envelope", "render"}, in + "toolresult-one-option.json", exitRejected, []string{"ENV_OPTION_COUNT"}},
		{"envelope-render-fallback-bare", []string{"envelope", "render"}, in + "envelope-many-problems.json", exitRejected,
			[]string{"ENV_UNKNOWN_MEMBER", "ENV_STRING_EMPTY", "ENV_ACTION_DIGEST_FORM", "ENV_RECOMMENDED_IDX", "ENV_MISSING_MEMBER"}},
		{"envelope-render-bad-format", []string{"envelope", "render", "--format", "html"}, samples + "example.json", exitUsage, []string{"USAGE"}},

		// envelope-04 §5.2 and §5.3 recommend 3-6 findings and 2-4 recommendations without
		// requiring any: an envelope with none is well formed, and actgate renders it.
		{"envelope-validate-no-findings", []string{"envelope", "validate"}, in + "envelope-no-findings.json", exitOK, nil},
		{"envelope-validate-no-findings-profile", []string{"envelope", "validate", "--profile"}, in + "envelope-no-findings.json", exitOK, nil},
		{"envelope-digest-no-findings", []string{"envelope", "digest"}, in + "envelope-no-findings.json", exitOK, nil},
		{"envelope-validate-toolresult-no-findings", []string{"envelope", "validate"}, in + "toolresult-no-findings.json", exitOK, nil},
		{"envelope-digest-toolresult-no-findings", []string{"envelope", "digest"}, in + "toolresult-no-findings.json", exitOK, nil},
		{"envelope-render-no-findings", []string{"envelope", "render"}, in + "envelope-no-findings.json", exitOK, nil},
		{"envelope-render-toolresult-no-findings", []string{"envelope", "render"}, in + "toolresult-no-findings.json", exitOK, nil},
		// Well formed, outside the actgate profile (a line break in the offer, two options
		// with one label): valid with a digest, and not rendered.
		{"envelope-validate-outside-profile", []string{"envelope", "validate"}, in + "envelope-outside-profile.json", exitOK,
			[]string{"ENV_STRING_CONTROL", "ENV_DUPLICATE_LABEL"}},
		{"envelope-validate-outside-profile-profile", []string{"envelope", "validate", "--profile"}, in + "envelope-outside-profile.json", exitRejected,
			[]string{"ENV_STRING_CONTROL", "ENV_DUPLICATE_LABEL"}},
		{"envelope-digest-outside-profile", []string{"envelope", "digest"}, in + "envelope-outside-profile.json", exitOK, nil},
		{"envelope-render-outside-profile", []string{"envelope", "render"}, in + "envelope-outside-profile.json", exitRejected,
			[]string{"ENV_STRING_CONTROL", "ENV_DUPLICATE_LABEL"}},
		{"envelope-validate-profile-malformed", []string{"envelope", "validate", "--profile"}, in + "toolresult-one-option.json", exitRejected, []string{"ENV_OPTION_COUNT"}},

		// resolution check: exit 0 only for an option whose action digest matches.
		{"check-authority", check(payEnv, payAct), samples + "payment.resolution.json", exitOK, nil},
		{"check-authority-toolresult-envelope", check(samples+"payment.toolresult.json", in+"payment-reordered.action.json"), samples + "payment.resolution.json", exitOK, nil},
		{"check-option1-authority", check(payEnv, in+"payment-half.action.json"), in + "resolution-option1.json", exitOK, nil},
		{"check-option-map-substitution", check(payEnv, payAct), in + "resolution-option1.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-bigger-action", check(payEnv, in+"payment-bigger.action.json"), samples + "payment.resolution.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-answer", check(payEnv, payAct), in + "resolution-answer.json", exitNotAuthority, []string{"RES_NOT_AUTHORITY"}},
		{"check-question", check(payEnv, payAct), in + "resolution-question.json", exitNotAuthority, []string{"RES_NOT_AUTHORITY"}},
		{"check-declined", check(payEnv, payAct), in + "resolution-declined.json", exitNotAuthority, []string{"RES_NOT_AUTHORITY"}},
		{"check-other-envelope", check(payEnv, payAct), in + "resolution-other-envelope.json", exitNotAuthority, []string{"RES_ENVELOPE_MISMATCH"}},
		{"check-out-of-range", check(payEnv, payAct), in + "resolution-out-of-range.json", exitNotAuthority, []string{"RES_OPTION_IDX"}},
		{"check-malformed-resolution", check(payEnv, payAct), in + "resolution-malformed.json", exitRejected,
			[]string{"RES_UNKNOWN_MEMBER", "RES_ENVELOPE_DIGEST_FORM", "RES_MEMBER_NOT_ALLOWED"}},
		{"check-float-action", check(payEnv, in+"float.action.json"), samples + "payment.resolution.json", exitRejected, []string{"JCS_NUMBER_OUT_OF_PROFILE"}},
		{"check-everything-malformed", check(in+"toolresult-one-option.json", in+"float.action.json"), in + "resolution-malformed.json", exitRejected,
			[]string{"ENV_OPTION_COUNT", "JCS_NUMBER_OUT_OF_PROFILE", "RES_UNKNOWN_MEMBER", "RES_ENVELOPE_DIGEST_FORM", "RES_MEMBER_NOT_ALLOWED"}},
		// An action is any JSON value, digested as itself (envelope-04 §5.6): an object
		// that is not {"tool","args"} is a well-formed action, and another one.
		{"check-misnamed-action", check(payEnv, in+"misnamed.action.json"), samples + "payment.resolution.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		// envelope-04 §7.3: a resolution is the object {"binding_moment_resolution": {...}};
		// the inner object of payment.resolution.json on its own is malformed, not authority.
		{"check-bare-resolution", check(payEnv, payAct), in + "resolution-bare-option0.json", exitRejected,
			[]string{"RES_UNKNOWN_MEMBER", "RES_UNKNOWN_MEMBER", "RES_UNKNOWN_MEMBER", "RES_MISSING_MEMBER"}},
		// A well-formed answer outside the actgate profile is still an answer: not authority.
		{"check-answer-outside-profile", check(payEnv, payAct), in + "resolution-answer-escape.json", exitNotAuthority, []string{"RES_NOT_AUTHORITY"}},

		// The worked example of envelope-04 §6.4: option 0 authorises action_a, option 1
		// action_b, as the draft prints them, and neither authorises the other.
		{"check-example-option0-action-a", check(samples+"example.json", samples+"example.action-a.json"), samples + "example.resolution-option0.json", exitOK, nil},
		{"check-example-option1-action-b", check(samples+"example.json", samples+"example.action-b.json"), samples + "example.resolution-option1.json", exitOK, nil},
		{"check-example-option0-action-b", check(samples+"example.json", samples+"example.action-b.json"), samples + "example.resolution-option0.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-example-option1-action-a", check(samples+"example.json", samples+"example.action-a.json"), samples + "example.resolution-option1.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-example-action-as-tool-call", append(check(samples+"example.json", samples+"example.action-a.json"), "--tool", "booking.share"), samples + "example.resolution-option0.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-example-other-envelope", check(payEnv, samples+"example.action-a.json"), samples + "example.resolution-option0.json", exitNotAuthority, []string{"RES_ENVELOPE_MISMATCH"}},

		// --tool NAME: the --action file holds the arguments of the tool call {"tool","args"}.
		{"check-tool-args", append(check(payEnv, in+"args-payment.json"), "--tool", "payment.release"), samples + "payment.resolution.json", exitOK, nil},
		{"check-tool-args-other-tool", append(check(payEnv, in+"args-payment.json"), "--tool", "payment.refund"), samples + "payment.resolution.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-tool-call-file-with-tool", append(check(payEnv, payAct), "--tool", "payment.release"), samples + "payment.resolution.json", exitNotAuthority, []string{"RES_ACTION_MISMATCH"}},
		{"check-tool-args-array", append(check(payEnv, in+"args-array.json"), "--tool", "payment.release"), samples + "payment.resolution.json", exitRejected, []string{"ACT_WRONG_TYPE"}},
		{"check-tool-args-float", append(check(payEnv, in+"args-float.json"), "--tool", "ledger.post"), samples + "payment.resolution.json", exitRejected, []string{"JCS_NUMBER_OUT_OF_PROFILE"}},
		{"check-tool-empty-name", append(check(payEnv, in+"args-payment.json"), "--tool", ""), samples + "payment.resolution.json", exitRejected, []string{"ACT_TOOL_NAME"}},
		{"check-missing-flags", []string{"resolution", "check"}, samples + "payment.resolution.json", exitUsage, []string{"USAGE", "Run"}},
		{"check-missing-file", check(in+"does-not-exist.json", payAct), samples + "payment.resolution.json", exitUsage, []string{"USAGE"}},

		// usage.
		{"unknown-command", []string{"sign"}, "", exitUsage, []string{"USAGE", "Run"}},
		{"unknown-subcommand", []string{"envelope", "sign"}, "", exitUsage, []string{"USAGE", "Run"}},
		{"unknown-flag", []string{"digest", "--sha512"}, "", exitUsage, []string{"USAGE", "Run"}},
		{"extra-argument", []string{"envelope", "digest", "file.json"}, "", exitUsage, []string{"USAGE", "Run"}},
	}
}

func TestCLI(t *testing.T) {
	goldens := map[string]bool{}
	for _, tc := range cliCases() {
		golden := filepath.Join("testdata", "golden", tc.name+".out")
		goldens[golden] = true
		t.Run(tc.name, func(t *testing.T) {
			var stdin bytes.Reader
			if tc.stdin != "" {
				b, err := os.ReadFile(tc.stdin)
				if err != nil {
					t.Fatal(err)
				}
				stdin.Reset(b)
			}
			var stdout, stderr bytes.Buffer
			exit := run(tc.args, &stdin, &stdout, &stderr)
			if exit != tc.exit {
				t.Errorf("exit %d, want %d\nstderr:\n%s", exit, tc.exit, stderr.String())
			}
			var codes []string
			for _, l := range strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n") {
				if l != "" {
					codes = append(codes, strings.Fields(l)[0])
				}
			}
			if !reflect.DeepEqual(codes, tc.codes) {
				t.Errorf("stderr codes %q, want %q\nstderr:\n%s", codes, tc.codes, stderr.String())
			}
			if *update {
				if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden (go test ./cmd/actgate -run TestCLI -update): %v", err)
			}
			if !bytes.Equal(stdout.Bytes(), want) {
				t.Errorf("stdout differs from %s:\n--- got ---\n%s\n--- want ---\n%s", golden, stdout.Bytes(), want)
			}
		})
	}
	all, _ := filepath.Glob("testdata/golden/*.out")
	for _, g := range all {
		if !goldens[g] {
			t.Errorf("orphan golden %s", g)
		}
	}
}

// TestCLIPinnedValues pins the values the specs print, independently of the golden files.
func TestCLIPinnedValues(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		// envelope-04 §6.4.
		{[]string{"envelope", "digest"}, samples + "example.json", "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1\n"},
		{[]string{"digest", "--strict"}, samples + "example.json", "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1\n"},
		// envelope-04 §6.4: each option is authority for the action the draft shows for it.
		{[]string{"resolution", "check", "--envelope", samples + "example.json", "--action", samples + "example.action-a.json"}, samples + "example.resolution-option0.json",
			"authority option 0 action sha256:ff91e3166e64b892004d4b43b05ad6ed7ff0819463da80c72f27f47039c033fa envelope sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1\n"},
		{[]string{"resolution", "check", "--envelope", samples + "example.json", "--action", samples + "example.action-b.json"}, samples + "example.resolution-option1.json",
			"authority option 1 action sha256:49be14ae6e74b950c0c7b790fa22538d45fb4853bb0f3b242b28204bee232945 envelope sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1\n"},
		// sha256 over the canonical bytes of the no-findings and outside-profile envelopes,
		// computed outside Go (sorted, compact JSON of these ASCII-only documents is their JCS form).
		{[]string{"envelope", "digest"}, in + "envelope-no-findings.json", "sha256:d460d5386a11471c57981107ebab5185b232745620e3206b8f358875cc895283\n"},
		{[]string{"envelope", "validate"}, in + "envelope-no-findings.json", "valid sha256:d460d5386a11471c57981107ebab5185b232745620e3206b8f358875cc895283\n"},
		{[]string{"envelope", "digest"}, in + "envelope-outside-profile.json", "sha256:98baa65e994e30aa9cb29cbfdc26343610751b3ec3863a22fd648ec8c65b1ad6\n"},
		// EP-TOOL-CALL-BINDING-v1 simple-payment and numeric-forms (full mode).
		{[]string{"action-digest", "--tool", "payment.release"}, in + "args-payment.json", "sha256:d0dfcc51d63932b0ca708ba87af799a97cc963d404d63e459c5fab9498845174\n"},
		{[]string{"action-digest", "--tool", "ledger.post"}, in + "args-float.json", "sha256:3f6b9dbfc4b2127ad2b683986d84c0ecb29dd79b0d25d6b20490149f262deab4\n"},
	}
	for _, tt := range tests {
		b, err := os.ReadFile(tt.stdin)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := run(tt.args, bytes.NewReader(b), &out, &errb); code != 0 || out.String() != tt.want {
			t.Errorf("%v: exit %d stdout %q stderr %q, want %q", tt.args, code, out.String(), errb.String(), tt.want)
		}
	}
	// The §6.4 canonical form is 895 bytes, printed with no newline added.
	b, _ := os.ReadFile(samples + "example.json")
	var out bytes.Buffer
	if run([]string{"jcs", "--strict"}, bytes.NewReader(b), &out, &bytes.Buffer{}) != 0 || out.Len() != 895 {
		t.Errorf("jcs --strict of the §6.4 example: %d bytes", out.Len())
	}
}

// TestSampleFilesAgree checks the README's sample files against each other: the payment
// envelope's options carry the digests of the sample actions, the tool result carries the
// same envelope, and the sample resolution names it.
func TestSampleFilesAgree(t *testing.T) {
	digestOf := func(args []string, file string) string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := run(args, bytes.NewReader(b), &out, &errb); code != 0 {
			t.Fatalf("%v < %s: exit %d: %s", args, file, code, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	bare := digestOf([]string{"envelope", "digest"}, samples+"payment.json")
	if tr := digestOf([]string{"envelope", "digest"}, samples+"payment.toolresult.json"); tr != bare {
		t.Errorf("tool result carries %s, bare envelope is %s", tr, bare)
	}
	res, _ := os.ReadFile(samples + "payment.resolution.json")
	if !bytes.Contains(res, []byte(bare)) {
		t.Errorf("payment.resolution.json does not name %s", bare)
	}
	env, _ := os.ReadFile(samples + "payment.json")
	for _, act := range []string{samples + "payment.action.json", in + "payment-half.action.json"} {
		d := digestOf([]string{"digest", "--strict"}, act)
		if !bytes.Contains(env, []byte(d)) {
			t.Errorf("no option of payment.json carries the digest %s of %s", d, act)
		}
	}
}
