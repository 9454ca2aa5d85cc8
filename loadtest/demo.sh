#!/usr/bin/env bash
# ticketd replay lab: fire the duplicates real systems see at two ticketd
# instances, first with every defence on, then with defences switched off in
# turn, and write a report of what each defence stopped.
#
# Usage: loadtest/demo.sh [--quick] [--out DIR]
#
#   --quick     smaller scenarios (about a third of the requests)
#   --out DIR   where the report goes (default report/demo-<timestamp>)
#
# Everything runs on a stack of its own, so `make run` and `make test` beside
# it are untouched: private Redis and MariaDB under .state/demo (ports 21379
# and 21306, scripts/services.sh), and two `build/release/ticketd serve` on
# 127.0.0.1:21080 and :21081 with TICKETD_ENV=demo and fresh random secrets.
# Runs that switch unique-index off use a second database,
# ticketd_demo_noindex, migrated from sql/ and then stripped of the two unique
# keys on orders; every other run uses the database ticketd. Before each run
# the instances are restarted with that run's TICKETD_DEFENSES and the
# database and Redis are emptied, so each audit judges one run alone.
#
# The report folder holds report.md (a table per run and a verdict line),
# damage.png, layers.png, throughput.png and latency.png (gnuplot), the JSON
# and the printed table of every scenario (runs/), and the instances' logs
# (logs/). Everything the demo started is stopped on exit, also on failure
# or Ctrl-C: the instances by their pids, the servers with services.sh down.
#
# The last runs keep every defence on and add a fault in the middle of the
# load: Redis flushed, one instance killed (the clients fail over to the
# other), MariaDB restarted (the clients retry after 503), and a downstream
# slower than the in-flight and lock TTLs (build/faults/ticketd with
# TICKETD_FAULT=order.after_redis:delay). ticketd-load retries as a client
# does, and an answer the contract forbids counts as damage.
#
# Exit status: 0 every run that should hold held; 2 damage where every
# defence that matters was on (a bug); 1 the demo could not run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "${HERE}/.." && pwd)
TICKETD=${ROOT}/build/release/ticketd
TICKETD_FAULTS=${ROOT}/build/faults/ticketd
LOAD=${ROOT}/build/loadtest/ticketd-load
REPORT=${ROOT}/build/loadtest/ticketd-report
SERVICES=${ROOT}/scripts/services.sh

STATE=${ROOT}/.state/demo
REDIS_PORT=21379
MYSQL_PORT=21306
HTTP_PORTS=(21080 21081)
DB_MAIN=ticketd
DB_NOINDEX=ticketd_demo_noindex
INTERVAL_MS=200

QUICK=0
OUT=""

die() {
    printf 'demo: error: %s\n' "$*" >&2
    exit 1
}
log() { printf 'demo: %s\n' "$*" >&2; }

while (($# > 0)); do
    case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=${2:?}; shift ;;
    -h | --help)
        sed -n '/^# Usage:/,/^# defence that matters/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) printf 'demo: unknown option %s\n' "$1" >&2; exit 1 ;;
    esac
    shift
done

# Paths in the report and the --after-load command are relative to the checkout.
cd "${ROOT}"

for bin in "${TICKETD}" "${TICKETD_FAULTS}" "${LOAD}" "${REPORT}"; do
    [[ -x "${bin}" ]] || die "${bin#"${ROOT}"/} is missing: run 'make demo' (or make build build/faults/ticketd && make -C loadtest)"
done
for tool in redis-cli mariadb curl; do
    command -v "${tool}" >/dev/null || die "${tool} not found; scripts/deps.sh installs it"
done
GNUPLOT=$(command -v gnuplot || true)
[[ -n "${GNUPLOT}" ]] || log "gnuplot not found (scripts/deps.sh installs gnuplot-nox): the report will have no charts"

# shellcheck disable=SC2016 # $1 is expanded by the inner bash
port_busy() { timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }
for p in "${HTTP_PORTS[@]}"; do
    port_busy "${p}" && die "127.0.0.1:${p} is taken; is another demo running?"
done

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-${ROOT}/report/demo-${STAMP}}
mkdir -p "${OUT}/runs" "${OUT}/logs"
OUT=$(cd "${OUT}" && pwd)
MANIFEST=${OUT}/runs.tsv
: >"${MANIFEST}"

# --- what we start, and stopping it ------------------------------------------

PIDS=()
STACK_UP=0
INSTANCE_EXITS=()
# The pid a run's fault killed on purpose: its exit is no error.
KILLED_PID=""

# The servers belong to this demo alone: what services.sh sees must not point
# it at someone else's Redis or MariaDB.
services() {
    env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET -u TICKETD_CONFIG \
        -u TICKETD_MYSQL_USER -u TICKETD_MYSQL_PASSWORD -u TICKETD_REDIS_PASSWORD \
        "${SERVICES}" "$@"
}

# Stops the instances: SIGTERM (they drain), SIGKILL after 20 s. One a
# fault killed already is only reaped.
stop_instances() {
    local pid i status
    for pid in "${PIDS[@]}"; do
        kill -TERM "${pid}" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        # A killed child stays a zombie (kill -0 succeeds) until waited for.
        for ((i = 0; i < 200 && pid != KILLED_PID; i++)); do
            kill -0 "${pid}" 2>/dev/null || break
            sleep 0.1
        done
        if [[ "${pid}" != "${KILLED_PID}" ]] && kill -0 "${pid}" 2>/dev/null; then
            log "ticketd pid ${pid} ignored SIGTERM for 20 s; killing it"
            kill -KILL "${pid}" 2>/dev/null || true
        fi
        status=0
        wait "${pid}" 2>/dev/null || status=$?
        if [[ "${pid}" == "${KILLED_PID}" ]]; then
            ((status == 137)) || log "the instance killed on purpose (pid ${pid}) exited ${status}"
            continue
        fi
        INSTANCE_EXITS+=("${status}")
    done
    PIDS=()
    KILLED_PID=""
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_instances
    if ((STACK_UP)); then
        services down "${STATE}" >/dev/null 2>&1 || log "services.sh down ${STATE} failed"
    fi
    exit "${rc}"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# --- the stack ------------------------------------------------------------------

random_hex() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
JWT_SECRET=$(random_hex)
PAY_SECRET=$(random_hex)

T_START=${SECONDS}
log "starting the private stack under ${STATE#"${ROOT}"/} (Redis :${REDIS_PORT}, MariaDB :${MYSQL_PORT})"
STACK_UP=1
services up "${STATE}" "${REDIS_PORT}" "${MYSQL_PORT}" >"${OUT}/logs/services.log" 2>&1 ||
    { tail -n 20 "${OUT}/logs/services.log" >&2; die "the private servers did not start"; }
TICKETD_MYSQL_DB=${DB_MAIN} services migrate "${STATE}" >>"${OUT}/logs/services.log" 2>&1 ||
    { tail -n 20 "${OUT}/logs/services.log" >&2; die "migrating ${DB_MAIN} failed"; }

# The database without the unique keys that make the unique-index defence:
# up again (it reuses the servers) creates it, migrate fills it.
TICKETD_MYSQL_DB=${DB_NOINDEX} services up "${STATE}" "${REDIS_PORT}" "${MYSQL_PORT}" \
    >>"${OUT}/logs/services.log" 2>&1 || die "creating ${DB_NOINDEX} failed"
TICKETD_MYSQL_DB=${DB_NOINDEX} services migrate "${STATE}" >>"${OUT}/logs/services.log" 2>&1 ||
    { tail -n 20 "${OUT}/logs/services.log" >&2; die "migrating ${DB_NOINDEX} failed"; }
MYSQL_PWD=ticketd mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "${MYSQL_PORT}" -u ticketd \
    "${DB_NOINDEX}" -e "ALTER TABLE orders DROP INDEX IF EXISTS uq_orders_request,
                        DROP INDEX IF EXISTS uq_orders_user_request" ||
    die "dropping the unique keys of ${DB_NOINDEX}.orders failed"

# Nothing but this demo may use these servers: a ticketd started elsewhere
# with their ports would consume events, sweep orders and hold locks along
# with ours, and the figures would be wrong. Give a stray one a moment to
# reconnect, then count the connections that are not ours.
sleep 1.5
stray_redis=$(redis-cli -h 127.0.0.1 -p "${REDIS_PORT}" CLIENT LIST | grep -vc 'cmd=client' || true)
stray_mysql=$(MYSQL_PWD=ticketd mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "${MYSQL_PORT}" \
    -u ticketd -N -e "SELECT COUNT(*) FROM information_schema.processlist
                      WHERE id <> CONNECTION_ID() AND user = 'ticketd'" || echo "?")
if [[ "${stray_redis}" != 0 || "${stray_mysql}" != 0 ]]; then
    die "other clients use the demo's servers (${stray_redis} on Redis :${REDIS_PORT}, ${stray_mysql} on MariaDB :${MYSQL_PORT}); stop whatever was started with these ports, then run the demo again"
fi

# --- one run: instances with some defences off, one or more scenarios -------------

TARGETS=()
for p in "${HTTP_PORTS[@]}"; do
    TARGETS+=(--target "http://127.0.0.1:${p}")
done

# What the next run's instances run with besides the usual: another binary
# (RUN_BIN) and more settings (RUN_ENV, KEY=VALUE words). run() clears them.
RUN_BIN=""
RUN_ENV=()

start_instances() {
    local defences=$1 db=$2 run=$3 p pid i
    for p in "${HTTP_PORTS[@]}"; do
        env -i PATH="${PATH}" HOME="${HOME:-/}" \
            TICKETD_ENV=demo TICKETD_DEFENSES="${defences}" \
            TICKETD_BIND=127.0.0.1 TICKETD_PORT="${p}" \
            TICKETD_REDIS_HOST=127.0.0.1 TICKETD_REDIS_PORT="${REDIS_PORT}" \
            TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${MYSQL_PORT}" \
            TICKETD_MYSQL_USER=ticketd TICKETD_MYSQL_PASSWORD=ticketd TICKETD_MYSQL_DB="${db}" \
            TICKETD_JWT_SECRET="${JWT_SECRET}" TICKETD_PAY_SECRET="${PAY_SECRET}" \
            TICKETD_ACCESS_LOG=0 TICKETD_CONSUMER_BLOCK_MS=100 "${RUN_ENV[@]}" \
            "${RUN_BIN:-${TICKETD}}" serve >"${OUT}/logs/run${run}-${p}.log" 2>&1 &
        PIDS+=($!)
    done
    for p in "${HTTP_PORTS[@]}"; do
        for ((i = 0; ; i++)); do
            curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:${p}/readyz" 2>/dev/null && break
            for pid in "${PIDS[@]}"; do
                kill -0 "${pid}" 2>/dev/null ||
                    { tail -n 5 "${OUT}/logs/run${run}-${p}.log" >&2; die "ticketd exited at start (run ${run})"; }
            done
            ((i < 100)) || die "ticketd on :${p} not ready after 10 s (run ${run})"
            sleep 0.1
        done
    done
}

RUN=0
# run LABEL OFF DB EXPECT PURPOSE SCENARIO... ; each SCENARIO is one string of
# ticketd-load arguments, the scenario's name first; the word @redeliver in it
# stands for --after-load with redeliver.sh, and the faults (with
# --fault-after N among the words) @flush for FLUSHALL on the demo's Redis, @kill2 for
# kill -9 of the second instance, @mysql-restart for stopping and starting
# the demo's MariaDB.
run() {
    local label=$1 off=$2 db=$3 expect=$4 purpose=$5 defences dbtext s name words args json txt rc cmd d w
    shift 5
    RUN=$((RUN + 1))
    if [[ "${off}" == none ]]; then
        defences=all
    else
        defences=$(printf '%s' "${off}" | sed 's/\([^,]*\)/-\1/g')
    fi
    if [[ "${db}" == "${DB_NOINDEX}" ]]; then
        dbtext="${DB_NOINDEX} (no unique keys on orders)"
    else
        dbtext="${DB_MAIN} (all migrations)"
    fi
    printf '\n=== run %d: %s (%s)\n' "${RUN}" "${off/#none/all defences on}" "${db}"
    stop_instances
    TICKETD_MYSQL_DB=${db} services reset "${STATE}" >>"${OUT}/logs/services.log" 2>&1 ||
        die "emptying ${db} failed (run ${RUN})"
    start_instances "${defences}" "${db}" "${RUN}"
    RUN_BIN=""
    RUN_ENV=()
    # ticketd says loudly what is off; the report should only claim what it said.
    for d in ${off//,/ }; do
        [[ "${d}" == none ]] && continue
        grep -q "DEFENCE SWITCHED OFF: ${d} " "${OUT}/logs/run${RUN}-${HTTP_PORTS[0]}.log" ||
            die "ticketd did not report ${d} as switched off (run ${RUN})"
    done
    for s in "$@"; do
        read -r -a words <<<"${s}"
        args=()
        cmd="ticketd-load ${s}"
        for w in "${words[@]}"; do
            case "${w}" in
            @redeliver) args+=(--after-load "${REDELIVER}") ;;
            @flush) args+=(--fault "${FAULT_FLUSH}") ;;
            @kill2)
                KILLED_PID=${PIDS[1]}
                args+=(--fault "kill -9 ${KILLED_PID}")
                ;;
            @mysql-restart) args+=(--fault "${FAULT_MYSQL}") ;;
            *) args+=("${w}") ;;
            esac
        done
        # The report prints the command as it runs again from the checkout
        # against `make run` (the demo's own stack is gone by then).
        cmd=build/loadtest/${cmd}
        cmd=${cmd/@redeliver/--after-load \"${REDELIVER/${REDIS_PORT}/16379}\"}
        cmd=${cmd/@flush/--fault \"${FAULT_FLUSH/${REDIS_PORT}/16379}\"}
        cmd=${cmd/@kill2/--fault \"kill -9 PID-OF-A-SECOND-INSTANCE\"}
        cmd=${cmd/@mysql-restart/--fault \"${FAULT_MYSQL//${STATE#"${ROOT}"/}/.state/run}\"}
        name=${args[0]}
        json=runs/$(printf '%02d' "${RUN}")-${name}.json
        txt=${OUT}/runs/$(printf '%02d' "${RUN}")-${name}.txt
        cmd+=" --target http://127.0.0.1:8080 --config config/ticketd.env --interval ${INTERVAL_MS}"
        rc=0
        TICKETD_JWT_SECRET=${JWT_SECRET} TICKETD_PAY_SECRET=${PAY_SECRET} \
            timeout 120 "${LOAD}" "${args[@]}" "${TARGETS[@]}" --interval "${INTERVAL_MS}" \
            --json "${OUT}/${json}" >"${txt}" 2>&1 || rc=$?
        printf '  %-14s exit %d  %s\n' "${name}" "${rc}" "$(grep '^verdict:' "${txt}" || echo "(no verdict: see ${txt#"${ROOT}"/})")"
        printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${RUN}" "${label}" "${off}" "${dbtext}" \
            "${expect}" "${purpose}" "${name}" "${json}" "${cmd}" >>"${MANIFEST}"
    done
}

# --- the runs ---------------------------------------------------------------------

if ((QUICK)); then
    K=1
else
    K=3
fi
STORM="retry-storm --rounds $((K * 1000)) --copies 8 --stock 1000000"
CLICK="double-click --shared-token --rounds $((K * 400)) --stock 1000000"
SALE="flash-sale --users $((K * 500)) --seats 50 --rounds 2"
GATEWAY="gateway-retry --orders $((K * 200)) --retries 3"
MQ="mq-redelivery --orders $((K * 200)) --settle 30"
REDELIVER="loadtest/redeliver.sh --port ${REDIS_PORT} --wait 20"
CACHE_TO_TOKEN=response-cache,inflight-key,session-lock,token
# The faults of the last runs, as the shell of ticketd-load --fault runs them.
FAULT_FLUSH="redis-cli -h 127.0.0.1 -p ${REDIS_PORT} FLUSHALL"
SVC="env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET -u TICKETD_CONFIG scripts/services.sh"
FAULT_MYSQL="${SVC} stop-mysql ${STATE#"${ROOT}"/} && ${SVC} start-mysql ${STATE#"${ROOT}"/}"
# The fault comes after a fifth of a storm's answers (a retry storm: a token
# and 8 copies per key; a flash sale: a token and an order per buyer and
# round), tied to the load's progress so that it lands mid-storm on a machine
# twice as fast or twice as slow.
FSTORM="retry-storm --rounds $((K * 600)) --copies 8 --stock 1000000 --fault-after $((K * 1000))"
FSALE="flash-sale --users $((K * 400)) --seats 50 --rounds 6 --fault-after $((K * 600))"
# A downstream slower than the TTLs: copies sent over a second, markers and
# locks that live 300 ms, orders that wait 800 ms before their transaction.
SLOW_ENV=(TICKETD_INFLIGHT_TTL_MS=300 TICKETD_LOCK_TTL_MS=300
    "TICKETD_FAULT=order.after_redis:delay:800:$((K * 40))")
SSTORM="retry-storm --rounds $((K * 60)) --copies 6 --spread 1000 --concurrency 60"

run "all on" none "${DB_MAIN}" none \
    "Every scenario against every defence: nothing may be sold, paid or credited twice." \
    "${STORM}" "${CLICK}" "${SALE}" "${GATEWAY}" "${MQ} @redeliver" "cart-storm --rounds $((K * 40)) --copies 4"

run "cache off" response-cache "${DB_MAIN}" none \
    "Without the response cache the retry storm falls through to the layers behind it; the retry after the storm gets its order from the unique index instead of the cache." \
    "${STORM}"
run "cache, inflight off" response-cache,inflight-key "${DB_MAIN}" none \
    "Without the cache and the in-flight marker, the session lock turns the copies away (DUPLICATE_SUBMISSION, allowed here: the marker that would say REQUEST_IN_PROGRESS is off) unless the order is already in the database." \
    "${STORM} --allow DUPLICATE_SUBMISSION"
run "cache, inflight, lock off" response-cache,inflight-key,session-lock "${DB_MAIN}" none \
    "Only the one-time token is left in Redis, and it is spent by the key: the copies of that key pass it, and the unique index answers them with the one order." \
    "${STORM}"
run "cache..token off" "${CACHE_TO_TOKEN}" "${DB_MAIN}" none \
    "Every Redis defence off: the unique index alone still yields one order per key, and replays the rest." \
    "${STORM}"
run "cache..token, index off" "${CACHE_TO_TOKEN},unique-index" "${DB_NOINDEX}" damage \
    "And without the unique index (check-then-insert, on a database without the unique keys) the copies race past the look and insert a duplicate each; only the copies that look after a commit are still answered with the order (their replays say unique-index: the look stands in for it)." \
    "${STORM}"
run "index off" unique-index "${DB_NOINDEX}" none \
    "The unique index off but the Redis defences on: they catch the storm first. The index is the last word, for when Redis forgets (flushed, failed over, expired)." \
    "${STORM}"

run "lock off" session-lock "${DB_MAIN}" none \
    "One form submitted twice, a new key each time, one token: without the session lock the token refuses the second click." \
    "${CLICK}"
run "token off" token "${DB_MAIN}" may \
    "The same double submission without the token: the session lock refuses the click that meets the first in flight, but not one that arrives after the first order completed and the lock was released." \
    "${CLICK}"
run "lock, token off" session-lock,token "${DB_MAIN}" damage \
    "Without both, each click of the double submission becomes an order." \
    "${CLICK}"

run "stock-cas off" stock-cas "${DB_MAIN}" damage \
    "A flash sale with the stock read and then written (no compare-and-set): concurrent buyers read the same stock and sell seats that are not there." \
    "${SALE}"
run "callback-dedup off" callback-dedup "${DB_MAIN}" damage \
    "A gateway retrying its callbacks without the txn_id dedup: the retry of the payment that paid an order is taken for a second payment and sent for refund." \
    "${GATEWAY}"
run "consumer-dedup off" consumer-dedup "${DB_MAIN}" damage \
    "Every order.paid event delivered twice (as after a relay crash) to consumers without their dedup row: points are credited twice." \
    "${MQ} @redeliver"

# The articles' pitfalls: each run switches off one detail, and the same
# scenario with every defence on (run 1, or the run named) shows zero.
run "lock, token-atomic off" session-lock,token-atomic "${DB_MAIN}" damage \
    "The token checked with GET and spent by a separate write (two round trips): the two clicks of one form both read it unspent. Compare run 8 (session-lock off, atomic token): zero." \
    "${CLICK}"
RUN_BIN=${TICKETD_FAULTS}
RUN_ENV=(TICKETD_LOCK_TTL_MS=400 TICKETD_FAULT=order.after_redis:delay:600)
run "lock-owner-check off" lock-owner-check "${DB_MAIN}" damage \
    "Every order 600 ms slow, locks of 400 ms; three clicks 450 and 250 ms apart. Click 1 outlives its lock, click 2 takes it, click 1's plain DEL frees it, and click 3 orders while click 2 holds it." \
    "double-click --burst 3 --gaps 450,250 --lock-ttl 400 --rounds $((K * 4))"
RUN_BIN=${TICKETD_FAULTS}
RUN_ENV=(TICKETD_CLAIM_IDLE_MS=300 "TICKETD_FAULT=consumer.effect:fail:$((K * 10))")
run "dedup-same-tx off" consumer-dedup-same-tx "${DB_MAIN}" damage \
    "The first effects fail after the dedup row; with the row committed on its own, the redelivery finds it and skips the effect: points lost." \
    "${MQ}"
run "dedup-business-key off" consumer-dedup-business-key "${DB_MAIN}" damage \
    "Dedup by stream entry id: every event republished under a new entry id (redeliver.sh) is credited again." \
    "${MQ} @redeliver"
RUN_BIN=${TICKETD_FAULTS}
RUN_ENV=(TICKETD_FAULT=order.before_transition:delay:50)
run "state-cas off" state-cas "${DB_MAIN}" may \
    "Transitions read without a lock and write without the status/version predicate, 50 ms between read and write: cancels and payments racing both apply." \
    "${GATEWAY}"
RUN_BIN=${TICKETD_FAULTS}
RUN_ENV=("TICKETD_FAULT=order.commit_lost:fail:$((K * 5))")
run "forget-failures off" forget-failures "${DB_MAIN}" damage \
    "The first COMMITs' answers are lost (503); remembered under the key, the 503 is replayed to every retry though the orders exist." \
    "retry-storm --rounds $((K * 100)) --copies 4 --client-retries 2"
RUN_ENV=(TICKETD_IDEM_TTL_S=1)
run "all on, records expired" none "${DB_MAIN}" none \
    "Every record expires after 1 s and the retries come 2.5 s after the storm: the unique index answers them with their orders." \
    "retry-storm --rounds $((K * 200)) --copies 4 --late 2500"

run "all on, Redis flushed" none "${DB_MAIN}" none \
    "FLUSHALL in the middle of the storm: markers, locks, answers and tokens are gone. The database is asked before any refusal, so the retries of keys completed before the flush get their orders back (unique-index); keys that had not spent their token yet are truly refused." \
    "${FSTORM} @flush"
run "all on, instance killed" none "${DB_MAIN}" none \
    "kill -9 of the second instance mid-storm: its connections drop and the clients send the same requests to the first instance, which answers with the orders the dead one committed or creates them once." \
    "${FSTORM} @kill2"
run "all on, MariaDB restarted" none "${DB_MAIN}" none \
    "MariaDB stopped and started mid-storm and mid-sale: ticketd answers 503 with Retry-After while it is down, and the clients' retries (same key, same token) create or replay the orders." \
    "${FSTORM} @mysql-restart" "${FSALE} @mysql-restart"
RUN_BIN=${TICKETD_FAULTS}
RUN_ENV=("${SLOW_ENV[@]}")
run "all on, slow downstream" none "${DB_MAIN}" none \
    "A downstream slower than the TTLs (${SLOW_ENV[*]}): copies sent after the marker and the lock expired get past Redis, and the unique index catches them." \
    "${SSTORM}"
run "item-keys off" item-keys "${DB_MAIN}" damage \
    "Carts under one key for the whole batch: the retry of a cart whose scarce item sold out buys its other items again, and the item two carts share is bought by each." \
    "cart-storm --rounds $((K * 40)) --copies 4"

stop_instances
for st in "${INSTANCE_EXITS[@]}"; do
    [[ "${st}" == 0 ]] || log "warning: a ticketd instance exited with status ${st} (logs in ${OUT#"${ROOT}"/}/logs)"
done

# --- the report -------------------------------------------------------------------

ELAPSED=$((SECONDS - T_START))
REV=$(git -C "${ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "${ROOT}" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    REV="${REV} (with local changes)"
fi
printf '\n=== summary\n'
report_rc=0
"${REPORT}" --runs "${MANIFEST}" --out "${OUT}" \
    --meta "$(date -u +'%Y-%m-%d %H:%M UTC'), ticketd ${REV}, $(nproc) cores, $(uname -sr); the demo took ${ELAPSED} s" \
    --meta "Two \`ticketd serve\` instances (TICKETD_ENV=demo) on 127.0.0.1:${HTTP_PORTS[0]} and :${HTTP_PORTS[1]}, sharing a private Redis 7 (:${REDIS_PORT}) and MariaDB (:${MYSQL_PORT}); ticketd-load spreads every scenario over both, round robin, on the same machine." \
    || report_rc=$?

charts_rc=0
if [[ -n "${GNUPLOT}" ]]; then
    (cd "${OUT}" && "${GNUPLOT}" charts.gp) >"${OUT}/logs/gnuplot.log" 2>&1 || charts_rc=$?
    if ((charts_rc != 0)); then
        log "gnuplot failed (see ${OUT#"${ROOT}"/}/logs/gnuplot.log): the report has no charts"
    fi
else
    charts_rc=1
fi

printf '\nreport: %s\n' "${OUT}/report.md"
case ${report_rc} in
0) printf 'Every run that should hold held; the runs meant to break show the damage each defence prevents.\n' ;;
2) printf 'DAMAGE where it should not be: see the report.\n' ;;
*) printf 'Some runs had errors: see the report and %s.\n' "${OUT#"${ROOT}"/}/runs" ;;
esac
if ((report_rc == 0 && charts_rc != 0)); then
    exit 1
fi
exit "${report_rc}"
