#!/usr/bin/env bash
# Prepares this machine for the end-to-end test of the stager's GridFTP transfer plugin
# (cmd/gridwire TestE2EGridFTPPlugin): Debian's GridFTP client, globus-url-copy, which
# `gridwire transfer-plugin globus-url-copy` drives, and its server, which the test starts
# itself on a loopback port (anonymous FTP, no GSI). Idempotent: it calls apt-get only
# when either program is missing. It starts nothing.
set -euo pipefail

need=()
command -v globus-url-copy >/dev/null 2>&1 || need+=(globus-gass-copy-progs)
[ -x /usr/sbin/globus-gridftp-server ] || need+=(globus-gridftp-server-progs)
if [ "${#need[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-gridftp: ${need[*]} missing and not root; install them with apt-get" >&2
  exit 1
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
