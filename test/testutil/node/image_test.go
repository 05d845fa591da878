package node

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteImageIsReproducibleAndNamed: the same files give the same bytes, the tarball names
// its tag, and its layer holds the files with their modes under root-owned parent folders.
func TestWriteImageIsReproducibleAndNamed(t *testing.T) {
	dir := t.TempDir()
	files := []ImageFile{{Path: "/usr/local/bin/tool", Data: []byte("#bin"), Mode: 0o755}, {Path: "/etc/passwd", Data: []byte("root:x:0:0::/:/sbin/nologin\n")}}
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	for _, out := range []string{a, b} {
		if err := WriteImage(out, "example.test/tool:1", files, ImageConfig{Entrypoint: []string{"/usr/local/bin/tool"}, User: "65532:65532"}); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("two writes of the same image differ")
	}
	if ref, err := ImageRef(a); err != nil || ref != "example.test/tool:1" {
		t.Fatalf("ImageRef = %q, %v", ref, err)
	}
	entries := map[string]*tar.Header{}
	var config map[string]any
	tr := tar.NewReader(bytes.NewReader(ab))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if strings.HasSuffix(h.Name, "/layer.tar") {
			lr := tar.NewReader(tr)
			for {
				lh, err := lr.Next()
				if err != nil {
					break
				}
				entries[lh.Name] = lh
			}
		}
		if strings.HasSuffix(h.Name, ".json") && h.Name != "manifest.json" {
			_ = json.NewDecoder(tr).Decode(&config)
		}
	}
	for name, mode := range map[string]int64{"usr/": 0o755, "usr/local/": 0o755, "usr/local/bin/": 0o755, "usr/local/bin/tool": 0o755, "etc/passwd": 0o644} {
		if h := entries[name]; h == nil || h.Mode != mode || h.Uid != 0 {
			t.Errorf("layer entry %s: %+v, want mode %o owned by root", name, h, mode)
		}
	}
	if c, _ := config["config"].(map[string]any); c == nil || c["User"] != "65532:65532" {
		t.Errorf("image config: %v", config)
	}
}

func TestWriteImageRefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", "relative/file", "/", "/a/../b", "/a//b"} {
		if err := WriteImage(filepath.Join(t.TempDir(), "x.tar"), "x:1", []ImageFile{{Path: p}}, ImageConfig{}); err == nil {
			t.Errorf("WriteImage accepted path %q", p)
		}
	}
}

func tarOf(t testing.TB, files map[string]string) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(data))
	}
	_ = tw.Close()
	p := filepath.Join(t.TempDir(), "img.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImageRef(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" = an error
	}{
		{"docker archive", map[string]string{"manifest.json": `[{"Config":"c.json","RepoTags":["ghcr.io/actgate/actgate:0.1.0"],"Layers":[]}]`}, "ghcr.io/actgate/actgate:0.1.0"},
		{"OCI index, containerd name", map[string]string{"index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"example.test/a:2"}}]}`}, "example.test/a:2"},
		{"OCI index, bare ref.name", map[string]string{"index.json": `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"latest"}}]}`}, ""},
		{"no tags", map[string]string{"manifest.json": `[{"Config":"c.json","RepoTags":[]}]`}, ""},
		{"malformed manifest", map[string]string{"manifest.json": `{not json`}, ""},
		{"neither", map[string]string{"other": "x"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ImageRef(tarOf(t, tc.files))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ImageRef = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ImageRef = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := ImageRef(filepath.Join(t.TempDir(), "missing.tar")); err == nil {
		t.Error("ImageRef of a missing file succeeded")
	}
	p := filepath.Join(t.TempDir(), "garbage.tar")
	_ = os.WriteFile(p, []byte("this is not a tar archive at all, not even close............"), 0o600)
	if _, err := ImageRef(p); err == nil {
		t.Error("ImageRef of garbage succeeded")
	}
}

// FuzzImageRef: any bytes give a name or an error, never a panic.
func FuzzImageRef(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	m := `[{"RepoTags":["a/b:c"]}]`
	_ = tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(m)), Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte(m))
	_ = tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("garbage"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "f.tar")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		ref, err := ImageRef(p)
		if err == nil && ref == "" {
			t.Fatal("no error and no name")
		}
	})
}

func TestTablesOf(t *testing.T) {
	rs := "table ip filter {\n\tchain FORWARD {\n\t}\n}\ntable ip6 nat {\n}\n"
	got := tablesOf(rs)
	if len(got) != 2 || got[0] != "table ip filter" || got[1] != "table ip6 nat" {
		t.Fatalf("tablesOf = %q", got)
	}
}

func TestSnapshotDiff(t *testing.T) {
	a := Snapshot{Links: []string{"lo"}, Sysctls: map[string]string{"net/ipv4/ip_forward": "0"}}
	b := Snapshot{Links: []string{"lo", Bridge}, Sysctls: map[string]string{"net/ipv4/ip_forward": "1"}, Ruleset: "table ip filter {\n}\n"}
	d := strings.Join(b.Diff(a), "\n")
	for _, want := range []string{"+ link " + Bridge, "sysctl net/ipv4/ip_forward 0 → 1", "netfilter ruleset changed"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if d := a.Diff(a); len(d) != 0 {
		t.Errorf("a snapshot differs from itself: %v", d)
	}
}
