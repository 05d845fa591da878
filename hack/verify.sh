#!/usr/bin/env bash
# Fail when generated files (CRDs, deepcopy, RBAC) or go.mod/go.sum are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
if grep -q '^manifests:' Makefile; then make -s manifests generate; fi
go mod tidy
if [ -n "$(git status --porcelain -- go.mod go.sum api config charts 2>/dev/null)" ]; then
  echo "generated files or go.mod are stale; run 'make manifests generate' and 'go mod tidy':" >&2
  git status --porcelain -- go.mod go.sum api config charts >&2
  git diff --stat >&2
  exit 1
fi
