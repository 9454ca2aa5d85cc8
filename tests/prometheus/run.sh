#!/usr/bin/env bash
# ticketd's metrics through Prometheus's own tools, against a live process
# (run by scripts/run-tests.sh while the private servers of make test run):
#
#   1. a ticketd (TICKETD_BIN, the ASan build under make test) on
#      TICKETD_TEST_HTTP_PORT against the private Redis and MariaDB;
#   2. a real Prometheus server on 127.0.0.1:TICKETD_TEST_PROM_PORT (29090),
#      its config and data under STATE/prometheus, scraping that ticketd
#      every second and evaluating config/prometheus/alerts.yml;
#   3. a retry storm (ticketd-load retry-storm);
#   4. GET /metrics through `promtool check metrics`;
#   5. the query sum(ticketd_orders_created_total) over the scraped series,
#      from a scrape taken after the storm ended, equals the orders the storm
#      made; every alerting rule was evaluated on those series without error;
#   6. SIGTERM: ticketd exits 0 (no sanitizer report); Prometheus is stopped
#      by its PID.
#
# Every wait is tied to progress (the target reported up, a scrape newer
# than the storm), bounded by a count of polls. Prints ok/FAIL lines and,
# last, "prometheus: N passed, N failed".
#
#   tests/prometheus/run.sh [STATE_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)

STATE=${1:-${TICKETD_TEST_STATE:-.state/test}}
HTTP_PORT=${TICKETD_TEST_HTTP_PORT:-24080}
PROM_PORT=${TICKETD_TEST_PROM_PORT:-29090}
REDIS_PORT=${TICKETD_TEST_REDIS_PORT:-26379}
MYSQL_PORT=${TICKETD_TEST_MYSQL_PORT:-23306}
BIN=${TICKETD_BIN:-${ROOT}/build/asan/ticketd}
LOAD=${ROOT}/build/loadtest/ticketd-load
LOGS=${TICKETD_TEST_LOGS:-${ROOT}/build/test-logs}/prometheus
# The state folder as given: relative to the checkout, or absolute (a
# TICKETD_TEST_STATE under /tmp must not land inside the checkout).
case "${STATE}" in
/*) DIR=${STATE}/prometheus ;;
*) DIR=${ROOT}/${STATE}/prometheus ;;
esac
URL=http://127.0.0.1:${HTTP_PORT}
PROM=http://127.0.0.1:${PROM_PORT}
RULES=${ROOT}/config/prometheus/alerts.yml
STORM_KEYS=30

passed=0
failed=0
TICKETD_PID=
PROM_PID=

ok() {
    passed=$((passed + 1))
    echo "ok    $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL  $*"
}

# SIGTERM, then a bounded wait; returns the exit code (or 1 for none).
stop_pid() {
    local pid=$1 i
    [[ -n "${pid}" ]] || return 0
    kill -TERM "${pid}" 2>/dev/null
    for ((i = 0; i < 300; i++)); do
        kill -0 "${pid}" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "${pid}" 2>/dev/null; then
        kill -KILL "${pid}" 2>/dev/null
        wait "${pid}" 2>/dev/null
        return 1
    fi
    wait "${pid}"
}

finish() {
    local rc
    if [[ -n "${TICKETD_PID}" ]]; then
        stop_pid "${TICKETD_PID}"
        rc=$?
        if [[ ${rc} -eq 0 ]] && ! grep -qE 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error' \
            "${LOGS}/ticketd.log"; then
            ok "SIGTERM: ticketd exited 0, no sanitizer report"
        else
            fail "SIGTERM: ticketd exited ${rc} (see ${LOGS}/ticketd.log)"
        fi
    fi
    stop_pid "${PROM_PID}" >/dev/null 2>&1
    echo "prometheus: ${passed} passed, ${failed} failed"
    [[ ${failed} -eq 0 ]]
    exit
}
trap 'fail "interrupted"; finish' INT TERM

# promql QUERY: the first sample's value and timestamp, "VALUE TIME", or
# nothing (no series yet).
promql() {
    curl -s --max-time 5 "${PROM}/api/v1/query" --data-urlencode "query=$1" |
        jq -r '.data.result[0] // empty | "\(.value[1]) \(.value[0])"' 2>/dev/null
}

target_up() {
    curl -s --max-time 5 "${PROM}/api/v1/targets" |
        jq -e --arg u "${URL}/metrics" '.data.activeTargets[] | select(.scrapeUrl == $u and .health == "up")' \
            >/dev/null 2>&1
}

mkdir -p "${LOGS}"
rm -rf "${DIR}"
mkdir -p "${DIR}/data"
for tool in promtool prometheus jq curl; do
    command -v "${tool}" >/dev/null 2>&1 || {
        fail "${tool} not found (scripts/deps.sh installs it)"
        finish
    }
done
[[ -x "${BIN}" && -x "${LOAD}" ]] || {
    fail "${BIN} or ${LOAD} not built"
    finish
}

# --- ticketd ---------------------------------------------------------------
# config/ticketd.env gives the secrets (ticketd-load reads the same file); the
# environment, which wins, points it at the private servers.
env TICKETD_BIND=127.0.0.1 TICKETD_PORT="${HTTP_PORT}" \
    TICKETD_REDIS_HOST=127.0.0.1 TICKETD_REDIS_PORT="${REDIS_PORT}" \
    TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${MYSQL_PORT}" \
    TICKETD_MYSQL_USER=ticketd TICKETD_MYSQL_PASSWORD=ticketd TICKETD_MYSQL_DB=ticketd \
    TICKETD_ACCESS_LOG=0 \
    "${BIN}" serve --config config/ticketd.env >"${LOGS}/ticketd.log" 2>&1 &
TICKETD_PID=$!
up=0
for ((i = 0; i < 300; i++)); do
    if curl -fs -o /dev/null --max-time 2 "${URL}/readyz"; then
        up=1
        break
    fi
    kill -0 "${TICKETD_PID}" 2>/dev/null || break
    sleep 0.1
done
if [[ ${up} -eq 1 ]]; then
    ok "ticketd serves on ${URL} (the private Redis :${REDIS_PORT} and MariaDB :${MYSQL_PORT})"
else
    fail "ticketd did not become ready on ${URL} (see ${LOGS}/ticketd.log)"
    tail -n 5 "${LOGS}/ticketd.log" | sed 's/^/      /'
    finish
fi

# --- Prometheus ------------------------------------------------------------
cat >"${DIR}/prometheus.yml" <<EOF
# Written by tests/prometheus/run.sh: one target, the test's ticketd.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - ${RULES}
scrape_configs:
  - job_name: ticketd
    static_configs:
      - targets: ["127.0.0.1:${HTTP_PORT}"]
EOF
if promtool check config "${DIR}/prometheus.yml" >"${LOGS}/check-config.out" 2>&1; then
    ok "promtool check config: the test server's prometheus.yml, with config/prometheus/alerts.yml"
else
    fail "promtool check config (see ${LOGS}/check-config.out)"
fi
prometheus --config.file="${DIR}/prometheus.yml" --storage.tsdb.path="${DIR}/data" \
    --web.listen-address="127.0.0.1:${PROM_PORT}" --storage.tsdb.retention.time=1h \
    >"${LOGS}/prometheus.log" 2>&1 &
PROM_PID=$!
up=0
for ((i = 0; i < 600; i++)); do
    if target_up; then
        up=1
        break
    fi
    kill -0 "${PROM_PID}" 2>/dev/null || break
    sleep 0.1
done
if [[ ${up} -eq 1 ]]; then
    ok "Prometheus $(prometheus --version 2>&1 | sed -n 's/^prometheus, version \([^ ]*\).*/\1/p') on ${PROM}: its scrape of ${URL}/metrics is up"
else
    fail "Prometheus on ${PROM} never reported ${URL}/metrics up (see ${LOGS}/prometheus.log)"
    tail -n 5 "${LOGS}/prometheus.log" | sed 's/^/      /'
    finish
fi

# --- the storm -------------------------------------------------------------
"${LOAD}" retry-storm --target "${URL}" --config config/ticketd.env --rounds "${STORM_KEYS}" \
    --copies 8 --concurrency 16 --requests 2000 --duration 30 \
    --orders-out "${DIR}/orders" >"${LOGS}/storm.log" 2>&1
rc=$?
storm_end=$(date +%s.%N)
orders=$(grep -E '^[0-9]{20}$' "${DIR}/orders" 2>/dev/null | sort -u | wc -l)
if [[ ${rc} -eq 0 && ${orders} -eq ${STORM_KEYS} ]]; then
    ok "retry storm: ${STORM_KEYS} keys x 8 copies, ${orders} orders, no damage"
else
    fail "retry storm: ticketd-load exit ${rc}, ${orders} distinct orders for ${STORM_KEYS} keys (see ${LOGS}/storm.log)"
fi

# --- promtool check metrics --------------------------------------------------
if curl -fs --max-time 5 "${URL}/metrics" >"${LOGS}/metrics.txt" &&
    promtool check metrics <"${LOGS}/metrics.txt" >"${LOGS}/check-metrics.out" 2>&1; then
    ok "promtool check metrics: GET /metrics after the storm, $(grep -c '^# TYPE ' "${LOGS}/metrics.txt") families, no problem"
else
    fail "promtool check metrics (see ${LOGS}/check-metrics.out)"
    head -n 10 "${LOGS}/check-metrics.out" | sed 's/^/      /'
fi

# --- the query over the scraped series ---------------------------------------
# Wait (bounded by count) for a sample scraped after the storm ended, then
# ask once: the counter of this fresh process is the storm's orders.
query='sum(ticketd_orders_created_total{job="ticketd"})'
fresh=
for ((i = 0; i < 600; i++)); do
    ts=$(promql "max(timestamp(ticketd_orders_created_total{job=\"ticketd\"}))" | awk '{print $1}')
    if [[ -n "${ts}" ]] && awk -v a="${ts}" -v b="${storm_end}" 'BEGIN { exit !(a > b) }'; then
        fresh=1
        break
    fi
    sleep 0.1
done
got=$(promql "${query}" | awk '{print $1}')
if [[ -n "${fresh}" && "${got}" == "${orders}" ]]; then
    ok "GET /api/v1/query ${query}: ${got}, the orders the storm made"
else
    fail "GET /api/v1/query ${query}: '${got}' (scrape after the storm: ${fresh:-none}), want ${orders}"
fi

# Every alerting rule evaluated on the live series, none with an error.
rules_ok() {
    curl -s --max-time 5 "${PROM}/api/v1/rules" >"${LOGS}/rules.json" || return 1
    jq -e '[.data.groups[].rules[]] | length > 0 and all(.health == "ok" and .lastEvaluation != "0001-01-01T00:00:00Z")' \
        "${LOGS}/rules.json" >/dev/null 2>&1
}
evaluated=
for ((i = 0; i < 600; i++)); do
    if rules_ok; then
        evaluated=1
        break
    fi
    sleep 0.1
done
n_rules=$(jq '[.data.groups[].rules[]] | length' "${LOGS}/rules.json" 2>/dev/null)
if [[ -n "${evaluated}" ]]; then
    ok "the server evaluated the ${n_rules} rules of config/prometheus/alerts.yml on the scraped series, health ok"
else
    fail "alerting rules not all evaluated with health ok (see ${LOGS}/rules.json)"
fi

finish
