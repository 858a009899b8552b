#!/usr/bin/env bash
# Stops the Slurm (and the munged, if it started one) that start-slurm.sh DIR started.
set -uo pipefail
dir="${1:?usage: stop-slurm.sh DIR}"
for f in slurmd.gw1.bg.pid slurmd.gw2.bg.pid slurmd.bg.pid slurmctld.bg.pid munged.pid; do
  [ -f "$dir/$f" ] || continue
  pid="$(cat "$dir/$f")"
  kill "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$dir/$f"
done
exit 0
