#!/usr/bin/env bash
# Writes the configuration of a three-node (or larger) NATS JetStream cluster for
# gridwire: one <node>.conf per server (client TLS, JetStream with sync_interval: always,
# routes over TLS with verified certificates on both ends) and accounts.conf (one account
# GRIDWIRE with one user per role: operator, gateway, ingest, incarnator, stager, one
# executor user per gridwire cluster, watcher, readside, reader; see docs/cluster.md for
# what each may do). Unless --no-secrets, it also makes a private CA, a certificate per node (valid
# for the node's host and for clients and routes alike) and a random password per role in
# nats.env; the private keys and nats.env are written 0600 and must never be committed.
#
#   scripts/nats-cluster.sh OUT [--nodes "n1=HOST:CLIENTPORT:ROUTEPORT ..."]
#       [--clusters local,hpc1] [--certs DIR] [--store DIR] [--no-secrets]
#
# --certs and --store are the directories the servers will read certificates from and
# keep their stores under (default: OUT and OUT/store); deploy/nats/ holds this script's
# output for hosts nats-1..3 and /etc/gridwire/nats, /var/lib/gridwire/nats.
set -euo pipefail

usage() { sed -n '2,18p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
out="$1"; shift
nodes="n1=127.0.0.1:4222:6222 n2=127.0.0.1:4223:6223 n3=127.0.0.1:4224:6224"
clusters="local"
certs=""
store=""
secrets=1
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --clusters) clusters="$2"; shift 2 ;;
    --certs) certs="$2"; shift 2 ;;
    --store) store="$2"; shift 2 ;;
    --no-secrets) secrets=0; shift ;;
    *) echo "nats-cluster: unknown argument $1" >&2; usage ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
certs="${certs:-$out}"
store="${store:-$out/store}"

# Role names become user names; their passwords come from the servers' environment
# (GRIDWIRE_NATS_PW_<ROLE>), so no config file holds a secret.
envname() { printf 'GRIDWIRE_NATS_PW_%s' "$(printf '%s' "$1" | tr 'a-z-' 'A-Z_' | tr -c 'A-Z0-9_' '_')"; }
valid_name() { [[ "$1" =~ ^[A-Za-z0-9_-]{1,64}$ ]]; }

IFS=',' read -r -a cluster_list <<<"$clusters"
for c in "${cluster_list[@]}"; do
  valid_name "$c" || { echo "nats-cluster: --clusters: $c is not a cluster name ([A-Za-z0-9_-], at most 64)" >&2; exit 2; }
done
read -r -a node_list <<<"$nodes"
[ "${#node_list[@]}" -ge 3 ] || { echo "nats-cluster: --nodes: a cluster needs at least three nodes" >&2; exit 2; }
roles=(operator gateway ingest incarnator stager watcher readside reader sys)
for c in "${cluster_list[@]}"; do roles+=("executor-$c"); done

# --- accounts.conf ---------------------------------------------------------------------
q() { printf '"%s"' "$1"; }
list() { local first=1; for s in "$@"; do [ $first = 1 ] || printf ', '; q "$s"; first=0; done; }

read_api=('$JS.API.INFO' '$JS.API.STREAM.INFO.JOBS' '$JS.API.DIRECT.GET.JOBS' '$JS.API.DIRECT.GET.JOBS.>'
  '$JS.API.STREAM.MSG.GET.JOBS' '$JS.API.CONSUMER.INFO.JOBS.*')
# Ordered (ephemeral) consumers read the log: SSE, live projection, audit, replay.
ordered=('$JS.API.CONSUMER.CREATE.JOBS.*' '$JS.API.CONSUMER.CREATE.JOBS.*.>' '$JS.API.CONSUMER.MSG.NEXT.JOBS.*'
  '$JS.API.CONSUMER.DELETE.JOBS.*' '$JS.FC.JOBS.>')
kv() { # kv BUCKET [write]: read (and write) one KV bucket
  local b="$1"
  printf '%s\n' "\$JS.API.STREAM.INFO.KV_$b" "\$JS.API.DIRECT.GET.KV_$b.>" "\$JS.API.STREAM.MSG.GET.KV_$b" \
    "\$JS.API.CONSUMER.CREATE.KV_$b.>" "\$JS.API.CONSUMER.CREATE.KV_$b" "\$JS.API.CONSUMER.DELETE.KV_$b.*" \
    "\$JS.API.CONSUMER.MSG.NEXT.KV_$b.*" "\$JS.FC.KV_$b.>"
  [ "${2:-}" = write ] && printf '%s\n' "\$KV.$b.>" "\$JS.API.STREAM.CREATE.KV_$b" "\$JS.API.STREAM.UPDATE.KV_$b"
  return 0
}
obj() { # obj BUCKET [write]
  local b="$1"
  printf '%s\n' "\$JS.API.STREAM.INFO.OBJ_$b" "\$JS.API.DIRECT.GET.OBJ_$b.>" "\$JS.API.STREAM.MSG.GET.OBJ_$b" \
    "\$JS.API.CONSUMER.CREATE.OBJ_$b.>" "\$JS.API.CONSUMER.DELETE.OBJ_$b.*" "\$JS.API.CONSUMER.MSG.NEXT.OBJ_$b.*" \
    "\$JS.FC.OBJ_$b.>"
  [ "${2:-}" = write ] && printf '%s\n' "\$O.$b.>" "\$JS.API.STREAM.CREATE.OBJ_$b" "\$JS.API.STREAM.UPDATE.OBJ_$b"
  return 0
}
durable() { # durable NAME [FILTER]: one durable pull consumer of JOBS, its filter pinned when given
  local n="$1"
  if [ -n "${2:-}" ]; then printf '%s\n' "\$JS.API.CONSUMER.CREATE.JOBS.$n.$2"; else printf '%s\n' "\$JS.API.CONSUMER.CREATE.JOBS.$n"; fi
  printf '%s\n' "\$JS.API.CONSUMER.INFO.JOBS.$n" "\$JS.API.CONSUMER.MSG.NEXT.JOBS.$n" "\$JS.ACK.JOBS.$n.>"
}
events_of() { local route="$1"; shift; for e in "$@"; do printf 'jobs.*.%s.%s\n' "$e" "$route"; done; }
perms() { # perms USER PUBLISH-LINES [SUBSCRIBE-SUBJECTS] [DENY-LINES] [responds]: one user, its password from
  # the environment; "responds" lets it answer the requests it receives (ingest's request subjects)
  local user="$1" pub="$2" subs="${3:-}" deny="${4:-}" responds="${5:-}"
  local -a p s d
  mapfile -t p < <(printf '%s\n' "$pub" | sed '/^$/d')
  mapfile -t s < <(printf '%s\n' '_INBOX.>' $subs | sed '/^$/d')
  mapfile -t d < <(printf '%s\n' "$deny" | sed '/^$/d')
  printf '      { user: %s, password: $%s, permissions: {\n' "$user" "$(envname "$user")"
  if [ "${#d[@]}" -gt 0 ]; then
    printf '          publish: { allow: [%s],\n            deny: [%s] }\n' "$(list "${p[@]}")" "$(list "${d[@]}")"
  else
    printf '          publish: { allow: [%s] }\n' "$(list "${p[@]}")"
  fi
  if [ "$responds" = responds ]; then
    printf '          subscribe: { allow: [%s] }\n          allow_responses: true } }\n' "$(list "${s[@]}")"
  else
    printf '          subscribe: { allow: [%s] } } }\n' "$(list "${s[@]}")"
  fi
}
# Readers create ordered consumers under names of their own; they must not create, change,
# pull from or delete the durable consumers the services share (taking another role's work).
durables_except() { # durables_except [OWN...]: deny lines for every service durable but OWN
  local -a all=(incarnator stager-in stager-out watcher-end watcher-groups watcher-group-requests watcher-restarts
    watcher-session-updates)
  for c in "${cluster_list[@]}"; do all+=("watcher-$c" "executor-$c" "executor-control-$c" "executor-retention-$c"); done
  for d in "${all[@]}"; do
    local own=0
    for o in "$@"; do [ "$o" = "$d" ] && own=1; done
    [ $own = 1 ] && continue
    printf '%s\n' "\$JS.API.CONSUMER.CREATE.JOBS.$d" "\$JS.API.CONSUMER.CREATE.JOBS.$d.>" "\$JS.API.CONSUMER.DELETE.JOBS.$d" \
      "\$JS.API.CONSUMER.MSG.NEXT.JOBS.$d"
  done
}
lines() { printf '%s\n' "$@"; }

{
  echo "# gridwire accounts and role permissions; written by scripts/nats-cluster.sh."
  echo "# Passwords come from the environment (nats.env), never from this file. Only the"
  echo "# operator may delete or purge a stream (and JOBS refuses both in any case)."
  echo "accounts {"
  echo "  GRIDWIRE {"
  echo "    jetstream: enabled"
  echo "    users: ["
  echo "      { user: operator, password: \$$(envname operator) }"
  perms gateway "$(lines "${read_api[@]}" "${ordered[@]}" 'jobs.>' 'gridwire.>' '$JS.API.STREAM.CREATE.JOBS' \
    '$JS.API.STREAM.UPDATE.JOBS' '$JS.API.CONSUMER.CREATE.JOBS.>' '$JS.API.CONSUMER.MSG.NEXT.JOBS.*' \
    '$JS.ACK.JOBS.>'; kv gridwire-jobs write; kv gridwire-watch write; kv gridwire-idempotency write
    kv gridwire-secrets write; kv gridwire-properties write; obj gridwire-uploads write)" 'gridwire.>'
  # Ingest submits (a group's parent to the route "group"), records a session's topology
  # update and external facts, never routed to a cluster.
  perms ingest "$(lines "${read_api[@]}" 'jobs.*.submitted._' 'jobs.*.submitted.group' 'jobs.*.session_updated._' 'jobs.*.cancel_requested.*' \
    'jobs.*.hold_requested.*' 'jobs.*.resume_requested.*'; kv gridwire-idempotency write; obj gridwire-uploads write)" \
    'gridwire.api.submit gridwire.api.events' "" responds
  # The end of a job a service decides before it runs (failed, cancelled) is unrouted;
  # which job's it may be the signature's rights decide (docs/security.md). The
  # incarnator's durable reads submitted and restarted events: pinned by name only.
  perms incarnator "$(lines "${read_api[@]}"; events_of '_' incarnated failed cancelled; durable incarnator)"
  perms stager "$(lines "${read_api[@]}"; events_of '_' staging_in transfer failed cancelled; events_of '*' queued staged_out
    durable stager-in 'jobs.*.incarnated.*'; durable stager-out 'jobs.*.exited.*'; obj gridwire-uploads)"
  perms watcher "$(lines "${read_api[@]}" "${ordered[@]}" 'gridwire.api.events'
    events_of '*' status_changed status_unknown status_known exited succeeded failed cancelled restarted \
      cancel_requested hold_requested resume_requested
    for c in "${cluster_list[@]}"; do durable "watcher-$c" "jobs.*.started.$c"; done
    durable watcher-end 'jobs.*.staged_out.*'
    durable watcher-restarts 'jobs.*.failed.*'
    durable watcher-session-updates 'jobs.*.session_updated.*'
    # The group consumers have several filters each: a permission can pin their names only.
    durable watcher-groups; durable watcher-group-requests
    kv gridwire-jobs write; kv gridwire-watch write)" 'gridwire.hint.> gridwire.api.events' \
    "$(durables_except watcher-end watcher-groups watcher-group-requests watcher-restarts watcher-session-updates $(for c in "${cluster_list[@]}"; do echo "watcher-$c"; done))"
  # The read side alone (gridwire readside): reads the log, keeps the job table, the
  # PTP element IDs and the DDS properties' view, and records what tasks set (property_set,
  # unrouted, signed as ingest) after checking their credentials (the secrets bucket).
  perms readside "$(lines "${read_api[@]}" "${ordered[@]}" 'jobs.*.property_set._'; kv gridwire-jobs write
    kv gridwire-watch; kv gridwire-ptp-ids write; kv gridwire-properties write; kv gridwire-secrets write)" "" \
    "$(durables_except)"
  perms reader "$(lines "${read_api[@]}" "${ordered[@]}"; kv gridwire-jobs; kv gridwire-watch)" "" "$(durables_except)"
  # An executor also removes its cluster's ended jobs' directories under a retention:
  # directory_deleted routed to its cluster, the schedule's durable (several filters:
  # pinned by name only) and its KV bucket.
  for c in "${cluster_list[@]}"; do
    perms "executor-$c" "$(lines "${read_api[@]}"; events_of "$c" started held resumed action_failed cancelled directory_deleted
      events_of '_' cancelled failed; echo "gridwire.hint.exit.$c"
      durable "executor-$c" "jobs.*.queued.$c"; durable "executor-control-$c"; durable "executor-retention-$c"
      kv gridwire-retention write)"
  done
  echo "    ]"
  echo "  }"
  echo "  SYS { users: [ { user: sys, password: \$$(envname sys) } ] }"
  echo "}"
  echo "system_account: SYS"
} >"$out/accounts.conf"

# --- one config per node ---------------------------------------------------------------
routes_except() {
  local me="$1" first=1
  for n in "${node_list[@]}"; do
    local name="${n%%=*}" rest="${n#*=}"
    [ "$name" = "$me" ] && continue
    local host="${rest%%:*}" rport="${rest##*:}"
    [ $first = 1 ] || printf ', '
    printf '"nats-route://%s:%s"' "$host" "$rport"; first=0
  done
}
for n in "${node_list[@]}"; do
  name="${n%%=*}"; rest="${n#*=}"
  IFS=: read -r host cport rport <<<"$rest"
  valid_name "$name" && [ -n "$host" ] && [[ "$cport" =~ ^[0-9]+$ ]] && [[ "$rport" =~ ^[0-9]+$ ]] ||
    { echo "nats-cluster: --nodes: $n is not NAME=HOST:CLIENTPORT:ROUTEPORT" >&2; exit 2; }
  cat >"$out/$name.conf" <<CONF
# gridwire NATS node $name; written by scripts/nats-cluster.sh (see docs/cluster.md).
server_name: $name
listen: "$host:$cport"
# Clients (every gridwire process) connect over TLS and check this certificate with the CA.
tls {
  cert_file: "$certs/$name-cert.pem"
  key_file: "$certs/$name-key.pem"
  ca_file: "$certs/ca.pem"
  timeout: 5
}
jetstream {
  store_dir: "$store/$name"
  # fsync every write before it is acknowledged: a power loss on a minority of nodes
  # must not lose an acknowledged event.
  sync_interval: always
}
cluster {
  name: gridwire
  listen: "$host:$rport"
  # Routes are TLS both ways: each node proves itself with a certificate of the CA.
  tls {
    cert_file: "$certs/$name-cert.pem"
    key_file: "$certs/$name-key.pem"
    ca_file: "$certs/ca.pem"
    verify: true
    timeout: 5
  }
  routes: [$(routes_except "$name")]
}
include ./accounts.conf
CONF
done

[ "$secrets" = 1 ] || exit 0

# --- secrets: CA, node certificates, passwords (0600, never committed) -------------------
umask 077
if [ ! -f "$out/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=gridwire NATS CA" -keyout "$out/ca-key.pem" -out "$out/ca.pem" 2>/dev/null
fi
for n in "${node_list[@]}"; do
  name="${n%%=*}"; rest="${n#*=}"; host="${rest%%:*}"
  [ -f "$out/$name-cert.pem" ] && continue
  san="DNS:localhost,IP:127.0.0.1"
  if [[ "$host" =~ ^[0-9.]+$ ]]; then san="$san,IP:$host"; else san="$san,DNS:$host"; fi
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$out/$name-key.pem" -out "$out/$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' "$san" >"$out/$name.ext"
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" -CAcreateserial \
    -days 825 -extfile "$out/$name.ext" -out "$out/$name-cert.pem" 2>/dev/null
  rm -f "$out/$name.csr" "$out/$name.ext"
done
chmod 644 "$out"/ca.pem "$out"/*-cert.pem
if [ ! -f "$out/nats.env" ]; then
  for r in "${roles[@]}"; do
    printf '%s=%s\n' "$(envname "$r")" "$(openssl rand -hex 24)"
  done >"$out/nats.env"
fi
echo "nats-cluster: wrote $out (private keys and nats.env are 0600: keep them out of version control)" >&2
