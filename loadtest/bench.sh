#!/usr/bin/env bash
# ticketd side-by-side benchmark: one run, one table.
#
# Usage: loadtest/bench.sh [options]
#
#   --start             start a private stack first and stop it afterwards:
#                       scripts/services.sh up .state/bench 30379 30306, migrate,
#                       build/release/ticketd serve on 127.0.0.1:30080 with
#                       TICKETD_ORDER_TOKEN_REQUIRED=0 (secrets from --config)
#   --url URL           ticketd to measure (default http://127.0.0.1:8080;
#                       with --start http://127.0.0.1:30080)
#   --pid PID           ticketd's process, for its RSS (default: the one --start
#                       started, else `pgrep -f "ticketd serve"` if exactly one)
#   --duration S        seconds per row (default 8; at most 30)
#   --concurrency N     HTTP connections of every load row (default 16)
#   --connections N     sqlbase connections (default: the same as --concurrency)
#   --sessions N        sessions of the "many sessions" rows (default 200)
#   --threads N         wrk threads (default 2)
#   --config FILE       KEY=VALUE file for secrets and MariaDB settings
#                       (default config/ticketd.env); the environment wins
#   --tokens            fetch an order token per new order (for a server that
#                       requires X-Order-Token; figures then include POST /tokens)
#   --json FILE         also write the rows as JSON
#
# Rows: GET /livez (wrk); the replay of one completed order (wrk, same POST
# with its Idempotency-Key, token and body); new orders over many sessions
# and on one hot session (ticketd-load, a new user and key per order); the
# same order transaction straight against MariaDB (sqlbase, many sessions and
# hot). Then the ratios replay/livez and new orders/sqlbase.
#
# The order rows send no X-Order-Token: the server under test must run with
# TICKETD_ORDER_TOKEN_REQUIRED=0 (as --start does), or pass --tokens.
# The MariaDB of sqlbase is TICKETD_MYSQL_HOST/PORT/USER/PASSWORD/DB from the
# environment, else from --config (with --start: the private one).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "${HERE}/.." && pwd)
LOAD=${ROOT}/build/loadtest/ticketd-load
SQLBASE=${ROOT}/build/loadtest/sqlbase
TICKETD=${ROOT}/build/release/ticketd

START=0
URL=""
PID=""
DURATION=8
CONC=16
CONNS=""
SESSIONS=200
THREADS=2
CONFIG=${ROOT}/config/ticketd.env
TOKENS=0
JSON_OUT=""

BENCH_STATE=${ROOT}/.state/bench
BENCH_REDIS_PORT=30379
BENCH_MYSQL_PORT=30306
BENCH_HTTP_PORT=30080

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
    --duration) DURATION=${2:?}; shift ;;
    --concurrency) CONC=${2:?}; shift ;;
    --connections) CONNS=${2:?}; shift ;;
    --sessions) SESSIONS=${2:?}; shift ;;
    --threads) THREADS=${2:?}; shift ;;
    --config) CONFIG=${2:?}; shift ;;
    --tokens) TOKENS=1 ;;
    --json) JSON_OUT=${2:?}; shift ;;
    -h | --help) usage 0 ;;
    *) printf 'bench: unknown option %s\n' "$1" >&2; usage 2 ;;
    esac
    shift
done

for n in "${DURATION}" "${CONC}" "${SESSIONS}" "${THREADS}" ${CONNS:+"${CONNS}"}; do
    [[ "${n}" =~ ^[0-9]+$ ]] && ((n >= 1)) || die "not a positive number: ${n}"
done
((DURATION <= 30)) || die "--duration is at most 30 s per row"
CONNS=${CONNS:-${CONC}}
((THREADS <= CONC)) || THREADS=${CONC}

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

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ticketd-bench.XXXXXX")
STARTED_TICKETD=""
STARTED_SERVICES=0
SAMPLER=""

cleanup() {
    local rc=$?
    if [[ -n "${SAMPLER}" ]]; then
        kill "${SAMPLER}" 2>/dev/null || true
        wait "${SAMPLER}" 2>/dev/null || true
    fi
    if [[ -n "${STARTED_TICKETD}" ]]; then
        kill -TERM "${STARTED_TICKETD}" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "${STARTED_TICKETD}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${STARTED_TICKETD}" 2>/dev/null || true
        wait "${STARTED_TICKETD}" 2>/dev/null || true
    fi
    if ((STARTED_SERVICES)); then
        "${ROOT}/scripts/services.sh" down "${BENCH_STATE}" >/dev/null 2>&1 || true
    fi
    rm -rf "${WORK}"
    exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the private stack -------------------------------------------------------

if ((START)); then
    [[ -x "${TICKETD}" ]] || die "build ticketd first: make build"
    mkdir -p "${BENCH_STATE}"
    log "starting Redis :${BENCH_REDIS_PORT} and MariaDB :${BENCH_MYSQL_PORT} under .state/bench"
    # External-server variables would make services.sh skip the private servers.
    env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
        "${ROOT}/scripts/services.sh" up "${BENCH_STATE}" "${BENCH_REDIS_PORT}" "${BENCH_MYSQL_PORT}" >&2
    STARTED_SERVICES=1
    env -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET TICKETD_MYSQL_PORT="${BENCH_MYSQL_PORT}" \
        "${ROOT}/scripts/services.sh" migrate "${BENCH_STATE}" >&2
    MYSQL_HOST=127.0.0.1
    MYSQL_PORT=${BENCH_MYSQL_PORT}
    URL=${URL:-http://127.0.0.1:${BENCH_HTTP_PORT}}
    if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:${BENCH_HTTP_PORT}/livez" 2>/dev/null; then
        die "something already serves 127.0.0.1:${BENCH_HTTP_PORT}; stop it first"
    fi
    log "starting ticketd on ${URL}"
    env -u TICKETD_MYSQL_SOCKET \
        TICKETD_ENV=dev TICKETD_PORT="${BENCH_HTTP_PORT}" TICKETD_BIND=127.0.0.1 \
        TICKETD_REDIS_HOST=127.0.0.1 TICKETD_REDIS_PORT="${BENCH_REDIS_PORT}" \
        TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${BENCH_MYSQL_PORT}" \
        TICKETD_MYSQL_USER="${MYSQL_USER}" TICKETD_MYSQL_PASSWORD="${MYSQL_PASSWORD}" \
        TICKETD_MYSQL_DB="${MYSQL_DB}" TICKETD_ORDER_TOKEN_REQUIRED=0 \
        TICKETD_JWT_SECRET="${JWT_SECRET}" TICKETD_PAY_SECRET="${PAY_SECRET}" \
        "${TICKETD}" serve --config "${CONFIG}" >"${BENCH_STATE}/ticketd.log" 2>&1 &
    STARTED_TICKETD=$!
    PID=${STARTED_TICKETD}
    ready=0
    for _ in $(seq 1 150); do
        if curl -fsS -o /dev/null --max-time 1 "${URL}/readyz" 2>/dev/null; then
            ready=1
            break
        fi
        kill -0 "${STARTED_TICKETD}" 2>/dev/null || {
            tail -n 20 "${BENCH_STATE}/ticketd.log" >&2
            die "ticketd exited during start-up"
        }
        sleep 0.2
    done
    ((ready)) || die "ticketd not ready after 30 s (see ${BENCH_STATE}/ticketd.log)"
fi

URL=${URL:-http://127.0.0.1:8080}
URL=${URL%/}
curl -fsS -o /dev/null --max-time 2 "${URL}/livez" || die "${URL}/livez does not answer"

if [[ -z "${PID}" ]]; then
    pids=$(pgrep -f "ticketd serve" || true)
    if [[ $(wc -w <<<"${pids}") -eq 1 ]]; then
        PID=${pids}
    else
        log "no single 'ticketd serve' process found (pass --pid): RSS not shown"
    fi
fi

# --- helpers -----------------------------------------------------------------

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

rss_kb() {
    [[ -n "${PID}" && -r "/proc/${PID}/status" ]] || return 0
    awk '/^VmRSS:/ {print $2}' "/proc/${PID}/status" 2>/dev/null || true
}

# The sampler writes ticketd's RSS every 0.2 s while a row runs.
sampler_start() {
    : >"${WORK}/rss"
    [[ -n "${PID}" ]] || return 0
    (
        for _ in $(seq 1 $(((DURATION + 30) * 5))); do
            rss_kb >>"${WORK}/rss"
            sleep 0.2
        done
    ) &
    SAMPLER=$!
}

sampler_stop() {
    if [[ -n "${SAMPLER}" ]]; then
        kill "${SAMPLER}" 2>/dev/null || true
        wait "${SAMPLER}" 2>/dev/null || true
        SAMPLER=""
    fi
    RSS_MAX=$(sort -n "${WORK}/rss" 2>/dev/null | tail -n 1)
    sleep 1
    RSS_AFTER=$(rss_kb)
    RSS_MAX=${RSS_MAX:-}
    RSS_AFTER=${RSS_AFTER:-}
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
declare -A RPS

# row NAME TOOL RPS P50 P99 [RSS_MAX RSS_AFTER] [NOTE]
row() {
    ROWS+=("$1|$2|$3|$4|$5|${6:-}|${7:-}|${8:-}")
    RPS[$1]=$3
}

wrk_row() {
    local name=$1 out rps p50 p99 non2xx note=""
    shift
    sampler_start
    out=$(timeout $((DURATION + 20)) wrk -t"${THREADS}" -c"${CONC}" -d"${DURATION}s" --latency "$@" 2>&1) ||
        die "wrk failed: ${out}"
    sampler_stop
    rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"${out}")
    p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"${out}")")
    p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"${out}")")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"${out}")
    [[ -n "${non2xx}" ]] && note="${non2xx} non-2xx answers"
    grep -q "Socket errors" <<<"${out}" && note="${note:+${note}; }$(grep 'Socket errors' <<<"${out}" | sed 's/^ *//')"
    row "${name}" wrk "${rps:-0}" "${p50}" "${p99}" "${RSS_MAX}" "${RSS_AFTER}" "${note}"
}

load_row() {
    local name=$1 scenario=$2 json=${WORK}/$2.json rc=0 note tok=(--no-token)
    shift 2
    ((TOKENS)) && tok=()
    sampler_start
    TICKETD_JWT_SECRET=${JWT_SECRET} TICKETD_PAY_SECRET=${PAY_SECRET} \
        timeout $((DURATION + 60)) "${LOAD}" "${scenario}" --target "${URL}" "${tok[@]}" \
        --duration "${DURATION}" --requests 5000000 --concurrency "${CONC}" --settle 0 \
        --no-audit --json "${json}" "$@" >"${WORK}/${scenario}.out" 2>&1 || rc=$?
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
    row "${name}" ticketd-load "$(jq -r '(.orders_created / .elapsed_s) | floor' "${json}")" \
        "$(jq -r '.latency_ms_by_kind.orders.p50 * 100 | round / 100' "${json}")" \
        "$(jq -r '.latency_ms_by_kind.orders.p99 * 100 | round / 100' "${json}")" "${RSS_MAX}" "${RSS_AFTER}" "${note}"
}

sql_row() {
    local name=$1 out
    shift
    out=$(timeout $((DURATION + 60)) "${SQLBASE}" --host "${MYSQL_HOST}" --port "${MYSQL_PORT}" \
        --user "${MYSQL_USER}" --password "${MYSQL_PASSWORD}" --db "${MYSQL_DB}" \
        --connections "${CONNS}" --duration "${DURATION}" --quiet "$@" 2>&1) ||
        die "sqlbase failed: ${out}"
    out=$(grep '^sqlbase tps=' <<<"${out}")
    row "${name}" sqlbase "$(sed -E 's/.*tps=([0-9.]+).*/\1/' <<<"${out}")" \
        "$(sed -E 's/.*p50_ms=([0-9.]+).*/\1/' <<<"${out}")" \
        "$(sed -E 's/.*p99_ms=([0-9.]+).*/\1/' <<<"${out}")" "" "" \
        "$(sed -E 's/.*failed=([0-9]+).*/\1 failed/' <<<"${out}")"
}

# --- the rows ----------------------------------------------------------------

log "measuring ${URL}, ${DURATION} s per row, ${CONC} connections"

wrk_row "GET /livez" "${URL}/livez"

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
wrk_row "replay of one completed key" -s "${HERE}/wrk/replay.lua" "${URL}/api/v1/orders"

load_row "new orders, ${SESSIONS} sessions" new-orders --sessions "${SESSIONS}"
load_row "new orders, one hot session" hot-session

sql_row "sqlbase, ${SESSIONS} sessions" --sessions "${SESSIONS}"
sql_row "sqlbase, one hot session" --hot

# --- the table -----------------------------------------------------------------

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'
}

mb() {
    [[ -n "$1" ]] && awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }' || printf -- '-'
}

printf '\nticketd benchmark: %s, %s s per row, %s HTTP connections, %s SQL connections\n' \
    "${URL}" "${DURATION}" "${CONC}" "${CONNS}"
[[ -n "${PID}" ]] && printf 'RSS of pid %s (VmRSS), max during the row / 1 s after\n' "${PID}"
printf '\n%-34s %-13s %10s %9s %9s %16s  %s\n' "row" "tool" "req/s" "p50 ms" "p99 ms" "RSS MB max/after" "note"
for r in "${ROWS[@]}"; do
    IFS='|' read -r name tool rps p50 p99 rmax rafter note <<<"${r}"
    rss="-"
    [[ -n "${rmax}${rafter}" ]] && rss="$(mb "${rmax}")/$(mb "${rafter}")"
    printf '%-34s %-13s %10s %9s %9s %16s  %s\n' "${name}" "${tool}" "${rps}" "${p50}" "${p99}" "${rss}" "${note}"
done

R_REPLAY=$(ratio "${RPS["replay of one completed key"]}" "${RPS["GET /livez"]}")
R_NEW=$(ratio "${RPS["new orders, ${SESSIONS} sessions"]}" "${RPS["sqlbase, ${SESSIONS} sessions"]}")
R_HOT=$(ratio "${RPS["new orders, one hot session"]}" "${RPS["sqlbase, one hot session"]}")
printf '\nratios\n'
printf '  replay / livez                   %s\n' "${R_REPLAY}"
printf '  new orders / sqlbase             %s   (%s sessions)\n' "${R_NEW}" "${SESSIONS}"
printf '  hot-session orders / sqlbase hot %s\n' "${R_HOT}"

if [[ -n "${JSON_OUT}" ]]; then
    {
        printf '{"url": "%s", "duration_s": %s, "concurrency": %s, "sql_connections": %s, "rows": [' \
            "${URL}" "${DURATION}" "${CONC}" "${CONNS}"
        sep=""
        for r in "${ROWS[@]}"; do
            IFS='|' read -r name tool rps p50 p99 rmax rafter note <<<"${r}"
            printf '%s{"row": "%s", "tool": "%s", "rps": %s, "p50_ms": %s, "p99_ms": %s, "rss_max_kb": %s, "rss_after_kb": %s, "note": "%s"}' \
                "${sep}" "${name}" "${tool}" "${rps:-0}" "${p50:-0}" "${p99:-0}" "${rmax:-null}" "${rafter:-null}" "${note}"
            sep=", "
        done
        printf '], "ratios": {"replay_over_livez": "%s", "new_orders_over_sqlbase": "%s", "hot_over_sqlbase_hot": "%s"}}\n' \
            "${R_REPLAY}" "${R_NEW}" "${R_HOT}"
    } | jq . >"${JSON_OUT}"
fi
