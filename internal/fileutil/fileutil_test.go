package fileutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "endpoint")
	for _, content := range []string{"first\n", "second, longer\n"} {
		if err := WriteAtomic(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("read %q %v, want %q", b, err, content)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v %v, want 0600", fi.Mode().Perm(), err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v %v", entries, err)
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		ok                  bool
	}{
		{"trimmed", " tok-1\n", "tok-1", true},
		{"empty", "", "", false},
		{"only whitespace", " \r\n\t", "", false},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadToken(p)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: ReadToken = %q, %v; want %q (ok %v)", tc.name, got, err, tc.want, tc.ok)
		}
	}
	if _, err := ReadToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("no error for a missing file")
	}
}
