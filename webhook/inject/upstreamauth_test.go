package inject_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// authPolicy has a server whose sidecar uses client credentials with a client secret and one
// whose sidecar exchanges the pod's service-account token.
func authPolicy() v1alpha1.ToolPolicy {
	pay := server("payments", "")
	pay.Auth = &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantClientCredentials, TokenURL: "https://idp.example/token", ClientID: "sidecar",
		ClientSecretRef: &v1alpha1.SecretKeyRef{Name: "idp-client", Key: "secret"}, Scopes: []string{"mcp"}}
	mail := server("mail", "")
	mail.Auth = &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token",
		ServiceAccountTokenAudience: "https://idp.example"}
	return policy("p", metav1.LabelSelector{}, pay, mail)
}

// TestInjectUpstreamAuth: for servers with spec.servers[].auth the sidecar — and only the
// sidecar — gets the client secret (projected to <server>/client-secret), a projected
// service-account token of the configured audience for token exchange (<server>/sa-token), and
// ACTGATE_UPSTREAM_OAUTH naming those files; an agent container's reference to the client
// secret is taken away like a static credential's.
func TestInjectUpstreamAuth(t *testing.T) {
	pod := agentPod()
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "IDP_SECRET", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "idp-client"}, Key: "secret"}}})
	policies := []v1alpha1.ToolPolicy{authPolicy()}
	out, st, err := inject.Inject(pod, policies, goldenConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if !inject.CredentialSecrets(policies)["idp-client"] {
		t.Fatal("the client secret is not a credential Secret")
	}
	for _, r := range inject.CredentialReferences(out, inject.CredentialSecrets(policies)) {
		if r.Container != inject.SidecarName {
			t.Errorf("an agent container still refers to a credential: %v", r)
		}
	}
	sc := out.Spec.InitContainers[0]
	var env string
	for _, e := range sc.Env {
		if e.Name == "ACTGATE_UPSTREAM_OAUTH" {
			env = e.Value
		}
	}
	var settings map[string]map[string]any
	if err := json.Unmarshal([]byte(env), &settings); err != nil {
		t.Fatalf("ACTGATE_UPSTREAM_OAUTH %q: %v", env, err)
	}
	if p := settings["payments"]; p["grant"] != "client_credentials" || p["clientSecretFile"] != "payments/"+inject.ClientSecretFileName || p["clientID"] != "sidecar" {
		t.Errorf("payments settings %v", p)
	}
	if m := settings["mail"]; m["grant"] != "token_exchange" || m["subjectTokenFile"] != "mail/"+inject.ServiceAccountTokenFileName {
		t.Errorf("mail settings %v", m)
	}
	var vol *corev1.Volume
	for i := range out.Spec.Volumes {
		if out.Spec.Volumes[i].Name == inject.VolumeCredentials {
			vol = &out.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Projected == nil {
		t.Fatal("no projected credentials volume")
	}
	var secretPath, tokenAud, tokenPath string
	for _, src := range vol.Projected.Sources {
		if src.Secret != nil && src.Secret.Name == "idp-client" && len(src.Secret.Items) == 1 && src.Secret.Items[0].Key == "secret" {
			secretPath = src.Secret.Items[0].Path
		}
		if src.ServiceAccountToken != nil {
			tokenAud, tokenPath = src.ServiceAccountToken.Audience, src.ServiceAccountToken.Path
		}
	}
	if secretPath != "payments/client-secret" || tokenAud != "https://idp.example" || tokenPath != "mail/sa-token" {
		t.Errorf("credentials volume: secret at %q, token %q at %q", secretPath, tokenAud, tokenPath)
	}
	mounted := map[string]bool{}
	for _, c := range append(out.Spec.InitContainers, out.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == inject.VolumeCredentials {
				mounted[c.Name] = true
			}
		}
	}
	if len(mounted) != 1 || !mounted[inject.SidecarName] {
		t.Errorf("the credentials volume is mounted into %v", mounted)
	}
	if len(st.Servers) != 2 {
		t.Errorf("status servers %v", st.Servers)
	}
}

// TestInjectUpstreamAuthAgentSubject: a server whose token exchange has subject Agent gets
// subject "agent" in ACTGATE_UPSTREAM_OAUTH and no subject token file; with
// serviceAccountTokenAudience the pod's projected token is the actor, and without it no
// service-account token is projected for the server.
func TestInjectUpstreamAuthAgentSubject(t *testing.T) {
	for _, tc := range []struct {
		name, audience string
	}{{"actor", "https://idp.example"}, {"no actor", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			mail := server("mail", "")
			mail.Auth = &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token",
				Subject: v1alpha1.UpstreamSubjectAgent, ServiceAccountTokenAudience: tc.audience}
			p := policy("p", metav1.LabelSelector{}, mail)
			p.Spec.AgentAuth = &v1alpha1.AgentAuth{Issuer: "https://idp.example", Audience: "https://agents.example"}
			out, _, err := inject.Inject(agentPod(), []v1alpha1.ToolPolicy{p}, goldenConfig(t))
			if err != nil {
				t.Fatal(err)
			}
			var env string
			for _, e := range out.Spec.InitContainers[0].Env {
				if e.Name == "ACTGATE_UPSTREAM_OAUTH" {
					env = e.Value
				}
			}
			var settings map[string]map[string]any
			if err := json.Unmarshal([]byte(env), &settings); err != nil {
				t.Fatalf("ACTGATE_UPSTREAM_OAUTH %q: %v", env, err)
			}
			m := settings["mail"]
			if m["subject"] != "agent" || m["subjectTokenFile"] != nil {
				t.Fatalf("mail settings %v", m)
			}
			projected := false
			for _, v := range out.Spec.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					if src.ServiceAccountToken != nil && src.ServiceAccountToken.Path == "mail/"+inject.ServiceAccountTokenFileName {
						projected = true
					}
				}
			}
			if actor := tc.audience != ""; projected != actor || (m["actorTokenFile"] == "mail/"+inject.ServiceAccountTokenFileName) != actor {
				t.Fatalf("actor %v: token projected %v, settings %v", actor, projected, m)
			}
		})
	}
}
