package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// TaskCapabilities are the capabilities a TaskServer's initialize answers, as it writes them.
const TaskCapabilities = `{"tools":{"listChanged":true},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`

// TaskServer is a real MCP streamable-HTTP server written against the wire of MCP 2025-11-25
// tasks (basic/utilities/tasks), which the Go SDK's server does not speak: a tools/call with
// params.task creates a task ("working") and answers its CreateTaskResult; tasks/get,
// tasks/result (which waits for a terminal status), tasks/cancel and tasks/list follow it; a
// tools/call without params.task runs as a plain call. Every answer is application/json; it
// offers no GET stream. Tests end a task with Finish and read what it received.
type TaskServer struct {
	// URL is the server's endpoint.
	URL string
	srv *http.Server

	tools   []string
	mu      sync.Mutex
	calls   map[string]int
	params  map[string][]json.RawMessage
	tasks   map[string]*serverTask
	next    int
	results int
	changed chan struct{}
	session int
	// stream enables the GET stream (StatusStream); statuses are its events.
	stream   bool
	statuses []string
}

// StatusStream makes the server offer a GET stream (before any request): a priming event with
// id "ts-0" and a retry field, then a notifications/tasks/status event for each Finish, with
// ids "ts-1", "ts-2", ...; a GET with Last-Event-ID "ts-N" gets the events after N first.
// Without it, GET is answered 405.
func (s *TaskServer) StatusStream() {
	s.mu.Lock()
	s.stream = true
	s.mu.Unlock()
}

type serverTask struct {
	status string
	result json.RawMessage
}

// StartTasks starts a TaskServer on a loopback port whose tools/list names tools, each with
// execution.taskSupport "required" (tools/call accepts any name).
func StartTasks(tools ...string) (*TaskServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &TaskServer{URL: "http://" + ln.Addr().String() + "/mcp", tools: tools, calls: map[string]int{},
		params: map[string][]json.RawMessage{}, tasks: map[string]*serverTask{}, changed: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *TaskServer) Close() error {
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Finish ends the task id with status and its result (a CallToolResult's JSON).
func (s *TaskServer) Finish(id, status, result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[id]; t != nil {
		t.status, t.result = status, json.RawMessage(result)
		if s.stream {
			s.statuses = append(s.statuses, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":%s}`, taskJSON(id, status)))
		}
		s.signalLocked()
	}
}

// Calls returns the tools/call requests of tool the server received and the tasks/result
// requests of any task.
func (s *TaskServer) Calls(tool string) (calls, results int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool], s.results
}

// Params returns the params of the tools/call requests of tool, as received.
func (s *TaskServer) Params(tool string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.params[tool]...)
}

func (s *TaskServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.serveGET(w, r)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	if len(m.ID) == 0 || m.Method == "" { // a notification or a response
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result, rpcErr := s.handle(r.Context(), m.Method, m.Params)
	if m.Method == "initialize" {
		s.mu.Lock()
		s.session++
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("task-session-%d", s.session))
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	if rpcErr != "" {
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, m.ID, rpcErr)
		return
	}
	_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

// serveGET is the StatusStream.
func (s *TaskServer) serveGET(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	stream := s.stream
	s.mu.Unlock()
	if !stream {
		http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
		return
	}
	next := 0
	if last, ok := strings.CutPrefix(r.Header.Get("Last-Event-ID"), "ts-"); ok {
		if _, err := fmt.Sscanf(last, "%d", &next); err != nil {
			http.Error(w, "bad Last-Event-ID", http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if next == 0 {
		_, _ = io.WriteString(w, "id: ts-0\nretry: 1000\ndata: \n\n")
	}
	rc := http.NewResponseController(w)
	for {
		_ = rc.Flush()
		s.mu.Lock()
		evs, changed := s.statuses[min(next, len(s.statuses)):], s.changed
		s.mu.Unlock()
		for _, ev := range evs {
			next++
			if _, err := fmt.Fprintf(w, "event: message\nid: ts-%d\ndata: %s\n\n", next, ev); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// taskJSON is a task as tasks/get, tasks/cancel and tasks/list answer it.
func taskJSON(id, status string) string {
	return fmt.Sprintf(`{"taskId":%q,"status":%q,"createdAt":"2026-12-01T16:00:00Z","lastUpdatedAt":"2026-12-01T16:00:01Z","ttl":60000}`, id, status)
}

func (s *TaskServer) handle(ctx context.Context, method string, params json.RawMessage) (result, rpcErr string) {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Name            string          `json:"name"`
		Task            json.RawMessage `json:"task"`
		TaskID          string          `json:"taskId"`
	}
	_ = json.Unmarshal(params, &p)
	const notFound = `{"code":-32602,"message":"Task not found"}`
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "initialize":
		return fmt.Sprintf(`{"protocolVersion":%q,"capabilities":%s,"serverInfo":{"name":"mcptest-tasks","version":"1"}}`, p.ProtocolVersion, TaskCapabilities), ""
	case "tools/list":
		var b strings.Builder
		for i, name := range s.tools {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":%q,"inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`, name)
		}
		return `{"tools":[` + b.String() + `]}`, ""
	case "tools/call":
		s.calls[p.Name]++
		s.params[p.Name] = append(s.params[p.Name], params)
		if len(p.Task) == 0 {
			return `{"content":[{"type":"text","text":"ran as a plain call"}]}`, ""
		}
		s.next++
		id := fmt.Sprintf("task-%d", s.next)
		s.tasks[id] = &serverTask{status: "working"}
		return fmt.Sprintf(`{"task":{"taskId":%q,"status":"working","createdAt":"2026-12-01T16:00:00Z",`+
			`"lastUpdatedAt":"2026-12-01T16:00:00Z","ttl":60000,"pollInterval":50}}`, id), ""
	case "tasks/get", "tasks/cancel":
		t := s.tasks[p.TaskID]
		if t == nil {
			return "", notFound
		}
		if method == "tasks/cancel" {
			t.status = "cancelled"
			s.signalLocked()
		}
		return taskJSON(p.TaskID, t.status), ""
	case "tasks/list":
		var b strings.Builder
		for id, t := range s.tasks {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(taskJSON(id, t.status))
		}
		return `{"tasks":[` + b.String() + `]}`, ""
	case "tasks/result":
		s.results++
		for {
			t := s.tasks[p.TaskID]
			if t == nil {
				return "", notFound
			}
			if t.status != "working" {
				if t.result == nil {
					return "", `{"code":-32603,"message":"the task has no result"}`
				}
				var m map[string]json.RawMessage
				_ = json.Unmarshal(t.result, &m)
				m["_meta"] = json.RawMessage(fmt.Sprintf(`{"io.modelcontextprotocol/related-task":{"taskId":%q}}`, p.TaskID))
				out, _ := json.Marshal(m)
				return string(out), ""
			}
			ch := s.changed
			s.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
			}
			s.mu.Lock()
			if ctx.Err() != nil {
				return "", `{"code":-32603,"message":"the request ended"}`
			}
		}
	}
	return "", `{"code":-32601,"message":"Method not found"}`
}

// signalLocked wakes the waiting tasks/result requests; s.mu is held.
func (s *TaskServer) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
