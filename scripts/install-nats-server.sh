#!/usr/bin/env bash
# Installs the official nats-server at exactly the version pkg/go.mod pins (the one the
# embedded server is built from), with the Go toolchain: `go install
# github.com/nats-io/nats-server/v2@<pin>`. Idempotent: when a nats-server of that
# version is already on PATH or in $(go env GOPATH)/bin it does nothing. Prints the
# binary's path on its last line, so callers may `bin=$(bash scripts/install-nats-server.sh | tail -1)`.
set -euo pipefail
cd "$(dirname "$0")/.."

pin="$(awk '$1 == "github.com/nats-io/nats-server/v2" { print $2; exit }' pkg/go.mod)"
if [ -z "$pin" ]; then
  echo "install-nats-server: no nats-server/v2 requirement in pkg/go.mod" >&2
  exit 1
fi
bin="$(go env GOPATH)/bin/nats-server"
have() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "v${pin#v}\$"; }
if ! have "$bin"; then
  if command -v nats-server >/dev/null && have "$(command -v nats-server)"; then
    bin="$(command -v nats-server)"
  else
    echo "install-nats-server: go install github.com/nats-io/nats-server/v2@$pin" >&2
    GOFLAGS="${GOFLAGS:-} -buildvcs=false" go install "github.com/nats-io/nats-server/v2@$pin"
  fi
fi
have "$bin" || { echo "install-nats-server: $bin is not nats-server $pin" >&2; exit 1; }
echo "$bin"
