#!/usr/bin/env bash
# Deliver every event of ticketd's stream once more, the way a relay that
# crashed between XADD and marking its outbox rows does: the same events
# under new entry ids. Consumers must apply each effect once anyway (their
# dedup row is keyed by the business key, not the entry id).
#
# Usage: loadtest/redeliver.sh [--host H] [--port P] [--stream NAME] [--wait S]
#                              [--min-entries N]
#
#   --host H, --port P   the Redis ticketd uses (default 127.0.0.1:16379, the
#                        one `make run` starts)
#   --stream NAME        the event stream (default ticketd:events)
#   --wait S             how long to wait for the consumer groups, before and
#                        after the copies (default 15 s each)
#   --min-entries N      before copying, wait (within --wait) until the stream
#                        holds at least N entries (default 1): right after a
#                        load the relay may not have published anything yet,
#                        and an empty stream looks settled
#
# It waits until every consumer group has read and acknowledged everything,
# copies each entry of the stream (one Lua script, so the copies are of one
# snapshot), waits again until the groups have worked through the copies,
# and prints how many it copied. Meant as `ticketd-load mq-redelivery
# --after-load "loadtest/redeliver.sh --port P"`, which then checks the points.
# Exit status: 0 done, 1 Redis unreachable or the groups did not catch up.
set -euo pipefail

HOST=127.0.0.1
PORT=16379
STREAM=ticketd:events
WAIT_S=15
MIN_ENTRIES=1

while (($# > 0)); do
    case "$1" in
    --host) HOST=${2:?}; shift ;;
    --port) PORT=${2:?}; shift ;;
    --stream) STREAM=${2:?}; shift ;;
    --wait) WAIT_S=${2:?}; shift ;;
    --min-entries) MIN_ENTRIES=${2:?}; shift ;;
    -h | --help)
        sed -n '/^# Usage:/,/^# Exit status:/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) printf 'redeliver: unknown option %s\n' "$1" >&2; exit 1 ;;
    esac
    shift
done
[[ "${WAIT_S}" =~ ^[0-9]+$ ]] || { printf 'redeliver: --wait takes seconds\n' >&2; exit 1; }
[[ "${MIN_ENTRIES}" =~ ^[0-9]+$ ]] || { printf 'redeliver: --min-entries takes a count\n' >&2; exit 1; }

rcli() { timeout 5 redis-cli -h "${HOST}" -p "${PORT}" --raw "$@"; }

# Prints "<groups> <groups still busy> <entries>": a group is busy until it has been
# handed the stream's newest entry (its last-delivered-id; Redis does not
# always know a group's lag) and has acknowledged everything (pending).
# shellcheck disable=SC2016 # Lua, not shell
BUSY_LUA='
if redis.call("EXISTS", KEYS[1]) == 0 then return {0, 0, 0} end
local info = redis.call("XINFO", "STREAM", KEYS[1])
local last
for i = 1, #info, 2 do if info[i] == "last-generated-id" then last = info[i + 1] end end
local groups = redis.call("XINFO", "GROUPS", KEYS[1])
local busy = 0
for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f["pending"] > 0 or f["last-delivered-id"] ~= last then busy = busy + 1 end
end
return {#groups, busy, redis.call("XLEN", KEYS[1])}'

# shellcheck disable=SC2016 # Lua, not shell
COPY_LUA='
local entries = redis.call("XRANGE", KEYS[1], "-", "+")
for _, e in ipairs(entries) do redis.call("XADD", KEYS[1], "*", unpack(e[2])) end
return #entries'

busy() {
    local out
    out=$(rcli EVAL "${BUSY_LUA}" 1 "${STREAM}" | paste -sd' ') || return 2
    [[ "${out}" =~ ^[0-9]+\ [0-9]+\ [0-9]+$ ]] || return 2
    printf '%s\n' "${out}"
}

# Waits until there are groups, none is busy and the stream holds at least
# $2 entries; bounded by WAIT_S.
wait_settled() {
    local what=$1 min=$2 deadline state groups left entries
    deadline=$((SECONDS + WAIT_S))
    while :; do
        state=$(busy) || { printf 'redeliver: Redis %s:%s does not answer\n' "${HOST}" "${PORT}" >&2; return 1; }
        read -r groups left entries <<<"${state}"
        if ((${groups:-0} > 0 && ${left:-1} == 0 && ${entries:-0} >= min)); then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            printf 'redeliver: %s: %s of %s consumer groups still busy, %s of at least %s entries, after %s s\n' \
                "${what}" "${left:-?}" "${groups:-0}" "${entries:-0}" "${min}" "${WAIT_S}" >&2
            return 1
        fi
        sleep 0.2
    done
}

wait_settled "before the copies" "${MIN_ENTRIES}"
copied=$(rcli EVAL "${COPY_LUA}" 1 "${STREAM}") || copied=""
if [[ ! "${copied}" =~ ^[0-9]+$ ]]; then
    printf 'redeliver: copying the entries failed: %s\n' "${copied}" >&2
    exit 1
fi
wait_settled "after the copies" 0
printf 'redeliver: delivered %s entries of %s once more; the consumer groups worked through them\n' \
    "${copied}" "${STREAM}"
