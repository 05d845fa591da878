package node_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/actgate/actgate/test/testutil"
)

// authorAttacks: on the real node, a pod's author cannot get the credential or the sidecar's
// volumes into a container of its own by naming things like the injector (docs/security.md
// "What a pod's author can and cannot do"). Each pod is the agent pod of step 2 with the
// attacker's change: its own emptyDir volumes named like the injector's credentials, token and
// journal volumes mounted by the agent; and, unselected by any ToolPolicy, its container named
// like the sidecar holding the credential by secretKeyRef. The API server refuses both and
// neither ever runs. Were one admitted, it is run and probed like the agent: where its
// container reads the credential is the failure.
func (s *suite) authorAttacks(upstreamURL, upstreamIP, authorityIP string) {
	t := s.t
	pod := func(name, labels, containerName, extra string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {%[3]s}
spec:
  serviceAccountName: %[4]s
  terminationGracePeriodSeconds: 2
  hostAliases:
  - {ip: %[5]q, hostnames: [%[6]q]}
  - {ip: %[7]q, hostnames: [%[8]q]}
  containers:
  - name: %[9]s
    image: %[10]s
    imagePullPolicy: Never
    command: [/agent]
    env:
    - {name: MCP_SERVER_URL, value: %[11]q}
    - name: PAYMENTS_TOKEN
      valueFrom: {secretKeyRef: {name: payments-mcp, key: token}}
    ports: [{containerPort: 8081, name: control}]
    readinessProbe: {tcpSocket: {port: 8081}, periodSeconds: 1}
    securityContext: {runAsNonRoot: true, runAsUser: 1000, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}
%[12]s`, name, agentNS, labels, agentSA, upstreamIP, upstreamHost, authorityIP, authorityDNS, containerName, fixturesRef, upstreamURL, extra)
	}
	const ownVolumes = `    volumeMounts:
    - {name: actgate-credentials, mountPath: /stolen/credentials}
    - {name: actgate-token, mountPath: /stolen/token}
    - {name: actgate-journal, mountPath: /stolen/journal}
  volumes:
  - {name: actgate-credentials, emptyDir: {}}
  - {name: actgate-token, emptyDir: {}}
  - {name: actgate-journal, emptyDir: {}}
`
	for _, tc := range []struct{ name, manifest, want string }{
		{"author-volumes", pod("author-volumes", "app.kubernetes.io/name: billing-agent", "agent", ownVolumes),
			`container "agent" mounts volume "actgate-credentials"`},
		{"author-sidecar", pod("author-sidecar", "app.kubernetes.io/name: unselected-agent", "actgate-sidecar", ""),
			`no ToolPolicy selects this pod`},
	} {
		out, err := s.kubectlErr("apply", "-f", testutil.WriteFile(t, s.work, tc.name+".yaml", []byte(tc.manifest)))
		if err == nil {
			s.kubectl("-n", agentNS, "wait", "--for=condition=Ready", "pod/"+tc.name, "--timeout=180s")
			ip := s.podIP(agentNS, tc.name)
			var r probeResult
			s.postJSON("http://"+ip+":8081/probe", map[string]string{"needle": upstreamToken}, &r)
			errorf(t, "%s was admitted and runs; its container reads the credential in files %v, env %v; mounts %v", tc.name, r.InFiles, r.InEnv, r.Mounts)
			s.kubectl("-n", agentNS, "delete", "pod", tc.name, "--wait=false")
			continue
		}
		if !strings.Contains(out, "denied the request") || !strings.Contains(out, tc.want) {
			errorf(t, "%s: kubectl apply failed, but not with the admission refusal %q: %s", tc.name, tc.want, out)
		}
		if got, err := s.kubectlErr("-n", agentNS, "get", "pod", tc.name); err == nil || !strings.Contains(got, "NotFound") {
			errorf(t, "%s exists after its refusal: %s", tc.name, got)
		}
		t.Logf("%s refused: %s", tc.name, strings.TrimSpace(out))
	}
}

// kubectlErr runs kubectl and returns its combined output and error, for a call that is meant
// to be refused.
func (s *suite) kubectlErr(args ...string) (string, error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := s.n.Command(ctx, "kubectl", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
