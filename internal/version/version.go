// Package version is the release the binaries report (`actgate version`,
// `actgate-controlplane version`). The image build (hack/image) sets Version at link time to the
// image's tag, so a running container says which release it is.
package version

import (
	"fmt"
	"runtime"
)

// Version is the release, set with
// -ldflags "-X github.com/actgate/actgate/internal/version.Version=0.1.0"; "dev" in a plain
// `go build`.
var Version = "dev"

// String is one line naming the binary, the release, the Go toolchain and the platform, e.g.
// "actgate 0.1.0 go1.26.8 linux/amd64".
func String(binary string) string {
	return fmt.Sprintf("%s %s %s %s/%s", binary, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
