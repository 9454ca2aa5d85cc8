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
# matched as written, phrases in any case. Prints each hit, then one line:
# "thread names: ok (...)" or "thread names: N left (...)".
#
# Before the real check it runs on a sample holding every entry once (and a
# clean file) and must find exactly those: a check that cannot fail proves
# nothing.

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
want=$((${#NAMES[@]} + ${#PHRASES[@]}))
hits "$sample" >"$sample/found"
got=$?
if [[ $got -ne $want ]] || grep -q clean.c "$sample/found"; then
    cat "$sample/found"
    echo "thread names: the check found $got of the $want planted names (and nothing in clean.c): it is broken"
    exit 1
fi

cd "$ROOT" || exit 1
dir=${1:-service}
hits "$dir"
left=$?
entries="${#NAMES[@]} names, ${#PHRASES[@]} phrases"
if [[ $left -gt 0 ]]; then
    echo "thread names: $left left in $dir ($entries)"
    exit 1
fi
echo "thread names: ok ($dir: $entries, none left)"
