#include "db.h"

#include "breaker.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* After the link to the server failed, every thread answers "unavailable"
 * at once for this long, then one probe pings (breaker.h): a paused or
 * restarting server costs one timeout, not one per request. */
#define DB_COOLDOWN_MS 500

static const struct config *cfg;
static pthread_key_t conn_key; /* a thread's own connection (background threads) */

/* The request workers' connections: TICKETD_DB_CONNS of them, shared by
 * TICKETD_THREADS workers, each borrowing one for the length of a request.
 * So the database sees as many sessions as it serves well, however many
 * workers wait on Redis. The idle ones are a stack: the connection used
 * last (warm, its statements prepared) is the next one lent. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    struct db_conn **idle;
    int nidle;
    int lent;
    int size;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0};

static __thread bool pooled;              /* this thread borrows (db_thread_pooled) */
static __thread struct db_conn *borrowed; /* what it holds until db_thread_idle */
static struct breaker health = BREAKER_INIT("mysql", DB_COOLDOWN_MS);

/* The link failed: open the breaker (counted when this opened it). */
static void trip(enum breaker_pass pass)
{
    if (breaker_failure(&health, pass, mono_ms()))
        metrics_inc(M_BREAKER_OPENED_MYSQL);
}

static void conn_close(struct db_conn *c)
{
    for (int i = 0; i < c->nstmts; i++)
        mysql_stmt_close(c->stmts[i].stmt);
    c->nstmts = 0;
    if (c->m != NULL) {
        mysql_close(c->m);
        c->m = NULL;
    }
}

static void conn_destroy(void *p)
{
    struct db_conn *c = p;
    if (c == NULL)
        return;
    conn_close(c);
    free(c);
}

int db_init(const struct config *config)
{
    cfg = config;
    pool.size = config->db_conns;
    pool.idle = xcalloc((size_t)pool.size, sizeof *pool.idle);
    if (mysql_library_init(0, NULL, NULL) != 0)
        return TD_EINTERNAL;
    if (pthread_key_create(&conn_key, conn_destroy) != 0)
        return TD_EINTERNAL;
    return TD_OK;
}

/* Lends a connection of the pool, waiting at most the MySQL timeout for
 * one to be given back. NULL when none came: the caller answers
 * "unavailable", as for a server that does not answer in time. */
static struct db_conn *pool_borrow(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += cfg->mysql_timeout_s;
    pthread_mutex_lock(&pool.mu);
    int rc = 0;
    while (pool.lent == pool.size && rc == 0)
        rc = pthread_cond_timedwait(&pool.freed, &pool.mu, &until);
    struct db_conn *c = NULL;
    if (pool.lent < pool.size) {
        pool.lent++;
        c = pool.nidle > 0 ? pool.idle[--pool.nidle] : xcalloc(1, sizeof *c);
    }
    pthread_mutex_unlock(&pool.mu);
    if (c == NULL)
        log_warn("mysql: no connection of %d came free in %d s", pool.size, cfg->mysql_timeout_s);
    return c;
}

static void pool_give_back(struct db_conn *c)
{
    if (c->in_tx) {
        log_error("mysql: a connection came back inside a transaction; rolling back");
        db_rollback(c);
    }
    pthread_mutex_lock(&pool.mu);
    pool.idle[pool.nidle++] = c;
    pool.lent--;
    pthread_cond_signal(&pool.freed);
    pthread_mutex_unlock(&pool.mu);
}

void db_thread_pooled(void)
{
    pooled = true;
}

void db_thread_idle(void)
{
    if (borrowed != NULL) {
        pool_give_back(borrowed);
        borrowed = NULL;
    }
}

void db_thread_release(void)
{
    if (pooled) {
        db_thread_idle();
        return;
    }
    struct db_conn *c = pthread_getspecific(conn_key);
    conn_destroy(c);
    pthread_setspecific(conn_key, NULL);
}

void db_cleanup(void)
{
    db_thread_release();
    pthread_mutex_lock(&pool.mu);
    for (int i = 0; i < pool.nidle; i++)
        conn_destroy(pool.idle[i]);
    free(pool.idle);
    pool.idle = NULL;
    pool.nidle = 0;
    pthread_mutex_unlock(&pool.mu);
    pthread_key_delete(conn_key);
    mysql_library_end();
}

static bool connection_error(unsigned int e)
{
    /* Client-side errors (2000-2999) are all about the link: gone, lost,
     * refused, timed out, out of sync. On the server side, shutdown and
     * killed connections mean the same for us. */
    return (e >= CR_MIN_ERROR && e <= CR_MAX_ERROR) || e == ER_SERVER_SHUTDOWN ||
           e == ER_CONNECTION_KILLED || e == ER_QUERY_INTERRUPTED || e == 4031 /* idle timeout */ ||
           /* A Galera node that is not (yet, or no longer) part of the
            * primary component answers 1047 "WSREP has not yet prepared node
            * for application use": unavailable, as a server still starting. */
           e == ER_UNKNOWN_COM_ERROR;
}

/* Maps the last error of c (or of stmt) and drops the connection when it
 * cannot be trusted any more. */
static int fail(struct db_conn *c, unsigned int e, const char *msg, const char *what)
{
    if (e == ER_DUP_ENTRY) {
        /* "Duplicate entry 'x' for key 'name'": remember which key. */
        const char *k = strstr(msg, "for key '");
        c->dup_key[0] = '\0';
        if (k != NULL) {
            k += 9;
            size_t n = strcspn(k, "'");
            const char *dot = memchr(k, '.', n); /* MySQL 8 says 'table.key' */
            if (dot != NULL) {
                n -= (size_t)(dot + 1 - k);
                k = dot + 1;
            }
            if (n >= sizeof c->dup_key)
                n = sizeof c->dup_key - 1;
            memcpy(c->dup_key, k, n);
            c->dup_key[n] = '\0';
        }
        return TD_EDUP;
    }
    if (e == ER_CONSTRAINT_FAILED) {
        /* "CONSTRAINT `name` failed for ...": a CHECK refused the row. */
        const char *k = strchr(msg, '`');
        size_t n = k != NULL ? strcspn(k + 1, "`") : 0;
        if (n >= sizeof c->dup_key)
            n = sizeof c->dup_key - 1;
        memcpy(c->dup_key, k != NULL ? k + 1 : "", n);
        c->dup_key[n] = '\0';
        return TD_ECONFLICT;
    }
    if (e == ER_LOCK_DEADLOCK || e == ER_LOCK_WAIT_TIMEOUT) {
        /* Which conflict, for the retries metric. Galera reports a failed
         * certification as 1213 too, and only at COMMIT: the writeset of a
         * transaction is certified against the other nodes' when it
         * commits. A local InnoDB deadlock cannot happen at COMMIT (COMMIT
         * takes no row locks; on a single server 1213 comes from a
         * statement that waited for a lock). So 1213 at COMMIT is a
         * certification conflict, 1213 at a statement a deadlock. A local
         * transaction aborted by a replicated writeset while it was still
         * running (a Galera "brute force" abort) fails at its next
         * statement and is counted as a deadlock: it is one, with a
         * transaction of another node, and is retried all the same. */
        if (e == ER_LOCK_WAIT_TIMEOUT)
            txretry_note(TXRETRY_LOCK_WAIT);
        else if (strcmp(what, "COMMIT") == 0)
            txretry_note(TXRETRY_CERTIFICATION);
        else
            txretry_note(TXRETRY_DEADLOCK);
        return TD_ERETRY;
    }
    if (e == ER_SAME_NAME_PARTITION || e == ER_PARTITION_DOES_NOT_EXIST ||
        e == ER_REORG_PARTITION_NOT_EXIST) {
        /* Partition maintenance that another instance did first: the
         * retention job lists the partitions again next round. */
        log_info("mysql: %u %s", e, msg);
        return TD_ECONFLICT;
    }
    metrics_inc(M_DEP_ERRORS_MYSQL);
    if (connection_error(e)) {
        log_warn("mysql: %s: %u %s (reconnecting on next use)", what, e, msg);
        /* A connection that has worked and fails outside a transaction may
         * just be stale (the server restarted while it idled): the caller
         * dials again before anyone is told the server is down. Inside a
         * transaction, or on a new connection, the link itself failed. */
        if (c->fresh || c->in_tx)
            trip(BREAKER_CALL);
        conn_close(c);
        return TD_EUNAVAIL;
    }
    log_error("mysql: %s: %u %s", what, e, msg);
    conn_close(c);
    return TD_EINTERNAL;
}

static int connect_thread(struct db_conn *c)
{
    MYSQL *m = mysql_init(NULL);
    if (m == NULL)
        return TD_EINTERNAL;
    unsigned int t = (unsigned int)cfg->mysql_timeout_s;
    my_bool off = 0;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_RECONNECT, &off); /* we reconnect, knowing what was lost */
    mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    /* Times are stored and shown in UTC; READ COMMITTED keeps the stock CAS
     * and duplicate lookups seeing the latest committed rows. */
    mysql_options(m, MYSQL_INIT_COMMAND, "SET time_zone = '+00:00'");
    mysql_options(m, MYSQL_INIT_COMMAND, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    const char *sock = cfg->mysql_socket[0] ? cfg->mysql_socket : NULL;
    if (mysql_real_connect(m, sock ? NULL : cfg->mysql_host, cfg->mysql_user, cfg->mysql_password,
                           cfg->mysql_db, (unsigned int)cfg->mysql_port, sock,
                           CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS) == NULL) {
        metrics_inc(M_DEP_ERRORS_MYSQL);
        log_warn("mysql: connect to %s:%d failed: %s", sock ? sock : cfg->mysql_host,
                 cfg->mysql_port, mysql_error(m));
        mysql_close(m);
        return TD_EUNAVAIL;
    }
    c->m = m;
    c->fresh = true;
    c->in_tx = false;
    return TD_OK;
}

/* A connection that worked before and fails at the first statement of a
 * unit of work (BEGIN, or a read outside a transaction) was most likely
 * closed by a restarted server while idle. Nothing has been done on it
 * yet, so dialling again and repeating is safe; writes outside a
 * transaction are never repeated. Returns true when c was re-dialled. */
static bool redial_stale(struct db_conn *c, int rc, bool was_fresh)
{
    if (rc != TD_EUNAVAIL || was_fresh || c->in_tx || breaker_is_open(&health, mono_ms()))
        return false;
    conn_close(c);
    if (connect_thread(c) == TD_OK)
        return true;
    trip(BREAKER_CALL);
    return false;
}

/* The calling thread's connection: borrowed from the pool by a worker,
 * its own for any other thread. NULL when the pool lent none in time. */
static struct db_conn *thread_conn(void)
{
    if (pooled) {
        if (borrowed == NULL)
            borrowed = pool_borrow();
        return borrowed;
    }
    struct db_conn *c = pthread_getspecific(conn_key);
    if (c == NULL) {
        c = xcalloc(1, sizeof *c);
        pthread_setspecific(conn_key, c);
    }
    return c;
}

int db_conn(struct db_conn **out)
{
    *out = NULL;
    /* Borrowed before the breaker is asked, so that a probe, once let
     * through, always goes out. */
    struct db_conn *c = thread_conn();
    if (c == NULL)
        return TD_EUNAVAIL;
    int64_t now = mono_ms();
    enum breaker_pass pass = breaker_ask(&health, now);
    if (pass == BREAKER_REFUSED)
        return TD_EUNAVAIL;
    /* The probe after an outage always pings, so that its verdict is about
     * the server now, not about a connection that happens to be open. */
    bool check = pass == BREAKER_PROBE || now - c->last_used_ms > DB_IDLE_PING_MS;
    if (c->m != NULL && check && mysql_ping(c->m) != 0) {
        log_info("mysql: connection is gone (%s); reconnecting", mysql_error(c->m));
        conn_close(c);
    }
    if (c->m == NULL && connect_thread(c) != TD_OK) {
        trip(pass);
        return TD_EUNAVAIL;
    }
    breaker_success(&health, pass);
    c->last_used_ms = now;
    *out = c;
    return TD_OK;
}

void db_lose_link(struct db_conn *c)
{
    log_warn("mysql: dropping the connection before its answer was read");
    conn_close(c);
}

static int simple(struct db_conn *c, const char *q)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (mysql_real_query(c->m, q, strlen(q)) != 0)
        return fail(c, mysql_errno(c->m), mysql_error(c->m), q);
    return TD_OK;
}

int db_begin(struct db_conn *c)
{
    bool was_fresh = c->fresh;
    int rc = simple(c, "START TRANSACTION");
    if (redial_stale(c, rc, was_fresh))
        rc = simple(c, "START TRANSACTION");
    c->fresh = false;
    c->in_tx = rc == TD_OK;
    return rc;
}

/* Whether the server's last answer on c said the session is inside a
 * transaction (every OK and EOF packet carries the flag, so asking costs
 * nothing). */
static bool server_in_tx(struct db_conn *c)
{
    unsigned int status = 0;
    if (c->m == NULL || mariadb_get_infov(c->m, MARIADB_CONNECTION_SERVER_STATUS, &status) != 0)
        return true; /* cannot tell: let COMMIT speak */
    return (status & SERVER_STATUS_IN_TRANS) != 0;
}

/* A Galera node rolls back a local transaction whose rows a replicated
 * write needs (a "brute force" abort). The transaction's next statement
 * should then fail with 1213; measured on a three-node cluster here, it
 * sometimes ran instead, outside any transaction, and the COMMIT that
 * followed answered OK having committed nothing: an answer that would
 * claim a cancel the database never kept. The server's own status flag
 * says so before COMMIT is sent: the transaction is run again, as after
 * any certification conflict. */
static bool lost_by_server(struct db_conn *c, const char *what)
{
    if (server_in_tx(c))
        return false;
    log_warn("mysql: %s: the server rolled the transaction back without an error (a Galera "
             "conflict); running it again",
             what);
    txretry_note(TXRETRY_CERTIFICATION);
    return true;
}

int db_commit(struct db_conn *c)
{
    if (c->in_tx && lost_by_server(c, "before COMMIT")) {
        c->in_tx = false;
        return TD_ERETRY;
    }
    /* Still "in a transaction" while COMMIT runs: a link lost now is the
     * server's trouble, not a stale connection. */
    int rc = simple(c, "COMMIT");
    c->in_tx = false;
    return rc;
}

void db_rollback(struct db_conn *c)
{
    c->in_tx = false;
    if (c->m != NULL && mysql_rollback(c->m) != 0)
        fail(c, mysql_errno(c->m), mysql_error(c->m), "ROLLBACK");
}

int db_tx_begin(struct db_conn **out)
{
    struct db_conn *c;
    *out = NULL;
    int rc = db_conn(&c);
    if (rc == TD_OK)
        rc = db_begin(c);
    if (rc == TD_OK)
        *out = c;
    return rc;
}

int db_tx_end(struct db_conn *c, int rc)
{
    if (rc == TD_OK)
        rc = db_commit(c);
    /* After a failed COMMIT too: the server may still hold the
     * transaction open when only the answer was lost. */
    if (rc != TD_OK)
        db_rollback(c);
    return rc;
}

static int ping_once(struct db_conn *c)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (mysql_ping(c->m) != 0)
        return fail(c, mysql_errno(c->m), mysql_error(c->m), "ping");
    return TD_OK;
}

int db_ping(struct db_conn *c)
{
    bool was_fresh = c->fresh;
    int rc = ping_once(c);
    if (redial_stale(c, rc, was_fresh))
        rc = ping_once(c);
    c->fresh = false;
    return rc;
}

int db_exec_text(struct db_conn *c, const char *sql)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (mysql_real_query(c->m, sql, strlen(sql)) != 0)
        return fail(c, mysql_errno(c->m), mysql_error(c->m), sql);
    /* DDL returns no rows; anything else is read and dropped so that the
     * link is ready for the next statement. */
    MYSQL_RES *r = mysql_store_result(c->m);
    mysql_free_result(r);
    return TD_OK;
}

const char *db_dup_key(const struct db_conn *c)
{
    return c->dup_key;
}

static int prepare(struct db_conn *c, const char *sql, MYSQL_STMT **out)
{
    *out = NULL;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    for (int i = 0; i < c->nstmts; i++) {
        if (c->stmts[i].sql == sql) {
            *out = c->stmts[i].stmt;
            return TD_OK;
        }
    }
    if (c->nstmts == DB_MAX_STMTS) {
        log_error("mysql: more than %d distinct statements; raise DB_MAX_STMTS", DB_MAX_STMTS);
        return TD_EINTERNAL;
    }
    MYSQL_STMT *s = mysql_stmt_init(c->m);
    if (s == NULL)
        return TD_EINTERNAL;
    if (mysql_stmt_prepare(s, sql, strlen(sql)) != 0) {
        int rc = fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
        mysql_stmt_close(s);
        return rc;
    }
    c->stmts[c->nstmts].sql = sql;
    c->stmts[c->nstmts].stmt = s;
    c->nstmts++;
    *out = s;
    return TD_OK;
}

static void bind_args(MYSQL_BIND *b, const struct db_arg *args, int nargs)
{
    memset(b, 0, sizeof(MYSQL_BIND) * (size_t)nargs);
    for (int i = 0; i < nargs; i++) {
        switch (args[i].type) {
        case DB_INT:
            b[i].buffer_type = MYSQL_TYPE_LONGLONG;
            b[i].buffer = (void *)&args[i].i;
            break;
        case DB_STR:
            b[i].buffer_type = MYSQL_TYPE_STRING;
            b[i].buffer = (void *)args[i].s;
            b[i].buffer_length = args[i].len;
            b[i].length = (unsigned long *)&args[i].len;
            break;
        case DB_NULL:
            b[i].buffer_type = MYSQL_TYPE_NULL;
            break;
        }
    }
}

/* Prepares (once), binds and executes. */
static int run(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
               MYSQL_STMT **out)
{
    MYSQL_STMT *s;
    MYSQL_BIND b[DB_MAX_ARGS];
    *out = NULL;
    int rc = prepare(c, sql, &s);
    if (rc != TD_OK)
        return rc;
    if (nargs > DB_MAX_ARGS || mysql_stmt_param_count(s) != (unsigned long)nargs) {
        log_error("mysql: '%s' takes %lu arguments, given %d", sql, mysql_stmt_param_count(s),
                  nargs);
        return TD_EINTERNAL;
    }
    bind_args(b, args, nargs);
    if (nargs > 0 && mysql_stmt_bind_param(s, b) != 0)
        return fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
    if (mysql_stmt_execute(s) != 0)
        return fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
    *out = s;
    return TD_OK;
}

int db_exec(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
            uint64_t *affected, uint64_t *insert_id)
{
    MYSQL_STMT *s;
    int rc = run(c, sql, args, nargs, &s);
    c->fresh = false;
    if (rc != TD_OK)
        return rc;
    if (affected != NULL)
        *affected = (uint64_t)mysql_stmt_affected_rows(s);
    if (insert_id != NULL)
        *insert_id = (uint64_t)mysql_stmt_insert_id(s);
    return TD_OK;
}

struct col_state {
    MYSQL_BIND b[DB_MAX_COLS];
    unsigned long len[DB_MAX_COLS];
    my_bool is_null[DB_MAX_COLS];
    my_bool error[DB_MAX_COLS];
    long long ints[DB_MAX_COLS];
};

static void bind_cols(struct col_state *st, const struct db_col *cols, int ncols)
{
    memset(st, 0, sizeof *st);
    for (int i = 0; i < ncols; i++) {
        MYSQL_BIND *b = &st->b[i];
        b->length = &st->len[i];
        b->is_null = &st->is_null[i];
        b->error = &st->error[i];
        if (cols[i].type == DB_INT) {
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &st->ints[i];
        } else {
            b->buffer_type = MYSQL_TYPE_STRING;
            b->buffer = cols[i].dst;
            b->buffer_length = cols[i].cap - 1; /* room for the NUL */
        }
    }
}

/* Copies a fetched row out of st into the callers' buffers. */
static void store_cols(struct col_state *st, const struct db_col *cols, int ncols)
{
    for (int i = 0; i < ncols; i++) {
        if (cols[i].type == DB_INT) {
            *(int64_t *)cols[i].dst = st->is_null[i] ? 0 : (int64_t)st->ints[i];
        } else {
            char *p = cols[i].dst;
            p[st->is_null[i] ? 0 : st->len[i]] = '\0';
        }
    }
}

int db_rows(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
            const struct db_col *cols, int ncols, int (*each)(void *ctx), void *ctx)
{
    MYSQL_STMT *s;
    struct col_state st;
    bool was_fresh = c->fresh;
    int rc = run(c, sql, args, nargs, &s);
    if (redial_stale(c, rc, was_fresh))
        rc = run(c, sql, args, nargs, &s);
    c->fresh = false;
    if (rc != TD_OK)
        return rc;
    /* Buffer the (small, LIMITed) result so that freeing it mid-way never
     * leaves unread rows on the wire. */
    if (mysql_stmt_store_result(s) != 0)
        return fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
    if (ncols > DB_MAX_COLS || mysql_stmt_field_count(s) != (unsigned int)ncols) {
        log_error("mysql: '%s' returns %u columns, expected %d", sql, mysql_stmt_field_count(s),
                  ncols);
        mysql_stmt_free_result(s);
        conn_close(c);
        return TD_EINTERNAL;
    }
    bind_cols(&st, cols, ncols);
    if (mysql_stmt_bind_result(s, st.b) != 0) {
        rc = fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
        goto out;
    }
    rc = TD_ENOTFOUND;
    for (;;) {
        int f = mysql_stmt_fetch(s);
        if (f == MYSQL_NO_DATA)
            break;
        if (f == MYSQL_DATA_TRUNCATED) {
            log_error("mysql: a value of '%s' does not fit its buffer", sql);
            rc = TD_EINTERNAL;
            break;
        }
        if (f != 0) {
            rc = fail(c, mysql_stmt_errno(s), mysql_stmt_error(s), sql);
            goto out;
        }
        store_cols(&st, cols, ncols);
        rc = TD_OK;
        if (each == NULL)
            break;
        int stop = each(ctx);
        if (stop != 0) {
            rc = stop;
            break;
        }
    }
out:
    /* Discard what was not read, so the connection stays in sync. */
    if (c->m != NULL)
        mysql_stmt_free_result(s);
    return rc;
}

int db_row(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
           const struct db_col *cols, int ncols)
{
    return db_rows(c, sql, args, nargs, cols, ncols, NULL, NULL);
}

/* The text of a batch with every '?' replaced by its argument as a literal:
 * integers in decimal, strings quoted and escaped by the server's rules for
 * this connection's character set. Returns the length, or 0 when the text
 * does not fit or the arguments do not match the placeholders. */
static size_t inline_args(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
                          char *out, size_t cap)
{
    size_t n = 0;
    int used = 0;
    for (const char *p = sql; *p != '\0'; p++) {
        if (*p != '?') {
            if (n + 1 >= cap)
                return 0;
            out[n++] = *p;
            continue;
        }
        if (used == nargs)
            return 0;
        const struct db_arg *a = &args[used++];
        if (a->type == DB_INT) {
            int w = snprintf(out + n, cap - n, "%lld", a->i);
            if (w < 0 || (size_t)w >= cap - n)
                return 0;
            n += (size_t)w;
        } else if (a->type == DB_NULL) {
            if (n + 5 >= cap)
                return 0;
            memcpy(out + n, "NULL", 4);
            n += 4;
        } else {
            if (n + 2 * a->len + 3 >= cap) /* the escaped worst case and quotes */
                return 0;
            out[n++] = '\'';
            n += mysql_real_escape_string(c->m, out + n, a->s, a->len);
            out[n++] = '\'';
        }
    }
    out[n] = '\0';
    return used == nargs ? n : 0;
}

/* Copies a batch's row into cols, by db_rows' rules: the column count must
 * match and every value must fit its buffer (else TD_EINTERNAL, logged). */
static int batch_row(MYSQL_RES *res, MYSQL_ROW row, const struct db_col *cols, int ncols)
{
    unsigned long *len = mysql_fetch_lengths(res);
    if ((int)mysql_num_fields(res) != ncols) {
        log_error("mysql: a batch's row has %u columns, expected %d", mysql_num_fields(res), ncols);
        return TD_EINTERNAL;
    }
    for (int i = 0; i < ncols; i++) {
        if (cols[i].type == DB_INT) {
            *(int64_t *)cols[i].dst = row[i] != NULL ? strtoll(row[i], NULL, 10) : 0;
            continue;
        }
        size_t n = row[i] != NULL ? len[i] : 0;
        if (n >= cols[i].cap) {
            log_error("mysql: a value of a batch's row does not fit its buffer");
            return TD_EINTERNAL;
        }
        memcpy(cols[i].dst, row[i] != NULL ? row[i] : "", n);
        ((char *)cols[i].dst)[n] = '\0';
    }
    return TD_OK;
}

/* Reads the results of a batch in order. *at is the statement being read. */
static int batch_results(struct db_conn *c, int last, int row_at, const struct db_col *cols,
                         int ncols, bool *got_row, int *at)
{
    int more;
    int rc = TD_OK;
    bool lost = false;
    *at = 0;
    do {
        MYSQL_RES *res = mysql_store_result(c->m);
        if (res != NULL) {
            MYSQL_ROW row = mysql_fetch_row(res);
            if (*at == row_at && row != NULL && rc == TD_OK) {
                rc = batch_row(res, row, cols, ncols);
                *got_row = rc == TD_OK;
            }
            mysql_free_result(res);
        } else if (mysql_field_count(c->m) != 0) {
            return fail(c, mysql_errno(c->m), mysql_error(c->m), "batch result");
        }
        /* Every statement between START TRANSACTION and COMMIT must end
         * inside the transaction (see lost_by_server). */
        if (*at > 0 && *at < last && !server_in_tx(c))
            lost = true;
        more = mysql_next_result(c->m);
        if (more > 0) {
            ++*at;
            /* 1213 at the COMMIT is a Galera certification conflict. */
            return fail(c, mysql_errno(c->m), mysql_error(c->m), *at == last ? "COMMIT" : "batch");
        }
        if (more == 0)
            ++*at;
    } while (more == 0);
    if (rc != TD_OK)
        return rc; /* every result read: the connection stays in step */
    if (lost) {
        /* Its statements may have run one by one, outside the transaction:
         * what holds now is for the database to say (the caller's retry
         * finds the order by its unique key, or makes it). */
        log_error("mysql: the server rolled a batch's transaction back without an error "
                  "(a Galera conflict); answering unavailable");
        return TD_EUNAVAIL;
    }
    return TD_OK;
}

static int batch_once(struct db_conn *c, const char *text, size_t len, int last, int row_at,
                      const struct db_col *cols, int ncols, bool *got_row, int *at)
{
    *got_row = false;
    *at = 0;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    /* Until its first statement (START TRANSACTION) answers, a failing
     * link may just be stale, as for db_begin; from then on the batch is
     * inside a transaction, a link lost is the server's trouble, and an
     * error leaves the transaction to be rolled back. */
    c->in_tx = false;
    if (mysql_real_query(c->m, text, len) != 0)
        return fail(c, mysql_errno(c->m), mysql_error(c->m), "batch");
    c->in_tx = true;
    return batch_results(c, last, row_at, cols, ncols, got_row, at);
}

int db_batch(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs, int row_at,
             const struct db_col *cols, int ncols)
{
    char text[DB_BATCH_MAX];
    bool got_row;
    int at;
    if (c->m == NULL)
        return TD_EUNAVAIL;
    size_t len = inline_args(c, sql, args, nargs, text, sizeof text);
    if (len == 0) {
        log_error("mysql: a batch does not fit %d bytes or its arguments", DB_BATCH_MAX);
        return TD_EINTERNAL;
    }
    int last = 0; /* the index of the final COMMIT: statements are split by ';' */
    for (const char *p = sql; *p != '\0'; p++)
        last += *p == ';';
    bool was_fresh = c->fresh;
    int rc = batch_once(c, text, len, last, row_at, cols, ncols, &got_row, &at);
    /* A stale link fails at the first statement, before anything ran. If
     * the batch did commit and only its answer was lost, running it again
     * meets the unique index, which the caller reads as "already done". */
    if (at == 0 && redial_stale(c, rc, was_fresh))
        rc = batch_once(c, text, len, last, row_at, cols, ncols, &got_row, &at);
    c->fresh = false;
    if (rc != TD_OK) {
        db_rollback(c); /* the statement that failed left the transaction open */
        return rc;
    }
    c->in_tx = false; /* the batch ended with its COMMIT */
    return got_row ? TD_OK : TD_ENOTFOUND;
}

int db_read(const char *sql, const struct db_arg *args, int nargs, const struct db_col *cols,
            int ncols, int (*each)(void *ctx), void *ctx)
{
    struct db_conn *c;
    int rc = db_conn(&c);
    if (rc != TD_OK)
        return rc;
    return db_rows(c, sql, args, nargs, cols, ncols, each, ctx);
}

int db_read_row(const char *sql, const struct db_arg *args, int nargs, const struct db_col *cols,
                int ncols)
{
    return db_read(sql, args, nargs, cols, ncols, NULL, NULL);
}
