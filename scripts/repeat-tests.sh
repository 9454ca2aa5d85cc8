#!/usr/bin/env bash
# The loop's promises, repeated: what one run of `make test` shows once,
# shown many times in a row, on a machine made busy on purpose.
#
#   scripts/repeat-tests.sh [--held N] [--storms N] [--hogs N]
#
#   --held N    the held-request test (itest_faults) N times (default 50):
#               one order held at a fault point while 8 other kept-alive
#               clients must get all their answers
#   --storms N  itest_answers N times (default 5): 64 clients x 20 new
#               orders, 10 s client timeout, one loop and two; every order
#               answered, and only answered orders in the database
#   --hogs N    N busy loops beside them the whole time (default 2), each
#               ended by PID when the runs are over (and by `timeout`
#               after an hour whatever happens)
#   --record F  also write the run's summary to F (markdown): the date, the
#               commit, the command and each line below, as printed
#
# Each repetition counts as one check; it ends with "N passed, N failed",
# and a failed run's output is kept under build/test-logs/repeat/. Needs
# the test builds (make test builds them) and starts its own Redis and
# MariaDB under .state/repeat (ports: TICKETD_TEST_REDIS_PORT and
# TICKETD_TEST_MYSQL_PORT, defaults 18379 and 18306; HTTP from 18080).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

held=50
storms=5
hogs=2
record=
while [[ $# -gt 0 ]]; do
    case "$1" in
    --held) held=$2; shift 2 ;;
    --storms) storms=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --record) record=$2; shift 2 ;;
    *) echo "usage: $0 [--held N] [--storms N] [--hogs N] [--record FILE]" >&2; exit 2 ;;
    esac
done

STATE=.state/repeat
export TICKETD_TEST_STATE=$STATE
export TICKETD_TEST_REDIS_PORT=${TICKETD_TEST_REDIS_PORT:-18379}
export TICKETD_TEST_MYSQL_PORT=${TICKETD_TEST_MYSQL_PORT:-18306}
export TICKETD_TEST_HTTP_PORT=${TICKETD_TEST_HTTP_PORT:-18080}
export TICKETD_BIN=${TICKETD_BIN:-$PWD/build/asan/ticketd}
LOGS=build/test-logs/repeat
mkdir -p "$LOGS"
export TICKETD_TEST_LOGS=$PWD/$LOGS
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}

for bin in build/release/tests/itest_faults build/release/tests/itest_answers "$TICKETD_BIN"; do
    if [[ ! -x "$bin" ]]; then
        echo "repeat: $bin is missing; make test builds it" >&2
        exit 2
    fi
done

if ! env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
    scripts/services.sh up "$STATE" "$TICKETD_TEST_REDIS_PORT" "$TICKETD_TEST_MYSQL_PORT" >/dev/null 2>&1 ||
    ! scripts/services.sh migrate "$STATE" >/dev/null 2>&1; then
    echo "repeat: the private servers did not start" >&2
    exit 1
fi

hog_pids=()
for ((i = 0; i < hogs; i++)); do
    timeout 3600 bash -c 'while :; do :; done' &
    hog_pids+=($!)
done
stop_all() {
    for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; done
    scripts/services.sh down "$STATE" >/dev/null 2>&1 || true
}
trap stop_all EXIT

passed=0
failed=0
# One run of a test binary: it passed when cmocka says so and nothing failed.
one() {
    local name=$1 out=$2
    shift 2
    if "$@" >"$out" 2>&1 && grep -q '^\[  PASSED  \]' "$out" && ! grep -q '^\[  FAILED  \]' "$out"; then
        passed=$((passed + 1))
        rm -f "$out"
    else
        failed=$((failed + 1))
        echo "FAIL  $name (see $out)"
        grep -E 'error|ERROR|no answer|late answer' "$out" | head -5 | sed 's/^/      /'
    fi
}

start=$(date +%s)
summary=()
for ((i = 1; i <= held; i++)); do
    TICKETD_TEST_CASE=test_a_held_request_holds_up_no_other_connection \
        one "held request, run $i" "$LOGS/held-$i.out" build/release/tests/itest_faults
done
summary+=("held request: $held runs beside $hogs busy loops, $passed passed, $failed failed")
echo "${summary[-1]}"
p0=$passed f0=$failed
for ((i = 1; i <= storms; i++)); do
    one "order storm, run $i" "$LOGS/storm-$i.out" build/release/tests/itest_answers
done
summary+=("order storm (64 clients x 20 orders, 10 s timeout, one loop and two): $storms runs, $((passed - p0)) passed, $((failed - f0)) failed")
echo "${summary[-1]}"
summary+=("repeat: $(($(date +%s) - start)) s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)")
echo "${summary[-1]}"
echo "$passed passed, $failed failed"
if [[ -n "$record" ]]; then
    {
        echo "# The loop's promises, repeated: a recorded run"
        echo
        echo "Written by \`scripts/repeat-tests.sh --record\` (\`make test-repeat\`); not edited by hand."
        echo
        echo "- when: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
        echo "- command: \`scripts/repeat-tests.sh --held $held --storms $storms --hogs $hogs\`"
        echo "- machine: $(nproc) cores, $(uname -r)"
        echo
        for line in "${summary[@]}"; do echo "- $line"; done
        echo "- $passed passed, $failed failed"
    } >"$record"
fi
[[ $failed -eq 0 ]]
