#!/usr/bin/env bash
# make test-cluster: ticketd on a 3-node MariaDB Galera cluster and a Redis
# that fails over (primary, replica, three Sentinels), three `ticketd serve`
# instances each on its own Galera node, the storms of loadtest/ spread over
# all three, then the faults: a Galera node killed mid-storm and rejoining,
# the Redis primary killed mid-storm and replaced by Sentinel. Ends with
# "N passed, N failed"; exits non-zero on any failure; stops everything it
# started, by pid, even when it fails or is interrupted. Then the lab's
# Galera cards in headless Chromium (tests/lab/cluster.sh).
#
#   tests/cluster/run.sh
#   TICKETD_CLUSTER_STATE=DIR     state folder (default .state/cluster)
#   TICKETD_CLUSTER_HTTP_PORTS    the instances' ports (default "22080 22081 22082")
#   TICKETD_CLUSTER_KEEP=1        leave the cluster running at the end (the
#                                 ticketd instances are stopped all the same)
#   TICKETD_CLUSTER_ONE_WRITER=1  every instance on node 1 (the single-writer
#                                 routing docs/scaling.md recommends) instead
#                                 of each on its own node
#   TICKETD_CLUSTER_LAB=0         skip the lab's Galera cards
#
# Each check is one line, "ok" or "FAIL"; the logs are in build/cluster-logs.
set -uo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
STATE=${TICKETD_CLUSTER_STATE:-.state/cluster}
read -r -a HTTP_PORTS <<<"${TICKETD_CLUSTER_HTTP_PORTS:-22080 22081 22082}"
read -r -a SQL_PORTS <<<"${TICKETD_CLUSTER_SQL_PORTS:-22306 22307 22308}"
read -r -a SENTINEL_PORTS <<<"${TICKETD_CLUSTER_SENTINEL_PORTS:-22381 22382 22383}"
read -r -a REDIS_PORTS <<<"${TICKETD_CLUSTER_REDIS_PORTS:-22379 22380}"
export TICKETD_CLUSTER_SQL_PORTS="${SQL_PORTS[*]}" TICKETD_CLUSTER_SENTINEL_PORTS="${SENTINEL_PORTS[*]}"
LOGS=${ROOT}/build/cluster-logs
CL=${ROOT}/scripts/cluster.sh
TICKETD=${ROOT}/build/release/ticketd
LOAD=${ROOT}/build/loadtest/ticketd-load
ORDERS_OUT=${LOGS}/orders-answered.txt

rm -rf "${LOGS}"
mkdir -p "${LOGS}"

passed=0
failed=0
failures=()
T0=$(date +%s)

ok() {
    passed=$((passed + 1))
    echo "ok    $1"
}
bad() {
    failed=$((failed + 1))
    failures+=("$1")
    echo "FAIL  $1"
}

# check NAME LOGFILE CMD...: one check, passed when CMD exits 0.
check() {
    local name=$1 log=$2 rc
    shift 2
    "$@" >"${log}" 2>&1
    rc=$?
    if [[ ${rc} -eq 0 ]]; then
        ok "${name}"
    else
        bad "${name} (exit ${rc}, see ${log})"
        grep -E 'verdict|error|FAIL|damage|forbidden|without a definite|fault exited|after .* 5[0-9][0-9] ' "${log}" |
            head -12 | sed 's/^/      /'
    fi
    return "${rc}"
}

# --- stopping what we started -------------------------------------------------

TICKETD_PIDS=()

stop_instances() {
    local pid deadline
    for pid in "${TICKETD_PIDS[@]}"; do
        kill -TERM "${pid}" 2>/dev/null || true
    done
    deadline=$(($(date +%s) + 20))
    for pid in "${TICKETD_PIDS[@]}"; do
        while kill -0 "${pid}" 2>/dev/null; do
            if (($(date +%s) > deadline)); then
                kill -KILL "${pid}" 2>/dev/null || true
                break
            fi
            sleep 0.1
        done
        wait "${pid}" 2>/dev/null || true
    done
    TICKETD_PIDS=()
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_instances
    if [[ "${TICKETD_CLUSTER_KEEP:-0}" != 1 ]]; then
        "${CL}" down "${STATE}" >>"${LOGS}/cluster-down.log" 2>&1 || echo "cluster: stopping failed, see ${LOGS}/cluster-down.log"
    fi
    exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for bin in "${TICKETD}" "${LOAD}"; do
    [[ -x "${bin}" ]] || {
        echo "missing ${bin}: run make test-cluster (it builds it)"
        exit 1
    }
done

# sql NODE QUERY: QUERY on Galera node NODE (1-3), as root, tab-separated.
sql() {
    "${CL}" sql "${STATE}" "$1" --database=ticketd -e "$2"
}

# --- the cluster and three instances ---------------------------------------------

echo "== cluster: 3 Galera nodes :${SQL_PORTS[*]}, Redis primary + replica + 3 Sentinels, under ${STATE}"
if ! check "cluster up (3 nodes Synced, Sentinels see the replica)" "${LOGS}/cluster-up.log" "${CL}" up "${STATE}"; then
    echo "$passed passed, $failed failed"
    exit 1
fi

PRIMARY=$("${CL}" primary-port "${STATE}" 2>/dev/null)
mysql_env=(TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${SQL_PORTS[0]}"
    TICKETD_REDIS_HOST=127.0.0.1 TICKETD_REDIS_PORT="${PRIMARY}")
check "migrate (through node 1, replicated to all)" "${LOGS}/migrate.log" \
    env "${mysql_env[@]}" scripts/services.sh migrate
# The audit judges the whole database: every run starts from empty tables.
check "reset (empty tables, FLUSHALL on the primary)" "${LOGS}/reset.log" \
    env "${mysql_env[@]}" scripts/services.sh reset

JWT_SECRET=$(openssl rand -hex 32)
PAY_SECRET=$(openssl rand -hex 32)
export TICKETD_JWT_SECRET=${JWT_SECRET} TICKETD_PAY_SECRET=${PAY_SECRET}
SENTINELS=$(printf '127.0.0.1:%s,' "${SENTINEL_PORTS[@]}")
SENTINELS=${SENTINELS%,}

start_instance() {
    local i=$1 port=${HTTP_PORTS[$1]} tries pid node=$1
    [[ "${TICKETD_CLUSTER_ONE_WRITER:-0}" == 1 ]] && node=0
    for tries in 1 2 3 4 5 6 7 8; do
        env -u TICKETD_CONFIG -u TICKETD_REDIS_HOST -u TICKETD_REDIS_PORT \
            TICKETD_ENV=test TICKETD_BIND=127.0.0.1 TICKETD_PORT="${port}" \
            TICKETD_ACCESS_LOG=1 TICKETD_LOG_LEVEL=info \
            TICKETD_REDIS_SENTINELS="${SENTINELS}" TICKETD_REDIS_MASTER=ticketd \
            TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${SQL_PORTS[${node}]}" \
            TICKETD_MYSQL_USER=ticketd TICKETD_MYSQL_PASSWORD=ticketd TICKETD_MYSQL_DB=ticketd \
            TICKETD_CONSUMER_BLOCK_MS=100 TICKETD_CLAIM_IDLE_MS=2000 \
            "${TICKETD}" serve >>"${LOGS}/ticketd-$((i + 1)).log" 2>&1 &
        pid=$!
        for _ in $(seq 1 100); do
            if curl -fsS -m 1 "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1; then
                TICKETD_PIDS+=("${pid}")
                return 0
            fi
            kill -0 "${pid}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${pid}" 2>/dev/null || true
        wait "${pid}" 2>/dev/null || true
        # Our port is in the ephemeral range: another process's outgoing
        # connection may hold it for a while (scripts/cluster.sh says more).
        echo "instance $((i + 1)): not ready on :${port} (try ${tries}); starting it again" >>"${LOGS}/ticketd-$((i + 1)).log"
        sleep $((tries < 4 ? tries * 2 : 8))
    done
    return 1
}

instances_up() {
    local i
    for i in 0 1 2; do
        start_instance "${i}" || {
            echo "instance $((i + 1)) did not become ready on :${HTTP_PORTS[$i]}"
            tail -5 "${LOGS}/ticketd-$((i + 1)).log"
            return 1
        }
        if [[ "${TICKETD_CLUSTER_ONE_WRITER:-0}" == 1 ]]; then
            echo "instance $((i + 1)): :${HTTP_PORTS[$i]} on Galera node 1 (:${SQL_PORTS[0]}), the one writer"
        else
            echo "instance $((i + 1)): :${HTTP_PORTS[$i]} on Galera node $((i + 1)) (:${SQL_PORTS[$i]})"
        fi
    done
}
where="each on its own node"
[[ "${TICKETD_CLUSTER_ONE_WRITER:-0}" == 1 ]] && where="all on node 1 (one writer)"
if ! check "three ticketd serve, ${where}, ready" "${LOGS}/instances.log" instances_up; then
    echo "$passed passed, $failed failed"
    exit 1
fi

TARGETS=()
for p in "${HTTP_PORTS[@]}"; do
    TARGETS+=(--target "http://127.0.0.1:${p}")
done

# ticketd-load over all three instances; every order's final 201 noted.
load() {
    "${LOAD}" "$@" "${TARGETS[@]}" --orders-out "${ORDERS_OUT}" --settle 40
}

# --- storms -------------------------------------------------------------------

echo "== storms over the three instances and nodes"
check "200 same-key requests: one order" "${LOGS}/storm-same-key.log" \
    load retry-storm --rounds 1 --copies 200 --concurrency 64
check "retry storm, 40 keys x 10 copies: one order per key" "${LOGS}/storm-keys.log" \
    load retry-storm --rounds 40 --copies 10 --concurrency 48
check "flash sale: 50 seats, 300 buyers, no oversell" "${LOGS}/flash-sale.log" \
    load flash-sale --seats 50 --users 300 --concurrency 64
check "callback storm: 20 copies of each callback, one applied payment" "${LOGS}/callbacks.log" \
    load gateway-retry --orders 30 --retries 20 --concurrency 48
check "events consumed on all three nodes: points once, every paid order ticketed" \
    "${LOGS}/events.log" load mq-redelivery --orders 60 --retries 3 --concurrency 32

# Consumers ran in every instance, each against its own node.
consumed_on=0
for p in "${HTTP_PORTS[@]}"; do
    n=$(curl -fsS -m 5 "http://127.0.0.1:${p}/metrics" 2>/dev/null |
        awk '$1 ~ /^ticketd_events_consumed_total/ {s += $2} END {print s + 0}')
    ((n > 0)) && consumed_on=$((consumed_on + 1))
done
if ((consumed_on >= 2)); then
    ok "consumers spread over the nodes (${consumed_on} of 3 instances applied events)"
else
    bad "consumers spread over the nodes (only ${consumed_on} of 3 instances applied events)"
fi

# The retention lease on Galera: `ticketd partitions` through the three
# nodes at once, each with a "today" one day later than the last one any
# round planned for (read from the partitions present, so that a cluster
# kept from an earlier run the same day still has a day to add): one more
# day is to be split off each retained table. One of them takes the lease
# (the other two's takes lose to it, in the same node or at
# certification), splits the day off with one ALTER per table, and gives
# it back; the other two wait, take it in turn and find nothing left to
# do. None of the three meets a change another made first. Without the
# lease they all list the same partitions and send the same ALTERs, the
# losers refused on every node for a partition already there.
RETENTION_AHEAD=3
partitions_at_once() {
    local i rc=0 pids=() today expected added
    # The day after the furthest day partition of any retained table, less
    # the days the job splits off ahead: then today + ahead is one day past
    # it. Each table is owed the days from its own last bound to there.
    read -r today expected < <(sql 1 "
        SELECT FROM_DAYS(MAX(e) - ${RETENTION_AHEAD}), COUNT(*) * (MAX(e) + 1) - SUM(e)
        FROM (SELECT MAX(CAST(PARTITION_DESCRIPTION AS UNSIGNED)) e
              FROM information_schema.PARTITIONS
              WHERE TABLE_SCHEMA = 'ticketd' AND PARTITION_DESCRIPTION <> 'MAXVALUE'
              GROUP BY TABLE_NAME) t" 2>/dev/null | tail -1)
    if [[ -z "${today}" || "${today}" == NULL ]]; then
        echo "no day partitions found on node 1 (the instances' retention rounds should have made them)"
        return 1
    fi
    echo "today for the three: ${today}; days owed: ${expected}"
    for i in 0 1 2; do
        env -u TICKETD_CONFIG -u TICKETD_REDIS_HOST -u TICKETD_REDIS_PORT \
            TICKETD_ENV=test TICKETD_RETENTION_TODAY="${today}" TICKETD_RETENTION_AHEAD_DAYS="${RETENTION_AHEAD}" \
            TICKETD_REDIS_SENTINELS="${SENTINELS}" TICKETD_REDIS_MASTER=ticketd \
            TICKETD_MYSQL_HOST=127.0.0.1 TICKETD_MYSQL_PORT="${SQL_PORTS[${i}]}" \
            TICKETD_MYSQL_USER=ticketd TICKETD_MYSQL_PASSWORD=ticketd TICKETD_MYSQL_DB=ticketd \
            "${TICKETD}" partitions >"${LOGS}/partitions-node$((i + 1)).out" 2>&1 &
        pids+=($!)
    done
    for i in 0 1 2; do
        wait "${pids[${i}]}" || { echo "node $((i + 1)): ticketd partitions exited $?"; rc=1; }
        echo "node $((i + 1)):"
        grep -E '^[a-z_]+: ' "${LOGS}/partitions-node$((i + 1)).out" | sed 's/^/  /'
    done
    added=$(cat "${LOGS}"/partitions-node?.out |
        awk -F', ' '/ day partitions, / {split($2, a, " "); s += a[1]} END {print s + 0}')
    echo "days added over the three: ${added} (owed: ${expected})"
    if grep -q 'made by another instance' "${LOGS}"/partitions-node?.out; then
        echo "a change was made twice"
        rc=1
    fi
    ((rc == 0 && added == expected))
}
check "retention: ticketd partitions through the three nodes at once, each change made once (the lease)" \
    "${LOGS}/partitions.log" partitions_at_once
grep -E '^days added|made twice|exited' "${LOGS}/partitions.log" | sed 's/^/      /'

# --- faults -------------------------------------------------------------------

echo "== faults"
# A Galera node killed while orders, payments and events flow through all
# three instances, started again while the load still runs, back in sync
# (IST). The instance on it answers 503 meanwhile; the client retries.
fault_galera="'${CL}' kill-node '${STATE}' 2 && sleep 2 && '${CL}' start-node '${STATE}' 2 && '${CL}' wait-synced '${STATE}' 2 120"
check "Galera node 2 killed mid-storm and rejoining: no damage" "${LOGS}/fault-galera.log" \
    load mixed --duration 12 --concurrency 32 --requests 6000 --client-retries 60 --retry-for 150 \
    --fault "${fault_galera}" --fault-after 1000
check "node 2 back: Synced, cluster of 3" "${LOGS}/node2-synced.log" "${CL}" wait-synced "${STATE}" 2 60

# The Redis primary killed while the storm runs: the Sentinels promote the
# replica; ticketd asks them again and follows. The old primary comes back
# as a replica.
before_primary=$("${CL}" primary-port "${STATE}" 2>/dev/null)
fault_redis="p=\$('${CL}' kill-redis-primary '${STATE}') && '${CL}' wait-failover '${STATE}' \"\$p\" 40 && '${CL}' start-redis '${STATE}' \"\$p\""
check "Redis primary killed mid-storm, replaced by Sentinel: no damage" "${LOGS}/fault-redis.log" \
    load mixed --duration 12 --concurrency 32 --requests 6000 --client-retries 60 --retry-for 60 \
    --fault "${fault_redis}" --fault-after 1000
# The fault command itself waited for the Sentinels to name another primary
# (wait-failover; the storm's check fails if it did not). Afterwards the
# pair must be whole again: the primary the Sentinels name answers ROLE
# master, with the old primary back as its replica.
redis_whole() {
    local p role links deadline=$(($(date +%s) + 30))
    while :; do
        p=$("${CL}" primary-port "${STATE}" 2>/dev/null)
        role=$(timeout 3 redis-cli -h 127.0.0.1 -p "${p:-0}" ROLE 2>/dev/null | head -1)
        links=$(timeout 3 redis-cli -h 127.0.0.1 -p "${p:-0}" INFO replication 2>/dev/null |
            tr -d '\r' | sed -n 's/^connected_slaves://p')
        if [[ "${role}" == master && "${links:-0}" -ge 1 ]]; then
            echo "primary ${p} (was ${before_primary}), ${links} replica(s)"
            return 0
        fi
        (($(date +%s) > deadline)) && {
            echo "primary ${p:-?}: role ${role:-?}, ${links:-0} replicas"
            return 1
        }
        sleep 0.5
    done
}
check "after the failover: the Sentinels' primary answers ROLE master, the old one is its replica" \
    "${LOGS}/redis-whole.log" redis_whole
echo "info  $(cat "${LOGS}/redis-whole.log")"

# Every instance follows the new primary: orders through each go through
# the Redis defences again, none served degraded (without Redis).
degraded() {
    local p s=0
    for p in "${HTTP_PORTS[@]}"; do
        s=$((s + $(curl -fsS -m 5 "http://127.0.0.1:${p}/metrics" 2>/dev/null |
            awk '$1 == "ticketd_redis_degraded_requests_total" {print $2 + 0}')))
    done
    echo "${s}"
}
sleep 2 # one breaker cooldown and probe per instance
d0=$(degraded)
check "after the failover: retry storm on every instance, one order per key" "${LOGS}/after-failover.log" \
    load retry-storm --rounds 30 --copies 6 --concurrency 32
d1=$(degraded)
if [[ "${d0}" == "${d1}" ]]; then
    ok "every instance follows the new primary (no order served without Redis: ${d0} before, ${d1} after)"
else
    bad "every instance follows the new primary (${d0} degraded orders before, ${d1} after)"
fi

# A token that bought an order, then a failover that lost its record: the
# replica is emptied on its own (replica-read-only off, FLUSHALL there: the
# writes the primary had not replicated when it died, and more), then the
# primary is killed and the Sentinels promote that replica. The token and
# the key's answer are gone from Redis; the database still knows which
# order spent the token.
TOKEN_THIEVES=6
as_user() {
    env -u TICKETD_CONFIG TICKETD_ENV=test "${TICKETD}" token --user "$@"
}
order_with() { # PORT JWT KEY TOKEN SESSION: prints "status layer code order_no"
    local out
    out=$(curl -sS -m 20 -D - -o "${LOGS}/token-body.json" -XPOST "http://127.0.0.1:$1/api/v1/orders" \
        -H "Authorization: Bearer $2" -H "Idempotency-Key: $3" -H "X-Order-Token: $4" \
        -H 'Content-Type: application/json' -d "{\"session_id\":$5,\"quantity\":1}" | tr -d '\r')
    printf '%s %s %s %s\n' "$(sed -n 's/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' <<<"${out}" | tail -1)" \
        "$(sed -n 's/^[Ii]dempotency-[Ll]ayer: //p' <<<"${out}")" \
        "$(jq -r '.code // "-"' "${LOGS}/token-body.json" 2>/dev/null)" \
        "$(jq -r '.order_no // "-"' "${LOGS}/token-body.json" 2>/dev/null)"
}
token_after_failover() {
    local user=880001 jwt admin sid tok first no p replica old got i bought n
    jwt=$(as_user "${user}") && admin=$(as_user 1 --admin) || return 1
    sid=$(curl -fsS -m 10 -XPOST "http://127.0.0.1:${HTTP_PORTS[0]}/api/v1/sessions" \
        -H "Authorization: Bearer ${admin}" -H 'Content-Type: application/json' \
        -d '{"title":"failover token","price_cents":1000,"stock":20}' | jq -r .id) || return 1
    tok=$(curl -fsS -m 10 -XPOST "http://127.0.0.1:${HTTP_PORTS[0]}/api/v1/tokens" \
        -H "Authorization: Bearer ${jwt}" | jq -r .token) || return 1
    first=$(order_with "${HTTP_PORTS[0]}" "${jwt}" spender "${tok}" "${sid}")
    echo "the token's order: ${first}"
    no=${first##* } # the last field: a first answer has no layer
    [[ "${first}" == 201\ * ]] || return 1
    old=$("${CL}" primary-port "${STATE}") || return 1
    for p in "${REDIS_PORTS[@]}"; do [[ "${p}" != "${old}" ]] && replica=${p}; done
    timeout 5 redis-cli -p "${replica}" CONFIG SET replica-read-only no >/dev/null &&
        timeout 5 redis-cli -p "${replica}" FLUSHALL | grep -qx OK || return 1
    p=$("${CL}" kill-redis-primary "${STATE}") && "${CL}" wait-failover "${STATE}" "${p}" 40 &&
        "${CL}" start-redis "${STATE}" "${p}" || return 1
    echo "failover: ${old} -> ${replica}, which had lost the token"
    bought=0
    for i in $(seq 1 "${TOKEN_THIEVES}"); do
        got=$(order_with "${HTTP_PORTS[$((i % 3))]}" "${jwt}" "thief-${i}" "${tok}" "${sid}")
        echo "new key ${i}: ${got}"
        # Refused by the database's record of the spent token, or, once a
        # refusal has taught the new primary that the token is spent, by
        # Redis itself: either way 409 and nothing bought.
        [[ "${got}" == "409 unique-index ORDER_TOKEN_INVALID -" ||
            "${got}" == "409 token ORDER_TOKEN_INVALID -" ]] || bought=$((bought + 1))
    done
    got=$(order_with "${HTTP_PORTS[2]}" "${jwt}" spender "${tok}" "${sid}")
    echo "the key that spent it: ${got}"
    [[ "${got}" == "201 "*" ${no}" ]] || return 1
    n=$(sql 1 "SELECT COUNT(*) FROM orders WHERE user_id = ${user}")
    echo "orders of the token's user in the database: ${n}; new keys not refused: ${bought}"
    [[ "${bought}" == 0 && "${n}" == 1 ]]
}
check "a failover that lost the token's record: ${TOKEN_THIEVES} new keys refused, the spender replayed" \
    "${LOGS}/token-failover.log" token_after_failover
grep '^orders of' "${LOGS}/token-failover.log" | sed 's/^/info  /'

# --- the books, on every node ---------------------------------------------------

echo "== every node"
for n in 1 2 3; do
    # The audit of GET /api/v1/admin/audit, through the instance on node n
    # (a tiny storm of its own, whose verdict includes the audit).
    check "audit ok on node ${n}" "${LOGS}/audit-node${n}.log" \
        "${LOAD}" retry-storm --rounds 3 --copies 3 --target "http://127.0.0.1:${HTTP_PORTS[$((n - 1))]}" \
        --orders-out "${ORDERS_OUT}"
done

# Every 201 any client saw names an order row, on every node.
sort -u "${ORDERS_OUT}" >"${LOGS}/orders-answered.sorted"
answered=$(wc -l <"${LOGS}/orders-answered.sorted")
for n in 1 2 3; do
    if sql "${n}" "SELECT order_no FROM orders" 2>"${LOGS}/rows-node${n}.err" | sort -u >"${LOGS}/rows-node${n}.txt"; then
        missing=$(comm -23 "${LOGS}/orders-answered.sorted" "${LOGS}/rows-node${n}.txt" | wc -l)
        if [[ "${answered}" -gt 0 && "${missing}" -eq 0 ]]; then
            ok "every 201 backed by a row on node ${n} (${answered} orders answered, $(wc -l <"${LOGS}/rows-node${n}.txt") rows)"
        else
            bad "every 201 backed by a row on node ${n} (${missing} of ${answered} answered orders have no row; see ${LOGS}/rows-node${n}.txt)"
        fi
    else
        bad "every 201 backed by a row on node ${n} (cannot read: $(head -1 "${LOGS}/rows-node${n}.err"))"
    fi
done

# The three nodes hold the same books.
books() {
    sql "$1" "SELECT
        (SELECT COUNT(*) FROM orders), (SELECT COALESCE(SUM(quantity), 0) FROM orders),
        (SELECT COALESCE(SUM(stock), 0) FROM sessions), (SELECT COUNT(*) FROM payments),
        (SELECT COUNT(*) FROM (SELECT user_id, session_id, request_id FROM orders
            GROUP BY user_id, session_id, request_id HAVING COUNT(*) > 1) d)"
}
b1=$(books 1 2>&1)
b2=$(books 2 2>&1)
b3=$(books 3 2>&1)
if [[ -n "${b1}" && "${b1}" == "${b2}" && "${b2}" == "${b3}" && "$(awk '{print $5}' <<<"${b1}")" == 0 ]]; then
    ok "the three nodes hold the same books (orders, seats, stock, payments: ${b1% *}; no key twice)"
else
    bad "the three nodes hold the same books (node 1: ${b1}; node 2: ${b2}; node 3: ${b3})"
fi

# Certification conflicts were retried and counted by cause.
cert=0
for p in "${HTTP_PORTS[@]}"; do
    c=$(curl -fsS -m 5 "http://127.0.0.1:${p}/metrics" 2>/dev/null |
        awk '$1 == "ticketd_transaction_retries_total{cause=\"certification\"}" {print $2 + 0}')
    cert=$((cert + ${c:-0}))
done
echo "info  certification conflicts retried over the run: ${cert} (ticketd_transaction_retries_total{cause=\"certification\"})"

stop_instances

# The lab's Galera cards in a real browser (tests/lab/cluster.sh), on this
# cluster's ports: this cluster goes down first (one cluster at a time).
if [[ "${TICKETD_CLUSTER_LAB:-1}" == 0 ]]; then
    echo "info  the lab's Galera cards not run (TICKETD_CLUSTER_LAB=0)"
elif [[ "${TICKETD_CLUSTER_KEEP:-0}" != 1 ]]; then
    "${CL}" down "${STATE}" >>"${LOGS}/cluster-down.log" 2>&1
    check "the lab's Galera cards on its page (tests/lab/cluster.sh)" "${LOGS}/lab-cluster.log" \
        env TICKETD_CLUSTER_HTTP_PORTS="${HTTP_PORTS[*]}" \
        TICKETD_CLUSTER_REDIS_PORTS="${REDIS_PORTS[*]}" tests/lab/cluster.sh
    grep -E '^(ok|FAIL) |^      browser: ' "${LOGS}/lab-cluster.log" | sed 's/^/      /'
else
    echo "info  the lab's Galera cards not run: TICKETD_CLUSTER_KEEP=1 keeps this cluster on their ports"
fi
echo "info  took $(($(date +%s) - T0)) s"
if [[ ${#failures[@]} -gt 0 ]]; then
    echo "failed:"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
