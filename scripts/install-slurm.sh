#!/usr/bin/env bash
# Prepares this machine for the tests that run a real single-node Slurm on loopback
# (see /work/shared/notes/test-servers.md): installs Debian's slurm-wlm and munge when
# slurmctld, slurmd, sbatch or munged is missing, and slurm-wlm-torque (Slurm's Torque/PBS
# wrappers qsub, qstat, qdel, qhold, qrls, through which the e2e suite runs the shipped PBS
# profile) when any of them is missing. Idempotent; starts nothing
# (scripts/start-slurm.sh does, with its own config, state and spool directories).
set -euo pipefail

need=()
for tool in slurmctld slurmd sbatch squeue sacct scontrol scancel; do
  command -v "$tool" >/dev/null 2>&1 || { need+=(slurm-wlm); break; }
done
for tool in qsub qstat qdel qhold qrls; do
  command -v "$tool" >/dev/null 2>&1 || { need+=(slurm-wlm-torque); break; }
done
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || need+=(munge)
if [ "${#need[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-slurm: ${need[*]} missing and not root; install them with apt-get" >&2
  exit 1
fi
apt-get -o DPkg::Lock::Timeout=900 update
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${need[@]}"
