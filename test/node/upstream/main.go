// Command upstream is the payments MCP server of the node suite, run in its own pod: the
// tools get_balance, send_payment and email_send (internal/mcpproxy/mcptest, the official Go
// SDK over streamable HTTP; send_payment and email_send can be asked to hold their answer) behind a bearer credential read from UPSTREAM_TOKEN, so only a
// caller holding the credential reaches a tool. GET /counts reports what the server itself
// saw: calls per tool, their operation ids, and the SHA-256 of each Authorization header it
// accepted or refused (never the header itself).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

func main() {
	token := os.Getenv("UPSTREAM_TOKEN")
	if token == "" {
		fmt.Fprintln(os.Stderr, "upstream: UPSTREAM_TOKEN is empty")
		os.Exit(2)
	}
	want := "Bearer " + token
	var mu sync.Mutex
	refused := []string{}
	var srv *mcptest.Server
	tools := []mcptest.Tool{
		{Name: "get_balance", Description: "Reads a balance.", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text(`{"balance":"1200.00"}`), nil
		}},
		{Name: "send_payment", Description: "Sends money.", Handler: func(ctx context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			hold(ctx, args)
			return mcptest.Text("paid: " + string(args)), nil
		}},
		{Name: "email_send", Description: "Sends an email.", Handler: func(ctx context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			hold(ctx, args)
			return mcptest.Text(`{"sent":true}`), nil
		}},
	}
	srv, err := mcptest.Start(tools, mcptest.Options{Name: "payments-mcp", Addr: ":8080",
		Intercept: func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/counts" {
				mu.Lock()
				defer mu.Unlock()
				counts := map[string]int{}
				var ops []string
				for _, c := range srv.Calls() {
					counts[c.Tool]++
					ops = append(ops, c.OperationID)
				}
				var accepted []string
				for _, a := range srv.Authorizations() {
					if a == want {
						accepted = append(accepted, digest(a))
					}
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]any{"counts": counts, "operations": ops, "accepted": accepted, "refused": refused})
				return true
			}
			if got := r.Header.Get("Authorization"); subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
				mu.Lock()
				refused = append(refused, digest(got))
				mu.Unlock()
				http.Error(w, "no valid credential", http.StatusUnauthorized)
				return true
			}
			return false
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "upstream: serving", srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	_ = srv.Close()
}

// hold waits hold_seconds (at most 120) when the arguments ask for it, or until the caller
// goes away: a call the suite can catch in flight.
func hold(ctx context.Context, args json.RawMessage) {
	var a struct {
		Hold float64 `json:"hold_seconds"`
	}
	if json.Unmarshal(args, &a) != nil || a.Hold <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(min(a.Hold, 120) * float64(time.Second))):
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
