#!/usr/bin/env bash
# Build Jaeger v2 (the OpenTelemetry Collector distribution of the Jaeger project: an OTLP
# receiver, in-memory trace storage and the query API) from its Go module into
# bin/jaeger/<version>/, rebuilt only when missing. test/e2e.TestTraceAcrossProcesses exports
# every process's spans to it and reads the call's trace back from its query API, as an
# operator's tracing back end would. Prints the binary's path.
#
# `go install module@version` builds with the module's own go.mod and go.sum, so nothing of
# Jaeger's dependency tree enters the project's go.mod. Cold: about 6 minutes on 2 cores.
# Concurrent callers take a lock, so one builds and the others wait and reuse its result.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
JAEGER_VERSION=v1.75.0
out="$root/bin/jaeger/${JAEGER_VERSION}"

if [ ! -x "$out/jaeger" ]; then
  mkdir -p "$root/bin/jaeger"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$root/bin/jaeger/.build.lock"
    if ! flock -n 9; then
      echo "hack/jaeger-bin.sh: another build of $out is running; waiting for it" >&2
      flock 9
    fi
  fi
  if [ ! -x "$out/jaeger" ]; then
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    echo "hack/jaeger-bin.sh: building jaeger ${JAEGER_VERSION} into $out (first time ~6 min)" >&2
    GOBIN="$out.tmp" nice -n 10 go install -p "${GO_BUILD_P:-2}" -trimpath -ldflags "-s -w" \
      "github.com/jaegertracing/jaeger/cmd/jaeger@${JAEGER_VERSION}" >&2
    rm -rf "$out"
    mv "$out.tmp" "$out"
  fi
fi
echo "$out/jaeger"
