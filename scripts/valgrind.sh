#!/usr/bin/env bash
# Runs the release unit tests and a short ticketd session under valgrind's
# memcheck with full leak checking; any error or definite leak fails.
#
# The session uses the private test servers (.state/test, or
# TICKETD_TEST_STATE and its ports), creates a session, issues a token,
# places, replays and conflicts an order, then stops ticketd with SIGTERM
# so every thread and connection is torn down.
#
#   scripts/valgrind.sh              the unit tests, then the session
#   scripts/valgrind.sh --session    the session alone (make test runs it)
set -uo pipefail
cd "$(dirname "$0")/.."

# --max-stackframe: a fiber's stack (base/fiber.c) is its own mapping, a
# few hundred KiB from the next, and valgrind takes a stack pointer that
# moves by less than this for a frame pushed or popped, not for a switch:
# at its default of 2 MB, every switch between two fibers marked the
# other stack unaddressable and each read there an error. No frame of
# ticketd comes near 128 KiB.
VG=(valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --error-exitcode=3
    --max-stackframe=131072 --suppressions=tests/valgrind.supp)
STATE=${TICKETD_TEST_STATE:-.state/test}
REDIS_PORT=${TICKETD_TEST_REDIS_PORT:-26379}
MYSQL_PORT=${TICKETD_TEST_MYSQL_PORT:-23306}
PORT=${TICKETD_VALGRIND_PORT:-24990}
failed=0
passed=0
units=1
[[ "${1:-}" == --session ]] && units=0

if ((units)); then
    for bin in build/release/tests/test_*; do
        [[ -x "$bin" ]] || continue
        if "${VG[@]}" "$bin" >/dev/null 2>"build/valgrind-$(basename "$bin").log"; then
            passed=$((passed + 1))
        else
            echo "valgrind: $bin failed (build/valgrind-$(basename "$bin").log)"
            failed=$((failed + 1))
        fi
    done
fi

# Servers already running (make test's, between its integration tests and
# the lab) are used and left running; servers started here are stopped.
started=1
scripts/services.sh status "$STATE" >/dev/null 2>&1 && started=0
env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST scripts/services.sh up "$STATE" "$REDIS_PORT" "$MYSQL_PORT" &&
    TICKETD_REDIS_PORT=$REDIS_PORT TICKETD_MYSQL_PORT=$MYSQL_PORT scripts/services.sh migrate "$STATE" || exit 1

export TICKETD_JWT_SECRET=valgrind-session-jwt-secret-0123456789abcdef
export TICKETD_PAY_SECRET=valgrind-session-pay-secret-0123456789abcdef
TICKETD_PORT=$PORT TICKETD_REDIS_PORT=$REDIS_PORT TICKETD_MYSQL_PORT=$MYSQL_PORT TICKETD_MYSQL_PASSWORD=ticketd \
    TICKETD_ENV=test \
    "${VG[@]}" build/release/ticketd serve >build/valgrind-serve.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    curl -fs "127.0.0.1:$PORT/livez" >/dev/null && break
    sleep 0.2
done
url=127.0.0.1:$PORT
admin=$(TICKETD_JWT_SECRET=$TICKETD_JWT_SECRET build/release/ticketd token --user 1 --admin)
user=$(TICKETD_JWT_SECRET=$TICKETD_JWT_SECRET build/release/ticketd token --user 4242)
sid=$(curl -fs -XPOST "$url/api/v1/sessions" -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' -d '{"title":"valgrind","price_cents":100,"stock":5}' |
    sed 's/.*"id":\([0-9]*\).*/\1/')
tok=$(curl -fs -XPOST "$url/api/v1/tokens" -H "Authorization: Bearer $user" | sed 's/.*"token":"\([^"]*\)".*/\1/')
key="vg-$$-$RANDOM"
for q in 1 1 2; do
    curl -s -o /dev/null -XPOST "$url/api/v1/orders" -H "Authorization: Bearer $user" \
        -H 'Content-Type: application/json' -H "Idempotency-Key: $key" -H "X-Order-Token: $tok" \
        -d "{\"session_id\":$sid,\"quantity\":$q}"
done
curl -s -o /dev/null "$url/api/v1/orders" -H "Authorization: Bearer $user"
curl -s -o /dev/null "$url/metrics"
curl -s -o /dev/null "$url/readyz"
curl -s -o /dev/null "$url/nope"
kill -TERM "$pid"
if wait "$pid"; then
    passed=$((passed + 1))
else
    echo "valgrind: ticketd serve reported errors (build/valgrind-serve.log)"
    grep -A12 'definitely lost\|Invalid\|uninitialised' build/valgrind-serve.log | head -40
    failed=$((failed + 1))
fi
((started)) && { scripts/services.sh down "$STATE" >/dev/null 2>&1 || true; }
echo "valgrind: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
