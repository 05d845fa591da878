package node

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/actgate/actgate/test/envtest"
)

// GoBinary is one main package built into an image.
type GoBinary struct {
	// Package is the package path relative to the repository root ("./cmd/actgate").
	Package string
	// Path is where the binary goes in the image ("/usr/local/bin/actgate").
	Path string
}

// BuildGoImage builds each binary statically (CGO_ENABLED=0, linux/amd64) from this tree into
// dir and writes an image of them tagged ref to out, with a passwd and group of a nonroot user
// 65532 and the machine's CA certificates; the image runs as 65532:65532 and has no shell.
func BuildGoImage(ctx context.Context, dir, out, ref string, bins []GoBinary, cfg ImageConfig) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	files := []ImageFile{
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files = append(files, ImageFile{Path: "/etc/ssl/certs/ca-certificates.crt", Source: "/etc/ssl/certs/ca-certificates.crt"})
	}
	for _, b := range bins {
		local := filepath.Join(dir, filepath.Base(b.Path))
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", local, b.Package)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", b.Package, err, out)
		}
		files = append(files, ImageFile{Path: b.Path, Source: local, Mode: 0o755})
	}
	if cfg.User == "" {
		cfg.User = "65532:65532"
	}
	return WriteImage(out, ref, files, cfg)
}

// ImageRef reads the name an image tarball is tagged with: RepoTags of a docker-archive
// manifest.json, or the io.containerd.image.name / org.opencontainers.image.ref.name
// annotation of an OCI index.json.
func ImageRef(tarball string) (string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", tarball, err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "manifest.json":
			var m []struct{ RepoTags []string }
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
				return "", fmt.Errorf("%s manifest.json: %w", tarball, err)
			}
			if len(m) > 0 && len(m[0].RepoTags) > 0 {
				return m[0].RepoTags[0], nil
			}
		case "index.json":
			var idx struct {
				Manifests []struct{ Annotations map[string]string }
			}
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil {
				return "", fmt.Errorf("%s index.json: %w", tarball, err)
			}
			for _, m := range idx.Manifests {
				for _, k := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
					if v := m.Annotations[k]; strings.Contains(v, "/") || strings.Contains(v, ":") {
						return v, nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("%s: no image name in manifest.json or index.json", tarball)
}
