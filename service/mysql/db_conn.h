/* db_conn.h - what db.c (connections), db_errors.c (what an error
 * means), db_tx.c (transactions), db_stmt.c (prepared statements) and
 * db_batch.c (one round trip of inlined statements) share of a
 * connection. Private to service/mysql/'s db*.c: the store adapters use
 * db.h only. A connection is a plain thread's own, or a request fiber's
 * for the length of its request. */
#ifndef TICKETD_DB_CONN_H
#define TICKETD_DB_CONN_H

#include "fiber_fd.h"
#include "loop.h"

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
    bool fresh;    /* opened and not yet used: a failure on it is not staleness */
    bool in_tx;    /* between db_begin and db_commit/db_rollback */
    bool nonblock; /* opened on a fiber (MYSQL_OPT_NONBLOCK): every call is
                    * Connector/C's _start/_cont pair (DB_CALL) */
    /* A fiber's connection, once connected: its socket stays in its loop's
     * epoll set between waits (fiber_fd.h). While it dials, the connector
     * may close and open sockets of its own, so those waits register and
     * remove theirs each time (fiber_wait_io). */
    bool connected;
    struct fiber_fd wait;
    struct db_stmt stmts[DB_MAX_STMTS];
    int nstmts;
    char dup_key[64]; /* the unique key or CHECK constraint of the last refusal */
};

/* Parks the calling fiber until what status (a _start or _cont answer:
 * MYSQL_WAIT_READ, _WRITE, _EXCEPT, _TIMEOUT) asks for happens on c's
 * socket, and returns what happened, for the next _cont. The one place a
 * MariaDB call waits on a fiber. */
int db_wait(struct db_conn *c, int status);

/* Runs the Connector/C call fn(obj, ...) and stores its result in ret. On
 * a connection opened on a fiber (c->nonblock), it is fn_start and then
 * fn_cont until the call is done, the fiber parked in db_wait between
 * them, so the loop serves other requests while the server works; on any
 * other connection it is the blocking call. */
#define DB_CALL(c, ret, fn, obj, ...)                                                              \
    do {                                                                                           \
        if ((c)->nonblock) {                                                                       \
            int st_ = fn##_start(&(ret), (obj), ##__VA_ARGS__);                                    \
            while (st_ != 0)                                                                       \
                st_ = fn##_cont(&(ret), (obj), db_wait((c), st_));                                 \
        } else {                                                                                   \
            LOOP_MUST_NOT_BLOCK("mysql " #fn);                                                     \
            (ret) = fn((obj), ##__VA_ARGS__);                                                      \
        }                                                                                          \
    } while (0)

/* mysql_real_query and mysql_store_result through DB_CALL. */
int db_query(struct db_conn *c, const char *q, unsigned long len);
MYSQL_RES *db_store_result(struct db_conn *c);

/* Maps the error e (message msg, while doing what) onto td_err and drops
 * the connection when it cannot be trusted any more. */
int db_fail(struct db_conn *c, unsigned int e, const char *msg, const char *what);

/* db_errors.c: what an error number e (message msg, while doing what)
 * means. db_refusal: TD_EDUP for a unique key, TD_ECONFLICT for a CHECK
 * constraint, TD_ENOTFOUND for a NOT NULL column, each one's name kept in
 * c->dup_key (db_dup_key); 0 for any other e. db_conflict: a deadlock, a
 * lock wait or a certification conflict, rolled back and worth running
 * again (its cause noted for txretry). db_partition_race: partition
 * maintenance another instance did first. db_link_error: the link itself
 * failed, or the server is not serving. */
int db_refusal(struct db_conn *c, unsigned int e, const char *msg);
bool db_conflict(unsigned int e, const char *what);
bool db_partition_race(unsigned int e);
bool db_link_error(unsigned int e);

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
