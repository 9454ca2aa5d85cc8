#!/usr/bin/env bash
# The figures of docs/scaling.md: orders per second with three `ticketd
# serve` on one MariaDB server, on a 3-node Galera cluster with every
# instance writing to its own node, and on the cluster with every instance
# writing to one node (the single-writer routing a proxy would do), for many
# sessions and for one hot session; with the certification conflicts each
# costs. One table on stdout; logs under build/cluster-bench.
#
#   scripts/cluster-bench.sh [SECONDS]     (default 10 per row)
#
# Starts and stops its own servers: the cluster of scripts/cluster.sh under
# .state/cluster and one plain MariaDB + Redis of scripts/services.sh under
# .state/cluster-single (ports 23606 and 26679). Everything it started is
# stopped at the end, by pid, even on failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECS=${1:-10}
STATE=.state/cluster
SINGLE=.state/cluster-single
SINGLE_MYSQL=${TICKETD_BENCH_SINGLE_MYSQL_PORT:-23606}
SINGLE_REDIS=${TICKETD_BENCH_SINGLE_REDIS_PORT:-26679}
HTTP_PORTS=(22080 22081 22082)
LOGS=${ROOT}/build/cluster-bench
LOAD=${ROOT}/build/loadtest/ticketd-load
TICKETD=${ROOT}/build/release/ticketd
CL=${ROOT}/scripts/cluster.sh
mkdir -p "${LOGS}"

export TICKETD_JWT_SECRET TICKETD_PAY_SECRET
TICKETD_JWT_SECRET=$(openssl rand -hex 32)
TICKETD_PAY_SECRET=$(openssl rand -hex 32)

PIDS=()
stop_instances() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "${pid}" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "${pid}" 2>/dev/null || true; done
    PIDS=()
}
cleanup() {
    trap - EXIT INT TERM
    stop_instances
    "${CL}" down "${STATE}" >>"${LOGS}/down.log" 2>&1 || true
    env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST scripts/services.sh down "${SINGLE}" >>"${LOGS}/down.log" 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_instances MYSQL_PORT MYSQL_PORT MYSQL_PORT REDIS_ARGS...
start_instances() {
    local i port ports=("$1" "$2" "$3") redis=("${@:4}")
    for i in 0 1 2; do
        port=${HTTP_PORTS[$i]}
        env -u TICKETD_CONFIG TICKETD_ENV=test TICKETD_PORT="${port}" \
            TICKETD_ACCESS_LOG=0 TICKETD_LOG_LEVEL=warn "${redis[@]}" \
            TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${ports[$i]}" TICKETD_MYSQL_USER=ticketd \
            TICKETD_MYSQL_PASSWORD=ticketd TICKETD_MYSQL_DB=ticketd \
            "${TICKETD}" serve >>"${LOGS}/ticketd-${port}.log" 2>&1 &
        PIDS+=($!)
    done
    for port in "${HTTP_PORTS[@]}"; do
        for _ in $(seq 1 100); do
            curl -fsS -m 1 "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1 && break
            sleep 0.1
        done
    done
}

retries() {
    local p s=0 v
    for p in "${HTTP_PORTS[@]}"; do
        v=$(curl -fsS -m 5 "http://127.0.0.1:${p}/metrics" 2>/dev/null |
            awk -v c="$1" '$1 == "ticketd_transaction_retries_total{cause=\"" c "\"}" {print $2 + 0}')
        s=$((s + ${v:-0}))
    done
    echo "${s}"
}

printf '%-44s %-12s %9s %9s %8s %10s %9s\n' "row" "load" "orders/s" "p99 ms" "5xx" "cert.retr" "deadlock"
row() {
    local name=$1 scen=$2 c0 d0 c1 d1 out
    shift 2
    c0=$(retries certification)
    d0=$(retries deadlock)
    out="${LOGS}/$(tr ' /,' '___' <<<"${name}-${scen}").json"
    "${LOAD}" "${scen}" --duration "${SECS}" --concurrency 24 --sessions 50 --no-audit \
        --target "http://127.0.0.1:${HTTP_PORTS[0]}" --target "http://127.0.0.1:${HTTP_PORTS[1]}" \
        --target "http://127.0.0.1:${HTTP_PORTS[2]}" --json "${out}" "$@" >"${out%.json}.txt" 2>&1
    c1=$(retries certification)
    d1=$(retries deadlock)
    jq -r --arg n "${name}" --arg s "${scen}" --arg c "$((c1 - c0))" --arg d "$((d1 - d0))" \
        '[$n, $s, (.orders_created / .elapsed_s | floor), (.latency_ms_by_kind.orders.p99 // .latency_ms.p99 | . * 100 | floor / 100), .server_errors, $c, $d] | @tsv' \
        "${out}" | awk -F'\t' '{printf "%-44s %-12s %9s %9s %8s %10s %9s\n", $1, $2, $3, $4, $5, $6, $7}'
}

# --- one MariaDB server ---------------------------------------------------------
env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
    scripts/services.sh up "${SINGLE}" "${SINGLE_REDIS}" "${SINGLE_MYSQL}" >"${LOGS}/single-up.log" 2>&1 &&
    scripts/services.sh migrate "${SINGLE}" >>"${LOGS}/single-up.log" 2>&1 || {
    echo "single server did not start (${LOGS}/single-up.log)"
    exit 1
}
start_instances "${SINGLE_MYSQL}" "${SINGLE_MYSQL}" "${SINGLE_MYSQL}" \
    TICKETD_REDIS_HOST=127.0.0.1 TICKETD_REDIS_PORT="${SINGLE_REDIS}"
row "one MariaDB (3 instances)" new-orders
row "one MariaDB (3 instances)" hot-session
stop_instances
env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST scripts/services.sh down "${SINGLE}" >>"${LOGS}/down.log" 2>&1

# --- the Galera cluster ---------------------------------------------------------
"${CL}" up "${STATE}" >"${LOGS}/cluster-up.log" 2>&1 || {
    echo "cluster did not start (${LOGS}/cluster-up.log)"
    exit 1
}
PRIMARY=$("${CL}" primary-port "${STATE}")
TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT=22306 scripts/services.sh migrate >>"${LOGS}/cluster-up.log" 2>&1
SENT=(TICKETD_REDIS_SENTINELS=127.0.0.1:22381,127.0.0.1:22382,127.0.0.1:22383 TICKETD_REDIS_MASTER=ticketd)

start_instances 22306 22307 22308 "${SENT[@]}"
row "Galera, each instance on its own node" new-orders
row "Galera, each instance on its own node" hot-session
stop_instances

start_instances 22306 22306 22306 "${SENT[@]}"
row "Galera, all instances on node 1" new-orders
row "Galera, all instances on node 1" hot-session
stop_instances
: "${PRIMARY}"
