#!/usr/bin/env bash
# Migrates a database holding rows at the schema before day partitions
# (every migration below 008) to the current one, and checks that no row was
# lost: the counts of every table match, the partitioned tables are
# partitioned, and the points ledger holds the orders already credited.
#
#   tests/migrate/run.sh STATE_DIR     against the private MariaDB of STATE_DIR
#
# It works in a database of its own (ticketd_migrate_test), created and
# dropped here, so that it never touches the tests' database. Prints
# "ok ..." or "FAIL ..." lines and exits non-zero on a failure.
set -uo pipefail

cd "$(dirname "$0")/../.."
STATE=${1:?usage: tests/migrate/run.sh STATE_DIR}
DB=ticketd_migrate_test
SQL_BEFORE=$(mktemp -d)
trap 'rm -rf "${SQL_BEFORE}"' EXIT
fails=0

for f in sql/[0-9]*_*.sql; do
    n=$(basename "$f")
    ((10#${n%%_*} < 8)) && cp "$f" "${SQL_BEFORE}/"
done

port=$(cat "${STATE}/mysql/port" 2>/dev/null || echo "${TICKETD_TEST_MYSQL_PORT:-23306}")
q() {
    MYSQL_PWD=${TICKETD_MYSQL_PASSWORD:-ticketd} mariadb --no-defaults --host=127.0.0.1 \
        --port="${port}" --protocol=TCP --user="${TICKETD_MYSQL_USER:-ticketd}" \
        --batch --skip-column-names "$@"
}
check() { # what, got, want
    if [[ "$2" == "$3" ]]; then
        echo "ok    $1: $2"
    else
        echo "FAIL  $1: got '$2', want '$3'"
        fails=$((fails + 1))
    fi
}

q -e "DROP DATABASE IF EXISTS ${DB}; CREATE DATABASE ${DB}" || exit 1
export TICKETD_MYSQL_DB=${DB}
TICKETD_SQL_DIR=${SQL_BEFORE} scripts/services.sh migrate "${STATE}" || exit 1

# Rows of three days ago, yesterday and today, as ticketd writes them (UTC).
q "${DB}" <<'SQL' || exit 1
INSERT INTO sessions (id, title, price_cents, capacity, stock) VALUES (1, 'm', 1500, 10, 7);
INSERT INTO orders (id, order_no, user_id, session_id, request_id, quantity, amount_cents, status,
                    created_at)
VALUES (1, 'T0000000000000000001', 7, 1, 'k1', 1, 1500, 'PAID', UTC_TIMESTAMP(3) - INTERVAL 3 DAY),
       (2, 'T0000000000000000002', 7, 1, 'k2', 1, 1500, 'PAID', UTC_TIMESTAMP(3) - INTERVAL 1 DAY),
       (3, 'T0000000000000000003', 8, 1, 'k3', 1, 1500, 'PENDING_PAYMENT', UTC_TIMESTAMP(3));
INSERT INTO outbox (event_type, biz_key, payload, created_at, published_at)
VALUES ('order.paid', 'T0000000000000000001', '{}', UTC_TIMESTAMP(3) - INTERVAL 3 DAY,
        UTC_TIMESTAMP(3) - INTERVAL 3 DAY),
       ('order.paid', 'T0000000000000000002', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 DAY, NULL);
INSERT INTO consume_records (consumer, biz_key, created_at)
VALUES ('points', 'points:T0000000000000000001', UTC_TIMESTAMP(3) - INTERVAL 3 DAY),
       ('ticketing', 'ticketing:T0000000000000000001', UTC_TIMESTAMP(3) - INTERVAL 3 DAY);
INSERT INTO user_points (user_id, points) VALUES (7, 15);
INSERT INTO dead_letters (consumer, biz_key, outbox_id, stream_id, deliveries, reason, created_at)
VALUES ('points', 'points:T0000000000000000002', 2, '1-0', 5, 'test', UTC_TIMESTAMP(3) - INTERVAL 1 DAY);
INSERT INTO idempotency_records (scope, user_id, idem_key, created_day, fingerprint, complete,
                                 status, response, created_at, updated_at)
VALUES ('batch', 7, 'b1', UTC_DATE() - INTERVAL 3 DAY, REPEAT('a', 64), 1, 200, '{}',
        UTC_TIMESTAMP(3) - INTERVAL 3 DAY, UTC_TIMESTAMP(3) - INTERVAL 3 DAY),
       ('batch', 8, 'b2', UTC_DATE(), REPEAT('b', 64), 0, 200, '{}', UTC_TIMESTAMP(3),
        UTC_TIMESTAMP(3));
SQL

counts() {
    q "${DB}" -e "SELECT CONCAT_WS(' ', (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM orders),
        (SELECT COUNT(*) FROM order_history), (SELECT COUNT(*) FROM outbox),
        (SELECT COUNT(*) FROM consume_records), (SELECT COUNT(*) FROM user_points),
        (SELECT COUNT(*) FROM dead_letters), (SELECT COUNT(*) FROM idempotency_records))"
}
before=$(counts)
scripts/services.sh migrate "${STATE}" || exit 1
check "rows per table (sessions orders history outbox consume user_points dead_letters idem)" \
    "$(counts)" "${before}"
check "partitioned tables" "$(q "${DB}" -e "SELECT GROUP_CONCAT(DISTINCT TABLE_NAME ORDER BY TABLE_NAME)
    FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND PARTITION_NAME IS NOT NULL")" \
    "consume_records,dead_letters,idempotency_records,outbox"
check "idempotency records keep their day" "$(q "${DB}" -e "SELECT GROUP_CONCAT(idem_key
    ORDER BY idem_key) FROM idempotency_records WHERE created_day = DATE(created_at)")" "b1,b2"
check "old rows keep their day" "$(q "${DB}" -e "SELECT COUNT(*) FROM outbox
    WHERE created_day = DATE(created_at)")" "2"
check "points ledger from the points consumer's rows" "$(q "${DB}" -e "SELECT
    CONCAT(order_no, ' ', points) FROM points_ledger")" "T0000000000000000001 15"
check "a new row gets today's day" "$(q "${DB}" -e "INSERT INTO consume_records (consumer, biz_key)
    VALUES ('points', 'points:x'); SELECT created_day = UTC_DATE() FROM consume_records
    WHERE biz_key = 'points:x'")" "1"

q -e "DROP DATABASE ${DB}"
((fails == 0))
