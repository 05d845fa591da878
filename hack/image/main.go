// Command image builds actgate's container image without Docker (`make image`): the static
// binaries actgate and actgate-controlplane (CGO_ENABLED=0, linux/amd64) in /usr/local/bin, the
// build machine's CA certificates, /etc/passwd and /etc/group with the non-root user 65532, and
// nothing else: no shell, no package manager. It writes a docker-style image tarball that
// `docker load`, `podman load` and `ctr -n k8s.io images import` read, and with -push sends the
// same image to a registry (credentials from the Docker config, ~/.docker/config.json or
// $DOCKER_CONFIG, as `docker login` and `crane auth login` write it).
//
// The image is reproducible: every file and the image config carry the same fixed time
// (SOURCE_DATE_EPOCH, default 0), the layers are written in a fixed order with fixed owners,
// and the binaries are built with -trimpath; the same commit, Go toolchain and CA file give the
// same image digest.
//
//	go run ./hack/image                                   # bin/image/actgate.tar, tagged ghcr.io/actgate/actgate:<appVersion>
//	go run ./hack/image -push registry.example.com/actgate:0.1.0
//
// The tag defaults to the chart's image.repository and appVersion (charts/actgate), so the
// chart's defaults name the image this writes.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

// The image's fixed layout; the chart's `command:` and the injector's sidecar rely on it.
const (
	BinDir      = "/usr/local/bin"
	Entrypoint  = BinDir + "/actgate"
	CAFile      = "/etc/ssl/certs/ca-certificates.crt"
	UID         = 65532
	User        = "65532:65532"
	HomeDir     = "/home/nonroot"
	versionPkg  = "github.com/actgate/actgate/internal/version"
	defaultOut  = "bin/image/actgate.tar"
	sourceLabel = "https://github.com/actgate/actgate"
)

// Binaries are the commands the image carries, as ./cmd/<name> of the repository.
var Binaries = []string{"actgate", "actgate-controlplane"}

// Options say what to build and where it goes.
type Options struct {
	// Root is the repository checkout the binaries are built from.
	Root string
	// Version is linked into the binaries (internal/version) and labels the image.
	Version string
	// Tag is the reference the tarball names (docker load / ctr import tag the image with it).
	Tag string
	// CAFile is the PEM bundle copied to /etc/ssl/certs/ca-certificates.crt.
	CAFile string
	// Created is the time of every file and of the image config.
	Created time.Time
	// Go is the go command.
	Go string
	// Stderr receives the go build's output.
	Stderr io.Writer
}

func main() {
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	out := flag.String("out", defaultOut, "image tarball to write; empty: none")
	tag := flag.String("tag", "", "reference the tarball is tagged with (default: the chart's image.repository:appVersion)")
	push := flag.String("push", "", "also push the image to this reference (registry/repository:tag), with the Docker config's credentials")
	ver := flag.String("version", "", "release linked into the binaries (default: the chart's appVersion)")
	ca := flag.String("ca-file", "/etc/ssl/certs/ca-certificates.crt", "CA bundle of the build machine copied into the image")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "image: no arguments expected; see -h")
		os.Exit(2)
	}
	if *out == "" && *push == "" {
		fmt.Fprintln(os.Stderr, "image: nothing to do: -out and -push are both empty")
		os.Exit(2)
	}
	if err := run(context.Background(), root, *out, *tag, *push, *ver, *ca); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, out, tag, push, ver, ca string) error {
	repo, appVersion, err := ChartDefaults(root)
	if err != nil {
		return err
	}
	if ver == "" {
		ver = appVersion
	}
	if tag == "" {
		tag = repo + ":" + ver
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	start := time.Now()
	img, err := Build(ctx, Options{Root: root, Version: ver, Tag: tag, CAFile: ca, Created: created, Go: "go", Stderr: os.Stderr})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if out != "" {
		// A relative -out is the repository's (bin/image/actgate.tar); an absolute one is kept.
		if !filepath.IsAbs(out) {
			out = filepath.Join(root, out)
		}
		if err := WriteTarball(out, tag, img); err != nil {
			return err
		}
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s %s (%.1f MB) in %s\n", out, tag, digest, float64(st.Size())/1e6, time.Since(start).Round(100*time.Millisecond))
	}
	if push != "" {
		ref, err := name.ParseReference(push)
		if err != nil {
			return fmt.Errorf("-push %q: %w", push, err)
		}
		if err := Push(ctx, ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref.Context().Name(), digest)
	}
	return nil
}

// ChartDefaults reads the chart's default image repository (values.yaml image.repository) and
// appVersion (Chart.yaml).
func ChartDefaults(root string) (repository, appVersion string, err error) {
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	for file, into := range map[string]any{"values.yaml": &values, "Chart.yaml": &chart} {
		raw, err := os.ReadFile(filepath.Join(root, "charts", "actgate", file))
		if err != nil {
			return "", "", err
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			return "", "", fmt.Errorf("charts/actgate/%s: %w", file, err)
		}
	}
	if values.Image.Repository == "" || chart.AppVersion == "" {
		return "", "", errors.New("charts/actgate: image.repository or appVersion is empty")
	}
	return values.Image.Repository, chart.AppVersion, nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (reproducible-builds.org), default the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a non-negative number of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Build compiles the binaries and assembles the image.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "actgate-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := BuildBinaries(ctx, o, dir); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA certificates: %s holds no PEM certificate", o.CAFile)
	}
	bins := map[string]string{}
	for _, b := range Binaries {
		bins[b] = filepath.Join(dir, b)
	}
	return Assemble(ca, bins, o.Version, o.Created, dir)
}

// BuildBinaries runs one `go build` of every Binaries entry into dir: static (CGO_ENABLED=0),
// linux/amd64, -trimpath (no build-machine paths), symbols stripped, Version linked in.
func BuildBinaries(ctx context.Context, o Options, dir string) error {
	args := make([]string, 0, 7+len(Binaries))
	args = append(args, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X "+versionPkg+".Version="+o.Version, "-o", dir+string(filepath.Separator))
	for _, b := range Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = o.Stderr, o.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// entry is one file or folder of a layer.
type entry struct {
	path     string // without a leading "/"
	mode     int64
	uid, gid int
	dir      bool
	data     []byte // a file's content, when src is empty
	src      string // a file to copy
}

// Assemble makes the image from a CA bundle and the binaries (name → file), in two layers:
// the base (users, CA certificates, folders), which rarely changes, then the binaries.
// Layer tarballs are staged in tmp.
func Assemble(ca []byte, binaries map[string]string, version string, created time.Time, tmp string) (v1.Image, error) {
	base := []entry{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		// No login shell exists in the image; /sbin/nologin names that.
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/ssl", mode: 0o755, dir: true},
		{path: "etc/ssl/certs", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(CAFile, "/"), mode: 0o644, data: ca},
		{path: "home", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(HomeDir, "/"), mode: 0o700, dir: true, uid: UID, gid: UID},
		{path: "root", mode: 0o700, dir: true},
		{path: "tmp", mode: 0o1777, dir: true},
	}
	names := make([]string, 0, len(binaries))
	for n := range binaries {
		names = append(names, n)
	}
	sort.Strings(names)
	bins := make([]entry, 0, 3+len(names))
	bins = append(bins,
		entry{path: "usr", mode: 0o755, dir: true},
		entry{path: "usr/local", mode: 0o755, dir: true},
		entry{path: "usr/local/bin", mode: 0o755, dir: true},
	)
	for _, n := range names {
		bins = append(bins, entry{path: strings.TrimPrefix(BinDir, "/") + "/" + n, mode: 0o755, src: binaries[n]})
	}

	cfg := &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{Entrypoint},
			User:       User,
			WorkingDir: "/",
			Env:        []string{"PATH=" + BinDir, "SSL_CERT_FILE=" + CAFile},
			Labels: map[string]string{
				"org.opencontainers.image.title":   "actgate",
				"org.opencontainers.image.source":  sourceLabel,
				"org.opencontainers.image.version": version,
			},
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	for i, l := range []struct {
		name    string
		entries []entry
	}{{"base", base}, {"binaries", bins}} {
		file := filepath.Join(tmp, fmt.Sprintf("layer-%d-%s.tar", i, l.name))
		if err := writeLayer(file, l.entries, created); err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.name, err)
		}
		layer, err := tarball.LayerFromFile(file, tarball.WithCompressedCaching)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.name, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "hack/image: " + l.name, Comment: "actgate " + version,
		}})
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.name, err)
		}
	}
	return mutate.CreatedAt(img, v1.Time{Time: created})
}

// writeLayer writes entries as an uncompressed tar with fixed times and owners.
func writeLayer(file string, entries []entry, mtime time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriter(f)
	tw := tar.NewWriter(bw)
	for _, e := range entries {
		h := &tar.Header{Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.uid == 0 {
			h.Uname, h.Gname = "root", "root"
		} else {
			h.Uname, h.Gname = "nonroot", "nonroot"
		}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, e.path+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case e.src != "":
			if err := copyFile(tw, h, e.src); err != nil {
				return err
			}
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func copyFile(tw *tar.Writer, h *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h.Typeflag, h.Size = tar.TypeReg, st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// WriteTarball writes img as a docker-style image tarball tagged tag, through a temporary file
// renamed into place, so a reader never sees half an image.
func WriteTarball(path, tag string, img v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// Push writes img to ref's registry.
func Push(ctx context.Context, ref name.Reference, img v1.Image, opts ...remote.Option) error {
	if err := remote.Write(ref, img, append(opts, remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
