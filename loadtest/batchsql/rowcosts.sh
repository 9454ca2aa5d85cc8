#!/usr/bin/env bash
# rowcosts.sh - what each row of a new order costs MariaDB, by taking pieces
# away: build/batchsql's `proc` (CALL place_orders) and `set` (the set-based
# cost probe) at batches of 1, 4 and 16, every order with a token, first on
# the whole schema, then without the history trigger, then also without the
# two secondary indexes of orders.
#
#   loadtest/batchsql/rowcosts.sh STATE_DIR MYSQL_PORT
#
# It DROPS the trigger and the indexes and does not put them back: run it
# only against a scratch server of its own (scripts/services.sh up
# STATE_DIR ... && scripts/services.sh migrate STATE_DIR), and throw that
# server's folder away after. build/batchsql is built as batchsql.c says.
set -u
STATE=${1:?STATE_DIR}
PORT=${2:?MYSQL_PORT}
PID=$(cat "$STATE/mysql/mysqld.pid")
M="mariadb -h127.0.0.1 -P$PORT -uticketd -pticketd ticketd"
runs() {
    for _ in 1 2; do for b in 1 4 16; do for m in proc set; do
        BATCHSQL_TOKENS=1 build/batchsql 127.0.0.1 "$PORT" ticketd ticketd ticketd "$PID" $m $b 4 5 2>&1 | head -3
    done; done; done
}
echo "== everything (migrations 001 to 014), the token on"; runs; uptime
$M -e "DROP TRIGGER trg_orders_history_create"
echo "== without trg_orders_history_create"; runs; uptime
$M -e "ALTER TABLE orders DROP INDEX ix_orders_status_created, DROP INDEX ix_orders_user"
echo "== without the trigger, ix_orders_status_created and ix_orders_user"; runs; uptime
