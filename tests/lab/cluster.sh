#!/usr/bin/env bash
# The lab's Galera cards in a real browser (make test-cluster runs it; it
# needs root, for the crash lesson's power cut, and scripts/deps.sh
# --cluster's packages):
#
#   - the lab's page serves, with three cluster cards that can run here;
#   - headless Chromium clicks them one after the other
#     (tests/lab/browser_cluster.py): the page brings the three nodes up,
#     draws them as they start, sync, die and rejoin, and ends each lesson
#     with damage without its defence, 0 with it, the witnesses, the audit
#     of each node and the run's seed; screenshots in build/test-logs/lab-cluster/;
#   - Ctrl-C stops the lab, and nothing of its cluster runs after it.
#
# Ports: the cluster's from TICKETD_CLUSTER_SQL_PORTS, _WSREP_PORTS,
# _REDIS_PORTS, _SENTINEL_PORTS and _HTTP_PORTS (scripts/cluster.sh's
# defaults otherwise: no other cluster may run meanwhile); the page's own
# stack from TICKETD_TEST_REDIS_PORT and TICKETD_TEST_MYSQL_PORT (under
# .state/labtest-cluster), the page on TICKETD_TEST_HTTP_PORT+4. The lessons
# run at TICKETD_LAB_CLUSTER_SIZE (default 1: at half of it the stock race
# found too few oversold seats to count on). Prints "ok"/"FAIL" per check
# and ends with "lab cluster: N passed, N failed".
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
ROOT=$(pwd)
LAB=lab/ticketd-lab
STATE=${ROOT}/.state/labtest-cluster
CLUSTER_STATE=${ROOT}/.state/cluster-lab
REDIS_PORT=${TICKETD_TEST_REDIS_PORT:-26379}
MYSQL_PORT=${TICKETD_TEST_MYSQL_PORT:-23306}
HTTP_PORT=${TICKETD_TEST_HTTP_PORT:-24000}
PAGE=$((HTTP_PORT + 4))
LOGS=${ROOT}/build/test-logs/lab-cluster
SIZE=${TICKETD_LAB_CLUSTER_SIZE:-1}
ARGS=(--state "${STATE}" --redis-port "${REDIS_PORT}" --mysql-port "${MYSQL_PORT}"
    --instance-ports "$((HTTP_PORT + 5)),$((HTTP_PORT + 6))" --logs "${LOGS}/runs" --size "${SIZE}")
# The nodes go down after each lesson: the page brings them up on demand.
unset TICKETD_CLUSTER_KEEP

rm -rf "${LOGS}"
mkdir -p "${LOGS}"
passed=0
failed=0
LAB_PID=""

ok() {
    passed=$((passed + 1))
    echo "ok    lab cluster: $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL  lab cluster: $*"
}

stop_lab() {
    [[ -n "${LAB_PID}" ]] || return 0
    kill -INT "${LAB_PID}" 2>/dev/null
    # Bounded: a cluster lesson stopped mid-run stops its nodes first.
    for _ in $(seq 1 1200); do
        kill -0 "${LAB_PID}" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "${LAB_PID}" 2>/dev/null
    wait "${LAB_PID}" 2>/dev/null
    LAB_PID=""
}

cleanup() {
    stop_lab
    env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
        scripts/services.sh down "${STATE}" >/dev/null 2>&1
    scripts/cluster.sh down "${CLUSTER_STATE}" >>"${LOGS}/cluster-down.log" 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

listening() { timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }

"${LAB}" serve --port "${PAGE}" "${ARGS[@]}" >"${LOGS}/serve.log" 2>&1 &
LAB_PID=$!
for _ in $(seq 1 600); do
    listening "${PAGE}" && break
    kill -0 "${LAB_PID}" 2>/dev/null || break
    sleep 0.1
done
if ! listening "${PAGE}"; then
    fail "the lab did not serve on :${PAGE} (see ${LOGS}/serve.log)"
    echo "lab cluster: ${passed} passed, ${failed} failed"
    exit 1
fi

can=$(curl -s "http://127.0.0.1:${PAGE}/api/lessons" | python3 -c '
import json, sys
ls = [l for l in json.load(sys.stdin)["lessons"] if l["kind"] == "cluster"]
print(len(ls), sum(1 for l in ls if l["available"]["ok"]),
      "; ".join(l["available"].get("why", "") for l in ls if not l["available"]["ok"]))')
if [[ "${can}" == "3 3 " ]]; then
    ok "the page has three cluster cards, each can run here"
else
    fail "cluster cards (count, runnable, why not): ${can}"
fi

if python3 tests/lab/browser_cluster.py --url "http://127.0.0.1:${PAGE}/" --shots "${LOGS}" \
    >"${LOGS}/browser.log" 2>&1; then
    ok "the three cluster cards: damage without, 0 with, witnesses, nodes drawn, audits ($(tail -1 "${LOGS}/browser.log" | sed 's/^browser: //'))"
else
    fail "the cluster cards in the browser (see ${LOGS}/browser.log)"
fi
grep '^browser: ' "${LOGS}/browser.log" | grep -v screenshot | sed 's/^/      /'

stop_lab
alive=0
for n in 1 2 3; do
    pid=$(cat "${CLUSTER_STATE}/g${n}/mysqld.pid" 2>/dev/null) &&
        [[ "$(cat "/proc/${pid}/comm" 2>/dev/null)" == mariadbd ]] && alive=$((alive + 1))
done
if ((alive == 0)) && ! listening "${PAGE}"; then
    ok "Ctrl-C stopped the page; no node of its cluster runs"
else
    fail "after Ctrl-C: ${alive} nodes still run, or the page still serves"
fi

echo "lab cluster: ${passed} passed, ${failed} failed"
((failed == 0))
