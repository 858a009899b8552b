#!/usr/bin/env bash
# Starts a two-node Slurm on loopback for tests and benchmarks, with its own config,
# state, spool and log files under DIR:
#   scripts/start-slurm.sh DIR      then   export SLURM_CONF=DIR/slurm.conf
# munged is started (as munge) unless one already answers. slurmctld and the slurmds run
# as root. The two nodes, gw1 and gw2, are two slurmd processes on this machine (Debian's
# Slurm is built with MULTIPLE_SLURMD: `slurmd -N NAME`), both at 127.0.0.1 on their own
# ports, so Slurm can place the components of a heterogeneous job (`#SBATCH hetjob`) on
# different nodes: on one node such a job stays PENDING (Resources) forever. Backfill,
# which alone schedules heterogeneous jobs, runs every second (bf_interval=1) rather than
# every 30 s. Ports: GW_SLURMCTLD_PORT (16817), GW_SLURMD_PORT (16818, gw1) and the next
# one (16819, gw2). The controller is the machine's hostname, which must resolve (here to
# 127.0.0.1). Stop with stop-slurm.sh DIR. Idempotent: a Slurm already running from DIR is
# left as it is.
set -euo pipefail

dir="${1:?usage: start-slurm.sh DIR}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
ctld_port="${GW_SLURMCTLD_PORT:-16817}"
slurmd_port="${GW_SLURMD_PORT:-16818}"
host="$(hostname -s)"
export SLURM_CONF="$dir/slurm.conf"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged --foreground >"$dir/munged.log" 2>&1 &
  echo $! >"$dir/munged.pid"
  for _ in $(seq 100); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null
fi

mkdir -p "$dir/state" "$dir/spool"
cat >"$SLURM_CONF" <<CONF
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MaxJobCount=100000
MinJobAge=30
SchedulerParameters=batch_sched_delay=0,bf_interval=1
NodeName=gw1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$slurmd_port CPUs=2 RealMemory=20000 State=UNKNOWN
NodeName=gw2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((slurmd_port + 1)) CPUs=2 RealMemory=20000 State=UNKNOWN
PartitionName=debug Nodes=gw1,gw2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:32
CONF

if ! alive "$dir/slurmctld.bg.pid"; then
  slurmctld -D -c -i >>"$dir/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.bg.pid"
fi
for node in gw1 gw2; do
  mkdir -p "$dir/spool/$node"
  if ! alive "$dir/slurmd.$node.bg.pid"; then
    slurmd -D -N "$node" >>"$dir/slurmd.$node.out" 2>&1 &
    echo $! >"$dir/slurmd.$node.bg.pid"
  fi
done

for _ in $(seq 300); do
  if [ "$(sinfo -h -N -o '%t' 2>/dev/null | grep -Ec '^(idle|mix|alloc)')" -eq 2 ]; then
    echo "slurm: up; export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.1
done
echo "slurm: the nodes did not come up; logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir"/slurmd.gw*.log >&2 || true
exit 1
