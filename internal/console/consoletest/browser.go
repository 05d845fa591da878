package consoletest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChromium names the Chromium binary; unset, DefaultChromium is used.
const EnvChromium = "ACTGATE_CHROMIUM"

// EnvArtifacts names the folder screenshots are saved to; unset, bin/artifacts under the
// repository root.
const EnvArtifacts = "ACTGATE_ARTIFACTS"

// DefaultChromium is where Debian's chromium package installs the browser.
const DefaultChromium = "/usr/bin/chromium"

// Chromium returns the browser binary: $ACTGATE_CHROMIUM, else /usr/bin/chromium. A missing
// browser fails t (never skips it) with how to install one.
func Chromium(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvChromium)
	from := "$" + EnvChromium
	if path == "" {
		path, from = DefaultChromium, "the default path"
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		if found, lerr := exec.LookPath("chromium"); path == DefaultChromium && lerr == nil {
			return found
		}
		t.Fatalf("the browser tests need Chromium, and %s (%s) is not an executable: "+
			"install it with `apt-get install -y chromium` (Debian) or run ./hack/chromium.sh, "+
			"or set %s to a Chromium binary; `make test` does this for you", path, from, EnvChromium)
	}
	return path
}

// Browser starts a headless Chromium with a fresh profile and returns a chromedp context for
// one tab. The browser is stopped when t ends. Under -short (the project's "unit tests only",
// make test-short) the test is skipped, saying so, as the envtest tests are; otherwise a
// missing browser fails it.
func Browser(t testing.TB) context.Context {
	t.Helper()
	return BrowserWith(t)
}

// BrowserWith is Browser with extra allocator options after the defaults (e.g. a flag
// trusting a test's own TLS certificates by their SPKI hashes).
func BrowserWith(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: not run under -short (make test runs it, with Chromium from hack/chromium.sh)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	// Start the browser now, so a broken installation fails here with its own message. The
	// first run must be on ctx itself: the browser lives as long as the context that started it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	var err error
	select {
	case err = <-started:
	case <-time.After(60 * time.Second):
		err = errors.New("no answer within 60s")
	}
	if err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting Chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// ArtifactDir returns the folder for test artifacts ($ACTGATE_ARTIFACTS, else bin/artifacts
// in the repository), creating it.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "bin", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Screenshot saves a PNG of the whole page to ArtifactDir/name.png, logs its path and
// returns it.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot: not a PNG (%d bytes)", len(png))
	}
	path := filepath.Join(ArtifactDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// repoRoot is the nearest folder above the working directory holding this module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/actgate/actgate\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
