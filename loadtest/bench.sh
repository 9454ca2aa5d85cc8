#!/usr/bin/env bash
# ticketd side-by-side benchmark: one run, one table, the targets.
#
# Usage: loadtest/bench.sh [options]
#
#   --start             start a private stack first and stop it afterwards:
#                       scripts/services.sh up .state/bench 30379 30306, migrate,
#                       reset (every run starts from empty tables),
#                       build/release/ticketd serve on 127.0.0.1:30080 with
#                       TICKETD_ORDER_TOKEN_REQUIRED=0 (secrets from --config;
#                       TICKETD_LOOPS, TICKETD_MAX_FIBERS, TICKETD_DB_CONNS and other TICKETD_*
#                       settings of the environment pass through; the TICKETD_MERGE=0
#                       instance on the next port, the one with
#                       TICKETD_ORDER_TOKEN_REQUIRED=1 for the token rows on
#                       the one after); BENCH_REDIS_PORT,
#                       BENCH_MYSQL_PORT and BENCH_HTTP_PORT in the environment
#                       move the three ports
#   --url URL           ticketd to measure (default http://127.0.0.1:8080;
#                       with --start http://127.0.0.1:30080)
#   --pid PID           ticketd's process, for its CPU and RSS (default: the one
#                       --start started, else `pgrep -f "ticketd serve"` if
#                       exactly one)
#   --mysql-pid PID     MariaDB's process, for its CPU (default with --start:
#                       the pidfile of .state/bench/mysql; else not shown)
#   --duration S        seconds per row (default 5; at most 30)
#   --concurrency N     connections of every row (default 16)
#   --scale LIST        more connection counts, comma-separated, for the
#                       /livez, replay, new orders (N sessions) and sqlbase
#                       (N sessions) rows (default 64,256; "none": none)
#   --connections N     sqlbase connections of the --concurrency rows
#                       (default: the same as --concurrency)
#   --sessions N        sessions of the "many sessions" rows (default 200)
#   --threads N         wrk threads (default 2)
#   --config FILE       KEY=VALUE file for secrets and MariaDB settings
#                       (default config/ticketd.env); the environment wins
#   --unix              with --start: ticketd reaches Redis and MariaDB, and
#                       sqlbase reaches MariaDB, through the servers' Unix
#                       sockets under .state/bench instead of TCP over loopback
#   --tokens            fetch an order token per new order (for a server that
#                       requires X-Order-Token; figures then include POST /tokens)
#   --json FILE         also write the rows and the targets as JSON
#   --rows LIST         only these rows, comma-separated, of livez, replay,
#                       new, hot, merge0 (the TICKETD_MERGE=0 instance's new
#                       and hot rows, those selected), token (new orders,
#                       N sessions, at the first two counts, on an instance
#                       with TICKETD_ORDER_TOKEN_REQUIRED=1), sqlbase,
#                       flash, refusals, floods (default: all); the targets
#                       of rows not run are n/a
#
# Rows: GET /livez (wrk); the replay of one completed order (wrk, same POST
# with its Idempotency-Key, token and body); new orders over many sessions
# and on one hot session (ticketd-load, a new user and key per order); the
# same order transaction straight against MariaDB (sqlbase, many sessions and
# hot). Every row runs over persistent keep-alive connections. Columns:
# req/s, p50, p99, CPU per request of ticketd, MariaDB and the load tool,
# ticketd's context switches per request (per new order on the order rows),
# ticketd's RSS, the TCP connections seen; each order row's note adds its
# batches (the mean and the share of each size), the Redis commands and
# round trips and MariaDB's statements and rows written per new order.
# Then the ratios and the targets.
#
# The order rows send no X-Order-Token: the server under test must run with
# TICKETD_ORDER_TOKEN_REQUIRED=0 (as --start does), or pass --tokens.
# The MariaDB of sqlbase is TICKETD_MYSQL_HOST/PORT/USER/PASSWORD/DB from the
# environment, else from --config (with --start: the private one).
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "${HERE}/.." && pwd)
LOAD=${ROOT}/build/loadtest/ticketd-load
SQLBASE=${ROOT}/build/loadtest/sqlbase
TICKETD=${BENCH_TICKETD:-${ROOT}/build/release/ticketd}

START=0
URL=""
PID=""
MYSQL_PID=""
DURATION=5
CONC=16
SCALE="64,256"
CONNS=""
SESSIONS=200
THREADS=2
CONFIG=${ROOT}/config/ticketd.env
TOKENS=0
UNIX=0
JSON_OUT=""
ALL_ROWS=livez,replay,new,hot,merge0,token,sqlbase,flash,refusals,floods
ROW_SET=${ALL_ROWS}

BENCH_STATE=${ROOT}/.state/bench
BENCH_REDIS_PORT=${BENCH_REDIS_PORT:-30379}
BENCH_MYSQL_PORT=${BENCH_MYSQL_PORT:-30306}
BENCH_HTTP_PORT=${BENCH_HTTP_PORT:-30080}

# Targets, as ratios within one run (what a new order costs: README, Speed).
# c16 and c64 are the first two connection counts (--concurrency, then the
# smallest of --scale).
T_NEW_OVER_SQL_FIRST=1.8 # new orders / sqlbase, N sessions, first count
T_NEW_OVER_SQL=2.5       # the same, second count
T_HOT_OVER_SQL=3         # hot session, second count
T_MACHINE_OVER_OFF_FIRST=0.45 # CPU per order (ticketd+MariaDB+Redis) / MERGE=0's
T_MACHINE_OVER_OFF=0.35       # the same, second count
T_REDIS_TRIPS=2          # Redis round trips per new order
T_REDIS_CMDS=8           # Redis commands per new order (INFO commandstats)
T_CSW_PER_ORDER=1        # first count
T_CPU_NEW_OVER_REPLAY=4
T_P99_OVER_SQL=1
T_RSS_MB=26
T_TOKEN_OVER_NONE=0.85   # orders/s with the order token required / without
# The flash sale: one session of FLASH_SEATS seats, FLASH_USERS buyers,
# each sending FLASH_COPIES copies of its one order (the same key, token
# and body: an impatient buyer's clicks), FLASH_CONC at once.
FLASH_SEATS=2000
FLASH_USERS=4000
FLASH_COPIES=5
FLASH_CONC=256

die() {
    printf 'bench: error: %s\n' "$*" >&2
    exit 1
}
log() { printf 'bench: %s\n' "$*" >&2; }

usage() {
    sed -n '/^# Usage:/,/^# environment, else from --config/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while (($# > 0)); do
    case "$1" in
    --start) START=1 ;;
    --url) URL=${2:?}; shift ;;
    --pid) PID=${2:?}; shift ;;
    --mysql-pid) MYSQL_PID=${2:?}; shift ;;
    --duration) DURATION=${2:?}; shift ;;
    --concurrency) CONC=${2:?}; shift ;;
    --scale) SCALE=${2:?}; shift ;;
    --connections) CONNS=${2:?}; shift ;;
    --sessions) SESSIONS=${2:?}; shift ;;
    --threads) THREADS=${2:?}; shift ;;
    --config) CONFIG=${2:?}; shift ;;
    --tokens) TOKENS=1 ;;
    --unix) UNIX=1 ;;
    --json) JSON_OUT=${2:?}; shift ;;
    --rows) ROW_SET=${2:?}; shift ;;
    -h | --help) usage 0 ;;
    *) printf 'bench: unknown option %s\n' "$1" >&2; usage 2 ;;
    esac
    shift
done

[[ "${SCALE}" == none ]] && SCALE=""
IFS=',' read -r -a SCALE_LIST <<<"${SCALE}"
for n in "${DURATION}" "${CONC}" "${SESSIONS}" "${THREADS}" ${CONNS:+"${CONNS}"} \
    ${PID:+"${PID}"} ${MYSQL_PID:+"${MYSQL_PID}"} "${SCALE_LIST[@]}"; do
    if ! [[ "${n}" =~ ^[0-9]+$ ]] || ((n < 1)); then
        die "not a positive number: ${n}"
    fi
done
((DURATION <= 30)) || die "--duration is at most 30 s per row"
((UNIX == 0 || START)) || die "--unix needs --start (it uses the sockets of the private servers)"
for n in "${CONC}" "${SCALE_LIST[@]}"; do
    ((n <= 1024)) || die "at most 1024 connections per row: ${n}"
done
CONNS=${CONNS:-${CONC}}
IFS=',' read -r -a ROW_LIST <<<"${ROW_SET}"
for r in "${ROW_LIST[@]}"; do
    [[ ",${ALL_ROWS}," == *",${r},"* ]] || die "--rows: no such rows: ${r} (${ALL_ROWS})"
done
for n in "${BENCH_REDIS_PORT}" "${BENCH_MYSQL_PORT}" "${BENCH_HTTP_PORT}"; do
    if ! [[ "${n}" =~ ^[0-9]+$ ]] || ((n < 1 || n > 65534)); then
        die "not a port: ${n}"
    fi
done
# wanted ROWS: true when --rows selected ROWS.
wanted() { [[ ",${ROW_SET}," == *",$1,"* ]]; }
# The connection counts: --concurrency first, then --scale ascending,
# without repeats.
LEVELS=("${CONC}")
while read -r n; do
    [[ -n "${n}" && "${n}" != "${CONC}" ]] && LEVELS+=("${n}")
done < <(printf '%s\n' "${SCALE_LIST[@]}" | sort -n -u)

command -v wrk >/dev/null || die "wrk not found (apt-get install wrk)"
command -v jq >/dev/null || die "jq not found (apt-get install jq)"
command -v curl >/dev/null || die "curl not found (apt-get install curl)"
[[ -x "${LOAD}" && -x "${SQLBASE}" ]] || die "build the tools first: make -C loadtest"

# --- settings: environment first, then the config file ----------------------

conf() {
    local key=$1 fallback=$2 val=""
    if [[ -n "${!key:-}" ]]; then
        printf '%s\n' "${!key}"
        return
    fi
    if [[ -r "${CONFIG}" ]]; then
        val=$(grep -E "^${key}=" "${CONFIG}" | tail -n 1 | cut -d= -f2- | sed -e 's/^"//' -e 's/"$//')
    fi
    printf '%s\n' "${val:-${fallback}}"
}

JWT_SECRET=$(conf TICKETD_JWT_SECRET "")
PAY_SECRET=$(conf TICKETD_PAY_SECRET "")
[[ -n "${JWT_SECRET}" ]] || die "no TICKETD_JWT_SECRET in the environment or ${CONFIG}"
MYSQL_HOST=$(conf TICKETD_MYSQL_HOST 127.0.0.1)
MYSQL_PORT=$(conf TICKETD_MYSQL_PORT 13306)
MYSQL_USER=$(conf TICKETD_MYSQL_USER ticketd)
MYSQL_PASSWORD=$(conf TICKETD_MYSQL_PASSWORD ticketd)
MYSQL_DB=$(conf TICKETD_MYSQL_DB ticketd)
# What ticketd --start runs with (the environment, else --config, else the
# defaults of service/base/config.c); shown in the header.
LOOPS=$(conf TICKETD_LOOPS "$(nproc)")
MAX_FIBERS=$(conf TICKETD_MAX_FIBERS 4096)
DB_CONNS=$(conf TICKETD_DB_CONNS 8)

SQL_SOCKET="" # --unix: the MariaDB socket sqlbase uses
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ticketd-bench.XXXXXX")
STARTED_TICKETD=""
STARTED_OFF=""
STARTED_TOK=""
OFF_URL=""
OFF_PID=""
TOK_URL=""
TOK_PID=""
ROW_TOKENS=0 # 1 while the rows of the TICKETD_ORDER_TOKEN_REQUIRED=1 instance run
REDIS_PID=""
STARTED_SERVICES=0
SAMPLER=""

cleanup() {
    local rc=$?
    if [[ -n "${SAMPLER}" ]]; then
        kill "${SAMPLER}" 2>/dev/null || true
        wait "${SAMPLER}" 2>/dev/null || true
    fi
    if [[ -n "${SYS_PERF}" ]]; then
        kill -INT "${SYS_PERF}" 2>/dev/null || true
        wait "${SYS_PERF}" 2>/dev/null || true
    fi
    for started in "${STARTED_TICKETD}" "${STARTED_OFF}" "${STARTED_TOK}"; do
        [[ -n "${started}" ]] || continue
        kill -TERM "${started}" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "${started}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${started}" 2>/dev/null || true
        wait "${started}" 2>/dev/null || true
    done
    if ((STARTED_SERVICES)); then
        private_services down "${BENCH_STATE}" >/dev/null 2>&1 || true
    fi
    rm -rf "${WORK}"
    exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the private stack -------------------------------------------------------

# scripts/services.sh on the private servers: external-server variables
# would make it skip them or talk to another server.
private_services() {
    env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
        TICKETD_REDIS_PORT="${BENCH_REDIS_PORT}" TICKETD_MYSQL_PORT="${BENCH_MYSQL_PORT}" \
        "${ROOT}/scripts/services.sh" "$@" >&2
}

if ((START)); then
    [[ -x "${TICKETD}" ]] || die "build ticketd first: make build"
    mkdir -p "${BENCH_STATE}"
    log "starting Redis :${BENCH_REDIS_PORT} and MariaDB :${BENCH_MYSQL_PORT} under .state/bench"
    private_services up "${BENCH_STATE}" "${BENCH_REDIS_PORT}" "${BENCH_MYSQL_PORT}"
    STARTED_SERVICES=1
    private_services migrate "${BENCH_STATE}"
    # Every run starts from empty tables and an empty Redis, so that runs
    # (and versions) compare: orders left by an earlier run make every
    # index deeper and MariaDB's work per order larger.
    private_services reset "${BENCH_STATE}"
    MYSQL_HOST=127.0.0.1
    MYSQL_PORT=${BENCH_MYSQL_PORT}
    if [[ -z "${MYSQL_PID}" && -s "${BENCH_STATE}/mysql/mysqld.pid" ]]; then
        MYSQL_PID=$(tr -d ' \n' <"${BENCH_STATE}/mysql/mysqld.pid")
    fi
    URL=${URL:-http://127.0.0.1:${BENCH_HTTP_PORT}}
    if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:${BENCH_HTTP_PORT}/livez" 2>/dev/null; then
        die "something already serves 127.0.0.1:${BENCH_HTTP_PORT}; stop it first"
    fi
    log "starting ticketd on ${URL} (TICKETD_LOOPS=${LOOPS}, TICKETD_MAX_FIBERS=${MAX_FIBERS}, TICKETD_DB_CONNS=${DB_CONNS})"
    REDIS_AT=127.0.0.1
    SOCKET_ENV=(-u TICKETD_MYSQL_SOCKET)
    if ((UNIX)); then
        REDIS_AT=${BENCH_STATE}/redis/redis.sock
        SQL_SOCKET=${BENCH_STATE}/mysql/mysqld.sock
        SOCKET_ENV=(TICKETD_MYSQL_SOCKET="${SQL_SOCKET}")
    fi
    # start_ticketd PORT LOG [KEY=VALUE...]: one ticketd of the run, in
    # the background (its pid in $!).
    start_ticketd() {
        local port=$1 logfile=$2
        shift 2
        env "${SOCKET_ENV[@]}" \
        TICKETD_ENV=dev TICKETD_PORT="${port}" TICKETD_BIND=127.0.0.1 \
        TICKETD_REDIS_HOST="${REDIS_AT}" TICKETD_REDIS_PORT="${BENCH_REDIS_PORT}" \
        TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${BENCH_MYSQL_PORT}" \
        TICKETD_MYSQL_USER="${MYSQL_USER}" TICKETD_MYSQL_PASSWORD="${MYSQL_PASSWORD}" \
        TICKETD_MYSQL_DB="${MYSQL_DB}" TICKETD_ORDER_TOKEN_REQUIRED=0 \
        TICKETD_LOOPS="${LOOPS}" TICKETD_MAX_FIBERS="${MAX_FIBERS}" \
        TICKETD_DB_CONNS="${DB_CONNS}" TICKETD_BLOOM_CHECK_MS=3600000 \
        TICKETD_JWT_SECRET="${JWT_SECRET}" TICKETD_PAY_SECRET="${PAY_SECRET}" "$@" \
        "${TICKETD}" serve --config "${CONFIG}" >"${logfile}" 2>&1 &
    }
    # wait_ready URL PID LOG
    wait_ready() {
        local ready=0
        for _ in $(seq 1 150); do
            if curl -fsS -o /dev/null --max-time 1 "$1/readyz" 2>/dev/null; then
                ready=1
                break
            fi
            kill -0 "$2" 2>/dev/null || {
                tail -n 20 "$3" >&2
                die "ticketd exited during start-up"
            }
            sleep 0.2
        done
        ((ready)) || die "ticketd not ready after 30 s (see $3)"
    }
    start_ticketd "${BENCH_HTTP_PORT}" "${BENCH_STATE}/ticketd.log"
    STARTED_TICKETD=$!
    PID=${STARTED_TICKETD}
    wait_ready "${URL}" "${PID}" "${BENCH_STATE}/ticketd.log"
    # The same build with merging off, idle but for its own rows: the
    # "TICKETD_MERGE=0" rows of the same run.
    OFF_URL=http://127.0.0.1:$((BENCH_HTTP_PORT + 1))
    if curl -fsS -o /dev/null --max-time 1 "${OFF_URL}/livez" 2>/dev/null; then
        die "something already serves ${OFF_URL}; stop it first"
    fi
    start_ticketd $((BENCH_HTTP_PORT + 1)) "${BENCH_STATE}/ticketd-merge0.log" TICKETD_MERGE=0
    STARTED_OFF=$!
    OFF_PID=${STARTED_OFF}
    wait_ready "${OFF_URL}" "${OFF_PID}" "${BENCH_STATE}/ticketd-merge0.log"
    # The same build with the order token required (the default path of a
    # client: POST /tokens, then the order with its X-Order-Token), idle
    # but for the "token" rows; started only when they run.
    if wanted token; then
        TOK_URL=http://127.0.0.1:$((BENCH_HTTP_PORT + 2))
        if curl -fsS -o /dev/null --max-time 1 "${TOK_URL}/livez" 2>/dev/null; then
            die "something already serves ${TOK_URL}; stop it first"
        fi
        start_ticketd $((BENCH_HTTP_PORT + 2)) "${BENCH_STATE}/ticketd-token.log" TICKETD_ORDER_TOKEN_REQUIRED=1
        STARTED_TOK=$!
        TOK_PID=${STARTED_TOK}
        wait_ready "${TOK_URL}" "${TOK_PID}" "${BENCH_STATE}/ticketd-token.log"
    fi
    [[ -s "${BENCH_STATE}/redis/redis.pid" ]] && REDIS_PID=$(tr -d ' \n' <"${BENCH_STATE}/redis/redis.pid")
fi

URL=${URL:-http://127.0.0.1:8080}
URL=${URL%/}
curl -fsS -o /dev/null --max-time 2 "${URL}/livez" || die "${URL}/livez does not answer"

if [[ -z "${PID}" ]]; then
    pids=$(pgrep -f "ticketd serve" || true)
    if [[ $(wc -w <<<"${pids}") -eq 1 ]]; then
        PID=${pids}
    else
        log "no single 'ticketd serve' process found (pass --pid): ticketd's CPU and RSS not shown"
    fi
fi
[[ -n "${MYSQL_PID}" ]] || log "no MariaDB process known (pass --mysql-pid): its CPU not shown"
ROW_PID=${PID}
ROW_URL=${URL}

# The port ticketd listens on, to count the connections it accepts.
HTTP_PORT=$(sed -E -e 's|^[a-z]+://||' -e 's|/.*$||' <<<"${URL}")
if [[ "${HTTP_PORT}" =~ :([0-9]+)$ ]]; then
    HTTP_PORT=${BASH_REMATCH[1]}
else
    HTTP_PORT=80
fi
command -v ss >/dev/null || log "ss not found (iproute2): connections not counted"

# --- measuring -----------------------------------------------------------------

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

# jwt USER [admin]: an HS256 token, as ticketd-load mints them.
jwt() {
    local now header payload sig role=""
    now=$(date +%s)
    [[ "${2:-}" == admin ]] && role=',"role":"admin"'
    header=$(printf '%s' '{"alg":"HS256","typ":"JWT"}' | b64url)
    payload=$(printf '{"sub":"%s","iat":%d,"exp":%d%s}' "$1" "${now}" $((now + 3600)) "${role}" | b64url)
    sig=$(printf '%s' "${header}.${payload}" | openssl dgst -sha256 -hmac "${JWT_SECRET}" -binary | b64url)
    printf '%s.%s.%s\n' "${header}" "${payload}" "${sig}"
}

CLK_TCK=$(getconf CLK_TCK)

# cpu_ticks PID: utime + stime of the process (all its threads), in clock
# ticks; nothing if PID is unknown or gone. Fields 14 and 15 of
# /proc/PID/stat, counted after the ")" that ends the command name. Shell
# builtins only: the sampler calls it every 0.2 s.
cpu_ticks() {
    local line f
    [[ -n "$1" && -r "/proc/$1/stat" ]] || return 0
    read -r line <"/proc/$1/stat" 2>/dev/null || return 0
    read -r -a f <<<"${line##*) }"
    printf '%s\n' $((f[11] + f[12]))
}

# ctx_switches PID: the context switches of every thread of the process
# so far, voluntary and not (/proc/PID/task/*/status); nothing if PID is
# unknown or gone. A thread that ended takes its count with it: ticketd's
# threads live as long as the process.
ctx_switches() {
    [[ -n "$1" && -d "/proc/$1/task" ]] || return 0
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { if (NR > 0) print n }'
}

# preempted PID: the involuntary ones alone (nonvoluntary_ctxt_switches: the
# thread was runnable and another took the core), a part of ctx_switches.
preempted() {
    [[ -n "$1" && -d "/proc/$1/task" ]] || return 0
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^nonvoluntary_ctxt_switches:/ { n += $2 } END { if (NR > 0) print n }'
}

rss_kb_of() {
    awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true
}
rss_kb() {
    [[ -n "${ROW_PID}" && -r "/proc/${ROW_PID}/status" ]] || return 0
    awk '/^VmRSS:/ {print $2}' "/proc/${ROW_PID}/status" 2>/dev/null || true
}

# The client ends of the connections ticketd has open now, one a line.
peers() {
    command -v ss >/dev/null || return 0
    ss -Htn state established "( sport = :${HTTP_PORT} )" 2>/dev/null | awk '{print $NF}' || true
}

# The sampler writes ticketd's RSS, its connections' peers and the CPU
# ticks of ticketd and MariaDB (with the wall clock) every 0.2 s while a
# row runs.
sampler_start() {
    : >"${WORK}/rss"
    : >"${WORK}/peers"
    : >"${WORK}/cpu"
    (
        for _ in $(seq 1 $(((DURATION + 70) * 5))); do
            rss_kb >>"${WORK}/rss"
            peers >>"${WORK}/peers"
            t=$(cpu_ticks "${ROW_PID}")
            m=$(cpu_ticks "${MYSQL_PID}")
            r=$(cpu_ticks "${REDIS_PID}")
            printf '%s %s %s %s\n' "${EPOCHREALTIME}" "${t:--}" "${m:--}" "${r:--}" >>"${WORK}/cpu"
            sleep 0.2
        done
    ) &
    SAMPLER=$!
}

# window_cpu FROM TO FIELD: the CPU ticks of column FIELD (2 ticketd, 3
# MariaDB, 4 Redis) between the first and the last sample within [FROM, TO] (Unix
# seconds), and the seconds between them: "TICKS SECONDS"; nothing if the
# samples span less than a second.
window_cpu() {
    awk -v s="$1" -v e="$2" -v f="$3" '$1 >= s && $1 <= e && $f != "-" {
        if (!have) { t0 = $1; c0 = $f; have = 1 }
        t1 = $1; c1 = $f
    } END { if (have && t1 - t0 >= 1) printf "%d %.3f\n", c1 - c0, t1 - t0 }' "${WORK}/cpu"
}

# window_us FROM TO FIELD RATE: CPU microseconds per request within the load
# window, RATE requests per second; nothing if the window is too short.
window_us() {
    local w
    w=$(window_cpu "$1" "$2" "$3")
    [[ -n "${w}" ]] || return 0
    awk -v w="${w}" -v r="$4" -v hz="${CLK_TCK}" 'BEGIN {
        split(w, a, " ")
        if (r > 0 && a[2] > 0) printf "%.0f", a[1] * 1e6 / hz / (r * a[2])
    }'
}

sampler_stop() {
    if [[ -n "${SAMPLER}" ]]; then
        kill "${SAMPLER}" 2>/dev/null || true
        wait "${SAMPLER}" 2>/dev/null || true
        SAMPLER=""
    fi
    RSS_MAX=$(sort -n "${WORK}/rss" 2>/dev/null | tail -n 1)
    PEERS=$(sort -u "${WORK}/peers" | wc -l)
    command -v ss >/dev/null || PEERS=""
    sleep 1
    RSS_AFTER=$(rss_kb)
    RSS_MAX=${RSS_MAX:-}
    RSS_AFTER=${RSS_AFTER:-}
}

# perf_usable: true when `perf stat` can count system calls here (perf
# installed, and root or a low enough kernel.perf_event_paranoid); asked
# once. Without it the rows print no system calls.
PERF_OK=""
perf_usable() {
    if [[ -z "${PERF_OK}" ]]; then
        PERF_OK=0
        if command -v perf >/dev/null &&
            perf stat -x, -e raw_syscalls:sys_enter -o /dev/null -- true >/dev/null 2>&1; then
            PERF_OK=1
        fi
    fi
    ((PERF_OK))
}

# measure_begin / measure_end: CPU of ticketd and MariaDB over a row, and
# (with perf) the system calls of ticketd's threads: unlike CPU time, a
# count the VM's neighbours barely move.
SYS_PERF=""
measure_begin() {
    SYSCALLS=""
    if [[ -n "${ROW_PID}" ]] && perf_usable; then
        perf stat -x, -e raw_syscalls:sys_enter -p "${ROW_PID}" -o "${WORK}/syscalls" 2>/dev/null &
        SYS_PERF=$!
    fi
    CSW0=$(ctx_switches "${ROW_PID}")
    PRE0=$(preempted "${ROW_PID}")
    CPU0_T=$(cpu_ticks "${ROW_PID}")
    CPU0_M=$(cpu_ticks "${MYSQL_PID}")
    CPU0_R=$(cpu_ticks "${REDIS_PID}")
}

measure_end() {
    local t m w p
    t=$(cpu_ticks "${ROW_PID}")
    m=$(cpu_ticks "${MYSQL_PID}")
    r=$(cpu_ticks "${REDIS_PID}")
    w=$(ctx_switches "${ROW_PID}")
    p=$(preempted "${ROW_PID}")
    CSW=""
    [[ -n "${CSW0}" && -n "${w}" ]] && CSW=$((w - CSW0))
    PRE=""
    [[ -n "${PRE0}" && -n "${p}" ]] && PRE=$((p - PRE0))
    if [[ -n "${SYS_PERF}" ]]; then
        kill -INT "${SYS_PERF}" 2>/dev/null || true
        wait "${SYS_PERF}" 2>/dev/null || true
        SYS_PERF=""
        SYSCALLS=$(awk -F, '$3 ~ /^raw_syscalls:sys_enter/ && $1 ~ /^[0-9]+$/ { print $1 }' \
            "${WORK}/syscalls" 2>/dev/null || true)
    fi
    CPU_T=""
    CPU_M=""
    CPU_R=""
    [[ -n "${CPU0_R}" && -n "${r}" ]] && CPU_R=$((r - CPU0_R))
    [[ -n "${CPU0_T}" && -n "${t}" ]] && CPU_T=$((t - CPU0_T))
    [[ -n "${CPU0_M}" && -n "${m}" ]] && CPU_M=$((m - CPU0_M))
}

# timed FILE CMD...: runs CMD and keeps the CPU time (user + system) it and
# its children used, for cpu_s FILE.
timed() {
    local file=$1
    shift
    (
        rc=0
        "$@" || rc=$?
        # Not in a pipe: times must run in this shell, the tool's parent.
        times >"${file}.times"
        exit "${rc}"
    )
}

# cpu_s FILE: the seconds timed wrote (user + system of the children).
cpu_s() {
    [[ -s "$1.times" ]] || return 0
    tail -n 1 "$1.times" | awk '{
        t = 0
        for (i = 1; i <= 2; i++) { split($i, a, "m"); sub(/s$/, "", a[2]); t += a[1] * 60 + a[2] }
        printf "%.3f\n", t
    }'
}

# us_per TICKS REQUESTS: CPU microseconds per request from clock ticks.
us_per() {
    [[ -n "$1" && -n "$2" ]] || return 0
    awk -v t="$1" -v n="$2" -v hz="${CLK_TCK}" 'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / hz / n }'
}

# per COUNT REQUESTS: COUNT per request, to two decimals.
per() {
    [[ -n "$1" && -n "$2" ]] || return 0
    awk -v c="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.2f", c / n }'
}

# us_per_s SECONDS REQUESTS: the same from seconds.
us_per_s() {
    [[ -n "$1" && -n "$2" ]] || return 0
    awk -v t="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / n }'
}

# wrk prints latencies as 812.00us, 1.23ms or 1.02s: in ms.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n = n / 1000; else if (v ~ /ms$/) n = n; else if (v ~ /m$/) n = n * 60000; else if (v ~ /s$/) n = n * 1000
        printf "%.2f", n
    }'
}

ROWS=()
declare -A RPS P99 CPU_TD CPU_MY CPU_RD CPU_LD CSW_TD RCMD RTRIP ROW_LINE
: >"${WORK}/rows.jsonl"

num() { if [[ "$1" =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then printf '%s' "$1"; else printf 'null'; fi; }

# row KEY NAME TOOL CONNS RPS P50 P99 REQUESTS TICKETD_US MARIADB_US LOAD_US
#     RSS_MAX RSS_AFTER PEERS NOTE REDIS_US CTX_SWITCHES_PER_REQ
#     [REDIS_COMMANDS_PER_ORDER REDIS_ROUND_TRIPS_PER_ORDER [EXTRA]]
# EXTRA: a JSON object of more fields for the row's JSON (order rows).
row() {
    ROWS+=("$1")
    ROW_LINE[$1]="$2|$3|$4|$5|$6|$7|$9|${10}|${11}|${12}|${13}|${14}|${15}|${16:-}|${17:-}"
    CSW_TD[$1]=${17:-}
    RPS[$1]=$5
    P99[$1]=$7
    CPU_TD[$1]=$9
    CPU_MY[$1]=${10}
    CPU_LD[$1]=${11}
    CPU_RD[$1]=${16:-}
    RCMD[$1]=${18:-}
    RTRIP[$1]=${19:-}
    jq -n -c --arg row "$2" --arg tool "$3" --arg note "${15}" \
        --argjson connections "$(num "$4")" --argjson rps "$(num "$5")" \
        --argjson p50 "$(num "$6")" --argjson p99 "$(num "$7")" --argjson requests "$(num "$8")" \
        --argjson td "$(num "$9")" --argjson my "$(num "${10}")" --argjson ld "$(num "${11}")" \
        --argjson rmax "$(num "${12}")" --argjson raft "$(num "${13}")" --argjson peers "$(num "${14}")" \
        --argjson csw "$(num "${17:-}")" \
        --argjson rcmd "$(num "${18:-}")" --argjson rtrip "$(num "${19:-}")" \
        --argjson extra "${20:-"{}"}" \
        '{row: $row, tool: $tool, connections: $connections, rps: $rps, p50_ms: $p50, p99_ms: $p99,
          requests: $requests, ticketd_cpu_us_per_req: $td, mariadb_cpu_us_per_req: $my,
          ticketd_context_switches_per_req: $csw,
          redis_commands_per_order: $rcmd, redis_round_trips_per_order: $rtrip,
          load_cpu_us_per_req: $ld, rss_max_kb: $rmax, rss_after_kb: $raft,
          tcp_connections_seen: $peers, note: $note} + $extra' >>"${WORK}/rows.jsonl"
}

# wrk_row KEY NAME CONNS WRK-ARGS...
wrk_row() {
    local key=$1 name=$2 c=$3 out rps p50 p99 n non2xx note="" threads=${THREADS}
    shift 3
    rm -f "${WORK}/load-cpu.times"
    ((threads <= c)) || threads=${c}
    log "row: ${name}, c${c}"
    measure_begin
    sampler_start
    out=$(timed "${WORK}/load-cpu" timeout $((DURATION + 20)) \
        wrk -t"${threads}" -c"${c}" -d"${DURATION}s" --latency "$@" 2>&1) || die "wrk failed: ${out}"
    measure_end
    sampler_stop
    rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"${out}")
    p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"${out}")")
    p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"${out}")")
    n=$(awk '/ requests in / {print $1}' <<<"${out}")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"${out}")
    [[ -n "${non2xx}" ]] && note="${non2xx} non-2xx answers"
    grep -q "Socket errors" <<<"${out}" && note="${note:+${note}; }$(grep 'Socket errors' <<<"${out}" | sed 's/^ *//')"
    [[ -n "${SYSCALLS}" && -n "${n}" ]] && ((n > 0)) &&
        note="${note:+${note}; }system calls per request: $(per "${SYSCALLS}" "${n}")"
    row "${key}" "${name}" wrk "${c}" "${rps:-0}" "${p50}" "${p99}" "${n}" \
        "$(us_per "${CPU_T}" "${n}")" "$(us_per "${CPU_M}" "${n}")" \
        "$(us_per_s "$(cpu_s "${WORK}/load-cpu")" "${n}")" "${RSS_MAX}" "${RSS_AFTER}" "${PEERS}" "${note}" \
        "$(us_per "${CPU_R}" "${n}")" "$(per "${CSW}" "${n}")"
}

# redis_calls: the commands Redis has run so far, as INFO commandstats
# counts them (each command's calls, summed: a Lua script's redis.call()s
# count as commands of their own beside its EVALSHA). Nothing when the
# run's Redis is not known (without --start).
redis_calls() {
    [[ -n "${REDIS_PID}" ]] || return 0
    redis-cli -p "${BENCH_REDIS_PORT}" INFO commandstats 2>/dev/null | tr -d '\r' |
        awk -F'[:=,]' '/^cmdstat_/ { n += $3; seen = 1 } END { if (seen) print n }'
}

# The MariaDB status counters an order row reads around itself (SHOW
# GLOBAL STATUS): the statements clients sent (Questions: each statement
# of a multi-statement query counts, a stored procedure's own statements
# do not), the CALLs and COMMITs among them (a COMMIT is a transaction),
# and the rows written to tables: inserted, updated, deleted, a trigger's
# and a procedure's rows included (Handler_write, Handler_update,
# Handler_delete; MariaDB counts its internal temporary tables apart, in
# Handler_tmp_*, and has no Innodb_rows_* counters).
MYSQL_STATUS=(Questions Com_call_procedure Com_commit Handler_write Handler_update Handler_delete)

# mysql_status: the values of MYSQL_STATUS, in that order, on one line.
# Nothing when the run's MariaDB is not its own (without --start: another
# client's statements would count) or does not answer.
mysql_status() {
    local sock=() names
    ((START)) || return 0
    command -v mariadb >/dev/null || return 0
    [[ -n "${SQL_SOCKET}" ]] && sock=(--socket="${SQL_SOCKET}")
    names=$(printf "'%s'," "${MYSQL_STATUS[@]}")
    mariadb --no-defaults -h "${MYSQL_HOST}" -P "${MYSQL_PORT}" "${sock[@]}" -u "${MYSQL_USER}" \
        -p"${MYSQL_PASSWORD}" --batch --skip-column-names \
        -e "SHOW GLOBAL STATUS WHERE Variable_name IN (${names%,})" 2>/dev/null |
        awk -v names="${MYSQL_STATUS[*]}" '{ v[$1] = $2 } END {
            if (NR == 0) exit
            n = split(names, w, " ")
            for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), v[w[i]] + 0
            print ""
        }' || true
}

# mysql_per_order BEFORE AFTER ORDERS: the note's words and the row's JSON
# fields for the status deltas (mysql_status lines) per order, as
# "NOTE|JSON"; nothing when a sample is missing. Two of the Questions
# between the samples are the bench's own, not counted: the later
# sample's SHOW STATUS and the earlier sample's client quitting (each
# mariadb client run counts two).
mysql_per_order() {
    [[ -n "$1" && -n "$2" ]] || return 0
    awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= 6; i++) d[i] = (y[i] - x[i]) / n
        d[1] = (y[1] - x[1] - 2) / n
        printf "MariaDB per order: %.2f statements (%.2f CALL, %.2f COMMIT), %.2f rows written (%.2f inserted, %.2f updated", d[1], d[2], d[3], d[4] + d[5] + d[6], d[4], d[5]
        if (d[6] > 0) printf ", %.2f deleted", d[6]
        printf ")|{\"mariadb_statements_per_order\": %.3f, \"mariadb_calls_per_order\": %.3f, \"mariadb_commits_per_order\": %.3f, \"mariadb_rows_inserted_per_order\": %.3f, \"mariadb_rows_updated_per_order\": %.3f, \"mariadb_rows_deleted_per_order\": %.3f}\n", d[1], d[2], d[3], d[4], d[5], d[6]
    }'
}

# The batch size histogram's buckets (ticketd_order_batch_size, cumulative,
# "le" inclusive), their labels as ranges of orders.
BATCH_LE=(1 2 4 8 16 32 64 +Inf)
BATCH_RANGES=(1 2 3-4 5-8 9-16 17-32 33-64 65+)

# batch_spread BEFORE AFTER: how the row's batches spread over the
# buckets, from two samples of the cumulative buckets (BATCH_LE order), as
# "NOTE|JSON": each non-empty range's share of the batches ("<1%" below
# half a percent) and the JSON object of every range's share; nothing
# when the row made no batch.
batch_spread() {
    awk -v a="$1" -v b="$2" -v r="${BATCH_RANGES[*]}" 'BEGIN {
        n = split(a, x, " "); split(b, y, " "); split(r, label, " ")
        total = y[n] - x[n]
        if (total <= 0) exit
        prev = 0; note = ""; json = ""
        for (i = 1; i <= n; i++) {
            c = (y[i] - x[i]) - prev; prev = y[i] - x[i]
            share = c / total
            if (c > 0) {
                pct = share * 100 < 0.5 ? "<1%" : sprintf("%.0f%%", share * 100)
                note = note (note == "" ? "" : ", ") label[i] ": " pct
            }
            json = json (i > 1 ? ", " : "") sprintf("\"%s\": %.4f", label[i], share)
        }
        printf "%s|{%s}\n", note, json
    }'
}

# load_row KEY NAME CONNS SCENARIO ARGS...
load_row() {
    local key=$1 name=$2 c=$3 scenario=$4 json=${WORK}/$4-$3.json rc=0 note n from to rate td my rd
    local tok=(--no-token) b0 o0 b1 o1 p0 c0 p1 c1 f0 f1 g0 g1 t0 t1 h0 h1 k0 k1 s0 s1 orders rcmd="" rtrip="" busy
    local extra="{}" mine="" spread=""
    shift 4
    rm -f "${WORK}/load-cpu.times"
    ((TOKENS || ROW_TOKENS)) && tok=()
    log "row: ${name}, c${c}"
    read -r b0 o0 p0 c0 f0 g0 t0 h0 < <(metrics_of "${ROW_URL}" "${MERGE_METRICS[@]}")
    k0=$(redis_calls)
    s0=$(mysql_status)
    measure_begin
    sampler_start
    TICKETD_JWT_SECRET=${JWT_SECRET} TICKETD_PAY_SECRET=${PAY_SECRET} \
        timed "${WORK}/load-cpu" timeout $((DURATION + 60)) "${LOAD}" "${scenario}" --target "${ROW_URL}" \
        "${tok[@]}" --duration "${DURATION}" --requests 5000000 --concurrency "${c}" --settle 0 \
        --no-audit --json "${json}" "$@" >"${WORK}/${scenario}.out" 2>&1 || rc=$?
    measure_end
    sampler_stop
    [[ -s "${json}" ]] || {
        cat "${WORK}/${scenario}.out" >&2
        die "ticketd-load ${scenario} wrote no figures (exit ${rc})"
    }
    # The row's rate is orders created per second, the figure sqlbase's
    # committed transactions per second compare with; latency is that of
    # the order requests alone.
    note="$(jq -r '"\(.orders_created) created" + ([.answers[] | select(.kind == "orders" and .status != 201)
        | "\(.status) \(.code) x\(.count)"] | if length > 0 then "; " + (.[:3] | join(", ")) else "" end)' "${json}")"
    ((rc == 0)) || note="${note}; ticketd-load exit ${rc}"
    # The mean merged batch: orders per order transaction over the row;
    # then how the row's batches spread over the sizes
    # (ticketd_order_batch_size), each range's share of the batches.
    read -r b1 o1 p1 c1 f1 g1 t1 h1 < <(metrics_of "${ROW_URL}" "${MERGE_METRICS[@]}")
    if ((b1 > b0)); then
        BATCH[${key}]=$(awk -v b=$((b1 - b0)) -v o=$((o1 - o0)) 'BEGIN { printf "%.1f", o / b }')
        # Each batch's time at the database (ticketd_order_batch_seconds),
        # and all the batches' time over the row's: one batch is at the
        # database at a time, so near 100% the batches' own time paces the
        # orders; above it, full batches went beside one another.
        busy=$(jq -r --argjson t0 "${t0}" --argjson t1 "${t1}" --argjson b $((b1 - b0)) \
            '"\(($t1 - $t0) * 1000 / $b * 100 | round / 100) ms each, their time \(
            ($t1 - $t0) / .elapsed_s * 100 | round)% of the row'"'"'s"' "${json}")
        note="${note}; batches: mean ${BATCH[${key}]}, ${busy}"
        spread=$(batch_spread "${h0}" "${h1}")
        if [[ -n "${spread}" ]]; then
            note="${note}; ${spread%%|*}"
            extra=$(jq -c --argjson s "${spread#*|}" '. + {batch_size_share: $s}' <<<"${extra}")
        fi
        extra=$(jq -c --argjson m "${BATCH[${key}]}" --argjson n $((b1 - b0)) \
            --argjson s "$(awk -v a="${t0}" -v b="${t1}" 'BEGIN { printf "%.6f", b - a }')" \
            '. + {batch_mean: $m, batches: $n, batch_seconds: $s}' <<<"${extra}")
    else
        note="${note}; one order per transaction"
    fi
    # The mean Redis pipeline: commands per write (ticketd_redis_pipelines_total).
    if ((p1 > p0)); then
        note="${note}; Redis pipeline $(awk -v p=$((p1 - p0)) -v c=$((c1 - c0)) 'BEGIN { printf "%.1f", c / p }')"
    fi
    # Script calls folded (ticketd_redis_folds_total): a turn's calls of
    # one script sent as one call; the mean calls per fold.
    if ((f1 > f0)); then
        note="${note}, $((f1 - f0)) folds of $(awk -v f=$((f1 - f0)) -v g=$((g1 - g0)) 'BEGIN { printf "%.1f", g / f }') calls"
    fi
    # Redis per new order: the commands Redis ran (INFO commandstats, the
    # whole server: the row's ticketd, the idle one's background jobs and
    # the load's control requests included), and the round trips, the
    # replies ticketd's requests waited for: the commands its loops sent
    # (ticketd_redis_pipelined_commands_total), a fold counted as the calls
    # it carried, each a request's wait (with --tokens, the SET of POST
    # /tokens is one of them).
    k1=$(redis_calls)
    orders=$(jq -r '.orders_created' "${json}")
    if ((orders > 0)); then
        [[ -n "${k0}" && -n "${k1}" ]] && rcmd=$(per $((k1 - k0)) "${orders}")
        rtrip=$(per $((c1 - c0 - (f1 - f0) + g1 - g0)) "${orders}")
        note="${note}; Redis per order: ${rcmd:--} commands, ${rtrip} round trips"
        # MariaDB per new order: SHOW GLOBAL STATUS deltas of the run's
        # own server (--start only), the whole server as for Redis: the
        # load's sessions made before it and the idle instance included.
        s1=$(mysql_status)
        mine=$(mysql_per_order "${s0}" "${s1}" "${orders}")
        if [[ -n "${mine}" ]]; then
            note="${note}; ${mine%%|*}"
            extra=$(jq -c --argjson s "${mine#*|}" '. + $s' <<<"${extra}")
        fi
    fi
    # ticketd-load creates its sessions before the load and reads them
    # after it: ticketd's and MariaDB's CPU per request is taken over the
    # load alone, from the samples within it, at the load's rate of
    # answered requests. The whole run (control requests included) only if
    # the load was too short for two samples a second apart.
    n=$(jq -r '.requests.total - .transport_errors' "${json}")
    read -r from to rate < <(jq -r '"\(.started_unix) \(.started_unix + .elapsed_s) \(
        (.requests.total - .transport_errors) / (if .elapsed_s > 0 then .elapsed_s else 1 end))"' "${json}")
    td=$(window_us "${from}" "${to}" 2 "${rate}")
    my=$(window_us "${from}" "${to}" 3 "${rate}")
    rd=$(window_us "${from}" "${to}" 4 "${rate}")
    if [[ -z "${td}" || -z "${my}" ]]; then
        n=$(jq -r '.requests.total + .requests.control - .transport_errors' "${json}")
        td=$(us_per "${CPU_T}" "${n}")
        my=$(us_per "${CPU_M}" "${n}")
        rd=$(us_per "${CPU_R}" "${n}")
        note="${note}; CPU over the whole run"
    fi
    # The context switches split: those ticketd's threads chose (a loop
    # that sleeps in epoll_wait) and those the scheduler imposed (a thread
    # runnable while MariaDB, Redis or the load tool took its core).
    if [[ -n "${CSW}" && -n "${PRE}" ]] && ((orders > 0)); then
        note="${note}; context switches per order: $(per $((CSW - PRE)) "${orders}") waiting, $(per "${PRE}" "${orders}") preempted"
    fi
    # ticketd's system calls per new order (perf stat, when it can attach).
    if [[ -n "${SYSCALLS}" ]] && ((orders > 0)); then
        note="${note}; system calls per order: $(per "${SYSCALLS}" "${orders}")"
    fi
    row "${key}" "${name}" ticketd-load "${c}" "$(jq -r '(.orders_created / .elapsed_s) | floor' "${json}")" \
        "$(jq -r '.latency_ms_by_kind.orders.p50 * 100 | round / 100' "${json}")" \
        "$(jq -r '.latency_ms_by_kind.orders.p99 * 100 | round / 100' "${json}")" "${n}" "${td}" "${my}" \
        "$(us_per_s "$(cpu_s "${WORK}/load-cpu")" "${n}")" "${RSS_MAX}" "${RSS_AFTER}" "${PEERS}" "${note}" \
        "${rd}" "$(per "${CSW}" "${orders}")" "${rcmd}" "${rtrip}" "${extra}"
}

# sql_row KEY NAME CONNS SQLBASE-ARGS...
sql_row() {
    local key=$1 name=$2 c=$3 out n
    shift 3
    rm -f "${WORK}/load-cpu.times"
    log "row: ${name}, c${c}"
    measure_begin
    out=$(timed "${WORK}/load-cpu" timeout $((DURATION + 60)) "${SQLBASE}" --host "${MYSQL_HOST}" \
        --port "${MYSQL_PORT}" ${SQL_SOCKET:+--socket "${SQL_SOCKET}"} --user "${MYSQL_USER}" \
        --password "${MYSQL_PASSWORD}" --db "${MYSQL_DB}" \
        --connections "${c}" --duration "${DURATION}" --quiet "$@" 2>&1) || die "sqlbase failed: ${out}"
    measure_end
    out=$(grep '^sqlbase tps=' <<<"${out}")
    n=$(sed -E 's/.*committed=([0-9]+).*/\1/' <<<"${out}")
    # ticketd only idles meanwhile: no CPU, RSS or connections of its own.
    row "${key}" "${name}" sqlbase "${c}" "$(sed -E 's/.*tps=([0-9.]+).*/\1/' <<<"${out}")" \
        "$(sed -E 's/.*p50_ms=([0-9.]+).*/\1/' <<<"${out}")" \
        "$(sed -E 's/.*p99_ms=([0-9.]+).*/\1/' <<<"${out}")" "${n}" \
        "" "$(us_per "${CPU_M}" "${n}")" "$(us_per_s "$(cpu_s "${WORK}/load-cpu")" "${n}")" "" "" "" \
        "$(sed -E 's/.*failed=([0-9]+).*/\1 failed/' <<<"${out}")"
}

# --- the rows ----------------------------------------------------------------

log "measuring ${URL}, ${DURATION} s per row, connections ${LEVELS[*]}"

# ticketd's RSS before any row, split: the pages of the shared libraries it
# maps (RssFile: libcrypto, libc, GnuTLS under libmicrohttpd...), which the
# RSS figures count but no setting of ticketd changes, and its own memory
# (RssAnon). What a row adds on top is its own.
IDLE_RSS_FILE=""
IDLE_RSS_ANON=""
if [[ -n "${PID}" ]]; then
    IDLE_RSS_FILE=$(awk '/^RssFile:/ {print $2}' "/proc/${PID}/status" 2>/dev/null || true)
    IDLE_RSS_ANON=$(awk '/^RssAnon:/ {print $2}' "/proc/${PID}/status" 2>/dev/null || true)
fi

if wanted livez; then
    for c in "${LEVELS[@]}"; do
        wrk_row "livez@${c}" "GET /livez" "${c}" "${URL}/livez"
    done
fi

# One real order first, then replays of exactly that request.
ADMIN_JWT=$(jwt 1 admin)
session=$(curl -fsS --max-time 5 -H "Authorization: Bearer ${ADMIN_JWT}" -H 'Content-Type: application/json' \
    -d '{"title":"bench replay","price_cents":1000,"stock":1000}' "${URL}/api/v1/sessions" | jq -r .id) ||
    die "cannot create a session (POST /api/v1/sessions)"
user=$(($(date +%s) * 100 + 7))
BENCH_JWT=$(jwt "${user}")
BENCH_KEY="bench-replay-$(date +%s)-$$"
BENCH_TOKEN=""
BENCH_BODY=$(printf '{"session_id":%s,"quantity":1}' "${session}")
BENCH_TOKEN=$(curl -fsS --max-time 5 -X POST -H "Authorization: Bearer ${BENCH_JWT}" \
    -H 'Content-Type: application/json' "${URL}/api/v1/tokens" | jq -r '.token // empty') || true
status=$(curl -sS -o "${WORK}/first.json" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer ${BENCH_JWT}" \
    -H 'Content-Type: application/json' -H "Idempotency-Key: ${BENCH_KEY}" \
    ${BENCH_TOKEN:+-H "X-Order-Token: ${BENCH_TOKEN}"} -d "${BENCH_BODY}" "${URL}/api/v1/orders")
[[ "${status}" == 201 ]] || die "the first order answered ${status}: $(cat "${WORK}/first.json")"
export BENCH_JWT BENCH_KEY BENCH_TOKEN BENCH_BODY
if wanted replay; then
    for c in "${LEVELS[@]}"; do
        wrk_row "replay@${c}" "replay of one completed key" "${c}" -s "${HERE}/wrk/replay.lua" "${URL}/api/v1/orders"
    done
fi

# metrics_of URL NAME...: one sample of a ticketd's /metrics, the value of
# each NAME on one line in the order given (0 when absent).
metrics_of() {
    local url=$1
    shift
    curl -fsS --max-time 5 "${url}/metrics" 2>/dev/null | awk -v names="$*" '
        BEGIN { n = split(names, want, " ") }
        { v[$1] = $2 }
        END { for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), v[want[i]] + 0; print "" }'
}
# The merged batches and the Redis pipelines of a new-order row.
MERGE_METRICS=(ticketd_order_batches_total ticketd_order_batch_orders_total
    ticketd_redis_pipelines_total ticketd_redis_pipelined_commands_total
    ticketd_redis_folds_total ticketd_redis_folded_calls_total
    ticketd_order_batch_seconds_sum)
for le in "${BATCH_LE[@]}"; do
    MERGE_METRICS+=("ticketd_order_batch_size_bucket{le=\"${le}\"}")
done

declare -A BATCH=()
# The order rows, one connection count at a time: at each count, the rows
# a target divides run next to each other (new orders, then with the
# token, with TICKETD_MERGE=0 and as sqlbase; then the hot session, with
# TICKETD_MERGE=0 and as sqlbase). This VM's speed drifts within a run, by
# a third between two rows minutes apart, and each row adds its orders to
# the tables the next ones write to; run by kind, the two rows of a ratio
# were minutes and tens of thousands of orders apart. The table still
# prints them by kind.
merge0_row() { # KEY NAME C SCENARIO...: a row on the TICKETD_MERGE=0 ticketd
    [[ -n "${OFF_URL}" ]] && wanted merge0 || return 0
    ROW_URL=${OFF_URL} ROW_PID=${OFF_PID}
    load_row "$@"
    ROW_URL=${URL} ROW_PID=${PID}
}
sql_at() { # KEY NAME C SQLBASE-ARGS...: a sqlbase row at the HTTP rows' count C
    wanted sqlbase || return 0
    local sc=$3
    [[ "$3" == "${CONC}" ]] && sc=${CONNS}
    sql_row "$1" "$2" "${sc}" "${@:4}"
}
for c in "${LEVELS[@]}"; do
    if wanted new; then
        load_row "new@${c}" "new orders, ${SESSIONS} sessions" "${c}" new-orders --sessions "${SESSIONS}"
        # With the order token required (--start only): each order fetches
        # its token first (POST /tokens), at the first two counts, the rows
        # the token target compares with "new".
        if [[ -n "${TOK_URL}" ]] && wanted token && [[ " ${LEVELS[*]:0:2} " == *" ${c} "* ]]; then
            ROW_URL=${TOK_URL} ROW_PID=${TOK_PID} ROW_TOKENS=1
            load_row "newtok@${c}" "new, ${SESSIONS} sess, token" "${c}" new-orders --sessions "${SESSIONS}"
            ROW_URL=${URL} ROW_PID=${PID} ROW_TOKENS=0
        fi
        merge0_row "newoff@${c}" "new, ${SESSIONS} sess, MERGE=0" "${c}" new-orders --sessions "${SESSIONS}"
    fi
    sql_at "sql@${c}" "sqlbase, ${SESSIONS} sessions" "${c}" --sessions "${SESSIONS}"
    if wanted hot; then
        load_row "hot@${c}" "new orders, one hot session" "${c}" hot-session
        merge0_row "hotoff@${c}" "new, hot, MERGE=0" "${c}" hot-session
    fi
    sql_at "sqlhot@${c}" "sqlbase, one hot session" "${c}" --hot
done

# --- the flash sale ------------------------------------------------------------

# One session of FLASH_SEATS seats, FLASH_USERS buyers with a token each,
# every buyer's order sent FLASH_COPIES times, FLASH_CONC at once, on the
# merged ticketd and on the TICKETD_MERGE=0 one. The audit is the
# database's: exactly the seats sold, no buyer with more than one order.
declare -A FLASH=()
flash_row() {
    local key=$1 url=$2 pid=$3 json=${WORK}/flash-$1.json rc=0 session sold users_over t0 t1 m0 m1 r0 r1
    log "flash sale (${key}): ${FLASH_SEATS} seats, ${FLASH_USERS} buyers x ${FLASH_COPIES}, c${FLASH_CONC}"
    t0=$(cpu_ticks "${pid}")
    m0=$(cpu_ticks "${MYSQL_PID}")
    r0=$(cpu_ticks "${REDIS_PID}")
    TICKETD_JWT_SECRET=${JWT_SECRET} TICKETD_PAY_SECRET=${PAY_SECRET} \
        timeout 300 "${LOAD}" flash-sale --target "${url}" --users "${FLASH_USERS}" \
        --seats "${FLASH_SEATS}" --copies "${FLASH_COPIES}" --concurrency "${FLASH_CONC}" \
        --requests 1000000 --duration 240 --settle 0 --no-audit --json "${json}" \
        >"${WORK}/flash-${key}.out" 2>&1 || rc=$?
    t1=$(cpu_ticks "${pid}")
    m1=$(cpu_ticks "${MYSQL_PID}")
    r1=$(cpu_ticks "${REDIS_PID}")
    [[ -s "${json}" ]] || {
        cat "${WORK}/flash-${key}.out" >&2
        die "ticketd-load flash-sale wrote no figures (exit ${rc})"
    }
    session=$(jq -r '.figures["flash_sale.session"] // 0' "${json}")
    read -r sold users_over < <(sql_query "SELECT COALESCE(SUM(n), 0), COALESCE(SUM(n > 1), 0) FROM (SELECT user_id, SUM(quantity) n FROM orders WHERE session_id = ${session} GROUP BY user_id) u")
    FLASH[${key}]=$(jq -r --arg sold "${sold:-?}" --arg over "${users_over:-?}" --arg rc "${rc}" \
        --arg td "$(us_per "$((t1 - t0))" "${FLASH_SEATS}")" --arg my "$(us_per "$((m1 - m0))" "${FLASH_SEATS}")" \
        --arg rd "$(us_per "$((r1 - r0))" "${FLASH_SEATS}")" \
        '.figures as $f | "\($f["flash_sale.requests"] // 0) requests: sold out after \(($f["flash_sale.sold_out_ms"] // 0) / 1000) s, \($f["flash_sale.orders_per_s"] // "-") orders/s until then, \($f["flash_sale.answers_per_s_after"] // "-") answers/s after, p99 \(.latency_ms_by_kind.orders.p99 * 100 | round / 100) ms; sold \($sold) of \($f["flash_sale.seats"]), users over one order \($over); CPU us per seat sold ticketd \($td), MariaDB \($my), Redis \($rd); ticketd-load exit \($rc)"' "${json}")
    log "flash sale (${key}): ${FLASH[${key}]}"
}

# sql_query SQL: one row of MariaDB's answer, tab-separated.
sql_query() {
    local sock=()
    [[ -n "${SQL_SOCKET}" ]] && sock=(--socket="${SQL_SOCKET}")
    mariadb --no-defaults -h "${MYSQL_HOST}" -P "${MYSQL_PORT}" "${sock[@]}" -u "${MYSQL_USER}" \
        -p"${MYSQL_PASSWORD}" -D "${MYSQL_DB}" --batch --skip-column-names -e "$1" 2>/dev/null | head -n 1
}

if ! wanted flash; then
    :
elif command -v mariadb >/dev/null; then
    flash_row merged "${URL}" "${PID}"
    [[ -n "${OFF_URL}" ]] && flash_row merge0 "${OFF_URL}" "${OFF_PID}"
else
    log "flash sale skipped: no mariadb client for its audit"
fi

# --- refusal storms: what the order-key filter saves ------------------------

# metric NAME: one sample of ticketd's /metrics (0 when absent).
metric() {
    curl -fsS --max-time 5 "${URL}/metrics" | awk -v n="$1" '$1 == n { v = $2 } END { print v + 0 }'
}

# Orders under new keys for a user whose session another request holds:
# every one is refused by Redis, and ticketd asks, before each refusal,
# whether the key has an order. Two rows: the filter trusted, and the
# filter's state deleted (as after Redis lost its records), where every
# refusal asks the database as it would without a filter. The figure is
# database look-ups per 1,000 refusals. --start only: it needs the private
# Redis, and a ticketd that does not rebuild the filter between the rows.
refusal_rows() {
    local session user lookups refused label
    ((START)) || {
        log "refusal storms skipped: they need --start"
        return 0
    }
    session=$(curl -fsS --max-time 5 -H "Authorization: Bearer ${ADMIN_JWT}" -H 'Content-Type: application/json' \
        -d '{"title":"bench refusals","price_cents":1000,"stock":10}' "${URL}/api/v1/sessions" | jq -r .id) ||
        die "cannot create a session"
    user=$(($(date +%s) * 100 + 9))
    redis-cli -p "${BENCH_REDIS_PORT}" SET "lock:order:{${user}}:${session}" bench-holder PX 3600000 >/dev/null ||
        die "cannot hold the session in Redis"
    BENCH_JWT=$(jwt "${user}") BENCH_BODY=$(printf '{"session_id":%s,"quantity":1}' "${session}")
    export BENCH_JWT BENCH_BODY
    for label in trusted untrusted; do
        [[ "${label}" == untrusted ]] && redis-cli -p "${BENCH_REDIS_PORT}" DEL 'ticketd:bloom:{orders}:state' >/dev/null
        lookups=$(metric ticketd_refusal_db_lookups_total)
        refused=$(metric 'ticketd_duplicates_blocked_total{layer="session-lock"}')
        wrk_row "refuse-${label}@${CONC}" "refusals, filter ${label}" "${CONC}" -s "${HERE}/wrk/refusals.lua" "${URL}"
        lookups=$(($(metric ticketd_refusal_db_lookups_total) - lookups))
        refused=$(($(metric 'ticketd_duplicates_blocked_total{layer="session-lock"}') - refused))
        REFUSAL_LOOKUPS[${label}]=$(awk -v l="${lookups}" -v r="${refused}" 'BEGIN { if (r > 0) printf "%.1f", l * 1000 / r; else print "n/a" }')
        log "refusals, filter ${label}: ${refused} refused, ${lookups} database look-ups"
    done
}
declare -A REFUSAL_LOOKUPS=()
wanted refusals && refusal_rows

# --- floods of connections: memory given back ----------------------------------

# ticketd's RSS idle (no client connection left, bounded wait), then after
# each of FLOODS floods of FLOOD_CONNS connections (loadtest/flood.py: each
# connects, asks /livez, closes), idle again. A server that keeps what a
# flood made it allocate holds it for good; the figure is the RSS idle
# after the floods over the RSS idle before. Needs ticketd's pid.
FLOODS=3
FLOOD_CONNS=5000
FLOOD_RSS=()
FLOOD_NOTE=""
wait_idle() {
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -z "$(peers)" ]] && break
        sleep 0.1
    done
    sleep 1 # the closes' own work, then one quiet second, as the rows' "1 s after"
}
flood_rows() {
    local host port i out
    [[ -n "${PID}" ]] || {
        log "floods skipped: ticketd's pid is not known"
        return 0
    }
    host=${URL#http://}
    port=${host##*:}
    host=${host%%:*}
    wait_idle
    FLOOD_RSS=("$(rss_kb_of "${PID}")")
    for ((i = 1; i <= FLOODS; i++)); do
        out=$(python3 "${HERE}/flood.py" "${host}" "${port}" "${FLOOD_CONNS}" 60)
        wait_idle
        FLOOD_RSS+=("$(rss_kb_of "${PID}")")
        log "flood ${i} of ${FLOODS}: ${out}; ticketd RSS idle ${FLOOD_RSS[${i}]} kB"
        FLOOD_NOTE=${out}
    done
}
wanted floods && flood_rows

# --- the table -----------------------------------------------------------------

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else printf "n/a" }'
}

mb() {
    if [[ -n "$1" ]]; then awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; else printf -- '-'; fi
}

dash() { printf '%s' "${1:--}"; }

printf '\nticketd benchmark: %s, %s s per row, keep-alive connections %s\n' \
    "${URL}" "${DURATION}" "${LEVELS[*]}"
if ((START)); then
    printf 'ticketd --start: TICKETD_LOOPS=%s TICKETD_MAX_FIBERS=%s TICKETD_DB_CONNS=%s (the TICKETD_MERGE=0 instance: the same)\n' \
        "${LOOPS}" "${MAX_FIBERS}" "${DB_CONNS}"
    if ((UNIX)); then
        printf 'Redis and MariaDB: through their Unix sockets (--unix), for ticketd and sqlbase\n'
    else
        printf 'Redis and MariaDB: TCP over loopback, for ticketd and sqlbase (--unix: their Unix sockets)\n'
    fi
fi
[[ "${CONNS}" != "${CONC}" ]] && printf 'sqlbase rows at c%s use %s connections (--connections)\n' "${CONC}" "${CONNS}"
printf 'CPU: us per request answered, utime+stime of ticketd (pid %s), MariaDB (pid %s) and the load tool\n' \
    "$(dash "${PID}")" "$(dash "${MYSQL_PID}")"
printf 'RSS: ticketd VmRSS max during the row / 1 s after; conns: client connections ticketd had open (ss, every 0.2 s)\n'
printf 'csw: context switches of ticketd'"'"'s threads (voluntary + not, /proc/PID/task/*/status) over the row, per request; per new order on the order rows, whose note splits them: waiting (the thread slept) and preempted (runnable, its core taken)\n'
printf 'system calls (in the note, when perf can attach): ticketd'"'"'s threads'"'"' system calls over the row (perf stat, raw_syscalls:sys_enter), per request on the wrk rows, per new order on the order rows\n'
printf 'Redis per order (order rows): commands Redis ran (INFO commandstats, a script'"'"'s inner commands counted) and round trips (commands whose reply a request waited for)\n'
printf 'MariaDB per order (order rows, --start): SHOW GLOBAL STATUS deltas over the row: statements clients sent (Questions), the CALLs and COMMITs among them, table rows inserted, updated and deleted (Handler_write/_update/_delete, a trigger'"'"'s rows included)\n'
printf 'batches (order rows): the mean merged batch (orders per order transaction), its mean time at the database and all batches'"'"' time over the row'"'"'s (ticketd_order_batch_seconds; one at a time below 100%%), then each range of sizes'"'"' share of the row'"'"'s batches (ticketd_order_batch_size)\n'
printf '\n%-28s %-12s %5s %8s %8s %8s %8s %8s %8s %8s %6s %11s %5s  %s\n' "row" "tool" "conns" "req/s" "p50 ms" \
    "p99 ms" "ticketd" "mariadb" "redis" "load" "csw" "RSS MB" "seen" "note"
printf '%-28s %-12s %5s %8s %8s %8s %8s %8s %8s %8s %6s %11s %5s\n' "" "" "" "" "" "" "us/req" "us/req" "us/req" \
    "us/req" "/req" "max/after" "conns"
# The rows by kind, each kind by connection count, whatever order they ran
# in; a kind not listed (the refusal storms) after them, as it ran.
PRINTED=()
for kind in livez replay new hot newoff hotoff newtok sql sqlhot; do
    for k in "${ROWS[@]}"; do
        [[ "${k%@*}" == "${kind}" ]] && PRINTED+=("${k}")
    done
done
for k in "${ROWS[@]}"; do
    [[ " ${PRINTED[*]} " == *" ${k} "* ]] || PRINTED+=("${k}")
done
for k in "${PRINTED[@]}"; do
    IFS='|' read -r name tool c rps p50 p99 td my ld rmax rafter peers note rd csw <<<"${ROW_LINE[${k}]}"
    rss="-"
    [[ -n "${rmax}${rafter}" ]] && rss="$(mb "${rmax}")/$(mb "${rafter}")"
    printf '%-28s %-12s %5s %8s %8s %8s %8s %8s %8s %8s %6s %11s %5s  %s\n' "${name}" "${tool}" "${c}" "${rps}" \
        "${p50}" "${p99}" "$(dash "${td}")" "$(dash "${my}")" "$(dash "${rd}")" "$(dash "${ld}")" \
        "$(dash "${csw}")" "${rss}" "$(dash "${peers}")" "${note}"
done

# target NAME VALUE OP LIMIT: one line of the targets, met or missed.
TARGETS=()
target() {
    local verdict
    verdict=$(awk -v v="$2" -v op="$3" -v l="$4" 'BEGIN {
        if (v == "" || v == "n/a" || v == "-") { print "n/a"; exit }
        ok = (op == ">=") ? (v + 0 >= l + 0) : (v + 0 <= l + 0)
        print ok ? "met" : "missed"
    }')
    TARGETS+=("$1|$(dash "$2")|$3|$4|${verdict}")
}

# The first two connection counts (c16 and c64 by default): the counts the
# targets name.
C1=${CONC}
C2=${LEVELS[1]:-}
# New orders against the bare one-order transaction, the same connections.
target "new orders / sqlbase, ${SESSIONS} sessions, c${C1}" \
    "$(ratio "${RPS["new@${C1}"]:-}" "${RPS["sql@${C1}"]:-}")" ">=" "${T_NEW_OVER_SQL_FIRST}"
if [[ -n "${C2}" ]]; then
    target "new orders / sqlbase, ${SESSIONS} sessions, c${C2}" \
        "$(ratio "${RPS["new@${C2}"]:-}" "${RPS["sql@${C2}"]:-}")" ">=" "${T_NEW_OVER_SQL}"
    target "new orders / sqlbase, hot session, c${C2}" \
        "$(ratio "${RPS["hot@${C2}"]:-}" "${RPS["sqlhot@${C2}"]:-}")" ">=" "${T_HOT_OVER_SQL}"
fi
# The machine's CPU per new order, ticketd + MariaDB + Redis, merged
# against TICKETD_MERGE=0's, the same build in the same run; the hot
# session's ratio is shown with the same target.
machine_ratio() {
    awk -v t="${CPU_TD[$1]:-}" -v m="${CPU_MY[$1]:-}" -v r="${CPU_RD[$1]:-}" \
        -v t0="${CPU_TD[$2]:-}" -v m0="${CPU_MY[$2]:-}" -v r0="${CPU_RD[$2]:-}" 'BEGIN {
        if (t == "" || m == "" || t0 == "" || m0 == "" || t0 + m0 + r0 <= 0) { printf "n/a"; exit }
        printf "%.2f", (t + m + r) / (t0 + m0 + r0)
    }'
}
for c in ${C1} ${C2}; do
    want=${T_MACHINE_OVER_OFF}
    [[ "${c}" == "${C1}" ]] && want=${T_MACHINE_OVER_OFF_FIRST}
    target "CPU/order (td+db+redis) / MERGE=0's, ${SESSIONS} s, c${c}" \
        "$(machine_ratio "new@${c}" "newoff@${c}")" "<=" "${want}"
    target "CPU/order (td+db+redis) / MERGE=0's, hot, c${c}" \
        "$(machine_ratio "hot@${c}" "hotoff@${c}")" "<=" "${want}"
done
# Redis per new order: the round trips ticketd's loops awaited and the
# commands Redis ran (INFO commandstats), on the default path (the token
# required: the "token" rows) and without the token.
for k in "newtok@${C1}" ${C2:+"newtok@${C2}"} "new@${C1}" ${C2:+"new@${C2}"}; do
    what="${SESSIONS} s"
    [[ "${k}" == newtok@* ]] && what="${SESSIONS} s, token"
    target "Redis round trips per new order, ${what}, c${k#*@}" "${RTRIP[${k}]:-}" "<=" "${T_REDIS_TRIPS}"
    target "Redis commands per new order, ${what}, c${k#*@}" "${RCMD[${k}]:-}" "<=" "${T_REDIS_CMDS}"
done
# Context switches per new order at the first count.
for k in "new@${C1}" "hot@${C1}"; do
    what="${SESSIONS} s"
    [[ "${k}" == hot@* ]] && what="hot"
    target "ticketd context switches per new order, ${what}, c${k#*@}" "${CSW_TD[${k}]:-}" "<=" \
        "${T_CSW_PER_ORDER}"
done
# ticketd's CPU per new order against its CPU per replay, at the first count.
target "ticketd CPU per new order / per replay, ${SESSIONS} s, c${C1}" \
    "$(ratio "${CPU_TD["new@${C1}"]:-}" "${CPU_TD["replay@${C1}"]:-}")" "<=" "${T_CPU_NEW_OVER_REPLAY}"
for c in "${LEVELS[@]}"; do
    target "new orders p99 / sqlbase p99, ${SESSIONS} sessions, c${c}" \
        "$(ratio "${P99["new@${c}"]:-}" "${P99["sql@${c}"]:-}")" "<=" "${T_P99_OVER_SQL}"
done
for c in "${LEVELS[@]}"; do
    target "new orders p99 / sqlbase p99, hot session, c${c}" \
        "$(ratio "${P99["hot@${c}"]:-}" "${P99["sqlhot@${c}"]:-}")" "<=" "${T_P99_OVER_SQL}"
done
rss_max=$(jq -s '[.[].rss_max_kb | select(. != null)] | if length > 0 then max / 1024 * 10 | round / 10 else "n/a" end' \
    "${WORK}/rows.jsonl")
target "ticketd RSS MB, max over every row" "${rss_max}" "<=" "${T_RSS_MB}"
# With the order token required, the same rows' orders/s against without.
for c in ${C1} ${C2}; do
    target "orders/s token required / without, ${SESSIONS} s, c${c}" \
        "$(ratio "${RPS["newtok@${c}"]:-}" "${RPS["new@${c}"]:-}")" ">=" "${T_TOKEN_OVER_NONE}"
done

printf '\n%-52s %8s %10s  %s\n' "ratio / figure" "value" "target" "verdict"
met=0
missed=0
for t in "${TARGETS[@]}"; do
    IFS='|' read -r name value op limit verdict <<<"${t}"
    printf '%-52s %8s %10s  %s\n' "${name}" "${value}" "${op} ${limit}" "${verdict}"
    [[ "${verdict}" == met ]] && met=$((met + 1))
    [[ "${verdict}" == missed ]] && missed=$((missed + 1))
done
printf '\ntargets: %d met, %d missed\n' "${met}" "${missed}"
# What each orders/s target over sqlbase asks of the machine: the orders/s
# it names, and the cores those orders would keep busy at the row's own CPU
# per order (ticketd, MariaDB, Redis and the load tool share the machine),
# against the cores there are. A target that needs more cores than the
# machine has can be met only by a cheaper order, not by less waiting.
budget() {
    local what=$1 key=$2 base=$3 want=$4
    [[ -n "${RPS[${key}]:-}" && -n "${RPS[${base}]:-}" && -n "${CPU_TD[${key}]:-}" ]] || return 0
    awk -v what="${what}" -v want="${want}" -v cores="$(nproc)" \
        -v rps="${RPS[${key}]}" -v td="${CPU_TD[${key}]}" -v my="${CPU_MY[${key}]:-0}" \
        -v rd="${CPU_RD[${key}]:-0}" -v ld="${CPU_LD[${key}]:-0}" \
        -v srps="${RPS[${base}]}" -v smy="${CPU_MY[${base}]:-0}" -v sld="${CPU_LD[${base}]:-0}" 'BEGIN {
        goal = want * srps
        us = td + my + rd + ld
        printf "%-36s %7.0f %7.0f %6.0f %5.2f %5.2f %5.2f %5.2f %6.0f %5.2f\n", what, goal, rps, us,
            rps * us / 1e6, goal * us / 1e6, goal * (my + ld) / 1e6, cores / us * 1e6 / srps,
            smy + sld, srps * (smy + sld) / 1e6
    }'
}
if [[ -n "${C2}" && -n "${RPS["new@${C1}"]:-}" ]]; then
    printf '\nwhat the orders/s targets over sqlbase ask of the machine (%s cores), at each row'"'"'s CPU per order (us: ticketd + MariaDB + Redis + load tool)\n' "$(nproc)"
    printf '%-36s %7s %7s %6s %5s %5s %5s %5s %6s %5s\n' "row" "target" "made" "us" "cores" "cores" \
        "db+ld" "reach" "sqlbase" "sqlbase"
    printf '%-36s %7s %7s %6s %5s %5s %5s %5s %6s %5s\n' "" "ord/s" "ord/s" "/order" "made" "target" \
        "target" "ratio" "us/tx" "cores"
    budget "new orders, ${SESSIONS} sessions, c${C1}" "new@${C1}" "sql@${C1}" "${T_NEW_OVER_SQL_FIRST}"
    budget "new orders, ${SESSIONS} sessions, c${C2}" "new@${C2}" "sql@${C2}" "${T_NEW_OVER_SQL}"
    budget "new orders, hot session, c${C2}" "hot@${C2}" "sqlhot@${C2}" "${T_HOT_OVER_SQL}"
fi
for k in merged merge0; do
    [[ -n "${FLASH[${k}]:-}" ]] || continue
    printf '\nflash sale (%s), %s seats, %s buyers x %s copies, c%s: %s\n' "${k}" "${FLASH_SEATS}" \
        "${FLASH_USERS}" "${FLASH_COPIES}" "${FLASH_CONC}" "${FLASH[${k}]}"
done
if ((${#FLOOD_RSS[@]} > 1)); then
    printf '\nfloods, %s x %s connections (each asks /livez): ticketd RSS idle %s MB before, then %s MB (MB after each); the last: %s\n' \
        "${FLOODS}" "${FLOOD_CONNS}" "$(mb "${FLOOD_RSS[0]}")" \
        "$(for r in "${FLOOD_RSS[@]:1}"; do printf '%s ' "$(mb "${r}")"; done | sed 's/ $//')" "${FLOOD_NOTE}"
fi
if [[ -n "${IDLE_RSS_FILE}" ]]; then
    printf '\nticketd RSS before the rows: %s MB of shared library pages (RssFile), %s MB of its own (RssAnon)\n' \
        "$(mb "${IDLE_RSS_FILE}")" "$(mb "${IDLE_RSS_ANON}")"
fi
if ((${#REFUSAL_LOOKUPS[@]} > 0)); then
    printf '\nrefusal storms, c%s: database look-ups per 1,000 refusals: filter trusted %s, untrusted (as without a filter) %s\n' \
        "${CONC}" "${REFUSAL_LOOKUPS[trusted]}" "${REFUSAL_LOOKUPS[untrusted]}"
fi

if [[ -n "${JSON_OUT}" ]]; then
    for t in "${TARGETS[@]}"; do
        IFS='|' read -r name value op limit verdict <<<"${t}"
        jq -n -c --arg name "${name}" --argjson value "$(num "${value}")" --arg op "${op}" \
            --argjson limit "${limit}" --arg verdict "${verdict}" \
            '{name: $name, value: $value, op: $op, target: $limit, verdict: $verdict}'
    done >"${WORK}/targets.jsonl"
    jq -n --arg url "${URL}" --argjson duration "${DURATION}" --argjson conc "${CONC}" \
        --argjson conns "${CONNS}" --argjson sessions "${SESSIONS}" \
        --argjson levels "$(printf '%s\n' "${LEVELS[@]}" | jq -s .)" \
        --arg fibers "${MAX_FIBERS}" --arg loops "${LOOPS}" \
        --argjson start "${START}" \
        --arg replay "$(ratio "${RPS["replay@${CONC}"]:-}" "${RPS["livez@${CONC}"]:-}")" \
        --arg new "$(ratio "${RPS["new@${CONC}"]:-}" "${RPS["sql@${CONC}"]:-}")" \
        --arg hot "$(ratio "${RPS["hot@${CONC}"]:-}" "${RPS["sqlhot@${CONC}"]:-}")" \
        --slurpfile rows "${WORK}/rows.jsonl" --slurpfile targets "${WORK}/targets.jsonl" \
        '{url: $url, duration_s: $duration, concurrency: $conc, sql_connections: $conns,
          sessions: $sessions, connection_levels: $levels,
          ticketd: (if $start == 1 then {loops: $loops, max_fibers: $fibers} else null end),
          rows: $rows,
          ratios: {replay_over_livez: $replay, new_orders_over_sqlbase: $new, hot_over_sqlbase_hot: $hot},
          targets: $targets}' >"${JSON_OUT}"
fi
