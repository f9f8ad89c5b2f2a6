#!/usr/bin/env bash
# Slurm end to end (issue 13; ctest label `slurm`): a one-node Slurm cluster on this machine
# (Debian's munged, slurmctld and slurmd, run as the current user with a configuration written
# into a temporary folder), `touchstone serve` (embedded PostgreSQL + scheduler), workers started
# by `sbatch` from deploy/slurm/touchstone-workers.sbatch as a two-task job array, and a sweep
# submitted with `touchstone submit --wait`. One array task is `scancel`led once the scheduler's
# database shows its worker holding a shard; the sweep must still end with every model recorded
# once (models_recorded == models_expected, duplicates 0), the cancelled task's worker must say
# it handed that shard back and exit 0, and the shard must never have expired and have been
# leased again.
#
#   tests/slurm_e2e.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
DATA=${TS_DATA_DIR:-$SRC/../shared/data}
SAMPLE=${TS_SLURM_SAMPLE:-16}
for t in munged slurmctld slurmd sbatch scancel squeue sinfo psql; do
  command -v "$t" >/dev/null || { echo "slurm_e2e: $t missing (scripts/setup installs it)"; exit 1; }
done

T=$(mktemp -d /tmp/ts-slurm.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
  set +e
  [[ -n ${JOB:-} ]] && SLURM_CONF=$T/slurm.conf scancel "$JOB" 2>/dev/null
  sleep 1
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$p" 2>/dev/null
  done
  if [[ ${KEEP:-0} != 1 ]]; then rm -rf "$T"; else echo "kept $T"; fi
}
trap cleanup EXIT
fail() {
  echo "slurm_e2e: FAIL: $*"
  for f in "$T"/log/*; do echo "== $f"; tail -n 30 "$f"; done
  exit 1
}
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  for _ in $(seq $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "timed out waiting for $what"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$T"/log "$T"/munge "$T"/ctld "$T"/spool "$T"/jobs
USER_NAME=$(id -un)
NODE=$(hostname -s)
CPUS=$(nproc)

# ---- munge: a fresh key and socket of our own ----
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
chmod 711 "$T/munge"
munged --foreground --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.sock" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/log/munged.log" --seed-file="$T/munge/seed" \
  --num-threads=2 > "$T/log/munged.out" 2>&1 &
PIDS+=($!)
wait_for 10 "munged's socket" test -S "$T/munge/munge.sock"

# ---- slurm: controller and one node, as this user ----
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
cat > "$T/slurm.conf" <<CONF
ClusterName=touchstone-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/ctld
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/ctld/slurmctld.pid
SlurmdPidFile=$T/spool/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
KillWait=120
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" > "$T/log/slurmctld.out" 2>&1 &
PIDS+=($!)
wait_for 30 "slurmctld" scontrol ping
slurmd -D -f "$SLURM_CONF" -N "$NODE" > "$T/log/slurmd.out" 2>&1 &
PIDS+=($!)
node_idle() { sinfo -h -N -o '%T' | grep -q idle; }
wait_for 60 "node $NODE idle" node_idle

# ---- the scheduler (embedded PostgreSQL) and a small catalog ----
"$BIN/touchstone" serve --state-dir "$T/state" --lease-ttl 10 > "$T/log/serve.out" 2> "$T/log/serve.err" &
PIDS+=($!)
wait_for 120 "touchstone serve" grep -q '^serving:' "$T/log/serve.out"
LINE=$(grep '^serving:' "$T/log/serve.out")
GRPC=$(sed -n 's/.*grpc=\([^ ]*\).*/\1/p' <<< "$LINE")
TOKENS=$(sed -n 's/.*tokens=\([^ ]*\).*/\1/p' <<< "$LINE")
"$BIN/touchstone" catalog generate --count 3000 --out "$T/catalog-all.jsonl" --data "$DATA" \
  > "$T/log/catalog.log" 2>&1 || fail "catalog generate"
# Text models that run in about a second each on one core (as tests/sweep_test.cc's Cheap()).
python3 - "$T/catalog-all.jsonl" "$T/catalog.jsonl" <<'PY'
import json, sys
cheap = {"llama", "bert", "qwen2", "mistral", "distilbert", "gpt2", "roberta"}
rows = [l for l in open(sys.argv[1]) if json.loads(l).get("family") in cheap]
open(sys.argv[2], "w").writelines(rows[:64])
PY

# The scheduler's own view of the fleet: its database (the embedded cluster of `touchstone serve`).
PGDATA_DIR="$T/state/pg/data"
DB="postgresql://touchstone@127.0.0.1:$(sed -n 4p "$PGDATA_DIR/postmaster.pid")/touchstone?passfile=$T/state/pg/pgpass"
sql() { psql "$DB" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

# ---- workers through sbatch: a two-task array, one worker (core) each ----
# A worker token file of the scheduler's tokens (the sbatch script hands it to the workers).
cp "$TOKENS" "$T/worker.tokens"
chmod 600 "$T/worker.tokens"
OUT=$(sbatch --parsable --array=0-1 --cpus-per-task=1 --chdir="$T/jobs" \
  --output="$T/log/workers-%A_%a.log" \
  --export=ALL,TOUCHSTONE_SCHEDULER="$GRPC",TOUCHSTONE_TOKEN_FILE="$T/worker.tokens",TOUCHSTONE_BIN="$BIN",TMPDIR="$T/jobs" \
  "$SRC/deploy/slurm/touchstone-workers.sbatch") || fail "sbatch"
JOB=${OUT%%;*}
echo "slurm_e2e: job array $JOB"
both_running() { [[ $(squeue -h -j "$JOB" -t RUNNING | wc -l) -ge 2 ]]; }
wait_for 60 "both array tasks running" both_running

# ---- the sweep, followed by `touchstone submit --wait` ----
# Submitted once both workers are registered and waiting for work, so that each leases a shard
# as the sweep starts: submitted before them, the worker that started first could run both
# shards before the other one (a slow start on a loaded machine) leased any, and task 0's worker
# would never hold the lease the cancel below waits for. Shards of 8 models: one per worker,
# each running for several seconds.
both_registered() {
  [[ $(sql "SELECT count(*) FROM workers WHERE name LIKE '%/slurm-${JOB}\\_%'") -ge 2 ]]
}
wait_for 120 "both workers registered with the scheduler" both_registered
"$BIN/touchstone" submit --scheduler "$GRPC" --token-file "$TOKENS" \
  --profile "$SRC/workers/simdevice/profiles/sim-2.0.json" --catalog "$T/catalog.jsonl" \
  --sample "$SAMPLE" --name slurm-e2e --modes eager --no-audit-ops --shard-models 8 --wait \
  > "$T/log/submit.out" 2> "$T/log/submit.err" &
SUBMIT=$!
wait_for 60 "the sweep" grep -q 'touchstone submit: sweep' "$T/log/submit.err"

# Cancel task 0 only once the scheduler records a lease held by task 0's worker (named
# HOST/slurm-JOB_0/N by the sbatch script) with most of its shard still to run: its results
# come every 2 s, so 5 jobs not done leave it several models, more than a SIGTERM takes to land.
W0="$T/log/workers-${JOB}_0.log"
HELD=
task0_holds_a_lease() {
  HELD=$(sql "SELECT s.shard_id FROM shards s JOIN workers w USING (worker_id)
              WHERE s.state = 'leased' AND w.name LIKE '%/slurm-${JOB}\_0/%'
                AND (SELECT count(*) FROM jobs j WHERE j.shard_id = s.shard_id AND NOT j.done) >= 5
              LIMIT 1") && [[ -n $HELD ]]
}
wait_for 300 "a lease held by task 0's worker" task0_holds_a_lease
scancel "${JOB}_0" || fail "scancel"
echo "slurm_e2e: scancelled ${JOB}_0 while its worker held shard $HELD"
task0_gone() { ! squeue -h -j "${JOB}_0" | grep -q .; }
wait_for 150 "task 0 to end" task0_gone

# The sweep completes on task 1 (and lease expiry, were a shard lost).
for _ in $(seq 900); do kill -0 $SUBMIT 2>/dev/null || break; sleep 1; done
kill -0 $SUBMIT 2>/dev/null && fail "the sweep did not finish in 15 minutes"
wait $SUBMIT || fail "touchstone submit exited $?"
cat "$T/log/submit.out"
SUMMARY=$(grep -E '^sweep [0-9]+: ' "$T/log/submit.out") || fail "no summary line"
read -r REC EXP DUP <<< "$(sed -E 's/^sweep [0-9]+: ([0-9]+)\/([0-9]+) models recorded, ([0-9]+) duplicates.*/\1 \2 \3/' <<< "$SUMMARY")"
[[ $EXP == "$SAMPLE" ]] || fail "models_expected $EXP, want $SAMPLE"
[[ $REC == "$EXP" ]] || fail "models_recorded $REC != models_expected $EXP"
[[ $DUP == 0 ]] || fail "$DUP duplicates"
# The hand-back, from the worker's own output and from the shard's lease events: task 0's worker
# gave shard $HELD back while draining (no lease expired), and another worker leased and
# finished it.
grep -qE "touchstone-worker: shard $HELD handed back \(draining\): [0-9]+ of [0-9]+ models run and reported, [1-9][0-9]* left" "$W0" ||
  fail "task 0's worker did not hand shard $HELD back"
read -r STATE ATTEMPT EXPIRIES <<< "$(sql "SELECT state, attempt, expiries FROM shards WHERE shard_id = $HELD" | tr '|' ' ')"
[[ $STATE == done ]] || fail "shard $HELD is $STATE"
[[ $EXPIRIES == 0 ]] || fail "shard $HELD's lease expired $EXPIRIES times: it was not handed back"
((ATTEMPT >= 2)) || fail "shard $HELD was leased $ATTEMPT times: nobody took it after the hand-back"
grep -qE 'worker [0-9]+ exited 0' "$W0" || fail "task 0's worker did not exit 0"
echo "slurm_e2e: PASS: $REC/$EXP models recorded, $DUP duplicates; task ${JOB}_0 cancelled holding shard $HELD, which its worker handed back and another finished"
