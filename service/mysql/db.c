/* db.c - connections over the MariaDB/MySQL C API (db.h): a request
 * fiber's, borrowed from its loop's pool, or a plain thread's own; dialled,
 * checked, dropped on an error (what the numbers mean: db_errors.c), and
 * the breaker in front of them all. The statements are db_stmt.c's and
 * db_batch.c's, the transactions db_tx.c's. Apart so that the adapters
 * above it write SQL and arguments, never the C API. */
#include "db.h"
#include "db_conn.h"
#include "db_pool.h"

#include "breaker.h"
#include "err.h"
#include "fiber.h"
#include "fiber_fd.h"
#include "loop.h"
#include "log.h"
#include "metrics.h"
#include "resolver.h"
#include "util.h"

#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After the link to the server failed, every caller answers "unavailable"
 * at once for this long, then one probe pings (breaker.h): a paused or
 * restarting server costs one timeout, not one per request. */
#define DB_COOLDOWN_MS 500

static const struct config *cfg;
static pthread_key_t conn_key; /* a plain thread's own connection (background threads) */

/* Loops with a pool of their own, at most (TICKETD_LOOPS is one per core). */
#define DB_MAX_LOOPS 256

/* The request connections: TICKETD_DB_CONNS of them, split over the loops
 * (at least one each), each loop's lent to its fibers for the length of a
 * request (db_pool.h). So the database sees as many sessions as it serves
 * well, however many requests wait on Redis. */
static struct db_pool pools[DB_MAX_LOOPS];
static struct breaker health = BREAKER_INIT("mysql", DB_COOLDOWN_MS);

/* The link failed: open the breaker (counted when this opened it). */
static void trip(enum breaker_pass pass)
{
    if (breaker_failure(&health, pass, mono_ms()))
        metrics_inc(M_BREAKER_OPENED_MYSQL);
}

void db_conn_close(struct db_conn *c)
{
    /* COM_STMT_CLOSE and COM_QUIT expect no answer: sent as they are,
     * even on a fiber's connection. */
    for (int i = 0; i < c->nstmts; i++)
        mysql_stmt_close(c->stmts[i].stmt);
    c->nstmts = 0;
    /* Out of the loop's set before the socket closes (fiber_fd.h). */
    fiber_fd_forget(&c->wait);
    c->connected = false;
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
    db_conn_close(c);
    free(c);
}

/* Where a loop's connections dial (resolver.h). Connector/C looks a host
 * name up inside its connect, non-blocking one included, before the first
 * _start returns: on a loop, a slow name service would stall the loop. So
 * a fiber's connection dials the numeric address of TICKETD_MYSQL_HOST,
 * looked up at start and again, off the loops, after a connection to it
 * failed (a server moved to another address, as a container restarted
 * may). A socket, a numeric address and "localhost" (which Connector/C
 * reaches through its socket) look nothing up. A plain thread's
 * connection dials the name: it may block. */
static bool find_server(void *arg, char *host, size_t cap, int *port)
{
    (void)arg;
    snprintf(host, cap, "%s", cfg->mysql_host);
    *port = cfg->mysql_port;
    return true;
}

static void server_published(void *arg, const char *host, int port, bool first)
{
    (void)arg;
    (void)port;
    if (!first)
        log_info("mysql: %s now is %s", cfg->mysql_host, host);
}

static struct resolver server = {
    .what = "mysql",
    .find = find_server,
    .published_cb = server_published,
    .gap_ms = DB_COOLDOWN_MS,
};

int db_init(const struct config *config)
{
    cfg = config;
    if (mysql_library_init(0, NULL, NULL) != 0)
        return TD_EINTERNAL;
    if (pthread_key_create(&conn_key, conn_destroy) != 0)
        return TD_EINTERNAL;
    bool fixed = cfg->mysql_socket[0] != '\0' || resolver_is_fixed(cfg->mysql_host) ||
                 strcmp(cfg->mysql_host, "localhost") == 0;
    return resolver_start(&server, fixed);
}

static struct db_pool *loop_pool(void)
{
    struct loop *l = loop_self();
    struct db_pool *p = loop_slot(l, pools, DB_MAX_LOOPS, sizeof *pools);
    if (p != NULL && p->loop == NULL)
        db_pool_init(p, l, db_pool_share(cfg->db_conns, loop_count(), loop_index(l)));
    return p;
}

/* Lends the calling fiber a connection of its loop's pool, parking it at
 * most the MySQL timeout for one to be given back. NULL when none came:
 * the caller answers "unavailable", as for a server that does not answer
 * in time. */
static struct db_conn *pool_borrow(void)
{
    struct db_pool *p = loop_pool();
    bool make;
    if (p == NULL)
        return NULL;
    struct db_conn *c = db_pool_borrow(p, cfg->mysql_timeout_s * 1000, &make);
    if (make)
        return xcalloc(1, sizeof *c); /* dialled by db_conn */
    if (c == NULL)
        log_warn("mysql: no connection of %d came free in %d s", p->size, cfg->mysql_timeout_s);
    return c;
}

static void pool_give_back(struct db_conn *c)
{
    if (c->in_tx) {
        log_error("mysql: a connection came back inside a transaction; rolling back");
        db_rollback(c);
    }
    db_pool_give_back(loop_pool(), c);
}

/* A request fiber's borrowed connection, in a fiber-local variable. */
static struct fiber_key borrowed = FIBER_KEY_INIT;

static struct db_conn **fiber_conn(void)
{
    return (struct db_conn **)fiber_slot(&borrowed);
}

void db_fiber_idle(void)
{
    if (fiber_self() == NULL)
        return;
    struct db_conn **slot = fiber_conn();
    if (*slot != NULL) {
        pool_give_back(*slot);
        *slot = NULL;
    }
}

bool db_holds_idle(void)
{
    struct db_conn *c = fiber_self() != NULL ? *fiber_conn() : NULL;
    return c != NULL && !c->in_tx;
}

void db_thread_release(void)
{
    if (fiber_self() != NULL) {
        db_fiber_idle();
        return;
    }
    struct db_conn *c = pthread_getspecific(conn_key);
    conn_destroy(c);
    pthread_setspecific(conn_key, NULL);
}

void db_cleanup(void)
{
    db_thread_release();
    /* The loops have stopped: their idle connections are closed here. */
    for (int i = 0; i < DB_MAX_LOOPS; i++) {
        if (pools[i].loop != NULL)
            db_pool_cleanup(&pools[i], conn_destroy);
    }
    pthread_key_delete(conn_key);
    resolver_stop(&server);
    mysql_library_end();
}

/* Maps the last error of c (or of stmt) and drops the connection when it
 * cannot be trusted any more. */
int db_fail(struct db_conn *c, unsigned int e, const char *msg, const char *what)
{
    int refused = db_refusal(c, e, msg);
    if (refused != 0)
        return refused;
    if (db_conflict(e, what))
        return TD_ERETRY;
    if (db_partition_race(e)) {
        /* The retention job lists the partitions again next round. */
        log_info("mysql: %u %s", e, msg);
        return TD_ECONFLICT;
    }
    metrics_inc(M_DEP_ERRORS_MYSQL);
    if (db_link_error(e)) {
        log_warn("mysql: %s: %u %s (reconnecting on next use)", what, e, msg);
        /* A connection that has worked and fails outside a transaction may
         * just be stale (the server restarted while it idled): the caller
         * dials again before anyone is told the server is down. Inside a
         * transaction, or on a new connection, the link itself failed. */
        if (c->fresh || c->in_tx)
            trip(BREAKER_CALL);
        db_conn_close(c);
        return TD_EUNAVAIL;
    }
    /* Any other error: the statement failed and its transaction is rolled
     * back (or, at COMMIT, it is unknown whether it was kept). Either way
     * the true answer is "unavailable, try again", never an internal
     * error for what may have committed: the retry finds the order by its
     * key, or makes it. Logged as an error, since it is unexpected. */
    log_error("mysql: %s: %u %s", what, e, msg);
    db_conn_close(c);
    return TD_EUNAVAIL;
}

int db_wait(struct db_conn *c, int status)
{
    unsigned want = 0;
    if (status & (MYSQL_WAIT_READ | MYSQL_WAIT_EXCEPT))
        want |= LOOP_READ;
    if (status & MYSQL_WAIT_WRITE)
        want |= LOOP_WRITE;
    /* The connector asks for a timeout whenever one is set (connect,
     * read and write timeouts are, in dial); without one the wait is still
     * bounded by the MySQL timeout, so no fiber waits forever. */
    int timeout_ms = (status & MYSQL_WAIT_TIMEOUT) ? (int)mysql_get_timeout_value_ms(c->m)
                                                   : cfg->mysql_timeout_s * 1000;
    int fd = mysql_get_socket(c->m);
    unsigned ready = c->connected ? fiber_fd_wait(&c->wait, fd, want, timeout_ms)
                                  : fiber_wait_io(fd, want, timeout_ms);
    if (ready == 0)
        return MYSQL_WAIT_TIMEOUT;
    int events = 0;
    if (ready & LOOP_READ)
        events |= status & (MYSQL_WAIT_READ | MYSQL_WAIT_EXCEPT);
    if (ready & LOOP_WRITE)
        events |= status & MYSQL_WAIT_WRITE;
    return events != 0 ? events : status & ~MYSQL_WAIT_TIMEOUT;
}

int db_query(struct db_conn *c, const char *q, unsigned long len)
{
    int err;
    DB_CALL(c, err, mysql_real_query, c->m, q, len);
    return err;
}

MYSQL_RES *db_store_result(struct db_conn *c)
{
    MYSQL_RES *r;
    DB_CALL(c, r, mysql_store_result, c->m);
    return r;
}

int db_lock_wait_s(int read_timeout_s)
{
    int s = (read_timeout_s - 1) / 2;
    return s < 1 ? 1 : s;
}

/* Opens c's link: on a fiber non-blocking (every later call on it goes
 * through DB_CALL), elsewhere blocking. */
static int dial(struct db_conn *c)
{
    const char *sock = cfg->mysql_socket[0] ? cfg->mysql_socket : NULL;
    const char *host = cfg->mysql_host;
    char numeric[RESOLVER_HOST_MAX];
    unsigned gen = 0;
    bool on_fiber = fiber_self() != NULL;
    if (sock == NULL && on_fiber) {
        int port;
        if (resolver_get(&server, numeric, sizeof numeric, &port, &gen) != TD_OK) {
            metrics_inc(M_DEP_ERRORS_MYSQL);
            return TD_EUNAVAIL; /* not looked up yet: asked for, off the loop */
        }
        host = numeric;
    }
    MYSQL *m = mysql_init(NULL);
    if (m == NULL)
        return TD_EINTERNAL;
    c->nonblock = on_fiber;
    if (c->nonblock)
        mysql_options(m, MYSQL_OPT_NONBLOCK, 0);
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
    /* On a Galera node a read waits until the node applied what the cluster
     * committed before it: an order made through another node is found
     * (docs/scaling.md). MariaDB without a cluster ignores it; a server
     * that lacks the variable (MySQL) refuses the connection: set 0 there. */
    /* A row lock is waited for less than the read timeout (db.h:
     * db_lock_wait_s): a row another transaction holds ends the statement
     * with 1205, rolled back and known, before the client gives up on the
     * link and the outcome becomes unknown. */
    char lock_wait[64];
    snprintf(lock_wait, sizeof lock_wait, "SET SESSION innodb_lock_wait_timeout = %d",
             db_lock_wait_s(cfg->mysql_timeout_s));
    mysql_options(m, MYSQL_INIT_COMMAND, lock_wait);
    char sync_wait[48];
    if (cfg->mysql_sync_wait > 0) {
        snprintf(sync_wait, sizeof sync_wait, "SET SESSION wsrep_sync_wait = %d",
                 cfg->mysql_sync_wait);
        mysql_options(m, MYSQL_INIT_COMMAND, sync_wait);
    }
    MYSQL *ok;
    c->m = m; /* db_wait asks it for the socket */
    DB_CALL(c, ok, mysql_real_connect, m, sock ? NULL : host, cfg->mysql_user, cfg->mysql_password,
            cfg->mysql_db, (unsigned int)cfg->mysql_port, sock,
            CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS);
    if (ok == NULL) {
        metrics_inc(M_DEP_ERRORS_MYSQL);
        log_warn("mysql: connect to %s:%d failed: %s", sock ? sock : host, cfg->mysql_port,
                 mysql_error(m));
        mysql_close(m);
        c->m = NULL;
        if (sock == NULL && on_fiber)
            resolver_forget(&server, gen); /* the server may have moved */
        return TD_EUNAVAIL;
    }
    c->fresh = true;
    c->in_tx = false;
    c->connected = c->nonblock;
    return TD_OK;
}

/* A connection that worked before and fails at the first statement of a
 * unit of work (BEGIN, or a read outside a transaction) was most likely
 * closed by a restarted server while idle. Nothing has been done on it
 * yet, so dialling again and repeating is safe; writes outside a
 * transaction are never repeated. Returns true when c was re-dialled. */
bool db_redial_stale(struct db_conn *c, int rc, bool was_fresh)
{
    if (rc != TD_EUNAVAIL || was_fresh || c->in_tx || breaker_is_open(&health, mono_ms()))
        return false;
    db_conn_close(c);
    if (dial(c) == TD_OK)
        return true;
    trip(BREAKER_CALL);
    return false;
}

/* The caller's connection: on a fiber, borrowed from its loop's pool
 * until db_fiber_idle; on a plain thread, its own. NULL when the pool
 * lent none in time. */
static struct db_conn *caller_conn(void)
{
    if (fiber_self() != NULL) {
        struct db_conn **slot = fiber_conn();
        if (*slot == NULL)
            *slot = pool_borrow();
        return *slot;
    }
    return xthread_object(conn_key, sizeof(struct db_conn));
}

static int ping(struct db_conn *c)
{
    int err;
    DB_CALL(c, err, mysql_ping, c->m);
    return err;
}

int db_conn_get(struct db_conn **out)
{
    *out = NULL;
    /* Borrowed before the breaker is asked, so that a probe, once let
     * through, always goes out. */
    struct db_conn *c = caller_conn();
    if (c == NULL)
        return TD_EUNAVAIL;
    int64_t now = mono_ms();
    enum breaker_pass pass = breaker_ask(&health, now);
    if (pass == BREAKER_REFUSED)
        return TD_EUNAVAIL;
    /* The probe after an outage always pings, so that its verdict is about
     * the server now, not about a connection that happens to be open. */
    bool check = pass == BREAKER_PROBE || now - c->last_used_ms > DB_IDLE_PING_MS;
    if (c->m != NULL && check && ping(c) != 0) {
        log_info("mysql: connection is gone (%s); reconnecting", mysql_error(c->m));
        db_conn_close(c);
    }
    if (c->m == NULL && dial(c) != TD_OK) {
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
    db_conn_close(c);
}

void db_rollback(struct db_conn *c)
{
    c->in_tx = false;
    if (c->m == NULL)
        return;
    my_bool failed;
    DB_CALL(c, failed, mysql_rollback, c->m);
    if (failed)
        db_fail(c, mysql_errno(c->m), mysql_error(c->m), "ROLLBACK");
}

static int ping_once(struct db_conn *c)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (ping(c) != 0)
        return db_fail(c, mysql_errno(c->m), mysql_error(c->m), "ping");
    return TD_OK;
}

int db_ping(struct db_conn *c)
{
    bool was_fresh = c->fresh;
    int rc = ping_once(c);
    if (db_redial_stale(c, rc, was_fresh))
        rc = ping_once(c);
    c->fresh = false;
    return rc;
}

int db_exec_text(struct db_conn *c, const char *sql)
{
    if (c->m == NULL)
        return TD_EUNAVAIL;
    if (db_query(c, sql, strlen(sql)) != 0)
        return db_fail(c, mysql_errno(c->m), mysql_error(c->m), sql);
    /* DDL returns no rows; anything else is read and dropped so that the
     * link is ready for the next statement. */
    MYSQL_RES *r = db_store_result(c);
    mysql_free_result(r);
    return TD_OK;
}

const char *db_dup_key(const struct db_conn *c)
{
    return c->dup_key;
}
