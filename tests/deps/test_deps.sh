#!/usr/bin/env bash
# What each make target installs (scripts/deps.sh --list GROUP): the demo's
# list holds none of the packages only the tests use, and the tests' list
# holds every other list's packages; each target asks for its own group.
#
#   tests/deps/test_deps.sh   one "ok"/"FAIL" line per check, then
#                             "deps: N checks, N failed"
set -uo pipefail
cd "$(dirname "$0")/../.."

n=0
failed=0
check() { # check WHAT CONDITION-EXIT-STATUS [DETAIL]
    n=$((n + 1))
    if [[ $2 -eq 0 ]]; then
        echo "ok    $1"
    else
        failed=$((failed + 1))
        echo "FAIL  $1${3:+: $3}"
    fi
}

list() { scripts/deps.sh --list "$@" | sort -u; }

# What only the tests (and the fuzzing, the benchmarks' wrk) use.
TEST_ONLY=(chromium prometheus gnuplot-nox nginx clang-14 libfuzzer-14-dev clang-format libcmocka-dev
    valgrind nodejs npm wrk)
RUN_NEEDS=(build-essential pkg-config libmicrohttpd-dev libhiredis-dev libmariadb-dev libjansson-dev
    libjwt-dev libssl-dev redis-server mariadb-server mariadb-client curl jq)

run=$(list run)
found=$(comm -12 <(printf '%s\n' "${TEST_ONLY[@]}" | sort -u) <(echo "${run}") | tr '\n' ' ')
check "make run's list holds none of the tests' packages" "$([[ -z "${found}" ]]; echo $?)" "${found}"
missing=$(comm -23 <(printf '%s\n' "${RUN_NEEDS[@]}" | sort -u) <(echo "${run}") | tr '\n' ' ')
check "make run's list holds the build, Redis, MariaDB, curl and jq" "$([[ -z "${missing}" ]]; echo $?)" "${missing}"

test_list=$(list test)
for group in run demo bench lab; do
    missing=$(comm -23 <(list "${group}") <(echo "${test_list}") | tr '\n' ' ')
    check "make test's list holds ${group}'s" "$([[ -z "${missing}" ]]; echo $?)" "${missing}"
done
# npm is asked for only where no npm is on PATH: not looked at here.
missing=$(comm -23 <(printf '%s\n' "${TEST_ONLY[@]}" | grep -vx npm | sort -u) <(echo "${test_list}") | tr '\n' ' ')
check "make test's list holds the tests' packages" "$([[ -z "${missing}" ]]; echo $?)" "${missing}"

check "make demo's list holds the load tool's libcurl and gnuplot" \
    "$(list demo | grep -qx libcurl4-openssl-dev && list demo | grep -qx gnuplot-nox; echo $?)"
check "make bench's list holds wrk" "$(list bench | grep -qx wrk; echo $?)"
check "make lab's list holds Python and the page's charts, and no browser" \
    "$(list lab | grep -qx python3 && list lab | grep -qx libjs-chart.js && ! list lab | grep -qx chromium; echo $?)"
check "--cluster adds Galera to a group" "$(list lab --cluster | grep -qx galera-4 && ! list lab | grep -qx galera-4; echo $?)"
check "an unknown group is refused" "$(scripts/deps.sh --list nosuchgroup >/dev/null 2>&1; [[ $? -eq 2 ]]; echo $?)"

# Each target asks for its own group (make -n prints the command, runs nothing).
for pair in run:run demo:demo bench:bench lab:lab lessons-run:lab test:test; do
    target=${pair%%:*} group=${pair#*:}
    out=$(make -n --no-print-directory "${target}" 2>/dev/null)
    check "make ${target} runs scripts/deps.sh ${group}" \
        "$(grep -qx "scripts/deps.sh ${group}" <<<"${out}"; echo $?)"
done

echo "deps: ${n} checks, ${failed} failed"
[[ ${failed} -eq 0 ]]
