#!/usr/bin/env bash
# Prepares this machine for the tests that run a real OpenSSH sshd on a loopback port
# (pkg/sshx's e2e tests; see /work/shared/notes/test-servers.md). Idempotent: it calls
# apt-get only when /usr/sbin/sshd or the OpenSSH client tools are missing, and creates
# the test login only when it does not exist. It starts nothing: each test runs its own
# sshd with its own config, host keys and port.
#
# The test login (GW_SSH_TEST_USER, default gwtest) has /bin/sh as its shell, so a
# command costs no rc files, and an unusable password ('*', not the locked '!' that sshd
# refuses with UsePAM no), so only keys can log in. Creating it needs root; without root
# the tests log in as the invoking user.
set -euo pipefail

user="${GW_SSH_TEST_USER:-gwtest}"

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
for tool in ssh scp ssh-keygen; do
  command -v "$tool" >/dev/null 2>&1 || { need+=(openssh-client); break; }
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-openssh: ${need[*]} missing and not root; install them with apt-get" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi

if [ "$(id -u)" -ne 0 ]; then
  exit 0
fi

# sshd refuses to start without its privilege-separation directory.
install -d -m 0755 /run/sshd

# Two test packages may run this at once: useradd and usermod then fail to lock
# /etc/passwd for a moment, or the other run has already created the user.
for _ in 1 2 3 4 5; do
  if ! id "$user" >/dev/null 2>&1; then
    useradd -m -s /bin/sh "$user" 2>/dev/null || true
  fi
  # '*' rather than '!': with UsePAM no, sshd refuses key logins to locked accounts.
  if [ "$(getent shadow "$user" | cut -d: -f2)" != "*" ]; then
    usermod -p '*' "$user" 2>/dev/null || true
  fi
  if id "$user" >/dev/null 2>&1 && [ "$(getent shadow "$user" | cut -d: -f2)" = "*" ]; then
    exit 0
  fi
  sleep 0.2
done
echo "install-openssh: could not create the key-only test user $user" >&2
exit 1
