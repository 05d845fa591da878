package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// TestTaskCallThroughSidecar: the sidecar runs the same proxy and sink, so a task-augmented
// call of a permitted tool is one Permit and one dispatch (sent once, with params.task), INVOKED
// in the pod's journal while its task works and not reported; the agent's tasks/result settles
// it EXECUTED, and the outbox reports that outcome to the service.
func TestTaskCallThroughSidecar(t *testing.T) {
	up, err := mcptest.StartTasks("send_payment")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	f := &fixture{t: t, stub: newStub(t, bankModes)}
	f.store, err = boltstore.Open(filepath.Join(t.TempDir(), JournalFile), boltstore.Options{Verifier: f.stub.signer.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.store.Close() })
	f.stub.spec, f.stub.epoch = testPolicy(t, up.URL), 1
	f.policy = compiled(t, f.stub.spec, 1)
	opts := Options{
		Review: f.stub.client(func() (string, error) { return testToken, nil }),
		Policy: f.policy, Store: f.store, Namespace: testNS, SinkID: testSink,
		Servers: []Server{{Name: "payments", URL: up.URL}}, ReviewTimeout: time.Second,
	}
	if f.gate, err = NewGate(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.gate.Close)
	p, err := mcpproxy.New(mcpproxy.Config{Server: "payments", URL: up.URL, Gate: f.gate, Agent: testAgent, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpproxy.Path("payments"), p)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		_ = p.Close()
		srv.Close()
	})

	endpoint := srv.URL + mcpproxy.Path("payments")
	sid := ""
	post := func(body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if sid == "" {
			sid = resp.Header.Get("Mcp-Session-Id")
		}
		return b
	}
	init := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if !bytes.Contains(init, []byte(`"tasks":{`)) {
		t.Fatalf("initialize without the upstream's capabilities.tasks: %s", init)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	created := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_payment","arguments":{"amount":5},"task":{}}}`)
	var c struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(created, &c) != nil || c.Result.Task.TaskID == "" {
		t.Fatalf("tools/call: not the upstream's CreateTaskResult: %s", created)
	}
	records := func(st journal.State) int {
		recs, err := f.store.InState(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n := records(journal.StateInvoked); n != 1 {
		t.Fatalf("%d INVOKED records, want 1", n)
	}
	if calls, _ := up.Calls("send_payment"); calls != 1 {
		t.Fatalf("upstream tools/call count %d, want 1", calls)
	}
	if reps := f.stub.reported(); len(reps) != 0 {
		t.Fatalf("reported before the outcome: %+v", reps)
	}

	up.Finish(c.Result.Task.TaskID, "completed", `{"content":[{"type":"text","text":"paid 5"}]}`)
	if res := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":%q}}`, c.Result.Task.TaskID)); !bytes.Contains(res, []byte("paid 5")) {
		t.Fatalf("tasks/result: %s", res)
	}
	reps := f.waitReports(1)
	if reps[0].State != v1alpha1.ActStateExecuted || records(journal.StateExecuted) != 1 || records(journal.StateInvoked) != 0 {
		t.Fatalf("outcome: reported %+v", reps)
	}
	if f.stub.consumeCount()+f.stub.reviewCount() == 0 {
		t.Fatal("the service was never asked")
	}
}
