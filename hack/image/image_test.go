package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// file is one entry of the image's flattened filesystem.
type file struct {
	hdr  *tar.Header
	data []byte
}

// TestImage builds the image as `make image` does (the repository's binaries, the machine's CA
// file), writes the tarball, reads it back and checks what the chart and the injector rely on:
// the tag, the config (non-root user, entrypoint, platform), the exact file list (no shell, no
// other binary), fixed times and owners, static binaries that run and report the version, a
// second build with the same digest, and a push to a registry that serves the same digest.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short skips the image build (a -trimpath compile of both binaries, minutes cold); `make test` (no -short) runs it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	repo, appVersion, err := ChartDefaults(root)
	if err != nil {
		t.Fatal(err)
	}
	tag := repo + ":" + appVersion
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const ver = "0.0.0-test"
	opts := Options{Root: root, Version: ver, Tag: tag, CAFile: "/etc/ssl/certs/ca-certificates.crt", Created: created, Go: "go", Stderr: os.Stderr}
	ctx := context.Background()
	img, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "actgate.tar")
	if err := WriteTarball(out, tag, img); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %.1f MB", tag, float64(st.Size())/1e6)

	want, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(out, &want)
	if err != nil {
		t.Fatalf("the tarball has no image tagged %s: %v", tag, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d, err := loaded.Digest(); err != nil || d != digest {
		t.Fatalf("tarball image digest %v (%v), built %v", d, err, digest)
	}

	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/actgate"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/actgate] and none", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created %v, want %v", cf.Created.Time, created)
	}
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != ver {
		t.Errorf("version label %q, want %q", v, ver)
	}
	layers, err := loaded.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers (%v), want 2 (base, binaries)", len(layers), err)
	}

	files := flatten(t, loaded)
	var paths []string
	for p, f := range files {
		paths = append(paths, p)
		if !f.hdr.ModTime.Equal(created) {
			t.Errorf("%s: mtime %v, want %v", p, f.hdr.ModTime, created)
		}
		wantUID := 0
		if p == "home/nonroot" {
			wantUID = 65532
		}
		if f.hdr.Uid != wantUID || f.hdr.Gid != wantUID {
			t.Errorf("%s: owner %d:%d, want %d:%d", p, f.hdr.Uid, f.hdr.Gid, wantUID, wantUID)
		}
	}
	slices.Sort(paths)
	wantPaths := []string{
		"etc", "etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl", "etc/ssl/certs",
		"etc/ssl/certs/ca-certificates.crt", "home", "home/nonroot", "root", "tmp",
		"usr", "usr/local", "usr/local/bin", "usr/local/bin/actgate", "usr/local/bin/actgate-controlplane",
	}
	// The exact list: no shell (bin/sh), no package manager, nothing the chart does not run.
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("image files:\n  %s\nwant:\n  %s", strings.Join(paths, "\n  "), strings.Join(wantPaths, "\n  "))
	}
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("passwd/group lack the nonroot user 65532:\n%s%s", files["etc/passwd"].data, files["etc/group"].data)
	}
	hostCA, err := os.ReadFile(opts.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, hostCA) {
		t.Error("the CA bundle differs from the build machine's")
	}

	// The binaries: static (no ELF interpreter), executable, and reporting the linked version.
	bin := t.TempDir()
	for _, b := range Binaries {
		f := files["usr/local/bin/"+b]
		if f.hdr.Mode != 0o755 {
			t.Errorf("%s: mode %o, want 755", b, f.hdr.Mode)
		}
		e, err := elf.NewFile(bytes.NewReader(f.data))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if e.Machine != elf.EM_X86_64 {
			t.Errorf("%s: machine %v, want x86-64", b, e.Machine)
		}
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: dynamically linked (has an ELF interpreter); want static", b)
			}
		}
		exe := filepath.Join(bin, b)
		if err := os.WriteFile(exe, f.data, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(exe, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s version: %v\n%s", b, err, got)
		}
		if w := b + " " + ver + " " + runtime.Version() + " linux/amd64\n" + "review protocol level 2 (the sidecar needs an authority service of level 1 or newer; " +
			"the authority service serves sidecars of levels 1 to 2)\n"; string(got) != w {
			t.Errorf("%s version = %q, want %q", b, got, w)
		}
	}

	// Reproducible: building again gives the same digest.
	again, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := again.Digest(); err != nil || d != digest {
		t.Errorf("second build digest %v (%v), first %v: not reproducible", d, err, digest)
	}

	// Push to a registry (go-containerregistry's, on loopback) and read it back.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	ref, err := name.ParseReference(strings.TrimPrefix(reg.URL, "http://")+"/actgate/actgate:"+ver, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(ctx, ref, img); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := pulled.Digest(); err != nil || d != digest {
		t.Errorf("pushed image digest %v (%v), built %v", d, err, digest)
	}
}

// flatten reads the image's filesystem as a container sees it.
func flatten(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")] = file{hdr: h, data: data}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	for _, c := range []struct {
		env     string
		want    time.Time
		wantErr bool
	}{
		{"", time.Unix(0, 0).UTC(), false},
		{"1764547200", time.Unix(1764547200, 0).UTC(), false},
		{"-1", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"1.5", time.Time{}, true},
	} {
		t.Setenv("SOURCE_DATE_EPOCH", c.env)
		got, err := sourceDateEpoch()
		if (err != nil) != c.wantErr || !got.Equal(c.want) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %v, %v; want %v, error %v", c.env, got, err, c.want, c.wantErr)
		}
	}
}

func TestChartDefaults(t *testing.T) {
	repo, v, err := ChartDefaults("../..")
	if err != nil {
		t.Fatal(err)
	}
	if repo != "ghcr.io/actgate/actgate" || v == "" {
		t.Errorf("chart defaults %q %q", repo, v)
	}
	if _, _, err := ChartDefaults(t.TempDir()); err == nil {
		t.Error("no chart: no error")
	}
}
