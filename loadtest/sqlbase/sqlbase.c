/*
 * sqlbase - the raw SQL baseline of ticketd's order transaction.
 *
 * Runs, per new order, the same transaction ticketd runs, in the same one
 * round trip (begin, the order priced from its session with its history
 * row written by the database's trigger, the stock compare-and-set, commit:
 * ORDER_PLACE below) with no HTTP and no Redis in front of it, from N
 * threads that each own one connection. What ticketd reaches over HTTP divided by what
 * this reaches is the cost of everything ticketd adds around the database.
 *
 * The run creates its own sessions (many, or one hot session) so that it
 * never touches stock other runs depend on; the rows it writes are
 * consistent orders, so ticketd's audit still holds afterwards.
 */
#include "hist.h"
#include "optable.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Deadlock (1213) and lock wait timeout (1205) abort the transaction (or
 * only the statement, for 1205), so the whole transaction is rolled back
 * and run again; bounded so that a stuck server cannot hold a thread. */
#define SQLBASE_MAX_RETRIES 5
#define SQLBASE_MAX_THREADS 512
#define SQLBASE_STOCK_MAX   2000000000LL

enum sqlbase_result {
    SQLBASE_COMMITTED = 0,
    SQLBASE_SOLD_OUT = 1,
    SQLBASE_FAILED = -1,
};

struct sqlbase_opts {
    const char *host;
    const char *user;
    const char *password;
    const char *db;
    const char *socket;
    const char *json_path;
    unsigned port;
    int connections;
    long long transactions;
    double duration_s;
    int sessions;
    long long stock;
    int quantity;
    long long price_cents;
    bool stock_first;
    bool quiet;
};

/* Shared by all workers: the budget, the stop time and the sessions. */
struct sqlbase_run {
    const struct sqlbase_opts *opts;
    atomic_llong issued;
    atomic_bool stop;
    double deadline;
    uint64_t *session_ids;
    int session_count;
    char run_id[8];
};

struct sqlbase_worker {
    struct sqlbase_run *run;
    pthread_t thread;
    int index;
    MYSQL *conn;
    MYSQL_STMT *st_order;
    MYSQL_STMT *st_stock;
    /* Bound parameters: the statements read these on every execute. */
    uint64_t session_id;
    uint64_t user_id;
    uint64_t order_id;
    int64_t quantity;
    uint64_t amount_cents;
    char order_no[24];
    unsigned long order_no_len;
    char request_id[64];
    unsigned long request_id_len;
    /* Results. */
    long long committed;
    long long sold_out;
    long long retried;
    long long failed;
    unsigned last_errno;
    char last_error[256];
    struct hist latency;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);

    return (v != NULL && v[0] != '\0') ? v : fallback;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sqlbase [options]\n"
            "Runs ticketd's order transaction straight against MariaDB and prints tx/s, p50, p99.\n"
            "\n"
            "  --host H            MariaDB host (TICKETD_MYSQL_HOST, 127.0.0.1)\n"
            "  --port P            MariaDB port (TICKETD_MYSQL_PORT, 3306)\n"
            "  --socket PATH       Unix socket instead of TCP (TICKETD_MYSQL_SOCKET)\n"
            "  --user U            (TICKETD_MYSQL_USER, ticketd)\n"
            "  --password P        (TICKETD_MYSQL_PASSWORD, ticketd)\n"
            "  --db NAME           (TICKETD_MYSQL_DB, ticketd)\n"
            "  --connections N     threads, one connection each (16)\n"
            "  --transactions N    stop after N transactions in all (1000000)\n"
            "  --duration S        stop after S seconds (10)\n"
            "  --sessions K        spread orders over K new sessions (1000)\n"
            "  --hot               every order on one new session (same as --sessions 1)\n"
            "  --stock N           stock per session (enough for the whole run)\n"
            "  --quantity Q        seats per order (1)\n"
            "  --price CENTS       price of the sessions created (1000)\n"
            "  --stock-first       run the transaction step by step, the stock UPDATE before\n"
            "                      the order INSERT (for comparison)\n"
            "  --json FILE         also write the figures as JSON\n"
            "  --quiet             print only the result line\n");
}

static int opt_port(const char *arg, void *dst)
{
    long long v;

    if (optable_ll(arg, 1, 65535, &v) != 0)
        return OPTABLE_BAD_VALUE;
    *(unsigned *)dst = (unsigned)v;
    return OPTABLE_OK;
}

static int opts_parse(int argc, char **argv, struct sqlbase_opts *o)
{
#define N(name, kind, field, min, max)                                                             \
    {                                                                                              \
        name, 0, kind, &o->field, min, max, NULL, NULL                                             \
    }
    const struct optable_opt opts[] = {
        N("host", OPTABLE_STR, host, 0, 0),
        {"port", 0, OPTABLE_CALL, &o->port, 0, 0, opt_port, NULL},
        N("socket", OPTABLE_STR, socket, 0, 0),
        N("user", OPTABLE_STR, user, 0, 0),
        N("password", OPTABLE_STR, password, 0, 0),
        N("db", OPTABLE_STR, db, 0, 0),
        N("connections", OPTABLE_INT, connections, 1, SQLBASE_MAX_THREADS),
        N("transactions", OPTABLE_LL, transactions, 1, 1000000000LL),
        N("duration", OPTABLE_SECONDS, duration_s, 1, 3600),
        N("sessions", OPTABLE_INT, sessions, 1, 100000),
        N("hot", OPTABLE_SET, sessions, 1, 1),
        N("stock", OPTABLE_LL, stock, 1, SQLBASE_STOCK_MAX),
        N("quantity", OPTABLE_INT, quantity, 1, 1000),
        N("price", OPTABLE_LL, price_cents, 0, 100000000LL),
        N("stock-first", OPTABLE_FLAG, stock_first, 0, 0),
        N("json", OPTABLE_STR, json_path, 0, 0),
        N("quiet", OPTABLE_FLAG, quiet, 0, 0),
        {"help", 'h', OPTABLE_HELP, NULL, 0, 0, NULL, NULL},
    };
#undef N
    const struct optable t = {"sqlbase", usage, opts, (int)(sizeof(opts) / sizeof(opts[0]))};

    o->host = env_or("TICKETD_MYSQL_HOST", "127.0.0.1");
    o->user = env_or("TICKETD_MYSQL_USER", "ticketd");
    o->password = env_or("TICKETD_MYSQL_PASSWORD", "ticketd");
    o->db = env_or("TICKETD_MYSQL_DB", "ticketd");
    o->socket = env_or("TICKETD_MYSQL_SOCKET", NULL);
    if (opt_port(env_or("TICKETD_MYSQL_PORT", "3306"), &o->port) != OPTABLE_OK) {
        fprintf(stderr, "sqlbase: TICKETD_MYSQL_PORT is not a port\n");
        return -1;
    }
    o->connections = 16;
    o->transactions = 1000000;
    o->duration_s = 10.0;
    o->sessions = 1000;
    o->stock = 0;
    o->quantity = 1;
    o->price_cents = 1000;
    if (optable_parse(&t, argc, argv) != 0)
        return -1;
    if (optind != argc) {
        fprintf(stderr, "sqlbase: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->stock == 0) {
        /* Enough for every order the run could place on one session, so
         * that the figure measures commits and never sold-out answers. */
        long long need = o->transactions / o->sessions + 1;
        need *= o->quantity;
        o->stock = need > SQLBASE_STOCK_MAX ? SQLBASE_STOCK_MAX : need;
    }
    return 0;
}

static MYSQL *db_connect(const struct sqlbase_opts *o, char *err, size_t errlen)
{
    MYSQL *conn = mysql_init(NULL);
    unsigned int timeout = 10;
    bool off = false;

    if (conn == NULL) {
        snprintf(err, errlen, "mysql_init failed");
        return NULL;
    }
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    mysql_options(conn, MYSQL_OPT_RECONNECT, &off);
    /* ticketd's session settings (service/mysql/db.c): the same isolation, so the
     * same locks. Under REPEATABLE READ the INSERT ... SELECT would take a
     * shared lock on the session row that the stock CAS then upgrades. */
    mysql_options(conn, MYSQL_INIT_COMMAND, "SET time_zone = '+00:00'");
    mysql_options(conn, MYSQL_INIT_COMMAND,
                  "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    if (mysql_real_connect(conn, o->socket != NULL ? NULL : o->host, o->user, o->password, o->db,
                           o->port, o->socket,
                           CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS) == NULL) {
        snprintf(err, errlen, "%s", mysql_error(conn));
        mysql_close(conn);
        return NULL;
    }
    return conn;
}

static MYSQL_STMT *stmt_new(MYSQL *conn, const char *sql, MYSQL_BIND *params)
{
    MYSQL_STMT *st = mysql_stmt_init(conn);

    if (st == NULL)
        return NULL;
    if (mysql_stmt_prepare(st, sql, (unsigned long)strlen(sql)) != 0 ||
        (params != NULL && mysql_stmt_bind_param(st, params) != 0)) {
        fprintf(stderr, "sqlbase: prepare '%s': %s\n", sql, mysql_stmt_error(st));
        mysql_stmt_close(st);
        return NULL;
    }
    return st;
}

static void bind_u64(MYSQL_BIND *b, uint64_t *v)
{
    memset(b, 0, sizeof(*b));
    b->buffer_type = MYSQL_TYPE_LONGLONG;
    b->buffer = v;
    b->is_unsigned = 1;
}

static void bind_i64(MYSQL_BIND *b, int64_t *v)
{
    memset(b, 0, sizeof(*b));
    b->buffer_type = MYSQL_TYPE_LONGLONG;
    b->buffer = v;
}

static void bind_str(MYSQL_BIND *b, char *buf, unsigned long *len)
{
    memset(b, 0, sizeof(*b));
    b->buffer_type = MYSQL_TYPE_STRING;
    b->buffer = buf;
    b->length = len;
}

/* Prepares the two statements of the order transaction once per
 * connection, bound to the worker's parameter fields. They are ticketd's
 * own (service/mysql/store_mysql.c): the order priced from its session in one
 * INSERT ... SELECT ... RETURNING (the history row comes from the
 * database's trigger), then the stock's decrement, which the sessions
 * table's CHECK (stock >= 0 AND stock <= capacity) refuses when the seats
 * run out (ORDER_STOCK in store_mysql.c). */
static int worker_prepare(struct sqlbase_worker *w)
{
    MYSQL_BIND order[6];
    MYSQL_BIND stock[2];

    bind_str(&order[0], w->order_no, &w->order_no_len);
    bind_u64(&order[1], &w->user_id);
    bind_str(&order[2], w->request_id, &w->request_id_len);
    bind_i64(&order[3], &w->quantity);
    bind_i64(&order[4], &w->quantity);
    bind_u64(&order[5], &w->session_id);

    bind_i64(&stock[0], &w->quantity);
    bind_u64(&stock[1], &w->session_id);

    w->st_order = stmt_new(w->conn,
                           "INSERT INTO orders (order_no, user_id, session_id, request_id, "
                           "quantity, amount_cents, status, version) "
                           "SELECT ?, ?, id, ?, ?, price_cents * ?, 'PENDING_PAYMENT', 1 "
                           "FROM sessions WHERE id = ? RETURNING id, amount_cents",
                           order);
    w->st_stock = stmt_new(w->conn,
                           "UPDATE sessions SET stock = stock - ?, version = version + 1 "
                           "WHERE id = ? AND @@in_transaction",
                           stock);
    if (w->st_order == NULL || w->st_stock == NULL)
        return -1;
    return 0;
}

static void worker_note_error(struct sqlbase_worker *w, unsigned err, const char *msg)
{
    w->last_errno = err;
    snprintf(w->last_error, sizeof(w->last_error), "%s", msg);
}

static bool errno_retryable(unsigned err)
{
    return err == ER_LOCK_DEADLOCK || err == ER_LOCK_WAIT_TIMEOUT;
}

/* The order, priced from its session; reads back its id and amount. */
static int order_insert(struct sqlbase_worker *w, unsigned *err)
{
    MYSQL_BIND result[2];
    int fetched;

    memset(result, 0, sizeof(result));
    result[0].buffer_type = MYSQL_TYPE_LONGLONG;
    result[0].buffer = &w->order_id;
    result[0].is_unsigned = 1;
    result[1].buffer_type = MYSQL_TYPE_LONGLONG;
    result[1].buffer = &w->amount_cents;
    result[1].is_unsigned = 1;
    if (mysql_stmt_execute(w->st_order) != 0 || mysql_stmt_bind_result(w->st_order, result) != 0) {
        *err = mysql_stmt_errno(w->st_order);
        worker_note_error(w, *err, mysql_stmt_error(w->st_order));
        return -1;
    }
    fetched = mysql_stmt_fetch(w->st_order);
    mysql_stmt_free_result(w->st_order);
    if (fetched != 0) {
        worker_note_error(w, 0, "session row not found");
        return -1;
    }
    return 0;
}

/* --stock-first: the transaction step by step, the stock compare-and-set
 * before the order (for comparison with ticketd's order of statements). */
static int order_tx_steps(struct sqlbase_worker *w, unsigned *err)
{
    int rc = SQLBASE_FAILED;

    *err = 0;
    if (mysql_real_query(w->conn, "START TRANSACTION", 17) != 0) {
        *err = mysql_errno(w->conn);
        worker_note_error(w, *err, mysql_error(w->conn));
        goto out;
    }
    /* ticketd inserts first: a duplicate key is then rejected before any
     * row lock on the session is taken. --stock-first measures the other
     * order. */
    if (!w->run->opts->stock_first && order_insert(w, err) != 0)
        goto rollback;
    if (mysql_stmt_execute(w->st_stock) != 0) {
        *err = mysql_stmt_errno(w->st_stock);
        worker_note_error(w, *err, mysql_stmt_error(w->st_stock));
        if (*err == ER_CONSTRAINT_FAILED)
            rc = SQLBASE_SOLD_OUT; /* the CHECK refused the decrement */
        goto rollback;
    }
    if (mysql_stmt_affected_rows(w->st_stock) != 1) {
        worker_note_error(w, 0, "session row not found");
        goto rollback;
    }
    if (w->run->opts->stock_first && order_insert(w, err) != 0)
        goto rollback;
    if (mysql_real_query(w->conn, "COMMIT", 6) != 0) {
        *err = mysql_errno(w->conn);
        worker_note_error(w, *err, mysql_error(w->conn));
        goto rollback;
    }
    rc = SQLBASE_COMMITTED;
    goto out;

rollback:
    /* Always explicit: a lock wait timeout rolls back only the statement. */
    mysql_rollback(w->conn);
out:
    return rc;
}

/* ticketd's order transaction (service/mysql/store_mysql.c, place_in_one_trip): one
 * multi-statement round trip. The server stops at the first failing
 * statement: a duplicate at the INSERT, or the stock's CHECK constraint
 * (sold out) at the UPDATE; the open transaction is then rolled back. */
static const char ORDER_PLACE[] =
    "START TRANSACTION; "
    "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, "
    "amount_cents, status, version, created_at, updated_at) "
    "SELECT '%s', %llu, id, '%s', %lld, price_cents * %lld, 'PENDING_PAYMENT', 1, '%s', '%s' "
    "FROM sessions WHERE id = %llu RETURNING id, amount_cents; "
    "UPDATE sessions SET stock = stock - %lld, version = version + 1 WHERE id = %llu "
    "AND EXISTS (SELECT 1 FROM orders WHERE order_no = '%s'); "
    "COMMIT";

/* Reads every result of the batch; the INSERT's row gives the order id. */
static int order_batch_results(struct sqlbase_worker *w, unsigned *err)
{
    int more;
    bool got_row = false;
    do {
        MYSQL_RES *res = mysql_store_result(w->conn);
        if (res != NULL) {
            MYSQL_ROW row = mysql_fetch_row(res);
            if (row != NULL && row[0] != NULL) {
                w->order_id = strtoull(row[0], NULL, 10);
                got_row = true;
            }
            mysql_free_result(res);
        }
        more = mysql_next_result(w->conn);
    } while (more == 0);
    if (more > 0) {
        *err = mysql_errno(w->conn);
        worker_note_error(w, *err, mysql_error(w->conn));
        return *err == ER_CONSTRAINT_FAILED ? SQLBASE_SOLD_OUT : SQLBASE_FAILED;
    }
    if (!got_row) {
        worker_note_error(w, 0, "session row not found");
        return SQLBASE_FAILED;
    }
    return SQLBASE_COMMITTED;
}

/* One attempt of the order transaction. Returns SQLBASE_COMMITTED,
 * SQLBASE_SOLD_OUT, or SQLBASE_FAILED with the server's error number in
 * *err (0 for a client-side failure). */
static int order_tx_once(struct sqlbase_worker *w, unsigned *err)
{
    char q[1024];
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    int rc;

    *err = 0;
    if (w->run->opts->stock_first)
        return order_tx_steps(w, err);
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S.000", &tm);
    int n = snprintf(q, sizeof q, ORDER_PLACE, w->order_no, (unsigned long long)w->user_id,
                     w->request_id, (long long)w->quantity, (long long)w->quantity, now, now,
                     (unsigned long long)w->session_id, (long long)w->quantity,
                     (unsigned long long)w->session_id, w->order_no);
    if (mysql_real_query(w->conn, q, (unsigned long)n) != 0) {
        *err = mysql_errno(w->conn);
        worker_note_error(w, *err, mysql_error(w->conn));
        rc = SQLBASE_FAILED;
    } else {
        rc = order_batch_results(w, err);
    }
    if (rc != SQLBASE_COMMITTED)
        mysql_rollback(w->conn); /* the failed statement left it open */
    return rc;
}

static int order_tx(struct sqlbase_worker *w)
{
    unsigned err = 0;
    int rc = SQLBASE_FAILED;

    for (int attempt = 0; attempt <= SQLBASE_MAX_RETRIES; attempt++) {
        rc = order_tx_once(w, &err);
        if (rc != SQLBASE_FAILED || !errno_retryable(err))
            break;
        w->retried++;
        /* A little jitter so that the two sides of a deadlock do not
         * collide again on the next attempt. */
        usleep((useconds_t)(100 + rand() % 900) * (useconds_t)(attempt + 1));
    }
    return rc;
}

static void *worker_main(void *arg)
{
    struct sqlbase_worker *w = arg;
    struct sqlbase_run *run = w->run;
    const struct sqlbase_opts *o = run->opts;

    mysql_thread_init();
    while (!atomic_load(&run->stop)) {
        long long n = atomic_fetch_add(&run->issued, 1);
        double t0;
        double t1;
        int rc;

        if (n >= o->transactions || now_s() >= run->deadline)
            break;
        w->session_id = run->session_ids[n % run->session_count];
        /* Distinct user and key per order, as distinct buyers would be: the
         * unique index (user, session, request) never fires here. */
        w->user_id = 900000000000ULL + (uint64_t)n;
        w->quantity = o->quantity;
        w->order_no_len =
            (unsigned long)snprintf(w->order_no, sizeof(w->order_no), "SB%.6s%02x%010llx",
                                    run->run_id, (unsigned)w->index & 0xffu, (long long)n);
        w->request_id_len = (unsigned long)snprintf(w->request_id, sizeof(w->request_id),
                                                    "sqlbase-%.6s-%lld", run->run_id, n);
        t0 = now_s();
        rc = order_tx(w);
        t1 = now_s();
        if (rc == SQLBASE_COMMITTED) {
            w->committed++;
            hist_add(&w->latency, (uint64_t)((t1 - t0) * 1e6));
        } else if (rc == SQLBASE_SOLD_OUT) {
            w->sold_out++;
            hist_add(&w->latency, (uint64_t)((t1 - t0) * 1e6));
        } else {
            w->failed++;
            /* A broken connection would fail every later attempt at once;
             * stop this worker and let the report say why. */
            if (mysql_ping(w->conn) != 0)
                break;
        }
    }
    mysql_thread_end();
    return NULL;
}

static int sessions_create(MYSQL *conn, struct sqlbase_run *run)
{
    const struct sqlbase_opts *o = run->opts;
    char *sql = NULL;
    size_t cap;
    size_t len = 0;
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = -1;
    int made = 0;

    run->session_ids = calloc((size_t)o->sessions, sizeof(uint64_t));
    cap = 256 + (size_t)o->sessions * 96;
    sql = malloc(cap);
    if (run->session_ids == NULL || sql == NULL) {
        fprintf(stderr, "sqlbase: out of memory\n");
        goto out;
    }
    len = (size_t)snprintf(sql, cap,
                           "INSERT INTO sessions (title, price_cents, capacity, stock, version) "
                           "VALUES ");
    for (int i = 0; i < o->sessions; i++)
        len +=
            (size_t)snprintf(sql + len, cap - len, "%s('sqlbase %s #%d', %lld, %lld, %lld, 0)",
                             i == 0 ? "" : ",", run->run_id, i, o->price_cents, o->stock, o->stock);
    if (mysql_real_query(conn, sql, (unsigned long)len) != 0) {
        fprintf(stderr, "sqlbase: creating sessions: %s\n", mysql_error(conn));
        goto out;
    }
    len = (size_t)snprintf(sql, cap,
                           "SELECT id FROM sessions WHERE title LIKE 'sqlbase %s #%%' ORDER BY id",
                           run->run_id);
    if (mysql_real_query(conn, sql, (unsigned long)len) == 0)
        res = mysql_store_result(conn);
    if (res == NULL) {
        fprintf(stderr, "sqlbase: reading sessions: %s\n", mysql_error(conn));
        goto out;
    }
    for (row = mysql_fetch_row(res); row != NULL && made < o->sessions; row = mysql_fetch_row(res))
        run->session_ids[made++] = strtoull(row[0], NULL, 10);
    if (made != o->sessions) {
        fprintf(stderr, "sqlbase: created %d sessions, expected %d\n", made, o->sessions);
        goto out;
    }
    run->session_count = made;
    rc = 0;
out:
    mysql_free_result(res);
    free(sql);
    return rc;
}

/* Seats taken from the run's sessions against seats held by the run's
 * orders: they differ only if a transaction was half applied. */
static int stock_check(MYSQL *conn, const struct sqlbase_run *run, long long *taken,
                       long long *held)
{
    char sql[512];
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = -1;
    int n;

    n = snprintf(sql, sizeof(sql),
                 "SELECT (SELECT COALESCE(SUM(capacity - stock), 0) FROM sessions "
                 "WHERE title LIKE 'sqlbase %s #%%'), "
                 "(SELECT COALESCE(SUM(o.quantity), 0) FROM orders o JOIN sessions s "
                 "ON s.id = o.session_id WHERE s.title LIKE 'sqlbase %s #%%')",
                 run->run_id, run->run_id);
    if (mysql_real_query(conn, sql, (unsigned long)n) == 0)
        res = mysql_store_result(conn);
    if (res == NULL)
        goto out;
    row = mysql_fetch_row(res);
    if (row == NULL || row[0] == NULL || row[1] == NULL)
        goto out;
    *taken = strtoll(row[0], NULL, 10);
    *held = strtoll(row[1], NULL, 10);
    rc = 0;
out:
    mysql_free_result(res);
    return rc;
}

int main(int argc, char **argv)
{
    struct sqlbase_opts opts = {0};
    struct sqlbase_run run;
    struct sqlbase_worker *workers = NULL;
    struct hist *total = NULL;
    MYSQL *admin = NULL;
    char err[256];
    long long committed = 0, sold_out = 0, retried = 0, failed = 0;
    long long taken = -1, held = -1;
    int started = 0;
    double t_start, elapsed, tps;
    int rc = 1;

    if (opts_parse(argc, argv, &opts) != 0)
        return 1;
    memset(&run, 0, sizeof(run));
    run.opts = &opts;
    snprintf(run.run_id, sizeof(run.run_id), "%06lx",
             ((unsigned long)time(NULL) ^ ((unsigned long)getpid() << 12)) & 0xffffffUL);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());

    if (mysql_library_init(0, NULL, NULL) != 0) {
        fprintf(stderr, "sqlbase: mysql_library_init failed\n");
        return 1;
    }
    admin = db_connect(&opts, err, sizeof(err));
    if (admin == NULL) {
        fprintf(stderr, "sqlbase: connect: %s\n", err);
        goto out;
    }
    if (sessions_create(admin, &run) != 0)
        goto out;

    workers = calloc((size_t)opts.connections, sizeof(*workers));
    total = malloc(sizeof(*total));
    if (workers == NULL || total == NULL) {
        fprintf(stderr, "sqlbase: out of memory\n");
        goto out;
    }
    hist_init(total);
    /* Connect and prepare everything before the clock starts. */
    for (int i = 0; i < opts.connections; i++) {
        struct sqlbase_worker *w = &workers[i];

        w->run = &run;
        w->index = i;
        hist_init(&w->latency);
        w->conn = db_connect(&opts, err, sizeof(err));
        if (w->conn == NULL) {
            fprintf(stderr, "sqlbase: connection %d: %s\n", i, err);
            goto out;
        }
        if (worker_prepare(w) != 0)
            goto out;
    }
    t_start = now_s();
    run.deadline = t_start + opts.duration_s;
    for (int i = 0; i < opts.connections; i++) {
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "sqlbase: cannot start thread %d\n", i);
            atomic_store(&run.stop, true);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    elapsed = now_s() - t_start;

    for (int i = 0; i < started; i++) {
        committed += workers[i].committed;
        sold_out += workers[i].sold_out;
        retried += workers[i].retried;
        failed += workers[i].failed;
        hist_merge(total, &workers[i].latency);
        if (workers[i].failed > 0 && !opts.quiet)
            fprintf(stderr, "sqlbase: connection %d: last error %u: %s\n", i, workers[i].last_errno,
                    workers[i].last_error);
    }
    if (stock_check(admin, &run, &taken, &held) != 0)
        fprintf(stderr, "sqlbase: stock check failed: %s\n", mysql_error(admin));
    tps = elapsed > 0 ? (double)committed / elapsed : 0.0;

    if (!opts.quiet) {
        printf("sqlbase: %d connections, %d session%s, %s, %.1f s\n", opts.connections,
               run.session_count, run.session_count == 1 ? " (hot)" : "s",
               opts.stock_first ? "stock update first, step by step"
                                : "order insert first, one round trip",
               elapsed);
        printf("  transactions  %lld committed, %lld sold out, %lld retried, %lld failed\n",
               committed, sold_out, retried, failed);
        printf("  stock check   %s (seats taken %lld, held by orders %lld)\n",
               taken == held ? "ok" : "MISMATCH", taken, held);
    }
    printf("sqlbase tps=%.0f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f committed=%lld failed=%lld\n", tps,
           (double)hist_percentile(total, 0.50) / 1000.0,
           (double)hist_percentile(total, 0.99) / 1000.0, (double)total->max_us / 1000.0, committed,
           failed);
    if (opts.json_path != NULL) {
        FILE *f = fopen(opts.json_path, "w");

        if (f == NULL) {
            fprintf(stderr, "sqlbase: cannot write %s: %s\n", opts.json_path, strerror(errno));
            goto out;
        }
        fprintf(f,
                "{\"tool\": \"sqlbase\", \"connections\": %d, \"sessions\": %d, "
                "\"elapsed_s\": %.3f, \"committed\": %lld, \"sold_out\": %lld, "
                "\"retried\": %lld, \"failed\": %lld, \"tps\": %.1f, \"p50_ms\": %.3f, "
                "\"p99_ms\": %.3f, \"max_ms\": %.3f, \"stock_ok\": %s}\n",
                opts.connections, run.session_count, elapsed, committed, sold_out, retried, failed,
                tps, (double)hist_percentile(total, 0.50) / 1000.0,
                (double)hist_percentile(total, 0.99) / 1000.0, (double)total->max_us / 1000.0,
                taken == held ? "true" : "false");
        fclose(f);
    }
    rc = (committed > 0 && taken == held) ? 0 : 1;
out:
    if (workers != NULL) {
        for (int i = 0; i < opts.connections; i++) {
            if (workers[i].st_order != NULL)
                mysql_stmt_close(workers[i].st_order);
            if (workers[i].st_stock != NULL)
                mysql_stmt_close(workers[i].st_stock);
            if (workers[i].conn != NULL)
                mysql_close(workers[i].conn);
        }
    }
    free(workers);
    free(total);
    free(run.session_ids);
    if (admin != NULL)
        mysql_close(admin);
    mysql_library_end();
    return rc;
}
