#!/usr/bin/env bash
# stage-load.sh: measure the whole stage as a user sees it (issues 14 and
# 15). It starts a Kafka-protocol broker process (kfakebroker), the S3
# servers asked for (versitygw, SeaweedFS; each a process of its own with
# its default settings) and `walkstage run` configured by WALKSTAGE_*
# variables, once per store (file://, versitygw, SeaweedFS), and runs
# `walkstage load` against it: a backlog and an idle series of walk requests
# (weighted DeepWalk), then of visits requests (PPR with restart), then a
# plain upload of the same volume to the same bucket (the store's own
# ceiling), and with --sample-requests a backlog of graph sampling requests.
# It prints a table of the results and stops every process it
# started when it exits.
#
#   scripts/stage-load.sh --graph g.wsg [--engine cpu] [--walk-requests 1000] ...
#   scripts/stage-load.sh -h      # every option
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/stage-load.sh --graph FILE [options]

binaries (default: ./bin):
  --walkstage BIN        walkstage or walkstage-cuda (bin/walkstage)
  --load-walkstage BIN   the walkstage that runs `walkstage load` (--walkstage): a newer one's load generator
                         against an older stage (--output samples came with issue 36)
  --broker BIN           kfakebroker (bin/kfakebroker; go build ./internal/testbroker/cmd/kfakebroker)
  --versitygw BIN        versitygw (bin/versitygw; scripts/test.sh installs it)
  --weed BIN             SeaweedFS's weed (bin/weed; scripts/test.sh installs it)
stage:
  --graph FILE           graph the stage serves (required)
  --engine NAME          auto, cpu or gpu (auto)
  --stores LIST          file, s3 (versitygw) and/or seaweedfs (weed server -s3), comma-separated (file,s3);
                         none for the live graph's measurements alone
  --work DIR             file:// output and the S3 servers' data (/dev/shm/walkstage-load-PID; removed at exit unless --keep)
  --keep                 keep --work
  --partitions N         partitions of each topic (4)
  --cpuprofile           write a CPU profile of each stage run into --out
  --memprofile           write the allocation profile of each stage run into --out (stage-NAME.mprof)
  --trace                write an execution trace of each stage run into --out
  --env K=V              extra variable for the stage (repeatable), e.g. WALKSTAGE_MAX_IN_FLIGHT=8
measurements:
  --walk-requests N      walks backlog: requests (1000)
  --walk-seeds N         seeds per walk request (1000)
  --walk-algorithm NAME  the walk requests' algorithm (deepwalk; node2vec, metapath, ppr)
  --walk-params JSON     more members of each walk request, e.g. '"p":0.5,"q":2' or '"schema":[0,1,2]'
  --walks-per-seed N     walks per seed (10; --walks, its old name, still works)
  --length N             steps per walk (80)
  --walk-idle N          walks idle series: requests (50)
  --visit-requests N     visits backlog: requests (200)
  --queries N            queries per visits request (100)
  --steps-per-query N    (100000)
  --top-k N              (100)
  --visit-idle N         visits idle series: 1-query requests (200)
  --sample-requests N    sampling backlog ("output": "samples"): requests (0: none, the default)
  --sample-seeds N       seeds per sampling request (1000: a GNN trainer's mini-batch)
  --sample-algorithm A   the sampler (neighbor)
  --sample-params STR    its parameters as JSON object members ('"fanouts":[25,10]' for neighbor)
  --plain                plain upload of the walks backlog's volume to each store (on)
  --no-plain             skip it
  --plain-rounds N       plain uploads of each kind, interleaved; the ratio takes each kind's median (3)
  --plain-shapes LIST    object sizes: batch (the backlog's bytes a request) and/or 64MiB (batch,64MiB)
  --plain-via LIST       writers: sink (the sink's requests) and/or gocloud (gocloud's writer, the plain
                         upload's form before issue 36's check); 64MiB objects go through the first only (sink)
  --plain-parallel N     objects at once (16)
  --signed-payload       S3 URLs with unsigned_payload=false: the SDK signs the SHA-256 of every body, the
                         client's default before issue 36 (the default now sends them unsigned with a CRC
                         header)
  --unsigned-payload     S3 URLs with unsigned_payload=true (the default since issue 36; for old command lines)
  --s3-params STR        more parameters for the S3 URLs, e.g. '&request_checksum_calculation=when_required'
  --integrity-etag       versitygw --data-integrity-etag: ETags from the checksum the client sends, not an MD5
                         of every body it stores
  --keep-alive           versitygw --keep-alive: keep connections open between requests (its default closes
                         each after one response, so every request is a new TCP connection)
  --store-cpus LIST      run versitygw on these CPUs only (taskset -c LIST, e.g. 0-5)
  --stage-cpus LIST      run the broker, the stage and the load generator on these CPUs only (e.g. 6-15):
                         with --store-cpus, shows which side bounds a run on one host
live graph (issue 37; runs after the stores, on a file:// bucket):
  --live-engine NAME     the engine of the live graph's measurements: cpu (the default) or gpu
  --edge-updates N       edge updates of the ingest measurements (0: none, the default): a true backlog of them
                         alone (the time until all are walkable), then beside a walks backlog (the walk rate while
                         ingesting, against the same walks on the static graph), then paced into the running stage
  --edge-rate R          the paced series' updates a second (default: half the backlog's ingest rate)
  --edge-batch N         updates a record (4096)
  --live-backlog         produce each backlog into the running stage (default: a true backlog, every request
                         queued while the stage is stopped, then the stage started; rate from the first
                         event to the last)
  --timeout SECONDS      bound on each measurement (600)
  --out DIR              logs and results (\$OUT/load when OUT is set, else --work/results)
EOF
}

bin_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bin
walkstage=$bin_dir/walkstage
load_walkstage=
broker=$bin_dir/kfakebroker
versitygw=$bin_dir/versitygw
weed=$bin_dir/weed
graph=
engine=auto
stores=file,s3
work=/dev/shm/walkstage-load-$$
keep=0
live_backlog=0
partitions=4
cpuprofile=0
memprofile=0
trace=0
extra_env=()
walk_requests=1000
walk_seeds=1000
walk_algorithm=deepwalk
walk_params=
walks=10
length=80
walk_idle=50
visit_requests=200
queries=100
steps_per_query=100000
top_k=100
visit_idle=200
plain=1
plain_rounds=3
plain_shapes=batch,64MiB
plain_via=sink
plain_parallel=16
s3_extra=
posix_flags=()
vgw_flags=()
store_pin=()
stage_pin=()
store_cpus=
stage_cpus=
timeout_s=600
out=
edge_updates=0
live_engine=cpu
edge_rate=
edge_batch=4096
sample_requests=0
sample_seeds=1000
sample_algorithm=neighbor
sample_params=

while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --walkstage) walkstage=$2; shift ;;
    --load-walkstage) load_walkstage=$2; shift ;;
    --broker) broker=$2; shift ;;
    --versitygw) versitygw=$2; shift ;;
    --weed) weed=$2; shift ;;
    --graph) graph=$2; shift ;;
    --engine) engine=$2; shift ;;
    --stores) stores=$2; shift ;;
    --work) work=$2; shift ;;
    --keep) keep=1 ;;
    --live-backlog) live_backlog=1 ;;
    --partitions) partitions=$2; shift ;;
    --cpuprofile) cpuprofile=1 ;;
    --memprofile) memprofile=1 ;;
    --trace) trace=1 ;;
    --env) extra_env+=("$2"); shift ;;
    --walk-requests) walk_requests=$2; shift ;;
    --walk-seeds) walk_seeds=$2; shift ;;
    --walk-algorithm) walk_algorithm=$2; shift ;;
    --walk-params) walk_params=$2; shift ;;
    --walks-per-seed|--walks) walks=$2; shift ;;
    --length) length=$2; shift ;;
    --walk-idle) walk_idle=$2; shift ;;
    --visit-requests) visit_requests=$2; shift ;;
    --queries) queries=$2; shift ;;
    --steps-per-query) steps_per_query=$2; shift ;;
    --top-k) top_k=$2; shift ;;
    --visit-idle) visit_idle=$2; shift ;;
    --sample-requests) sample_requests=$2; shift ;;
    --sample-seeds) sample_seeds=$2; shift ;;
    --sample-algorithm) sample_algorithm=$2; shift ;;
    --sample-params) sample_params=$2; shift ;;
    --plain) plain=1 ;;
    --no-plain) plain=0 ;;
    --plain-rounds) plain_rounds=$2; shift ;;
    --plain-shapes) plain_shapes=$2; shift ;;
    --plain-via) plain_via=$2; shift ;;
    --plain-parallel) plain_parallel=$2; shift ;;
    --unsigned-payload) s3_extra+="&unsigned_payload=true" ;;
    --signed-payload) s3_extra+="&unsigned_payload=false" ;;
    --s3-params) s3_extra+=$2; shift ;;
    --integrity-etag) posix_flags+=(--data-integrity-etag) ;;
    --keep-alive) vgw_flags+=(--keep-alive) ;;
    --store-cpus) store_pin=(taskset -c "$2"); store_cpus=$2; shift ;;
    --stage-cpus) stage_pin=(taskset -c "$2"); stage_cpus=$2; shift ;;
    --timeout) timeout_s=$2; shift ;;
    --edge-updates) edge_updates=$2; shift ;;
    --live-engine) live_engine=$2; shift ;;
    --edge-rate) edge_rate=$2; shift ;;
    --edge-batch) edge_batch=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "stage-load.sh: unknown option $1 (-h lists them)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "stage-load.sh: $*" >&2; exit 1; }
[ -n "$graph" ] || { usage >&2; die "--graph is required"; }
[ -f "$graph" ] || die "graph $graph not found"
[ -n "$load_walkstage" ] || load_walkstage=$walkstage
for b in "$walkstage" "$broker" "$load_walkstage"; do [ -x "$b" ] || die "$b is not an executable (-h says where each binary comes from)"; done
case ,$stores, in *,s3,*) [ -x "$versitygw" ] || die "versitygw $versitygw not found (or use --stores file)" ;; esac
case ,$stores, in *,seaweedfs,*) [ -x "$weed" ] || die "weed $weed not found (scripts/test.sh installs it into bin/)" ;; esac
if [ -z "$out" ]; then
  if [ -n "${OUT:-}" ]; then out=$OUT/load; else out=$work/results; fi
fi
mkdir -p "$work" "$out"
results=$out/results.txt
: >"$results"

# Every process started here, stopped on exit whatever happens.
pids=()
cleanup() {
  local rc=$?
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  if [ "$keep" -eq 0 ]; then rm -rf "$work/file" "$work/s3" "$work/seaweedfs"; [ "$out" = "$work/results" ] || rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "== $*" | tee -a "$out/run.log"; }

# free_port: a port nothing listens on, below the kernel's ephemeral range
# (a port in it may be taken by an outgoing connection before the listener
# binds it).
free_port() {
  local low=32768 p
  if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then read -r low _ </proc/sys/net/ipv4/ip_local_port_range; fi
  [ "$low" -gt 11000 ] || low=32768
  while :; do
    p=$((10000 + RANDOM % (low - 10000)))
    (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# wait_port PID PORT SECONDS: until something listens on PORT, PID alive.
wait_port() {
  local i
  for i in $(seq $(($3 * 10))); do
    kill -0 "$1" 2>/dev/null || return 1
    if (: <"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
    [ "$i" -gt 0 ] && sleep 0.1
  done
  return 1
}

# ready URL PID SECONDS: until GET URL answers 200, PID alive; asked every
# 50 ms, as a backlog's CPU is counted from the stage's readiness.
ready() {
  local i
  for i in $(seq $(($3 * 20))); do
    kill -0 "$2" 2>/dev/null || return 1
    if command -v curl >/dev/null 2>&1; then
      curl -fs -o /dev/null "$1" && return 0
    elif python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$1" 2>/dev/null; then
      return 0
    fi
    [ "$i" -gt 0 ] && sleep 0.05
  done
  return 1
}

topics="walkstage-requests,walkstage-completions,walkstage-dlq,walkstage-edges-a,walkstage-edges-b"
export AWS_ACCESS_KEY_ID=walkstage AWS_SECRET_ACCESS_KEY=walkstage-secret AWS_REGION=us-east-1 \
  AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

log "broker: $broker ($partitions partitions a topic)"
: >"$out/broker.log" # exists before the background job opens it
"${stage_pin[@]}" "$broker" -topics "$topics" -partitions "$partitions" >>"$out/broker.log" 2>&1 &
pids+=($!)
broker_pid=$!
brokers=
for _ in $(seq 100); do
  brokers=$(sed -n 's/^kfakebroker listening on //p' "$out/broker.log" | head -n 1)
  [ -n "$brokers" ] && break
  kill -0 "$broker_pid" 2>/dev/null || die "kfakebroker exited: $(tail -n 5 "$out/broker.log")"
  sleep 0.1
done
[ -n "$brokers" ] || die "kfakebroker printed no address"
export WALKSTAGE_BROKERS=$brokers

# The S3 server of each store, for the CPU time it spends on each
# measurement (store_cpu_s in the results).
declare -A server_pid=()
# cpu_ticks PID: user + system CPU time of PID so far, in clock ticks.
cpu_ticks() {
  local st
  read -r -a st <"/proc/$1/stat" 2>/dev/null || { echo 0; return; }
  # Fields 14 and 15 (utime, stime), counted past the parenthesised name.
  local rest=${st[*]}
  rest=${rest##*) }
  read -r -a st <<<"$rest"
  echo $((st[11] + st[12]))
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

s3_url=
if [[ ,$stores, == *,s3,* ]]; then
  mkdir -p "$work/s3/data/walks" "$work/s3/meta"
  port=$(free_port)
  log "versitygw: $versitygw on 127.0.0.1:$port, data under $work/s3"
  "${store_pin[@]}" "$versitygw" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --port "127.0.0.1:$port" --quiet "${vgw_flags[@]}" \
    posix --sidecar "$work/s3/meta" "${posix_flags[@]}" "$work/s3/data" >"$out/versitygw.log" 2>&1 &
  pids+=($!)
  server_pid[s3]=$!
  wait_port "$!" "$port" 30 || die "versitygw did not listen: $(tail -n 5 "$out/versitygw.log")"
  s3_url="s3://walks?endpoint=http://127.0.0.1:$port&region=us-east-1&use_path_style=true$s3_extra"
fi

swfs_url=
if [[ ,$stores, == *,seaweedfs,* ]]; then
  # weed server: master, volume server, filer and S3 gateway in one
  # process, its S3 settings the defaults (as internal/testseaweed runs it);
  # off only telemetry (no network here) and the Iceberg and Lance
  # listeners. The credentials in the environment are its one identity.
  mkdir -p "$work/seaweedfs"
  port=$(free_port)
  wp=()
  for _ in 1 2 3 4 5 6 7; do wp+=("$(free_port)"); done
  log "seaweedfs: $weed server -s3 on 127.0.0.1:$port, data under $work/seaweedfs"
  "${store_pin[@]}" "$weed" server -dir="$work/seaweedfs" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false \
    -master.port="${wp[0]}" -master.port.grpc="${wp[1]}" -volume.port="${wp[2]}" -volume.port.grpc="${wp[3]}" \
    -filer -filer.port="${wp[4]}" -filer.port.grpc="${wp[5]}" \
    -s3 -s3.port="$port" -s3.port.grpc="${wp[6]}" -s3.port.iceberg=0 -s3.port.lance=0 >"$out/seaweedfs.log" 2>&1 &
  pids+=($!)
  weed_pid=$!
  server_pid[seaweedfs]=$!
  wait_port "$weed_pid" "$port" 60 || die "weed did not listen: $(tail -n 5 "$out/seaweedfs.log")"
  swfs_url="s3://walks?endpoint=http://127.0.0.1:$port&region=us-east-1&use_path_style=true$s3_extra"
  # Ready once an object can be written (the gateway answers before the
  # filer and a volume take data); the first write creates the bucket
  # (weed's autoCreateBucket, for its admin identity).
  t0=$SECONDS
  until "$load_walkstage" load --plain-upload --bucket "$swfs_url" --plain-bytes 1 --plain-object-bytes 1 --plain-parallel 1 \
    >"$out/seaweedfs-ready.log" 2>&1; do
    kill -0 "$weed_pid" 2>/dev/null || die "weed exited: $(tail -n 5 "$out/seaweedfs.log")"
    [ $((SECONDS - t0)) -lt 90 ] || die "seaweedfs not ready: $(tail -n 5 "$out/seaweedfs-ready.log")"
    sleep 0.5
  done
  log "seaweedfs ready after $((SECONDS - t0)) s"
fi

stage_pid=
metrics_port=
stop_stage() {
  [ -n "$stage_pid" ] || return 0
  kill -TERM "$stage_pid" 2>/dev/null || true
  wait "$stage_pid" 2>/dev/null || true
  stage_pid=
}

# start_stage NAME OUTPUT_URL: a stage process, once its /readyz answers
# 200 (a second try on another port when its port was taken meanwhile).
start_stage() {
  local port try args=()
  [ "$cpuprofile" -eq 1 ] && args+=(--cpuprofile "$out/stage-$1.prof")
  [ "$memprofile" -eq 1 ] && args+=(--memprofile "$out/stage-$1.mprof")
  [ "$trace" -eq 1 ] && args+=(--trace "$out/stage-$1.trace")
  for try in 1 2 3; do
    port=$(free_port)
    metrics_port=$port
    log "stage ($1): $walkstage run, engine $engine, output $2, metrics on 127.0.0.1:$port"
    env WALKSTAGE_GRAPH="$graph" WALKSTAGE_OUTPUT_URL="$2" WALKSTAGE_ENGINE="$engine" \
      WALKSTAGE_METRICS_ADDR="127.0.0.1:$port" WALKSTAGE_LOG_FORMAT=text WALKSTAGE_LOG_LEVEL=warn \
      WALKSTAGE_GRAPH_POLL_INTERVAL=0 WALKSTAGE_SESSION_TIMEOUT=6s "${extra_env[@]}" \
      "${stage_pin[@]}" "$walkstage" run "${args[@]}" >>"$out/stage-$1.log" 2>&1 &
    stage_pid=$!
    pids+=("$stage_pid")
    local t0=$SECONDS
    if ready "http://127.0.0.1:$port/readyz" "$stage_pid" 600; then
      log "stage ($1) ready after $((SECONDS - t0)) s"
      return 0
    fi
    stop_stage
    tail -n 1 "$out/stage-$1.log" | grep -q "address already in use" || break
    log "stage ($1): port $port taken, try $((try + 1))"
  done
  die "stage not ready: $(tail -n 20 "$out/stage-$1.log")"
}

# load NAME ARGS...: one walkstage load run; its RESULT line goes to the
# table, tagged with NAME.
load() {
  local name=$1
  shift
  log "$name: walkstage load $*"
  local f=$out/$name.txt c0 pid cpu=
  c0=$(server_cpu)
  window_start
  "${stage_pin[@]}" "$load_walkstage" load --graph "$graph" --timeout "${timeout_s}s" "$@" >"$f" 2>"$out/$name.err" &
  pid=$!
  if [[ " $* " == *" --mode backlog "* ]]; then
    # A backlog into the running stage (--live-backlog): the CPU up to its
    # last event, before the manifests are read back (see collect_wait).
    until grep -q "every event read" "$out/$name.err" 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.02
    done
    cpu=" store_cpu_s=$(cpu_since "$c0")$(window_fields)"
  fi
  if ! wait "$pid"; then
    cat "$f" "$out/$name.err" >&2
    die "$name failed"
  fi
  [ -n "$cpu" ] || cpu=" store_cpu_s=$(cpu_since "$c0")$(window_fields)"
  cat "$f"
  sed -n "s/^RESULT /$name /p" "$f" | sed "s/\$/$cpu/" >>"$results"
}

# server_cpu: CPU ticks of the current store's S3 server so far (0 for
# file://); cpu_since TICKS: its CPU seconds since then.
server_cpu() {
  local p=${server_pid[${store:-}]:-}
  if [ -n "$p" ]; then cpu_ticks "$p"; else echo 0; fi
}
cpu_since() { awk -v a="$1" -v b="$(server_cpu)" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) / hz }'; }

# busy_ticks [LIST]: CPU ticks the host's CPUs in LIST (taskset's form,
# e.g. 0-7,9; empty: all of them) spent busy so far (/proc/stat: user,
# nice, system, irq, softirq, steal).
busy_ticks() {
  awk -v list="${1:-}" '
    BEGIN {
      n = split(list, a, ",")
      for (i = 1; i <= n; i++) {
        if (split(a[i], r, "-") == 2) { for (c = r[1]; c <= r[2]; c++) want["cpu" c] = 1 } else want["cpu" a[i]] = 1
      }
    }
    (list == "" && $1 == "cpu") || ($1 in want) { s += $2 + $3 + $4 + $7 + $8 + $9 }
    END { print s + 0 }' /proc/stat
}
# window_start, then window_fields: the CPU over a measurement beside the
# store's: the stage's (when running), the whole host's, and with
# --store-cpus/--stage-cpus each side's CPUs, in core-seconds, and the
# window's length. Where the stage and the store share one host, these say
# whether the host's cores bound the run.
win=()
window_start() {
  local ticks=0
  [ -n "$stage_pid" ] && ticks=$(cpu_ticks "$stage_pid")
  win=("$(date +%s.%N)" "$ticks" "$(busy_ticks)" "$(busy_ticks "$store_cpus")" "$(busy_ticks "$stage_cpus")")
}
window_fields() {
  local ticks=0
  [ -n "$stage_pid" ] && ticks=$(cpu_ticks "$stage_pid")
  awk -v t0="${win[0]}" -v t1="$(date +%s.%N)" -v s0="${win[1]}" -v s1="$ticks" -v h0="${win[2]}" -v h1="$(busy_ticks)" \
    -v a0="${win[3]}" -v a1="$(busy_ticks "$store_cpus")" -v b0="${win[4]}" -v b1="$(busy_ticks "$stage_cpus")" \
    -v pinned="$store_cpus" -v running="$stage_pid" -v hz="$hz" 'BEGIN {
      printf " window_s=%.3f host_cpu_s=%.1f", t1 - t0, (h1 - h0) / hz
      if (running != "") printf " stage_cpu_s=%.1f", (s1 - s0) / hz
      if (pinned != "") printf " store_cpus_s=%.1f stage_cpus_s=%.1f", (a1 - a0) / hz, (b1 - b0) / hz
    }'
}

collectors=()
names=()
# collect_start NAME ARGS...: a collect of what was produced
# before (with --id-prefix in ARGS), started before the stage, as the true
# backlog's second half; start the stage after it. collect_wait [TICKS] waits
# for every collect started and adds their RESULT lines to the table (with
# the store's CPU seconds since TICKS when given).
collect_start() {
  local name=$1
  shift
  log "$name: walkstage load $*, then the stage starts"
  "${stage_pin[@]}" "$load_walkstage" load --graph "$graph" --timeout "${timeout_s}s" "$@" >"$out/$name.txt" 2>"$out/$name.err" &
  collectors+=($!)
  names+=("$name")
  local t0=$SECONDS
  until grep -q "watching the event topics" "$out/$name.err" 2>/dev/null; do
    kill -0 "${collectors[-1]}" 2>/dev/null || { cat "$out/$name.err" >&2; die "$name: the collector stopped"; }
    [ $((SECONDS - t0)) -lt 60 ] || die "$name: the collector did not start"
    sleep 0.1
  done
}
collect_wait() {
  local i cpu=
  if [ $# -gt 0 ]; then
    # The store's CPU over the whole backlog (not only the stage's
    # start-up), the stage's and the host's from the stage's readiness
    # (window_start), up to the last event: read when every collector has
    # its events, before it reads the manifests back for the bytes written
    # (a GET a batch that the stage never makes; a load without that line
    # is waited for instead).
    for i in "${!collectors[@]}"; do
      until grep -q "every event read" "$out/${names[$i]}.err" 2>/dev/null; do
        kill -0 "${collectors[$i]}" 2>/dev/null || break
        sleep 0.02
      done
    done
    cpu=" store_cpu_s=$(cpu_since "$1")$(window_fields)"
  fi
  for i in "${!collectors[@]}"; do
    if ! wait "${collectors[$i]}"; then
      cat "$out/${names[$i]}.txt" "$out/${names[$i]}.err" >&2
      die "${names[$i]} failed"
    fi
  done
  for i in "${!collectors[@]}"; do
    cat "$out/${names[$i]}.txt"
    sed -n "s/^RESULT /${names[$i]} /p" "$out/${names[$i]}.txt" | sed "s/\$/$cpu/" >>"$results"
  done
  collectors=()
  names=()
}

# go_totals NAME: the running stage's collector CPU, heap allocations and
# collections since it started (its metrics
# go_cpu_classes_gc_total_cpu_seconds_total, go_gc_heap_allocs_bytes_total,
# go_gc_duration_seconds_count) and its peak RSS, appended to go-totals.txt
# in --out.
go_totals() {
  local url="http://127.0.0.1:$metrics_port/metrics" m
  if command -v curl >/dev/null 2>&1; then
    m=$(curl -fs "$url") || return 0
  else
    m=$(python3 -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$url") || return 0
  fi
  local hwm
  hwm=$(awk '$1 == "VmHWM:" { print $2 * 1024 }' "/proc/$stage_pid/status" 2>/dev/null)
  awk -v name="$1" -v hwm="${hwm:-0}" '$1 == "go_cpu_classes_gc_total_cpu_seconds_total" { gc = $2 }
    $1 == "go_gc_heap_allocs_bytes_total" { a = $2 } $1 == "go_gc_duration_seconds_count" { n = $2 }
    END { printf "%s gc_cpu_s=%.2f alloc_bytes=%.0f gc_cycles=%d rss_peak_bytes=%.0f\n", name, gc, a, n, hwm }' <<<"$m" >>"$out/go-totals.txt"
}

# backlog NAME STORE URL ARGS...: a backlog measurement. By default a true
# backlog: the stage is stopped, every request produced, then a collector
# reads the event topics from their ends while the stage starts again; the
# rate is from the first event to the last, the queue full from the start.
# With --live-backlog the requests go into the running stage.
backlog() {
  local name=$1 store=$2 url=$3
  shift 3
  if [ "$live_backlog" -eq 1 ]; then
    load "$name" "$@" --mode backlog --bucket "$url"
    return
  fi
  local prefix="$name-$$-$RANDOM" c0
  stop_stage
  load "$name-produce" "$@" --mode backlog --phase produce --id-prefix "$prefix"
  collect_start "$name" "$@" --mode backlog --phase collect --id-prefix "$prefix" --bucket "$url"
  c0=$(server_cpu)
  start_stage "$store" "$url"
  window_start
  collect_wait "$c0"
  go_totals "$name"
}

walk_args=(--output walks --algorithm "$walk_algorithm" --seeds "$walk_seeds" --walks-per-seed "$walks" --length "$length")
[ -n "$walk_params" ] && walk_args+=(--walk-params "$walk_params")
sample_args=(--output samples --algorithm "$sample_algorithm" --seeds "$sample_seeds")
[ -z "$sample_params" ] || sample_args+=(--sample "$sample_params")
visit_args=(--output visits --queries "$queries" --steps-per-query "$steps_per_query" --top-k "$top_k" --stop-probability 0.2)

IFS=, read -r -a store_list <<<"$stores"
for store in "${store_list[@]}"; do
  case $store in
    file) url=file://$work/file ;;
    s3) url=$s3_url ;;
    seaweedfs) url=$swfs_url ;;
    none) continue ;;
    *) die "store $store: want file, s3 or seaweedfs" ;;
  esac
  # Warm-ups, not measured: the first call of each kind pins the GPU
  # engine's buffers. A true backlog restarts the stage (and pins them
  # again), so with no idle series or live backlog to follow there is
  # nothing to warm.
  if [ "$walk_idle" -gt 0 ] || [ "$visit_idle" -gt 0 ] || [ "$visit_requests" -gt 0 ] || [ "$live_backlog" -eq 1 ]; then
    start_stage "$store" "$url"
    load "$store-walks-warmup" "${walk_args[@]}" --mode idle --requests 1 --warmup 1
  fi
  if [ "$walk_requests" -gt 0 ]; then
    backlog "$store-walks-backlog" "$store" "$url" "${walk_args[@]}" --requests "$walk_requests"
  fi
  if [ "$walk_idle" -gt 0 ]; then
    load "$store-walks-idle" "${walk_args[@]}" --mode idle --requests "$walk_idle" --warmup 0 --gap 20ms
  fi
  if [ "$visit_requests" -gt 0 ] || [ "$visit_idle" -gt 0 ]; then
    load "$store-visits-warmup" "${visit_args[@]}" --mode idle --requests 1 --warmup 1
  fi
  if [ "$visit_requests" -gt 0 ]; then
    backlog "$store-visits-backlog" "$store" "$url" "${visit_args[@]}" --requests "$visit_requests"
  fi
  if [ "$visit_idle" -gt 0 ]; then
    load "$store-visits-idle" "${visit_args[@]}" --queries 1 --mode idle --requests "$visit_idle" --warmup 0 --gap 20ms
  fi
  if [ "$sample_requests" -gt 0 ]; then
    backlog "$store-samples-backlog" "$store" "$url" "${sample_args[@]}" --requests "$sample_requests"
    curl -fs "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null | grep '^walkstage_sample_\|^walkstage_engine_runs_total' >"$out/$store-samples-metrics.txt" || true
  fi
  stop_stage
  if [ "$plain" -eq 1 ]; then
    bytes=$(sed -n "s/^$store-walks-backlog .* bytes=\([0-9]*\) .*/\1/p" "$results")
    if [ "${bytes:-0}" -gt 0 ]; then
      # Each kind (object size, writer) plain_rounds times, the kinds
      # interleaved, so that a drift of the host's speed reaches all.
      IFS=, read -r -a shapes <<<"$plain_shapes"
      IFS=, read -r -a vias <<<"$plain_via"
      for round in $(seq "$plain_rounds"); do
        for shape in "${shapes[@]}"; do
          case $shape in
            batch) object=$((bytes / walk_requests)) ;;
            64MiB) object=$((64 << 20)) ;;
            *) die "--plain-shapes: $shape: want batch or 64MiB" ;;
          esac
          for via in "${vias[@]}"; do
            [ "$shape" = batch ] || [ "$via" = "${vias[0]}" ] || continue
            # Kept, then deleted by a command of its own: the store's CPU
            # counted around the measured one holds the uploads alone.
            load "$store-plain-$shape-$via-$round" --plain-upload --bucket "$url" --plain-bytes "$bytes" \
              --plain-object-bytes "$object" --plain-parallel "$plain_parallel" --plain-via "$via" \
              --plain-prefix "plain-$shape-$via-$round" --plain-keep
            "$load_walkstage" load --plain-upload --bucket "$url" --plain-prefix "plain-$shape-$via-$round" --plain-delete \
              2>>"$out/plain-delete.log" || die "deleting the plain upload's objects: $(tail -n 3 "$out/plain-delete.log")"
          done
        done
      done
    fi
  fi
done

# The live graph's ingest (issue 37). Each stage start replays its whole
# edge topic, so each backlog has a topic of its own.
if [ "$edge_updates" -gt 0 ]; then
  store="file"
  url=file://$work/file-edges
  saved_env=("${extra_env[@]}")
  edge_args=(--mode edges --edge-updates "$edge_updates" --edge-batch "$edge_batch")
  # 1. The walks on the static graph, for the rate beside ingest below.
  extra_env=("${saved_env[@]}" "WALKSTAGE_ENGINE=$live_engine")
  stop_stage
  backlog "edges-walks-static" "$store" "$url" "${walk_args[@]}" --requests "$walk_requests"
  stop_stage
  # 2. Edges alone, a true backlog.
  extra_env=("${saved_env[@]}" "WALKSTAGE_ENGINE=$live_engine" WALKSTAGE_EDGE_TOPIC=walkstage-edges-a "WALKSTAGE_EDGE_OFFSETS_WAIT=${timeout_s}s")
  prefix="edges-a-$$-$RANDOM"
  load "edges-backlog-produce" "${edge_args[@]}" --edge-topic walkstage-edges-a --phase produce --id-prefix "$prefix"
  collect_start "edges-backlog" "${edge_args[@]}" --edge-topic walkstage-edges-a --phase collect --id-prefix "$prefix"
  start_stage edges-a "$url"
  collect_wait
  stop_stage
  # 3. Walks and edges queued together: the walk rate while ingesting.
  extra_env=("${saved_env[@]}" "WALKSTAGE_ENGINE=$live_engine" WALKSTAGE_EDGE_TOPIC=walkstage-edges-b "WALKSTAGE_EDGE_OFFSETS_WAIT=${timeout_s}s")
  wprefix="edges-w-$$-$RANDOM"
  prefix="edges-b-$$-$RANDOM"
  load "edges-walks-live-produce" "${walk_args[@]}" --requests "$walk_requests" --mode backlog --phase produce --id-prefix "$wprefix"
  load "edges-beside-produce" "${edge_args[@]}" --edge-topic walkstage-edges-b --phase produce --id-prefix "$prefix"
  # A probe would queue behind the walks: the walk events' own watermark
  # (edge_offsets) says when the stage walked on every update.
  collect_start "edges-walks-live" "${walk_args[@]}" --requests "$walk_requests" --mode backlog --phase collect --id-prefix "$wprefix" --bucket "$url"
  start_stage edges-b "$url"
  collect_wait
  go_totals edges-walks-live
  # 4. Paced into the running stage at half the backlog's rate (the
  # issue's update -> walkable target), once the stage holds the updates
  # of 3 (the load's paced run waits for them: settle_s).
  if [ -z "$edge_rate" ]; then
    edge_rate=$(sed -n 's/^edges-backlog .* walkable_s=\([0-9.]*\) .*/\1/p' "$results" | awk -v n="$edge_updates" '{ printf "%.0f", n / $1 / 2 }')
  fi
  load "edges-paced" "${edge_args[@]}" --edge-topic walkstage-edges-b --edge-rate "$edge_rate" --id-prefix "edges-p-$$-$RANDOM"
  stop_stage
  extra_env=("${saved_env[@]}")
  {
    echo
    echo "live graph ($edge_updates updates in records of $edge_batch, $live_engine engine, file://):"
    awk -v n="$edge_updates" '
      function v(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
      $1 == "edges-beside-produce" { beside = v("records") }
      $1 == "edges-walks-static" { printf "  %-20s %.1f M walk vertices/s\n", $1, v("walk_vertices_per_s") / 1e6 }
      $1 == "edges-walks-live" {
        printf "  %-20s %.1f M walk vertices/s with the updates queued beside; their events covered %s of %s edge records %s s after the start", $1, v("walk_vertices_per_s") / 1e6, v("edge_records"), beside, v("edge_covered_s")
        if (v("edge_records") == beside) printf " (%.2f M updates/s, start-up included)", n / v("edge_covered_s") / 1e6
        printf "\n"
      }
      $1 == "edges-backlog" { printf "  %-20s all walkable %s s after the start: %.2f M updates/s (the stage served after %s s)\n", $1, v("walkable_s"), v("updates") / v("walkable_s") / 1e6, v("serving_s") }
      $1 == "edges-paced" { printf "  %-20s %s updates/s: update -> walkable p50 %s ms, p99 %s ms; a probe waiting for nothing p50 %s ms, p99 %s ms (started once the stage held the topic, %s s after it asked)\n", $1, v("rate"), v("walkable_p50_ms"), v("walkable_p99_ms"), v("plain_p50_ms"), v("plain_p99_ms"), v("settle_s") }
    ' "$results"
    # The collector's CPU and the bytes allocated from the stage's start to
    # the walks' end (graph load and start-up included), and a walked
    # vertex's share of those bytes.
    walked=$((walk_requests * walk_seeds * walks * (length + 1)))
    awk -v walked="$walked" '$1 == "edges-walks-static" || $1 == "edges-walks-live" {
        split($2, g, "="); split($3, a, "="); split($4, c, "="); split($5, r, "=")
        printf "  %-20s collector %s CPU-s in %s cycles, %.2f GB allocated (%.2f bytes a walked vertex) from the stage start to the walks end; peak RSS %.2f GB\n", $1, g[2], c[2], a[2] / 1e9, a[2] / walked, r[2] / 1e9
      }' "$out/go-totals.txt" 2>/dev/null || true
  } | tee "$out/edges.txt"
fi

# The table: one row per measurement, from the RESULT lines.
{
  echo
  echo "results ($(date -u +%FT%TZ), engine $engine, graph $graph):"
  awk '
    function v(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
    function cores(k) { return v("window_s") > 0 && v(k) != "" ? sprintf("%.1f", v(k) / v("window_s")) : "" }
    BEGIN { printf "%-26s %8s %9s %12s %12s %10s %10s %10s %10s %8s %9s %9s %10s\n", "case", "requests", "seconds", "M vertices/s", "queries/s", "MB/s", "p50 ms", "p99 ms", "fetch p99", "GB/s", "store cpu", "stage cpu", "host cores" }
    v("mode") == "edges" { next } # the live graph table below
    {
      if (v("mode") == "plain-upload") {
        printf "%-26s %8s %9s %12s %12s %10.0f %10s %10s %10s %8s %9s %9s %10s\n", $1, v("objects"), v("seconds"), "", "", v("bytes") / 1e6 / v("seconds"), "", "", "", v("gb_per_s"), v("store_cpu_s"), "", cores("host_cpu_s")
        next
      }
      mvs = sprintf("%.1f", v("walk_vertices_per_s") / 1e6); qps = ""; mbs = ""
      if (v("output") == "visits") { mvs = ""; qps = sprintf("%.0f", v("queries_per_s")) }
      if (v("bytes") > 0) mbs = sprintf("%.0f", v("bytes") / 1e6 / v("seconds"))
      p50 = v("fetch_event_p50_ms"); p99 = v("fetch_event_p99_ms")
      if (v("mode") == "idle") { p50 = v("produce_event_p50_ms"); p99 = v("produce_event_p99_ms") }
      printf "%-26s %8s %9s %12s %12s %10s %10s %10s %10s %8s %9s %9s %10s\n", $1, v("requests"), v("seconds"), mvs, qps, mbs, p50, p99, v("fetch_event_p99_ms"), "", v("store_cpu_s"), v("stage_cpu_s"), cores("host_cpu_s")
    }' "$results"
  # The issue 36 ratio: the walks backlog's bytes a second against the
  # plain uploads of the same volume to the same store in this run: each
  # kind's (object size, writer) median over its rounds, the best kind's
  # median the ceiling (the best single upload, the method before, is
  # printed beside it: a maximum of noisy runs lies above the store's
  # typical rate). Then the store's CPU a GB under each, and the host's
  # busy cores: on one host the stage's CPU and the store's share them.
  awk -v ncpu="$(nproc)" '
    function v(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
    function median(key,   n, i, j, x, a) {
      n = split(rates[key], a, " ")
      for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $1 ~ /-walks-backlog$/ && v("bytes") > 0 {
      st = substr($1, 1, length($1) - 14); order[++k] = st
      stage[st] = v("bytes") / v("seconds"); scpu[st] = v("store_cpu_s") / (v("bytes") / 1e9)
      if (v("window_s") > 0) {
        shost[st] = sprintf("%.1f-%.1f", v("host_cpu_s") / v("window_s"), v("host_cpu_s") / v("seconds")); sstage[st] = v("stage_cpu_s") / (v("bytes") / 1e9)
      }
      if (v("store_cpus_s") != "") sset[st] = sprintf("; busy cores, store side %.1f-%.1f, stage side %.1f-%.1f", v("store_cpus_s") / v("window_s"), v("store_cpus_s") / v("seconds"), v("stage_cpus_s") / v("window_s"), v("stage_cpus_s") / v("seconds"))
    }
    v("mode") == "plain-upload" {
      i = index($1, "-plain-"); st = substr($1, 1, i - 1); kind = substr($1, i + 7); sub(/-[0-9]+$/, "", kind)
      if (!((st, kind) in seen)) { seen[st, kind] = 1; kinds[st] = kinds[st] " " kind }
      r = v("bytes") / v("seconds"); rates[st, kind] = rates[st, kind] " " r
      cpu[st, kind] = cpu[st, kind] + v("store_cpu_s"); gb[st, kind] = gb[st, kind] + v("bytes") / 1e9
      if (v("window_s") > 0) { hc[st, kind] += v("host_cpu_s"); hw[st, kind] += v("window_s"); hs[st, kind] += v("seconds") }
      if (r > best1[st]) best1[st] = r
    }
    END {
      for (i = 1; i <= k; i++) {
        st = order[i]
        if (!(st in best1)) continue
        n = split(kinds[st], ks, " "); bk = ""; line = ""
        for (j = 1; j <= n; j++) {
          m = median(st SUBSEP ks[j])
          line = line sprintf("%s %s %.0f", (j > 1 ? ";" : ""), ks[j], m / 1e6)
          if (bk == "" || m > bm) { bk = ks[j]; bm = m }
        }
        printf "%s: stage %.0f MB/s = %.0f%% of the plain upload (median of its rounds, best kind: %s %.0f MB/s; kinds:%s); %.0f%% of the best single upload (%.0f MB/s)\n", st, stage[st] / 1e6, 100 * stage[st] / bm, bk, bm / 1e6, line, 100 * stage[st] / best1[st], best1[st] / 1e6
        printf "%s: store core-s a GB: stage %.2f, plain %s %.2f", st, scpu[st], bk, cpu[st, bk] / gb[st, bk]
        if (st in shost) printf "; stage core-s a GB %.2f; host cores busy (of %d; over the window, then over the measured seconds): stage run %s, plain %s %.1f-%.1f%s", sstage[st], ncpu, shost[st], bk, hc[st, bk] / hw[st, bk], hc[st, bk] / hs[st, bk], sset[st]
        printf "\n"
      }
    }' "$results"
  echo "(idle rows: p50/p99 are produce -> event as the user sees it; 'fetch p99' is the stage's fetch -> the event read back;"
  echo " 'store cpu': CPU seconds the S3 server spent during the measurement, the backlog's from the stage's start to its last event;"
  echo " 'stage cpu': the stage's CPU seconds from its readiness to the backlog's end; 'host cores': the host's busy CPU seconds"
  echo " over the same span (a plain upload's: the command's) a second of that span, a lower bound of the cores busy while measured)"
} | tee "$out/table.txt"
