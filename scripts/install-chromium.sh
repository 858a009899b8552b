#!/usr/bin/env bash
# Prepares this machine for the watcher's web page test, which loads the page served by
# gridwire in a real headless browser (Debian's chromium). Idempotent: it calls apt-get
# only when no chromium binary is on PATH. It starts nothing: the test runs its own
# browser with a fresh profile directory.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-chromium: chromium missing and not root; install it with apt-get install chromium" >&2
  exit 1
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
