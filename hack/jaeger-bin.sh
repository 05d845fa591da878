#!/usr/bin/env bash
# Build Jaeger v2 (the OpenTelemetry Collector distribution of the Jaeger project: an OTLP
# receiver, in-memory trace storage and the query API) from its Go module into
# bin/jaeger/<version>/, rebuilt only when missing. test/e2e.TestTraceAcrossProcesses exports
# every process's spans to it and reads the call's trace back from its query API, as an
# operator's tracing back end would. Prints the binary's path.
#
# hack/jaegerbin is a module of its own (a `tool` directive pinning cmd/jaeger at
# JAEGER_VERSION, and its go.sum), so nothing of Jaeger's dependency tree enters the project's
# go.mod; `go install module@version` cannot build it, since Jaeger's go.mod has replace
# directives. Cold: about 10 minutes on 2 cores.
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
    echo "hack/jaeger-bin.sh: building jaeger ${JAEGER_VERSION} into $out (first time ~10 min)" >&2
    (
      cd "$root/hack/jaegerbin"
      nice -n 10 go build -p "${GO_BUILD_P:-2}" -mod=mod -trimpath -ldflags "-s -w" -o "$out.tmp/jaeger" \
        github.com/jaegertracing/jaeger/cmd/jaeger >&2
    )
    rm -rf "$out"
    mv "$out.tmp" "$out"
  fi
fi
echo "$out/jaeger"
