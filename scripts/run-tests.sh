#!/usr/bin/env bash
# Runs ticketd's tests and ends with one summary line: "N passed, N failed".
#
#   scripts/run-tests.sh              the docs' links (scripts/check-docs.py),
#                                     unit tests (release and ASan builds), the
#                                     fuzz harnesses on their seeds, then
#                                     integration tests against the ASan binary
#                                     and private servers under .state/test
#   scripts/run-tests.sh --unit-only  the docs, unit tests and fuzz harnesses (no
#                                     servers needed)
#   TICKETD_TEST_ONLY=itest_orders scripts/run-tests.sh
#                                     only the test binaries whose name
#                                     contains that text (a quick loop);
#                                     TICKETD_TEST_ONLY=lab: only the replay
#                                     lab's tests, tests/lab/run.sh and the
#                                     checker's (TICKETD_TEST_ONLY=checker:
#                                     the checker's alone, no servers);
#                                     TICKETD_TEST_ONLY=docs: only the docs check
#                                     and its checker's test, with the packages'
#                                     lists (TICKETD_TEST_ONLY=deps: those alone;
#                                     scripts/check-docs.py alone is quicker);
#                                     TICKETD_TEST_ONLY=sources: only the rules
#                                     of scripts/check-sources.sh;
#                                     TICKETD_TEST_ONLY=prometheus: the alerting
#                                     rules and tests/prometheus/run.sh;
#                                     TICKETD_TEST_ONLY=valgrind: the session
#                                     under valgrind (scripts/valgrind.sh)
#
# Each test binary is a cmocka group; its "[  PASSED  ] N" and "[  FAILED  ] N"
# lines are added up. A binary that crashes or prints no summary counts as one
# failure, so a sanitizer abort can never pass silently.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
unit_only=0
[[ "${1:-}" == "--unit-only" ]] && unit_only=1

STATE=${TICKETD_TEST_STATE:-.state/test}
REDIS_PORT=${TICKETD_TEST_REDIS_PORT:-26379}
MYSQL_PORT=${TICKETD_TEST_MYSQL_PORT:-23306}
LOGS=build/test-logs
mkdir -p "$LOGS"

passed=0
failed=0
failures=()

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}

ONLY=${TICKETD_TEST_ONLY:-}

run_one() {
    local bin=$1 name out rc p f
    [[ -n "$ONLY" && "$bin" != *"$ONLY"* ]] && return 0
    name=$(echo "$bin" | sed 's|build/||; s|/tests/|-|')
    out="$LOGS/$name.out"
    "$bin" >"$out" 2>&1
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
    p=${p:-0}
    f=${f:-0}
    if [[ $rc -ne 0 && $f -eq 0 ]]; then
        f=1 # crashed, or a sanitizer stopped it
    fi
    if ! grep -q '^\[==========\] .* ran\.$\|^\[==========\] .* run\.$' "$out"; then
        [[ $f -eq 0 ]] && f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [[ $f -gt 0 ]]; then
        failures+=("$name (see $out)")
        echo "FAIL  $name: $p passed, $f failed"
        grep -E '^\[  FAILED  \] |^\[  ERROR   \] |ERROR: |runtime error|^  *[a-z_/]+\.c:[0-9]+: error' "$out" | head -20 | sed 's/^/      /'
    else
        echo "ok    $name: $p passed"
    fi
}

# Adds up a check script's summary line, "NAME: N passed, N failed", in
# the file out; no such line (it stopped early) counts as one failure.
add_summary() {
    local name=$1 out=$2 p f
    p=$(sed -n "s/^$name: \([0-9]*\) passed, \([0-9]*\) failed\$/\1/p" "$out")
    f=$(sed -n "s/^$name: \([0-9]*\) passed, \([0-9]*\) failed\$/\2/p" "$out")
    if [[ -z "$p" ]]; then
        p=0
        f=1 # it stopped before its summary
        tail -5 "$out" | sed 's/^/      /'
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    ((f == 0)) || failures+=("$name (see $out)")
}

echo "== formatting (clang-format, .clang-format)"
if make --no-print-directory format-check >"$LOGS/format.out" 2>&1; then
    passed=$((passed + 1))
    echo "ok    format-check"
else
    failed=$((failed + 1))
    failures+=("format-check (see $LOGS/format.out; 'make format' fixes it)")
    echo "FAIL  format-check"
    head -10 "$LOGS/format.out" | sed 's/^/      /'
fi

# The route table and the published contract name the same operations.
echo "== route table against docs/openapi.yaml"
if scripts/check-openapi.sh >"$LOGS/openapi.out" 2>&1; then
    passed=$((passed + 1))
    echo "ok    $(tail -1 "$LOGS/openapi.out")"
else
    failed=$((failed + 1))
    failures+=("openapi (see $LOGS/openapi.out)")
    echo "FAIL  openapi"
    head -10 "$LOGS/openapi.out" | sed 's/^/      /'
fi

# The contract through a real OpenAPI 3.1 linter (Redocly's, pinned by
# tools/openapi/package-lock.json): any error or warning fails it.
echo "== docs/openapi.yaml through the OpenAPI linter (scripts/lint-openapi.sh)"
if scripts/lint-openapi.sh >"$LOGS/openapi-lint.out" 2>&1; then
    passed=$((passed + 1))
    echo "ok    $(tail -1 "$LOGS/openapi-lint.out")"
else
    failed=$((failed + 1))
    failures+=("openapi lint (see $LOGS/openapi-lint.out)")
    echo "FAIL  openapi lint"
    grep -E '^ +[0-9]+:[0-9]+ |^openapi lint|^lint-openapi' "$LOGS/openapi-lint.out" | head -10 | sed 's/^/      /'
fi

# The house rule (service/layers.mk) on the release objects: who calls whom
# across folders, and the include paths refusing a wrong include.
echo "== layers (service/layers.mk)"
if make --no-print-directory layers-check >"$LOGS/layers.out" 2>&1; then
    passed=$((passed + 1))
    echo "ok    $(tail -1 "$LOGS/layers.out")"
else
    failed=$((failed + 1))
    failures+=("layers-check (see $LOGS/layers.out)")
    echo "FAIL  layers-check"
    grep '^layers: ' "$LOGS/layers.out" | head -10 | sed 's/^/      /'
fi

# Two rules of service/ the compiler does not see (scripts/check-sources.sh):
# no .c file over 500 lines, and a client library's header only in its
# adapter's folder; each rule, and the script's test of itself, counts as one.
if [[ -z "$ONLY" || "$ONLY" == *sources* ]]; then
    echo "== sources (file length, client libraries' headers)"
    out="$LOGS/sources.out"
    scripts/check-sources.sh >"$out" 2>&1
    grep -E '^(ok|FAIL|      )' "$out"
    add_summary sources "$out"
fi

# No name of the thread-per-request model is left in service/ (the loops
# and fibers replaced it; scripts/check-thread-names.sh lists the names);
# the script's test of itself and the tree count one each.
echo "== thread-era names (scripts/check-thread-names.sh)"
out="$LOGS/thread-names.out"
scripts/check-thread-names.sh >"$out" 2>&1
grep -E '^(ok|FAIL|      )' "$out" | head -20
add_summary thread-names "$out"

# The docs' links, anchors and file paths, and the generated figures'
# blocks (scripts/check-docs.py); each of its checks counts as one.
if [[ -z "$ONLY" || "$ONLY" == *docs* ]]; then
    echo "== docs (relative links, anchors, file paths, lessons-run blocks)"
    out="$LOGS/docs.out"
    python3 scripts/check-docs.py >"$out" 2>&1
    grep -E '^(ok|FAIL|      )' "$out"
    add_summary docs "$out"
fi

# A check script that ends with "<label>: N checks, N failed": each check
# counts as one; a crash, or no count line, as one failure.
# counted_checks LABEL WHAT COMMAND...
counted_checks() {
    local label=$1 what=$2 out rc line n f
    shift 2
    out="$LOGS/$label.out"
    "$@" >"$out" 2>&1
    rc=$?
    line=$(grep -E "^$label: [0-9]+ checks, [0-9]+ failed$" "$out" | tail -1)
    n=$(echo "$line" | sed -n 's/^[^:]*: \([0-9]*\) checks.*/\1/p')
    f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed$/\1/p')
    n=${n:-0}
    f=${f:-0}
    if [[ -z "$line" || ( $rc -ne 0 && $f -eq 0 ) ]]; then
        f=$((f + 1))
    fi
    passed=$((passed + n - (f > n ? n : f)))
    failed=$((failed + f))
    if [[ $f -gt 0 ]]; then
        failures+=("$what (see $out)")
        echo "FAIL  $label: $f failed"
        grep '^FAIL' "$out" | head -10 | sed 's/^/      /'
    else
        echo "ok    $label: $n checks passed ($what)"
    fi
}

# The docs checker's names check on pages made up here (a made-up name must
# fail, a real one pass), and what each make target installs (make run's
# list holds none of the tests' packages).
if [[ -z "$ONLY" || "$ONLY" == *docs* || "$ONLY" == *deps* ]]; then
    echo "== the docs checker's names, each target's packages"
    counted_checks docs-checker "tests/docs/test_check_docs.py" python3 tests/docs/test_check_docs.py
    counted_checks deps "tests/deps/test_deps.sh" tests/deps/test_deps.sh
fi

# The alerting rules (config/prometheus/alerts.yml) through promtool: the
# file itself, then its unit tests (tests/prometheus/alerts.test.yml:
# series in, alerts expected out); one check each.
if [[ -z "$ONLY" || "$ONLY" == *prom* ]]; then
    echo "== alerting rules (promtool check rules, promtool test rules)"
    if promtool check rules config/prometheus/alerts.yml >"$LOGS/promtool-rules.out" 2>&1; then
        passed=$((passed + 1))
        echo "ok    promtool check rules: config/prometheus/alerts.yml,$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/ \1 rules/p' "$LOGS/promtool-rules.out")"
    else
        failed=$((failed + 1))
        failures+=("promtool check rules (see $LOGS/promtool-rules.out)")
        echo "FAIL  promtool check rules"
        head -10 "$LOGS/promtool-rules.out" | sed 's/^/      /'
    fi
    if promtool test rules tests/prometheus/alerts.test.yml >"$LOGS/promtool-test.out" 2>&1; then
        passed=$((passed + 1))
        echo "ok    promtool test rules: tests/prometheus/alerts.test.yml, $(grep -c 'alertname:' tests/prometheus/alerts.test.yml) expectations"
    else
        failed=$((failed + 1))
        failures+=("promtool test rules (see $LOGS/promtool-test.out)")
        echo "FAIL  promtool test rules"
        grep -E 'FAILED|alertname:' "$LOGS/promtool-test.out" | head -10 | sed 's/^/      /'
    fi
fi

echo "== unit tests (release, then ASan+UBSan)"
for bin in build/release/tests/test_* build/asan/tests/test_*; do
    [[ -x "$bin" ]] && run_one "$bin"
done

# The load tool's own checks (loadtest/selftest/): each check counts as
# one; a crash, or no count line, as one failure.
echo "== load tool selftest (build/loadtest/selftest)"
selftest=build/loadtest/selftest
if [[ -n "$ONLY" && "selftest" != *"$ONLY"* ]]; then
    :
elif [[ ! -x "$selftest" ]]; then
    failed=$((failed + 1))
    failures+=("selftest (not built: make -C loadtest)")
    echo "FAIL  selftest: not built"
else
    counted_checks selftest "load tool selftest" "$selftest"
fi

# The lab's checker (lab/checker.py) on hand-made histories, one of each
# kind of violation and clean ones: each check counts as one; a crash, or
# no count line, as one failure. No servers needed.
echo "== lab checker (tests/lab/test_checker.py)"
if [[ -z "$ONLY" || "checker" == *"$ONLY"* || "$ONLY" == *lab* ]]; then
    counted_checks checker "lab checker" python3 tests/lab/test_checker.py
fi

# Each libFuzzer harness (make fuzz-bins) replays its seed corpus, then
# fuzzes for a few seconds; one check each. New inputs go to a scratch
# directory, never into fuzz/corpus; a crashing input is kept in $LOGS.
FUZZ_TEST_SECONDS=${FUZZ_TEST_SECONDS:-3}
echo "== fuzz harnesses (seed corpus, then ${FUZZ_TEST_SECONDS}s of fuzzing each)"
fuzz_bins=(build/fuzz/fuzz_*)
if [[ ! -x "${fuzz_bins[0]}" ]]; then
    echo "skip  no harnesses built ('make fuzz-bins' builds them)"
fi
for bin in "${fuzz_bins[@]}"; do
    [[ -x "$bin" ]] || continue
    name=fuzz-${bin##*/fuzz_}
    out="$LOGS/$name.out"
    scratch=build/fuzz/ci/${bin##*/fuzz_}
    rm -rf "$scratch"
    mkdir -p "$scratch"
    if "$bin" -max_total_time="$FUZZ_TEST_SECONDS" -timeout=10 -artifact_prefix="$LOGS/$name-" \
        "$scratch" "fuzz/corpus/${bin##*/fuzz_}" >"$out" 2>&1 &&
        grep -q '^Done [0-9]* runs' "$out"; then
        passed=$((passed + 1))
        echo "ok    $name: $(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$out") runs"
    else
        failed=$((failed + 1))
        failures+=("$name (see $out)")
        echo "FAIL  $name"
        grep -E 'ERROR: |runtime error|invariant broken|Test unit written' "$out" | head -5 | sed 's/^/      /'
    fi
done

if [[ $unit_only -eq 0 ]]; then
    echo "== integration tests (ASan+UBSan binary, private Redis :$REDIS_PORT and MariaDB :$MYSQL_PORT)"
    if env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET \
        scripts/services.sh up "$STATE" "$REDIS_PORT" "$MYSQL_PORT" &&
        scripts/services.sh migrate "$STATE"; then
        export TICKETD_BIN=${TICKETD_BIN:-$ROOT/build/asan/ticketd}
        export TICKETD_TEST_STATE=$STATE TICKETD_TEST_REDIS_PORT=$REDIS_PORT TICKETD_TEST_MYSQL_PORT=$MYSQL_PORT
        export TICKETD_TEST_LOGS=$ROOT/$LOGS
        # The migrations from the schema before day partitions, on a
        # database with rows: nothing may be lost (one check).
        if [[ -z "$ONLY" || "migrate" == *"$ONLY"* ]]; then
            if tests/migrate/run.sh "$STATE" >"$LOGS/migrate.out" 2>&1; then
                passed=$((passed + 1))
                echo "ok    migrate: rows kept through 008, 009 and 010"
            else
                failed=$((failed + 1))
                failures+=("migrate (see $LOGS/migrate.out)")
                echo "FAIL  migrate"
                grep '^FAIL' "$LOGS/migrate.out" | head -5 | sed 's/^/      /'
            fi
        fi
        for bin in build/release/tests/itest_*; do
            [[ -x "$bin" ]] && run_one "$bin"
        done
        # Prometheus's own tools on a live instance (tests/prometheus/run.sh):
        # promtool check metrics after a storm, a real server scraping it and
        # the query of its orders; each of its checks counts as one.
        if [[ -z "$ONLY" || "$ONLY" == *prom* ]]; then
            echo "== Prometheus (promtool check metrics after a storm; a real server scrapes a test instance)"
            out="$LOGS/prometheus.out"
            tests/prometheus/run.sh "$STATE" >"$out" 2>&1
            grep -E '^(ok|FAIL) |^      ' "$out"
            p=$(sed -n 's/^prometheus: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$out")
            f=$(sed -n 's/^prometheus: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$out")
            if [[ -z "$p" ]]; then
                p=0
                f=1 # it stopped before its summary
            fi
            passed=$((passed + p))
            failed=$((failed + f))
            ((f == 0)) || failures+=("prometheus (see $out)")
        fi
        # The release binary under valgrind's memcheck for a short session
        # on the same servers (scripts/valgrind.sh --session): no invalid
        # access, no leak, through its start, its requests and its drain.
        # The unit tests under valgrind are `make valgrind`'s; under ASan
        # they ran above.
        if [[ -z "$ONLY" || "$ONLY" == *valgrind* ]]; then
            echo "== valgrind (a ticketd serve session under memcheck)"
            out="$LOGS/valgrind.out"
            scripts/valgrind.sh --session >"$out" 2>&1
            grep -E '^valgrind: ' "$out"
            add_summary valgrind "$out"
        fi
    else
        failures+=("private servers did not start")
        failed=$((failed + 1))
    fi
    scripts/services.sh down "$STATE" || true

    # The replay lab (tests/lab/run.sh): its own stack on the same ports,
    # now that the integration tests' servers are down; each of its checks
    # counts as one.
    if [[ -z "$ONLY" || "$ONLY" == *lab* ]]; then
        echo "== replay lab (the page in headless Chromium, make lesson, what it refuses)"
        out="$LOGS/lab.out"
        tests/lab/run.sh 2>&1 | tee "$out" | grep -E '^(ok|FAIL) '
        p=$(sed -n 's/^lab: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$out")
        f=$(sed -n 's/^lab: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$out")
        if [[ -z "$p" ]]; then
            p=0
            f=1 # it stopped before its summary
        fi
        passed=$((passed + p))
        failed=$((failed + f))
        ((f == 0)) || failures+=("replay lab (see $out)")
    fi
fi

if [[ ${#failures[@]} -gt 0 ]]; then
    echo "failed:"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
