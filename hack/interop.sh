#!/usr/bin/env bash
# Installs the interop suite's pinned npm packages (test/interop/package-lock.json) into
# test/interop/node_modules with `npm ci`, once per lockfile: the conformance suite (0.1.16, and
# 0.2.0-alpha.12 as conformance-next), the official TypeScript SDK (1.32 and the v2 client and
# server), server-everything, and the MCP Inspector CLI (test/interop/doc.go). Needs Node 20
# or later and npm. Prints the directory it installed into.
set -euo pipefail
cd "$(dirname "$0")/../test/interop"
command -v node >/dev/null || { echo "hack/interop.sh: node is not on PATH (Node 20 or later)" >&2; exit 1; }
stamp=node_modules/.interop-lock
if [[ -f "$stamp" ]] && cmp -s package-lock.json "$stamp"; then
	pwd
	exit 0
fi
# Install scripts are not run: none of the pinned packages needs one.
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2
cp package-lock.json "$stamp"
pwd
