package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/receipt"
)

// standaloneConfig is the gate's configuration: the policy of testdata/gate/actgate.yaml
// (hot reads, payments under alice, email under a policy permit) without the provenance and
// amount rules, which the mix does not exercise.
func standaloneConfig(listen, dataDir, tokenFile, upstreamURL string) []byte {
	return fmt.Appendf(nil, `listen: %s
dataDir: %q
sinkID: actgate-load
agent:
  name: %s
  trustDeclaredProvenance: true
  # The suite's agent connects without a token (docs/security.md: agent authentication).
  authentication: none
# The mix raises escalations faster than it resolves them, from one agent over many sessions:
# the caps that bound what an agent can make the gate hold are set to their maximum here, so
# the run measures the sink, not the caps (TestStandaloneServe tests the caps).
limits:
  sessions: 100000
  sessionsPerAgent: 100000
  pendingMomentsPerAgent: 100000
  pendingMomentsPerSession: 100000
principals:
- name: alice
upstreams:
- server: %s
  bearerTokenFile: %q
callTimeout: 30s
policy:
  podSelector: {}
  servers:
  - name: %s
    url: %q
  rules:
  - name: balances
    tools: [%s]
    consequenceClass: INFORMATIONAL
  - name: payments
    tools: [%s]
    consequenceClass: FINANCIAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    alternatives:
    - label: Pay at most 1 now
      reasoning: Caps the amount while the rest is checked.
      args:
        amount: 1
  - name: email
    tools: [%s]
    consequenceClass: COMMUNICATION
    evidence:
      role: PolicyPermit
`, listen, dataDir, agentName, serverName, tokenFile, serverName, upstreamURL, toolBalance, toolPayment, toolEmail)
}

// standalone runs `actgate serve` as a process, on a fresh data dir per run.
type standalone struct {
	bin  string
	host string
	dir  string
}

func (s *standalone) name() string { return targetStandalone }

func (s *standalone) close() error { return nil }

// standaloneRun is one gate process.
type standaloneRun struct {
	p       *proc
	dataDir string
	base    string
	alice   *momentsPrincipal
}

func (s *standalone) startRun(ctx context.Context, runID string, upstreamURL string) (sinkRun, error) {
	dir := filepath.Join(s.dir, runID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "finance.token")
	if err := os.WriteFile(tokenFile, []byte(upstreamToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	cfgFile := filepath.Join(dir, "actgate.yaml")
	cfg := standaloneConfig(net.JoinHostPort(s.host, "0"), dataDir, tokenFile, upstreamURL)
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return nil, err
	}
	p, err := startProc("actgate-serve", dir, s.bin, os.Environ(), "serve", "--config", cfgFile)
	if err != nil {
		return nil, err
	}
	r := &standaloneRun{p: p, dataDir: dataDir}
	endpoint := filepath.Join(dataDir, gateconfig.EndpointFile)
	if err := waitFor(p, 60*time.Second, "writing its endpoint", func() error {
		b, err := os.ReadFile(endpoint)
		if err != nil {
			return err
		}
		r.base = strings.TrimSpace(string(b))
		if r.base == "" {
			return errNotYet
		}
		return nil
	}); err != nil {
		_ = p.stop()
		return nil, err
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "principals", "alice.token"))
	if err != nil {
		_ = p.stop()
		return nil, err
	}
	r.alice = &momentsPrincipal{base: r.base, token: strings.TrimSpace(string(tok)), http: &http.Client{Timeout: opTimeout}}
	return r, nil
}

func (r *standaloneRun) endpoint() string     { return r.base + mcpproxy.Path(serverName) }
func (r *standaloneRun) pid() int             { return r.p.cmd.Process.Pid }
func (r *standaloneRun) principal() principal { return r.alice }

// finish stops the gate (SIGTERM: graceful, the receipt log flushed) and reads what it left:
// the store (authorities and journal, boltstore.ReadSnapshot) and the receipt log.
func (r *standaloneRun) finish(context.Context) (World, error) {
	if err := r.p.stop(); err != nil {
		return World{}, err
	}
	snap, err := boltstore.ReadSnapshot(filepath.Join(r.dataDir, gateconfig.StoreFile), 10*time.Second)
	if err != nil {
		return World{}, err
	}
	w := World{Dispatches: snap.Dispatches}
	for _, a := range snap.Authorities {
		if a.State == authority.StateConsumed {
			w.Consumed = append(w.Consumed, Consumption{AuthorityID: a.Authority.ID, ConsumedBy: a.ConsumedBy})
		}
	}
	logPath := filepath.Join(r.dataDir, gateconfig.ReceiptsFile)
	w.HotSource = "the receipt log"
	w.HotAllows, err = hotAllows(logPath)
	if err != nil {
		return World{}, err
	}
	w.Receipts = verifyReceipts(logPath, filepath.Join(r.dataDir, gateconfig.ReceiptPubFile))
	return w, nil
}

// hotAllows reads the hot-path allows from a receipt log: allow receipts without an authority.
func hotAllows(path string) ([]HotAllow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []HotAllow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), receipt.MaxLineBytes*2)
	for sc.Scan() {
		var r struct {
			Decision    *string `json:"decision"`
			Tool        string  `json:"tool"`
			AuthorityID string  `json:"authority_id"`
			OperationID string  `json:"operation_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if r.Decision != nil && *r.Decision == receipt.DecisionAllow && r.AuthorityID == "" {
			out = append(out, HotAllow{Tool: r.Tool, OperationID: r.OperationID})
		}
	}
	return out, sc.Err()
}

// verifyReceipts verifies the log under the gate's checkpoint key (`actgate receipts verify`).
func verifyReceipts(logPath, pubPath string) *ReceiptCheck {
	pemBytes, err := os.ReadFile(pubPath)
	if err != nil {
		return &ReceiptCheck{Err: err}
	}
	v, err := receipt.NewVerifierPEM(pemBytes)
	if err != nil {
		return &ReceiptCheck{Err: fmt.Errorf("%s: %w", pubPath, err)}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		return &ReceiptCheck{Err: err}
	}
	rep, err := receipt.Verify(bytes.NewReader(b), v)
	return &ReceiptCheck{Receipts: rep.Receipts, Err: err}
}

// momentsPrincipal is alice on the gate's moments API (`actgate resolve`): option 0 of a
// gate-authored envelope is the requested call (docs/architecture.md "Human decisions").
type momentsPrincipal struct {
	base, token string
	http        *http.Client
}

func (m *momentsPrincipal) resolve(ctx context.Context, momentID, envelopeDigest, _ string, _ json.RawMessage) error {
	body := fmt.Sprintf(`{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, envelopeDigest)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/v1/moments/"+momentID+"/resolve", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("resolve %s: HTTP %d: %s", momentID, resp.StatusCode, bytes.TrimSpace(b))
	}
	var out struct {
		AuthorityID string `json:"authorityId"`
		Pending     bool   `json:"pending"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	if out.AuthorityID == "" || out.Pending {
		return fmt.Errorf("resolve %s issued no authority: %s", momentID, bytes.TrimSpace(b))
	}
	return nil
}
