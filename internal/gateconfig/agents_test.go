package gateconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgents: agent authentication is on by default with a token file created on first start
// (0600 in a 0700 directory) and read back unchanged; named token files must exist and be
// private; bad agents[], limits and modes are refused by field.
func TestAgents(t *testing.T) {
	dir := t.TempDir()
	c, err := Parse([]byte(minimal+"agents:\n- name: agent-2\n  tokenFile: a2.token\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Authentication != AuthToken || c.Limits.Sessions != DefaultMaxSessions || c.Limits.SessionsPerAgent != DefaultMaxSessionsPerAgent ||
		c.Limits.PendingMomentsPerAgent != DefaultMaxPendingMomentsPerAgent || c.Limits.PendingMomentsPerSession != DefaultMaxPendingMomentsPerSession ||
		c.ReadTimeout() != DefaultReadTimeout {
		t.Fatalf("defaults: %+v %+v %v", c.Agent, c.Limits, c.ReadTimeout())
	}
	if _, err := c.AgentTokens(); err == nil || !strings.Contains(err.Error(), "agent-2") {
		t.Fatalf("a missing named token file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a2.token"), []byte(strings.Repeat("k", 40)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AgentTokens(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a readable token file: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "a2.token"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := c.AgentTokens()
	if err != nil {
		t.Fatal(err)
	}
	if string(toks["agent-2"]) != strings.Repeat("k", 40) || len(toks["agent-1"]) != 64 || len(toks) != 2 {
		t.Fatalf("tokens %q", toks)
	}
	fi, err := os.Stat(c.AgentTokenPath("agent-1"))
	if err != nil || fi.Mode().Perm() != 0o600 || c.AgentTokenPath("agent-1") != filepath.Join(dir, "data", AgentsDir, "agent-1.token") {
		t.Fatalf("the default token file: %v %v", fi, err)
	}
	again, err := c.AgentTokens()
	if err != nil || string(again["agent-1"]) != string(toks["agent-1"]) {
		t.Fatalf("the token changed on a second start: %v", err)
	}
	srv := c.HTTPServer(nil)
	if srv.ReadTimeout != DefaultReadTimeout || srv.ReadHeaderTimeout != ReadHeaderTimeout || srv.IdleTimeout != IdleTimeout {
		t.Fatalf("server timeouts %v %v %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}

	none, err := Parse([]byte(strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  authentication: none", 1)), dir)
	if err != nil {
		t.Fatal(err)
	}
	if toks, err := none.AgentTokens(); toks != nil || err != nil {
		t.Fatalf("authentication none: %v %v", toks, err)
	}
	if c.Limits.HostLoopCalls != DefaultMaxHostLoopCalls || c.Limits.HostLoopCallsPerAgent != DefaultMaxHostLoopCallsPerAgent {
		t.Fatalf("host-loop limits %d %d", c.Limits.HostLoopCalls, c.Limits.HostLoopCallsPerAgent)
	}
	short, err := Parse([]byte(minimal+"limits:\n  readTimeout: 2s\n"), dir)
	if err != nil || short.ReadTimeout() != 2*time.Second || short.HTTPServer(nil).ReadHeaderTimeout != 2*time.Second {
		t.Fatalf("limits.readTimeout: %v", err)
	}

	for _, tc := range []struct{ name, doc, field string }{
		{"unknown mode", strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  authentication: maybe", 1), "agent.authentication"},
		{"none with a token file", strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  authentication: none\n  tokenFile: t", 1), "agent.authentication"},
		{"none with more agents", strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  authentication: none", 1) + "agents:\n- name: b\n", "agent.authentication"},
		{"duplicate agent", minimal + "agents:\n- name: agent-1\n", "agents[0].name"},
		{"agent that is a principal", minimal + "agents:\n- name: alice\n", "agents[0].name"},
		{"agent name not a label", minimal + "agents:\n- name: A/B\n", "agents[0].name"},
		{"shared token file", minimal + "agents:\n- name: b\n  tokenFile: t\n- name: c\n  tokenFile: t\n", "agents[1].tokenFile"},
		{"negative limit", minimal + "limits:\n  sessions: -1\n", "limits.sessions"},
		{"huge limit", minimal + "limits:\n  pendingMomentsPerAgent: 1000000\n", "limits.pendingMomentsPerAgent"},
		{"negative host-loop limit", minimal + "limits:\n  hostLoopCalls: -1\n", "limits.hostLoopCalls"},
		{"huge host-loop limit", minimal + "limits:\n  hostLoopCallsPerAgent: 1000000\n", "limits.hostLoopCallsPerAgent"},
		{"read timeout too short", minimal + "limits:\n  readTimeout: 10ms\n", "limits.readTimeout"},
		{"agent name not a file name", strings.Replace(minimal, "  name: agent-1", "  name: agent@example.com", 1), "agent.tokenFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), dir)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one about %s", err, tc.field)
			}
		})
	}
}
