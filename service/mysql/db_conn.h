/* db_conn.h - what db.c (connections, errors, transactions),
 * db_stmt.c (prepared statements) and db_batch.c (one round trip of
 * inlined statements) share of a connection. Private to service/mysql/'s
 * db*.c: the store adapters use db.h only. Thread-safety as db.h: a
 * connection is its thread's, or a worker's for one request. */
#ifndef TICKETD_DB_CONN_H
#define TICKETD_DB_CONN_H

#include <mysql.h>
#include <stdbool.h>
#include <stdint.h>

#define DB_MAX_ARGS  16
#define DB_MAX_COLS  16
#define DB_MAX_STMTS 128 /* distinct statements a connection may prepare */

struct db_stmt {
    const char *sql; /* static text: its address is the key */
    MYSQL_STMT *stmt;
};

/* A connection idle this long is pinged before use: after a server
 * restart the first statement would otherwise fail on a dead socket. */
#define DB_IDLE_PING_MS 1000

struct db_conn {
    MYSQL *m;
    int64_t last_used_ms;
    bool fresh; /* opened and not yet used: a failure on it is not staleness */
    bool in_tx; /* between db_begin and db_commit/db_rollback */
    struct db_stmt stmts[DB_MAX_STMTS];
    int nstmts;
    char dup_key[64]; /* the unique key or CHECK constraint of the last refusal */
};

/* Maps the error e (message msg, while doing what) onto td_err and drops
 * the connection when it cannot be trusted any more. */
int db_fail(struct db_conn *c, unsigned int e, const char *msg, const char *what);

/* Closes c's link and forgets its prepared statements; c can dial again. */
void db_conn_close(struct db_conn *c);

/* A connection that worked before and failed (rc) at the first statement
 * of a unit of work was most likely closed by a restarted server while
 * idle: dials again and returns true when the caller may repeat it. */
bool db_redial_stale(struct db_conn *c, int rc, bool was_fresh);

/* Whether the server's last answer on c said the session is inside a
 * transaction (every OK and EOF packet carries the flag, so asking costs
 * nothing); true when it cannot tell. */
bool db_server_in_tx(struct db_conn *c);

#endif
