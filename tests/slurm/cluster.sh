#!/usr/bin/env bash
# A one-node Slurm cluster for the jobs tests: MariaDB, munge, slurmdbd, slurmctld and slurmd
# from Debian's packages, all under DIR, on loopback ports of their own. Four GPUs of type a100
# are declared as generic resources backed by device nodes that alias /dev/null and its
# siblings (AutoDetect=off): Slurm hands jobs
# their indices (SLURM_JOB_GPUS) exactly as on a GPU node.
#
#   tests/slurm/cluster.sh start DIR   # prints the slurm.conf path; SLURM_CONF=… sbatch …
#   tests/slurm/cluster.sh stop DIR
set -euo pipefail
cmd=${1:?start or stop}
dir=$(realpath -m "${2:?DIR}")
host=$(hostname -s)
db_port=${GPUWISE_SLURM_DB_PORT:-13306}
dbd_port=${GPUWISE_SLURM_DBD_PORT:-16819}
ctld_port=${GPUWISE_SLURM_CTLD_PORT:-16817}
d_port=${GPUWISE_SLURM_D_PORT:-16818}

stop() {
  for p in slurmd slurmctld slurmdbd munged mariadbd; do
    # munged's pid file exists only where this script started it.
    if [[ -f "$dir/$p.pid" ]]; then kill "$(cat "$dir/$p.pid")" 2>/dev/null || true; fi
  done
  sleep 1
}

if [[ $cmd == stop ]]; then stop; exit 0; fi

mkdir -p "$dir"/{state,spool,dev,mysql,run,map}
# Slurm wants character devices behind a GPU (it derives the indices it hands jobs from them):
# nodes aliasing null, zero, full and random, which nothing opens.
minor=(3 5 7 8)
for i in 0 1 2 3; do
  [[ -c "$dir/dev/nvidia$i" ]] || mknod "$dir/dev/nvidia$i" c 1 "${minor[$i]}"
done

# MariaDB on a port of its own (no grant tables: a throwaway test database).
if [[ ! -d "$dir/mysql/mysql" ]]; then
  mariadb-install-db --no-defaults --datadir="$dir/mysql" --user=root --skip-test-db \
    --auth-root-authentication-method=normal >"$dir/mariadb-install.log" 2>&1
fi
setsid mariadbd --no-defaults --datadir="$dir/mysql" --user=root --port="$db_port" --bind-address=127.0.0.1 \
  --socket="$dir/run/mysql.sock" --pid-file="$dir/mariadbd.pid" --skip-grant-tables \
  --log-error="$dir/mariadb.log" </dev/null >/dev/null 2>&1 &
for _ in $(seq 50); do
  mariadb-admin --no-defaults --socket="$dir/run/mysql.sock" ping >/dev/null 2>&1 && break
  sleep 0.2
done

# munge with a key of its own, on munge's default socket (every Slurm daemon and client
# finds it there; a machine that already runs munged keeps its own).
if [[ ! -f "$dir/munge.key" ]]; then
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/munge.key"
fi
if ! munge -n </dev/null >/dev/null 2>&1; then
  mkdir -p /run/munge
  munged --force --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --seed-file="$dir/munge.seed" --log-file="$dir/munged.log"
fi

cat >"$dir/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=slurm_acct_db
LogFile=$dir/slurmdbd.log
PidFile=$dir/slurmdbd.pid
CONF
chmod 600 "$dir/slurmdbd.conf"

cat >"$dir/slurm.conf" <<CONF
ClusterName=gpuwise
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStorageTRES=gres/gpu,gres/gpu:a100
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
MpiDefault=none
SchedulerParameters=sched_interval=1
MinJobAge=3600
Prolog=$dir/prolog.sh
Epilog=$dir/epilog.sh
PrologFlags=Alloc
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=4000 Gres=gpu:a100:4 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
# The job mapping dcgm-exporter reads (--hpc-job-mapping-dir): a prolog writes, per GPU index
# the job holds, a file named by the index holding the job id; the epilog removes them.
cat >"$dir/prolog.sh" <<SH
#!/bin/sh
for i in \$(echo "\$SLURM_JOB_GPUS" | tr ',' ' '); do echo "\$SLURM_JOB_ID" > "$dir/map/\$i"; done
SH
cat >"$dir/epilog.sh" <<SH
#!/bin/sh
for f in "$dir"/map/*; do
  [ -f "\$f" ] && [ "\$(cat "\$f")" = "\$SLURM_JOB_ID" ] && rm -f "\$f"
done
exit 0
SH
chmod +x "$dir/prolog.sh" "$dir/epilog.sh"
cat >"$dir/gres.conf" <<CONF
AutoDetect=off
NodeName=$host Name=gpu Type=a100 File=$dir/dev/nvidia[0-3]
CONF

export SLURM_CONF="$dir/slurm.conf"
slurmdbd
for _ in $(seq 50); do
  sacctmgr -n list cluster >/dev/null 2>&1 && break
  sleep 0.2
done
sacctmgr -i add cluster gpuwise >/dev/null 2>&1 || true
sacctmgr -i add account ml >/dev/null 2>&1 || true
sacctmgr -i add user root account=ml >/dev/null 2>&1 || true
slurmctld
slurmd
for _ in $(seq 100); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [[ $state == idle ]] && break
  sleep 0.2
done
echo "$SLURM_CONF"
