#!/usr/bin/env bash
# The replay lab's tests (make test-lab; scripts/run-tests.sh runs them too):
#
#   - a non-loopback bind is refused unless --bind-any is given;
#   - the page's API refuses an unknown lesson (422) and a second run while
#     one goes (409), both as RFC 9457 problems;
#   - headless Chromium loads the page, runs a lesson without its defence and
#     with it, and reads from the page that the damage is above zero, with
#     the checker's witnesses under it, then zero with none
#     (tests/lab/browser.py; screenshots in build/test-logs/lab/);
#   - the run's history downloads from the page's link, as JSON lines;
#   - Ctrl-C stops everything the lab started;
#   - `make lesson` for five lessons ends with its one line, and prints the
#     checker's first witness under the pass without the defence and none
#     under the pass with it;
#   - the seed: stock-cas again with the seed its run printed sends the same
#     requests (tests/lab/same_requests.py), and the history's first line
#     names the seed and the command that repeats it.
#
# The Galera cards of the page have their own test (tests/lab/cluster.sh,
# in make test-cluster: it needs root and the cluster's packages).
#
# Ports: the lab's stack takes TICKETD_TEST_REDIS_PORT and
# TICKETD_TEST_MYSQL_PORT (under .state/labtest, after the integration
# tests stopped theirs), the instances TICKETD_TEST_HTTP_PORT+1 and +2, the
# page +3. Lessons run small (--size). Prints "ok"/"FAIL" per check and ends
# with "lab: N passed, N failed".
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
LAB=lab/ticketd-lab
STATE=${ROOT}/.state/labtest
REDIS_PORT=${TICKETD_TEST_REDIS_PORT:-26379}
MYSQL_PORT=${TICKETD_TEST_MYSQL_PORT:-23306}
HTTP_PORT=${TICKETD_TEST_HTTP_PORT:-24000}
I1=$((HTTP_PORT + 1))
I2=$((HTTP_PORT + 2))
PAGE=$((HTTP_PORT + 3))
LOGS=${ROOT}/build/test-logs/lab
SIZE=${TICKETD_LAB_TEST_SIZE:-0.3}
ARGS=(--state "${STATE}" --redis-port "${REDIS_PORT}" --mysql-port "${MYSQL_PORT}"
    --instance-ports "${I1},${I2}" --logs "${LOGS}/runs" --size "${SIZE}")
mkdir -p "${LOGS}"

passed=0
failed=0
LAB_PID=""
LAB_KILLED=0

ok() {
    passed=$((passed + 1))
    echo "ok    lab: $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL  lab: $*"
}

stop_lab() {
    [[ -n "${LAB_PID}" ]] || return 0
    kill -INT "${LAB_PID}" 2>/dev/null
    for _ in $(seq 1 300); do
        kill -0 "${LAB_PID}" 2>/dev/null || break
        sleep 0.1
    done
    if kill -KILL "${LAB_PID}" 2>/dev/null; then
        LAB_KILLED=1
    fi
    wait "${LAB_PID}" 2>/dev/null
    LAB_PID=""
}

cleanup() {
    stop_lab
    env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
        scripts/services.sh down "${STATE}" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

listening() { timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }

# curl_json METHOD PATH [BODY]: prints "STATUS CONTENT-TYPE" then the body.
api() {
    local method=$1 path=$2 body=${3:-}
    local args=(-s -o "${LOGS}/api.body" -w '%{http_code} %{content_type}' -X "${method}")
    [[ -n "${body}" ]] && args+=(-H 'Content-Type: application/json' --data "${body}")
    curl "${args[@]}" "http://127.0.0.1:${PAGE}${path}"
}

# --- 1. the bind -----------------------------------------------------------
out=$("${LAB}" serve --bind 0.0.0.0 --port "${PAGE}" "${ARGS[@]}" 2>&1)
rc=$?
if ((rc == 2)) && [[ "${out}" == *"--bind-any"* ]] && ! listening "${PAGE}"; then
    ok "a non-loopback bind is refused without --bind-any"
else
    fail "serve --bind 0.0.0.0 exited ${rc}: ${out}"
fi

# --- 2. the page ---------------------------------------------------------------
"${LAB}" serve --port "${PAGE}" "${ARGS[@]}" >"${LOGS}/serve.log" 2>&1 &
LAB_PID=$!
for _ in $(seq 1 600); do
    listening "${PAGE}" && break
    kill -0 "${LAB_PID}" 2>/dev/null || break
    sleep 0.1
done
if ! listening "${PAGE}"; then
    fail "the lab did not serve on :${PAGE} (see ${LOGS}/serve.log)"
    tail -5 "${LOGS}/serve.log" | sed 's/^/      /'
    echo "lab: ${passed} passed, $((failed + 1)) failed"
    exit 1
fi

got=$(api POST /api/runs '{"lesson":"no-such-lesson"}')
if [[ "${got}" == "422 application/problem+json" ]] && grep -q 'Unknown lesson' "${LOGS}/api.body"; then
    ok "an unknown lesson is refused (422 problem)"
else
    fail "unknown lesson: ${got} $(cat "${LOGS}/api.body")"
fi

first=$(api POST /api/runs '{"lesson":"stock-cas","passes":"without"}')
second=$(api POST /api/runs '{"lesson":"callback-dedup","passes":"with"}')
if [[ "${first}" == 202* && "${second}" == "409 application/problem+json" ]] &&
    grep -q 'one run at a time' "${LOGS}/api.body"; then
    ok "a second run while one goes is refused (409 problem)"
else
    fail "concurrent runs: first ${first}, second ${second} $(cat "${LOGS}/api.body")"
fi
# The first run ends on its own; the browser's run may start only then.
for _ in $(seq 1 1200); do
    curl -s "http://127.0.0.1:${PAGE}/api/state" | grep -q '"status": "running"' || break
    sleep 0.1
done

if python3 tests/lab/browser.py --url "http://127.0.0.1:${PAGE}/" --lesson stock-cas \
    --shots "${LOGS}" >"${LOGS}/browser.log" 2>&1; then
    ok "the page shows damage and witnesses without the defence, zero and none with it ($(tail -1 "${LOGS}/browser.log" | sed 's/^browser: //'))"
else
    fail "browser test (see ${LOGS}/browser.log)"
    tail -5 "${LOGS}/browser.log" | sed 's/^/      /'
fi

# The history link of the run the browser made: JSON lines, invokes and
# their completions.
run_id=$(curl -s "http://127.0.0.1:${PAGE}/api/state" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("run", ""))')
got=$(curl -s -o "${LOGS}/history.jsonl" -w '%{http_code} %{content_type}' \
    "http://127.0.0.1:${PAGE}/api/history?run=${run_id}&pass=without")
invokes=$(grep -c '"type":"invoke"' "${LOGS}/history.jsonl" 2>/dev/null)
ends=$(grep -cE '"type":"(ok|fail|info)"' "${LOGS}/history.jsonl" 2>/dev/null)
if [[ "${got}" == "200 application/x-ndjson" ]] && ((${invokes:-0} > 0 && ${ends:-0} == ${invokes:-0})) &&
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "${LOGS}/history.jsonl"; then
    ok "the run's history downloads: ${invokes} operations, each an invoke and its completion"
else
    fail "history download: ${got}, ${invokes:-0} invokes, ${ends:-0} completions"
fi

stop_lab
if ((LAB_KILLED == 0)) && ! env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST scripts/services.sh status "${STATE}" \
    >/dev/null 2>&1 && ! listening "${I1}" && ! listening "${I2}" && ! listening "${PAGE}"; then
    ok "Ctrl-C stopped the page, both instances, Redis and MariaDB"
else
    fail "the lab ignored Ctrl-C for 30 s, or something it started still runs"
fi

# --- 3. make lesson --------------------------------------------------------------
# lesson, defence, unit, the checker's witness kind: the last line must read
# exactly so, N > 0 and M = 0; the pass without the defence prints a witness
# of that kind, the pass with it none.
while IFS='|' read -r name defence unit kind; do
    log=${LOGS}/lesson-${name}.log
    make --no-print-directory lesson L="${name}" LAB_ARGS="${ARGS[*]}" >"${log}" 2>&1
    rc=$?
    last=$(tail -n 1 "${log}")
    re="^lesson ${name}: without ${defence}: ([0-9]+) ${unit}; with it: ([0-9]+) ${unit}\$"
    if ((rc == 0)) && [[ "${last}" =~ ${re} ]] && ((BASH_REMATCH[1] > 0 && BASH_REMATCH[2] == 0)); then
        ok "make lesson L=${name}: ${last}"
    else
        fail "make lesson L=${name} exited ${rc}, last line: ${last} (see ${log})"
    fi
    wit=$(grep -A1 '^without: ' "${log}" | tail -n 1)
    none=$(grep -A1 '^with: ' "${log}" | tail -n 1)
    if [[ "${wit}" == "  first witness: ${kind}: "* && "${none}" == *"no violation"* ]]; then
        ok "make lesson L=${name}: a witness without the defence (${wit#  first witness: }), none with it"
    else
        fail "make lesson L=${name}: witnesses: without '${wit}', with '${none}' (see ${log})"
    fi
done <<'EOF'
stock-cas|stock-cas|oversold seats|oversold
callback-dedup|callback-dedup|applied payments also refunded|applied-and-refunded
token-atomic|token-atomic|orders beyond one per token|token-reused
bloom-liveness|bloom-liveness|keys with an order refused|refused-with-order
redis-flush|unique-index|duplicate orders|duplicate-order
EOF

# --- 4. the seed -------------------------------------------------------------------
seed=$(sed -n 's/^seed \([0-9][0-9]*\): the same requests again with .*/\1/p' \
    "${LOGS}/lesson-stock-cas.log" | head -n 1)
first=${LOGS}/seed-first.history.jsonl
cp "${LOGS}/runs/stock-cas-without.history.jsonl" "${first}" 2>/dev/null
make --no-print-directory lesson L=stock-cas LAB_ARGS="${ARGS[*]} --seed ${seed:-0}" \
    >"${LOGS}/lesson-stock-cas-again.log" 2>&1
head_line=$(head -n 1 "${LOGS}/runs/stock-cas-without.history.jsonl" 2>/dev/null)
if [[ -n "${seed}" ]] && same=$(python3 tests/lab/same_requests.py "${first}" \
    "${LOGS}/runs/stock-cas-without.history.jsonl") &&
    [[ "${head_line}" == *"\"seed\": ${seed}"* && "${head_line}" == *"--seed ${seed}"* ]]; then
    ok "make lesson L=stock-cas with the seed its run printed (${seed}): ${same}"
else
    fail "the seed: '${seed}'; ${same:-no comparison}; history head: ${head_line:0:200}"
fi

echo "lab: ${passed} passed, ${failed} failed"
((failed == 0))
