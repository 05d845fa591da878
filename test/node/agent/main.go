// Command agent is the agent container of the node suite: an MCP client (the official Go SDK)
// that reaches its tools only through the URL in MCP_SERVER_URL, which the injection points
// at the sidecar, driven by the test over HTTP on :8081:
//
//	POST /call   {"session":"a","tool":"get_balance","args":{...}} → the tool result
//	POST /direct {"url":"http://…/mcp","tool":"…","args":{…}} → a call straight to a server
//	POST /probe  {"needle":"…"} → where in its environment and filesystem the needle occurs,
//	                              what it can see of other containers, and what it saw at start
//
// Each session name is one MCP session, kept until /call names it again.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

type callReq struct {
	Session string          `json:"session"`
	URL     string          `json:"url"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
}

type callResp struct {
	IsError bool           `json:"isError"`
	Text    string         `json:"text"`
	Meta    map[string]any `json:"meta"`
	Err     string         `json:"err,omitempty"`
	// Replayed: the gate marked the answer a journal replay (its Actgate-Replayed header).
	Replayed bool `json:"replayed"`
}

// atStart is what the agent saw the moment it started: whether the sidecar's port already
// accepted a connection.
var atStart struct {
	Time            time.Time `json:"time"`
	SidecarListened bool      `json:"sidecarListened"`
	DialErr         string    `json:"dialErr,omitempty"`
}

func main() {
	atStart.Time = time.Now().UTC()
	target := os.Getenv("MCP_SERVER_URL")
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		atStart.SidecarListened = err == nil
		if err != nil {
			atStart.DialErr = err.Error()
		} else {
			_ = c.Close()
		}
	}
	var mu sync.Mutex
	sessions := map[string]*session{}
	connect := func(ctx context.Context, endpoint string) (*session, error) {
		s := &session{}
		hc := &http.Client{Transport: wire.ReplayCounter{N: &s.replayed}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "billing-agent", Version: "v1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		s.cs = cs
		return s, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var req callReq
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		cs := sessions[req.Session]
		mu.Unlock()
		if cs == nil {
			var err error
			if cs, err = connect(r.Context(), target); err != nil {
				writeJSON(w, callResp{Err: "connect: " + err.Error()})
				return
			}
			mu.Lock()
			sessions[req.Session] = cs
			mu.Unlock()
		}
		writeJSON(w, call(r.Context(), cs, req))
	})
	mux.HandleFunc("POST /direct", func(w http.ResponseWriter, r *http.Request) {
		var req callReq
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cs, err := connect(r.Context(), req.URL)
		if err != nil {
			writeJSON(w, callResp{Err: "connect: " + err.Error()})
			return
		}
		defer cs.cs.Close()
		writeJSON(w, call(r.Context(), cs, req))
	})
	mux.HandleFunc("POST /probe", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Needle string `json:"needle"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Needle == "" {
			http.Error(w, "needle required", http.StatusBadRequest)
			return
		}
		writeJSON(w, probe(req.Needle))
	})
	srv := &http.Server{Addr: ":8081", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "agent: control on :8081; MCP through", target)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// session is an MCP client session and the count of answers on it the gate marked a replay.
type session struct {
	cs       *mcp.ClientSession
	replayed atomic.Int64
}

func call(ctx context.Context, s *session, req callReq) callResp {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := req.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	before := s.replayed.Load()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: req.Tool, Arguments: args})
	if err != nil {
		return callResp{Err: err.Error()}
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return callResp{IsError: res.IsError, Text: strings.Join(text, "\n"), Meta: res.Meta, Replayed: s.replayed.Load() > before}
}

type probeResp struct {
	EnvNames   []string `json:"envNames"`
	InEnv      []string `json:"inEnv"`
	InFiles    []string `json:"inFiles"`
	Unreadable int      `json:"unreadable"`
	Processes  []string `json:"processes"`
	Mounts     []string `json:"mounts"`
	AtStart    any      `json:"atStart"`
}

// probe looks for needle everywhere this container can read: its environment and every
// regular file outside /proc, /sys and /dev, and lists the processes and mounts it sees.
func probe(needle string) probeResp {
	p := probeResp{AtStart: atStart}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		p.EnvNames = append(p.EnvNames, k)
		if strings.Contains(v, needle) {
			p.InEnv = append(p.InEnv, k)
		}
	}
	nb := []byte(needle)
	_ = filepath.WalkDir("/", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			p.Unreadable++
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() && (path == "/proc" || path == "/sys" || path == "/dev") {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			p.Unreadable++
			return nil
		}
		if bytes.Contains(b, nb) {
			p.InFiles = append(p.InFiles, path)
		}
		return nil
	})
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && e.Name()[0] >= '0' && e.Name()[0] <= '9' {
			p.Processes = append(p.Processes, e.Name()+" "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
		}
	}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				p.Mounts = append(p.Mounts, f[1])
			}
		}
	}
	return p
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "agent: write:", err)
	}
}
