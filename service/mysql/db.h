/* db.h - a thin layer over the MariaDB/MySQL C API's prepared statements:
 * a connection per request fiber (borrowed from its loop's pool) or per
 * plain thread, statements prepared once per connection from a table of
 * SQL, arguments and result columns described by small arrays. On a fiber
 * every call uses Connector/C's non-blocking API and parks the fiber while
 * the server works (db_conn.h: DB_CALL); on a plain thread it blocks.
 * Only the adapters of this folder (store_*.c, *_mysql.c) include this;
 * only the db*.c files (through db_conn.h) include <mysql.h>.
 *
 * Every call maps MySQL's error numbers onto td_err: 1062 is TD_EDUP,
 * a failed CHECK constraint (4025) TD_ECONFLICT, 1213, 1205 and 1467 TD_ERETRY, lost or refused
 * connections and any other error TD_EUNAVAIL (and the connection is dropped so the
 * next call reconnects). */
#ifndef TICKETD_DB_H
#define TICKETD_DB_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum db_type { DB_INT, DB_STR, DB_NULL };

struct db_arg {
    enum db_type type;
    long long i;
    const char *s;
    unsigned long len;
};

#define DB_I(v) ((struct db_arg){.type = DB_INT, .i = (long long)(v)})
#define DB_S(v) ((struct db_arg){.type = DB_STR, .s = (v), .len = (unsigned long)strlen(v)})
#define DB_NUL  ((struct db_arg){.type = DB_NULL})

/* A result column: DB_INT into an int64_t, DB_STR into a char buffer of
 * cap bytes (NUL-terminated; a longer value is an error). */
struct db_col {
    enum db_type type;
    void *dst;
    size_t cap;
};

#define DB_COL_I(p) ((struct db_col){.type = DB_INT, .dst = (p), .cap = 0})
#define DB_COL_S(b) ((struct db_col){.type = DB_STR, .dst = (b), .cap = sizeof(b)})

/* How long a statement waits for a row lock (innodb_lock_wait_timeout,
 * whole seconds, set on every connection), given the read timeout
 * (TICKETD_MYSQL_TIMEOUT_S): (read_timeout_s - 1) / 2, at least 1, so
 * that a transaction that waits twice (a new order's INSERT behind an
 * uncommitted copy of its key, then its stock UPDATE behind the session
 * row) still ends with the server's 1205 before the client's read
 * timeout. 1205 rolls the statement back and the caller rolls back the
 * rest: nothing is kept, and the answer says so. A read timeout leaves the
 * outcome unknown (the server may still commit). MariaDB's default is 50 s,
 * ten times the read timeout. */
int db_lock_wait_s(int read_timeout_s);

/* Statements are named by their SQL text, which must have static storage:
 * each connection prepares a text once and finds it again by its address. */
int db_init(const struct config *cfg);
/* A request's fiber borrows a connection from its loop's pool
 * (TICKETD_DB_CONNS split over the loops, at least one each) at its first
 * db_conn and keeps it in its fiber slot until db_fiber_idle gives it
 * back; a plain thread keeps a connection of its own. */
void db_fiber_idle(void);
/* True when the calling fiber holds a borrowed connection outside any
 * transaction: one it may give back before it waits on another fiber. */
bool db_holds_idle(void);
/* Closes a plain thread's own connection (at its end), or gives back a
 * fiber's borrowed one. */
void db_thread_release(void);
void db_cleanup(void);

struct db_conn;

/* The caller's connection (on a fiber, borrowed: it parks at most the
 * MySQL timeout for one, first come first served), connecting if needed. TD_EUNAVAIL at
 * once, without any I/O, while the shared breaker knows the server is down
 * (see breaker.h); the first call after its cooldown probes with a ping. */
int db_conn_get(struct db_conn **out);

/* Closes c's link as if the server's answer had been lost, for the test
 * build's fault points. The next db_conn dials again. */
void db_lose_link(struct db_conn *c);

int db_begin(struct db_conn *c);
int db_commit(struct db_conn *c);
/* Rolls back; always explicit, because a lock wait timeout rolls back only
 * the statement and a later COMMIT would keep the rest. */
void db_rollback(struct db_conn *c);
int db_ping(struct db_conn *c);

/* Every adapter transaction has this shape:
 *
 *     int rc = db_tx_begin(&c);
 *     if (rc != TD_OK)
 *         return rc;
 *     rc = ...statements on c...;
 *     return db_tx_end(c, rc);
 *
 * db_tx_begin gets the caller's connection (db_conn) and starts a
 * transaction on it; *out is NULL unless it returns TD_OK. db_tx_end
 * commits when rc is TD_OK and rolls back otherwise (a failed COMMIT
 * included), and returns rc, or the COMMIT's error: whether a transaction
 * is kept is decided here only. */
int db_tx_begin(struct db_conn **out);
int db_tx_end(struct db_conn *c, int rc);

/* Runs a statement that returns no rows. *affected and *insert_id may be
 * NULL. Duplicate-key errors also copy the key name into dup_key (if not
 * NULL, 64 bytes). */
int db_exec(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
            uint64_t *affected, uint64_t *insert_id);

/* Runs one statement given as text, neither prepared nor kept: the DDL
 * whose names change from day to day (partition maintenance), which would
 * otherwise fill the connection's statement cache. sql must be built from
 * names the caller controls, never from a request. */
int db_exec_text(struct db_conn *c, const char *sql);

/* The name of the unique key behind the last TD_EDUP on c, or of the CHECK
 * constraint behind the last TD_ECONFLICT ("" if none). */
const char *db_dup_key(const struct db_conn *c);

/* Runs a query and reads its first row into cols. TD_ENOTFOUND when there
 * is none. */
int db_row(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
           const struct db_col *cols, int ncols);

/* Runs a query and calls each(ctx) after every row is read into cols; a
 * non-zero return from each stops and is returned. */
int db_rows(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
            const struct db_col *cols, int ncols, int (*each)(void *ctx), void *ctx);

/* A read outside any transaction, on the caller's connection:
 * db_conn, then db_rows (db_read) or db_row (db_read_row). */
int db_read(const char *sql, const struct db_arg *args, int nargs, const struct db_col *cols,
            int ncols, int (*each)(void *ctx), void *ctx);
int db_read_row(const char *sql, const struct db_arg *args, int nargs, const struct db_col *cols,
                int ncols);

/* The largest batch text db_batch builds, arguments inlined. */
#define DB_BATCH_MAX 4096

/* Runs a whole transaction in one round trip: sql is several statements,
 * from START TRANSACTION to COMMIT, separated by ';', with '?' for
 * arguments (no literal '?' or ';' in the text). A multi-statement text
 * cannot be prepared, so the arguments are inlined as escaped literals. The
 * server stops at the first statement that fails: its error is returned
 * and the transaction is rolled back. The first row of statement row_at
 * (0 = the first) is read into cols; TD_ENOTFOUND when it returned none
 * (the batch still committed). */
int db_batch(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs, int row_at,
             const struct db_col *cols, int ncols);

/* A row of a batch's result: nfields values as text (NULL for SQL NULL)
 * and their lengths, valid only during the call. */
struct db_batch_row {
    const char *const *vals;
    const unsigned long *lens;
    int nfields;
};
typedef int (*db_batch_row_fn)(void *ctx, int at, const struct db_batch_row *row);

/* How a db_batch_each text spans its transaction (or-ed; 0: from START
 * TRANSACTION to COMMIT). */
enum {
    /* The text ends before its COMMIT: on success the transaction is left
     * open, for another batch or db_tx_end. */
    DB_BATCH_OPEN = 1,
    /* The text goes on with the transaction an open batch left: it starts
     * without START TRANSACTION, and a link found stale is not redialled
     * (the transaction went with it). */
    DB_BATCH_REST = 2,
    /* The text is one CALL of a procedure that runs the whole transaction
     * itself, from START TRANSACTION to COMMIT, and answers its rows after
     * the COMMIT, so that the whole answer is one reply
     * (sql/015_place_batch.sql). Once the text is sent the transaction
     * may be under way: a link that fails after the send is not redialled
     * (the outcome is unknown), only one that fails sending. An error of
     * the CALL comes after the procedure rolled its transaction back; an
     * error at its COMMIT has a message that starts "at COMMIT: ". */
    DB_BATCH_CALL = 4,
};

/* db_batch for a text built at run time (any length): every row of every
 * statement is handed to each(ctx, at, row), at counting statements from
 * 0; a non-zero return stops reading rows (the rest are drained) and is
 * returned after the transaction was rolled back. how: DB_BATCH_* flags. */
int db_batch_each(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
                  unsigned how, db_batch_row_fn each, void *ctx);

#endif
