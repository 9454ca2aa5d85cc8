#!/usr/bin/env bash
# check-thread-names.sh - no name of the thread-per-request model is left
# in the service.
#
#   scripts/check-thread-names.sh          (run by make test through
#                                          scripts/run-tests.sh)
#   scripts/check-thread-names.sh DIR      checks DIR instead of service/
#
# ticketd serves requests on an event loop per core, each request's work on
# a fiber that parks where it waits; only the background jobs run on
# threads of their own. The names and phrases below described requests
# handed to worker threads, each with its own connections: a reader who
# meets one believes a model the code no longer has. Identifiers are
# matched as written, phrases in any case.
#
# Two checks: first the check itself, on a sample holding every entry once
# (and a clean file with near misses), which must find exactly those: a
# check that cannot fail proves nothing; then the tree. Prints "ok"/"FAIL"
# per check, a line per hit, and a last line "thread-names: N passed, N
# failed"; exits 1 when a check failed.

set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)

# The identifiers of the old model.
NAMES=(ROUTE_THREAD_WORKER API_BLOCKING store_thread_idle http_thread_hooks FIBER_SLOT_DB io_threads)
# Its phrases.
PHRASES=("one connection per thread" "worker thread")

# Prints every hit under $1 (file:line:text) and returns how many.
hits() {
    local dir=$1 n=0 out
    for name in "${NAMES[@]}"; do
        out=$(grep -rnwF -- "$name" "$dir")
        [[ -n "$out" ]] && printf '%s\n' "$out" && n=$((n + $(printf '%s\n' "$out" | wc -l)))
    done
    for phrase in "${PHRASES[@]}"; do
        out=$(grep -rniF -- "$phrase" "$dir")
        [[ -n "$out" ]] && printf '%s\n' "$out" && n=$((n + $(printf '%s\n' "$out" | wc -l)))
    done
    return $((n > 255 ? 255 : n))
}

sample=$(mktemp -d)
trap 'rm -rf "$sample"' EXIT
{
    for name in "${NAMES[@]}"; do
        printf 'int x_%s = %s;\n' "$name" "$name"
    done
    printf '/* Each request keeps One Connection Per Thread. */\n'
    printf '/* handed to a Worker Thread */\n'
} >"$sample/planted.c"
# Near misses: a longer identifier, a real thread of a background job.
printf 'int store_thread_idle_count;\n/* the relay job runs on a thread of its own */\n' >"$sample/clean.c"
passed=0
failed=0
# One check's verdict: $1 true (0) or not, $2 what an ok says, $3 what a
# FAIL says, $4 the hits that go with a FAIL.
verdict() {
    if [[ $1 -eq 0 ]]; then
        passed=$((passed + 1))
        echo "ok    thread-names: $2"
    else
        failed=$((failed + 1))
        echo "FAIL  thread-names: $3"
        sed 's/^/      /' "$4"
    fi
}

want=$((${#NAMES[@]} + ${#PHRASES[@]}))
hits "$sample" >"$sample/found"
got=$?
[[ $got -eq $want ]] && ! grep -q clean.c "$sample/found"
verdict $? "a sample with each of the $want entries planted: all found, no near miss" \
    "$got hits on a sample with $want entries planted (and near misses)" "$sample/found"

cd "$ROOT" || exit 1
dir=${1:-service}
if [[ ! -d "$dir" ]]; then
    echo "thread-names: no folder $dir to check"
    exit 1
fi
entries="${#NAMES[@]} names, ${#PHRASES[@]} phrases"
hits "$dir" >"$sample/left"
left=$?
verdict $left "none of the $entries left in $dir" "$left left in $dir ($entries)" "$sample/left"
echo "thread-names: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
