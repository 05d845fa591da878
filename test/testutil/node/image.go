package node

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// ImageFile is one file of an image layer.
type ImageFile struct {
	// Path is absolute inside the image ("/usr/local/bin/actgate").
	Path string
	// Data is the content; Source, when set, is a file on the machine read instead.
	Data   []byte
	Source string
	// Mode is the permission bits (0o755 for a binary, 0o644 when zero).
	Mode int64
}

// ImageConfig is what an image runs.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	// User is "uid:gid" (empty: root).
	User string
}

// imageEpoch is every entry's modification time, so the same files make the same image.
var imageEpoch = time.Unix(0, 0).UTC()

// WriteImage writes a single-layer linux/amd64 image of files, tagged ref (e.g.
// "actgate.test/pause:1"), as a docker-archive tarball (manifest.json, the config, one layer),
// the format `ctr images import` loads. Parent folders are added as root-owned 0755
// directories. The same input gives the same bytes.
func WriteImage(out, ref string, files []ImageFile, cfg ImageConfig) error {
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	env := cfg.Env
	if env == nil {
		env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": imageEpoch.Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": cfg.Entrypoint, "Cmd": cfg.Cmd, "Env": env, "User": cfg.User, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return err
	}
	csum := sha256.Sum256(config)
	configName := hex.EncodeToString(csum[:]) + ".json"
	layerName := hex.EncodeToString(sum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := path.Dir(e.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: imageEpoch}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: imageEpoch}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func layerTar(files []ImageFile) ([]byte, error) {
	dirs := map[string]bool{}
	type entry struct {
		name string
		data []byte
		mode int64
	}
	var entries []entry
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("image file %q: want a clean absolute path", f.Path)
		}
		data := f.Data
		if f.Source != "" {
			b, err := os.ReadFile(f.Source)
			if err != nil {
				return nil, err
			}
			data = b
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		entries = append(entries, entry{strings.TrimPrefix(f.Path, "/"), data, mode})
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			dirs[strings.TrimPrefix(d, "/")] = true
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: imageEpoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: imageEpoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
