package v1alpha1_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

const samplesDir = "../../config/samples"

// loadSample decodes a file of config/samples strictly (unknown fields are errors), as the
// standalone gate reads its policy file.
func loadSample[T any](t testing.TB, name string) *T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(samplesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	obj := new(T)
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		t.Fatalf("%s does not decode strictly into %T: %v", name, obj, err)
	}
	return obj
}

func samplePolicy(t testing.TB) *v1alpha1.ToolPolicy {
	return loadSample[v1alpha1.ToolPolicy](t, "actgate_v1alpha1_toolpolicy.yaml")
}

func sampleAct(t testing.TB) *v1alpha1.Act {
	return loadSample[v1alpha1.Act](t, "actgate_v1alpha1_act.yaml")
}

func sampleBindingMoment(t testing.TB) *v1alpha1.BindingMoment {
	return loadSample[v1alpha1.BindingMoment](t, "actgate_v1alpha1_bindingmoment.yaml")
}

func TestAddToSchemeRegistersEveryKind(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{
		&v1alpha1.ToolPolicy{}, &v1alpha1.ToolPolicyList{},
		&v1alpha1.Act{}, &v1alpha1.ActList{},
		&v1alpha1.BindingMoment{}, &v1alpha1.BindingMomentList{},
	} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		if len(gvks) != 1 || gvks[0].GroupVersion() != v1alpha1.GroupVersion || gvks[0].Group != "actgate.io" {
			t.Errorf("%T registered as %v, want group actgate.io version v1alpha1", obj, gvks)
		}
	}
	if got := v1alpha1.Resource("acts").String(); got != "acts.actgate.io" {
		t.Errorf("Resource(acts) = %q", got)
	}
}

// The samples are the documentation users copy; they must decode strictly into the Go types
// and survive a deep copy and a JSON round trip unchanged.
func TestSamplesDecodeStrictlyAndRoundTrip(t *testing.T) {
	objs := map[string]runtime.Object{
		"toolpolicy":    samplePolicy(t),
		"act":           sampleAct(t),
		"bindingmoment": sampleBindingMoment(t),
	}
	for name, obj := range objs {
		t.Run(name, func(t *testing.T) {
			cp := obj.DeepCopyObject()
			if !equality.Semantic.DeepEqual(obj, cp) {
				t.Fatalf("DeepCopyObject differs from the original")
			}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			back := cp.DeepCopyObject()
			if err := json.Unmarshal(b, back); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(obj, back) {
				t.Fatalf("JSON round trip changed the object:\n%s", b)
			}
		})
	}
}

func TestSamplePolicyReadsAsDocumented(t *testing.T) {
	p := samplePolicy(t)
	if len(p.Spec.Servers) != 1 || p.Spec.Servers[0].Name != "payments" {
		t.Fatalf("servers = %+v, want the one payments server", p.Spec.Servers)
	}
	byName := map[string]v1alpha1.ToolRule{}
	for _, r := range p.Spec.Rules {
		byName[r.Name] = r
	}
	reads, money, mail := byName["reads"], byName["money-movement"], byName["receipts-by-email"]
	if reads.ConsequenceClass != v1alpha1.ConsequenceInformational || reads.Evidence.Role != v1alpha1.EvidenceRoleNone ||
		!slices.Equal(reads.Tools, []string{"get_*", "search*"}) {
		t.Errorf("reads rule = %+v", reads)
	}
	if money.ConsequenceClass != v1alpha1.ConsequenceFinancial || money.Evidence.Role != v1alpha1.EvidenceRoleHumanAuthorization ||
		!slices.Equal(money.Evidence.Principals, []string{"alice@example.com"}) || !slices.Equal(money.Tools, []string{"send_payment", "refund"}) {
		t.Errorf("money-movement rule = %+v", money)
	}
	if len(money.Arguments) != 1 || len(money.Alternatives) != 1 {
		t.Fatalf("money-movement wants one amount cap and one dry-run alternative, got %+v", money)
	}
	if got := string(money.Alternatives[0].Args.Raw); got != `{"dry_run":true}` {
		t.Errorf("dry-run alternative args = %s", got)
	}
	if mail.ConsequenceClass != v1alpha1.ConsequenceCommunication || len(mail.Provenance) != 1 ||
		mail.Provenance[0].Action != v1alpha1.ProvenanceActionDeny ||
		!slices.Equal(mail.Provenance[0].Sources, []v1alpha1.ProvenanceSource{v1alpha1.ProvenanceRetrieval}) {
		t.Errorf("receipts-by-email rule = %+v", mail)
	}
}

// canonical is JCS for the sample's values: objects with ASCII keys and string or bool members,
// for which encoding/json's sorted-key output without HTML escaping is byte-identical to
// RFC 8785. It is not a general JCS (that is internal/jcs).
func canonical(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func digest(b []byte) v1alpha1.Digest {
	sum := sha256.Sum256(b)
	return v1alpha1.Digest("sha256:" + hex.EncodeToString(sum[:]))
}

// The sample Act and BindingMoment carry real digests: the ones a reader recomputes from the
// arguments in the sample's comment (docs/architecture.md "The action an option authorises": the
// action is {"tool","args"}), and the envelope digest over the stored envelope bytes (envelope-04
// §6.2).
func TestSampleDigestsAreReproducible(t *testing.T) {
	args := map[string]any{"amount": "2500.00", "currency": "EUR", "invoice": "INV-2291", "to": "acct-7781"}
	dryRun := map[string]any{"amount": "2500.00", "currency": "EUR", "invoice": "INV-2291", "to": "acct-7781", "dry_run": true}
	act, bm := sampleAct(t), sampleBindingMoment(t)

	if got, want := act.Spec.ArgumentsDigest, digest(canonical(t, args)); got != want {
		t.Errorf("act argumentsDigest = %s, want %s", got, want)
	}
	requested := digest(canonical(t, map[string]any{"tool": "send_payment", "args": args}))
	if act.Spec.ActionDigest != requested {
		t.Errorf("act actionDigest = %s, want %s", act.Spec.ActionDigest, requested)
	}
	if got := digest([]byte(bm.Spec.Envelope)); got != bm.Spec.EnvelopeDigest {
		t.Errorf("sha256(envelope) = %s, spec.envelopeDigest = %s", got, bm.Spec.EnvelopeDigest)
	}

	var env struct {
		Synopsis string `json:"synopsis"`
		Question struct {
			Options []struct {
				ActionDigest v1alpha1.Digest `json:"action_digest"`
			} `json:"options"`
			RecommendedIdx int `json:"recommended_idx"`
		} `json:"question"`
	}
	if err := json.Unmarshal([]byte(bm.Spec.Envelope), &env); err != nil {
		t.Fatalf("sample envelope is not JSON: %v", err)
	}
	var reparsed any
	_ = json.Unmarshal([]byte(bm.Spec.Envelope), &reparsed)
	if !bytes.Equal(canonical(t, reparsed), []byte(bm.Spec.Envelope)) {
		t.Errorf("sample envelope is not in canonical form")
	}
	if env.Synopsis != bm.Spec.Synopsis {
		t.Errorf("spec.synopsis %q is not the envelope's %q", bm.Spec.Synopsis, env.Synopsis)
	}
	want := []v1alpha1.Digest{requested, digest(canonical(t, map[string]any{"tool": "send_payment", "args": dryRun}))}
	var got []v1alpha1.Digest
	for _, o := range env.Question.Options {
		got = append(got, o.ActionDigest)
	}
	if !slices.Equal(got, want) {
		t.Errorf("envelope option digests = %v, want the requested call then the dry run %v", got, want)
	}
	if bm.Spec.ActRef.Name != act.Name {
		t.Errorf("binding moment actRef %q, act is %q", bm.Spec.ActRef.Name, act.Name)
	}
}
