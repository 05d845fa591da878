#!/usr/bin/env bash
# Run every Go fuzz target in the module for a bounded time each: hack/fuzz.sh 20s
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-20s}
# The main module, then the separate modules that have fuzz targets (sdk/go).
for mod in . sdk/go; do
  for pkg in $(cd "$mod" && go list ./...); do
    dir=$(cd "$mod" && go list -f '{{.Dir}}' "$pkg")
    for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
      echo "== $pkg $f ($t)"
      (cd "$mod" && go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" "$pkg")
    done
  done
done
