package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManagerNotifyFlags: the webhook URL comes from the flag or a file (a mounted Secret);
// bad combinations and URLs are usage errors that never echo a URL read from a file.
func TestManagerNotifyFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("url", "https://hooks.slack.com/services/T0/B0/secret-path-91\n")
	plain := write("plain", "http://hooks.example/secret-path-92")
	cases := []struct {
		name  string
		flags notifyFlags
		want  string // "" = off, "!" = error
	}{
		{"off", notifyFlags{}, ""},
		{"flag", notifyFlags{webhookURL: "https://hooks.example/x"}, "https://hooks.example/x"},
		{"file, trimmed", notifyFlags{webhookURLFile: good}, "https://hooks.slack.com/services/T0/B0/secret-path-91"},
		{"both", notifyFlags{webhookURL: "https://hooks.example/x", webhookURLFile: good}, "!"},
		{"missing file", notifyFlags{webhookURLFile: filepath.Join(dir, "nope")}, "!"},
		{"http to a remote host in the file", notifyFlags{webhookURLFile: plain}, "!"},
		{"http to a remote host", notifyFlags{webhookURL: "http://hooks.example/x"}, "!"},
		{"console URL without a webhook", notifyFlags{consoleURL: "https://c.example/{id}"}, "!"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.flags.webhook()
			if c.want == "!" {
				if err == nil {
					t.Fatalf("accepted: %q", got)
				}
				if strings.Contains(err.Error(), "secret-path") {
					t.Errorf("the error echoes the URL from the file: %v", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
