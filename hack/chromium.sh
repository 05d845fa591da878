#!/usr/bin/env bash
# Print the path of the Chromium the browser tests drive (internal/console/consoletest),
# installing Debian's `chromium` package with apt-get when it is missing (CI runs as root on a
# fresh Debian machine). `make test` exports the result as ACTGATE_CHROMIUM. Messages go to
# stderr; stdout is the path only.
#
# ACTGATE_CHROMIUM, when set to an executable, is printed as is.
set -euo pipefail

if [ -n "${ACTGATE_CHROMIUM:-}" ] && [ -x "${ACTGATE_CHROMIUM}" ]; then
  echo "${ACTGATE_CHROMIUM}"
  exit 0
fi
for c in /usr/bin/chromium "$(command -v chromium 2>/dev/null || true)"; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    echo "$c"
    exit 0
  fi
done

if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium.sh: no chromium and no apt-get: install Chromium and set ACTGATE_CHROMIUM to it" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "chromium.sh: chromium is missing and installing it needs root: apt-get install -y chromium" >&2
    exit 1
  fi
fi
echo "chromium.sh: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends chromium >&2; then
  $sudo apt-get update >&2
  $sudo apt-get install -y --no-install-recommends chromium >&2
fi
if [ -x /usr/bin/chromium ]; then
  echo /usr/bin/chromium
  exit 0
fi
echo "chromium.sh: apt-get installed chromium, but /usr/bin/chromium is not there" >&2
exit 1
