/* batchsql - how one batch of new orders is best sent to MariaDB, measured
 * straight against the server: the stored procedure ticketd runs
 * (sql/013_place_orders.sql), the same body sent as an anonymous block
 * (BEGIN NOT ATOMIC ... END, parsed with every batch), the two round trips
 * merged batches took before it, and the one-order text of before.
 *
 *   batchsql HOST PORT USER PASSWORD DB MYSQLD_PID MODE BATCH CONNS SECONDS [SQL_FILE]
 *
 * MODE: batch, the one statement ticketd sends today (CALL place_batch,
 * sql/015_place_batch.sql, around the newest place_orders); proc, block
 * (needs SQL_FILE, the migration, for the body), twotrip,
 * one (ticketd's one-order text) and single (the one-order text before it,
 * an INSERT ... SELECT), both BATCH 1 only; proc2, a version of the
 * procedure with loops instead of cursors, once place_orders2.sql (beside
 * this file) is loaded by hand; set, a cost probe of a set-based batch (one
 * multi-row INSERT IGNORE under the unique keys, one INSERT ... SELECT of the
 * tokens, one UPDATE of the stock for all the batch's sessions, one SELECT
 * that finds what was placed): it decides nothing a refusal needs (a missing
 * session, a sold-out seat, a lock wait), so it measures the floor a
 * set-based procedure could reach on the path that places every order, not a
 * procedure ticketd could run; text, the batch as plain statements in one
 * text instead of a CALL (per order: its price into a variable, its INSERT
 * with ON DUPLICATE KEY UPDATE so that a duplicate is no error, its id or 0
 * into a variable, with the token its row the same way; then the stock
 * compare-and-sets by session, each noting whether it took; then the
 * compensating DELETEs of the orders that took no stock, and one SELECT of
 * every outcome), which decides what the procedure decides but a lock wait
 * (a text stops at its first error). With BATCHSQL_TOKENS=1 in the environment
 * every order carries a token hash ("t"), as with the token required.
 * Every order is new (its own user and key) and
 * every session has the seats: the measure is of the path that places
 * orders, not of refusals. Prints one line: mode, batch, connections,
 * orders/s, and MariaDB's CPU per order in µs (from /proc/MYSQLD_PID/stat);
 * then a second line of SHOW GLOBAL STATUS deltas per order (the server's
 * counters, so run it against a server nothing else uses).
 * It makes 200 sessions of its own and deletes what it wrote at the end.
 *
 * Built by hand (no test or benchmark depends on it):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -pthread -o build/batchsql \
 *      loadtest/batchsql/batchsql.c $(pkg-config --cflags --libs libmariadb) */
#include <mysql.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SESSIONS 200

static const char *host, *user, *pass, *db, *mode;
static unsigned port;
static int batch, seconds;
static long long run_base;
static char *block_body; /* the procedure's body, for MODE block */
static unsigned long long session_ids[SESSIONS];
static atomic_llong placed, failures;
static atomic_bool stop;
static bool tokens; /* BATCHSQL_TOKENS=1: each order carries a token hash */

static MYSQL *dial(void)
{
    MYSQL *m = mysql_init(NULL);
    if (mysql_real_connect(m, host, user, pass, db, port, NULL,
                           CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS) == NULL) {
        fprintf(stderr, "connect: %s\n", mysql_error(m));
        exit(1);
    }
    if (mysql_query(m, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED") != 0)
        exit(1);
    return m;
}

/* Runs a text and reads every result; 0 on success. */
static int run(MYSQL *m, const char *q)
{
    if (mysql_query(m, q) != 0) {
        fprintf(stderr, "%s: %s\n", mode, mysql_error(m));
        return -1;
    }
    int more;
    do {
        MYSQL_RES *r = mysql_store_result(m);
        mysql_free_result(r);
        more = mysql_next_result(m);
        if (more > 0) {
            fprintf(stderr, "%s: %s\n", mode, mysql_error(m));
            return -1;
        }
    } while (more == 0);
    return 0;
}

static size_t put(char *b, size_t at, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t put(char *b, size_t at, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b + at, cap - at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - at) {
        fprintf(stderr, "text too long\n");
        exit(1);
    }
    return at + (size_t)n;
}

struct order {
    long long no, user;
    unsigned long long session;
};

static size_t put_json(char *b, size_t at, size_t cap, const struct order *o, int n)
{
    at = put(b, at, cap, "[");
    for (int i = 0; i < n; i++) {
        at = put(b, at, cap,
                 "%s{\"n\":\"%020lld\",\"u\":%lld,\"s\":%llu,\"r\":\"k%lld\",\"q\":1,"
                 "\"c\":\"2026-12-03 10:00:00.000\"",
                 i ? "," : "", o[i].no, o[i].user, o[i].session, o[i].no);
        if (tokens)
            at = put(b, at, cap, ",\"t\":\"%064lld\"", o[i].no);
        at = put(b, at, cap, "}");
    }
    return put(b, at, cap, "]");
}

static void *worker(void *arg)
{
    long t = (long)arg;
    MYSQL *m = dial();
    size_t cap = 1u << 20;
    char *q = malloc(cap);
    struct order o[256];
    long long seq = 0;
    unsigned seed = (unsigned)t * 7919u + 1u;
    while (!atomic_load(&stop)) {
        for (int i = 0; i < batch; i++) {
            long long k = run_base + t * 100000000LL + seq++;
            o[i] = (struct order){k, k, session_ids[rand_r(&seed) % SESSIONS]};
        }
        size_t at = 0;
        int rc = 0;
        if (strcmp(mode, "proc") == 0) {
            at = put(q, at, cap, "START TRANSACTION; CALL place_orders('");
            at = put_json(q, at, cap, o, batch);
            put(q, at, cap, "'); SELECT @placed_orders; COMMIT");
            rc = run(m, q);
        } else if (strcmp(mode, "batch") == 0) { /* what ticketd sends (sql/015) */
            at = put(q, at, cap, "CALL place_batch('");
            at = put_json(q, at, cap, o, batch);
            put(q, at, cap, "')");
            rc = run(m, q);
        } else if (strcmp(mode, "proc2") == 0) { /* loops instead of cursors */
            at = put(q, at, cap, "START TRANSACTION; CALL place_orders2('");
            at = put_json(q, at, cap, o, batch);
            at = put(q, at, cap, "', '[");
            int idx[256];
            for (int i = 0; i < batch; i++)
                idx[i] = i;
            for (int i = 1; i < batch; i++) { /* by session, then arrival */
                for (int k = i; k > 0 && o[idx[k - 1]].session > o[idx[k]].session; k--) {
                    int x = idx[k];
                    idx[k] = idx[k - 1];
                    idx[k - 1] = x;
                }
            }
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s%d", i ? "," : "", idx[i]);
            put(q, at, cap, "]'); SELECT @placed_orders; COMMIT");
            rc = run(m, q);
        } else if (strcmp(mode, "block") == 0) {
            at = put(q, at, cap,
                     "START TRANSACTION; BEGIN NOT ATOMIC DECLARE batch LONGTEXT DEFAULT '");
            at = put_json(q, at, cap, o, batch);
            put(q, at, cap, "'; %s END; SELECT @placed_orders; COMMIT", block_body);
            rc = run(m, q);
        } else if (strcmp(mode, "one") == 0) { /* ticketd's one-order text now */
            put(q, 0, cap,
                "START TRANSACTION; SELECT MAX(price_cents) INTO @order_price FROM sessions WHERE "
                "id = %llu; INSERT INTO orders (order_no, user_id, session_id, request_id, "
                "quantity, amount_cents, status, version, created_at, updated_at) VALUES "
                "('%020lld', %lld, %llu, 'k%lld', 1, @order_price * 1, IF(@@in_transaction, "
                "'PENDING_PAYMENT', NULL), 1, '2026-12-03 10:00:00.000', '2026-12-03 "
                "10:00:00.000') RETURNING id, amount_cents; UPDATE sessions SET stock = stock - "
                "1, version = version + 1 WHERE id = %llu AND @@in_transaction; COMMIT",
                o[0].session, o[0].no, o[0].user, o[0].session, o[0].no, o[0].session);
            rc = run(m, q);
        } else if (strcmp(mode, "single") == 0) { /* the one-order text before */
            put(q, 0, cap,
                "START TRANSACTION; INSERT INTO orders (order_no, user_id, session_id, "
                "request_id, quantity, amount_cents, status, version, created_at, updated_at) "
                "SELECT '%020lld', %lld, id, 'k%lld', 1, price_cents * 1, 'PENDING_PAYMENT', 1, "
                "'2026-12-03 10:00:00.000', '2026-12-03 10:00:00.000' FROM sessions WHERE id = "
                "%llu RETURNING id, amount_cents; UPDATE sessions SET stock = stock - 1, version "
                "= version + 1 WHERE id = %llu AND EXISTS (SELECT 1 FROM orders WHERE order_no = "
                "'%020lld'); COMMIT",
                o[0].no, o[0].user, o[0].no, o[0].session, o[0].session, o[0].no);
            rc = run(m, q);
        } else if (strcmp(mode, "text") == 0) { /* a batch as plain statements */
            at = put(q, at, cap, "START TRANSACTION");
            for (int i = 0; i < batch; i++) {
                at = put(q, at, cap,
                         "; SELECT MAX(price_cents) INTO @p%d FROM sessions WHERE id = %llu"
                         "; INSERT INTO orders (order_no, user_id, session_id, request_id, "
                         "quantity, amount_cents, status, version, created_at, updated_at) VALUES "
                         "('%020lld', %lld, %llu, 'k%lld', 1, @p%d * 1, IF(@@in_transaction, "
                         "'PENDING_PAYMENT', NULL), 1, '2026-12-03 10:00:00.000', '2026-12-03 "
                         "10:00:00.000') ON DUPLICATE KEY UPDATE version = version"
                         "; SELECT IF(ROW_COUNT() = 1, LAST_INSERT_ID(), 0) INTO @o%d",
                         i, o[i].session, o[i].no, o[i].user, o[i].session, o[i].no, i, i);
                if (tokens)
                    at = put(q, at, cap,
                             "; INSERT INTO order_tokens (order_id, token_hash, created_at) "
                             "SELECT @o%d, LPAD('%lld', 64, '0'), '2026-12-03 10:00:00.000' "
                             "FROM DUAL WHERE @o%d > 0 ON DUPLICATE KEY UPDATE order_id = "
                             "order_id; SELECT IF(ROW_COUNT() = 1, @o%d, 0) INTO @o%d",
                             i, o[i].no, i, i, i);
            }
            int idx[256];
            for (int i = 0; i < batch; i++)
                idx[i] = i;
            for (int i = 1; i < batch; i++)
                for (int k = i; k > 0 && o[idx[k - 1]].session > o[idx[k]].session; k--) {
                    int x = idx[k];
                    idx[k] = idx[k - 1];
                    idx[k - 1] = x;
                }
            for (int j = 0; j < batch; j++) {
                int i = idx[j];
                at = put(q, at, cap,
                         "; UPDATE sessions SET stock = stock - 1, version = version + 1 WHERE id "
                         "= %llu AND stock >= 1 AND @o%d > 0; SELECT ROW_COUNT() INTO @k%d",
                         o[i].session, i, i);
            }
            const char *tables[] = {"order_tokens", "order_history", "orders"};
            for (int t = 0; t < 3; t++) {
                at = put(q, at, cap, "; DELETE FROM %s WHERE %s IN (", tables[t],
                         t == 2 ? "id" : "order_id");
                for (int i = 0; i < batch; i++)
                    at = put(q, at, cap, "%sIF(@k%d = 0, @o%d, 0)", i ? "," : "", i, i);
                at = put(q, at, cap, ")");
            }
            at = put(q, at, cap, "; SELECT ");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s@o%d, @k%d", i ? "," : "", i, i);
            put(q, at, cap, "; COMMIT");
            rc = run(m, q);
        } else if (strcmp(mode, "set") == 0) { /* the set-based cost probe */
            /* The prices by a plain read first: a subquery inside the
             * INSERT would take a shared lock on each session row, and two
             * batches that then both UPDATE the row deadlock (1213). */
            at = put(q, at, cap,
                     "START TRANSACTION; SELECT JSON_OBJECTAGG(id, price_cents) INTO @prices "
                     "FROM sessions WHERE id IN (");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s%llu", i ? "," : "", o[i].session);
            at = put(q, at, cap,
                     "); INSERT IGNORE INTO orders (order_no, user_id, "
                     "session_id, request_id, quantity, amount_cents, status, version, "
                     "created_at, updated_at) VALUES ");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap,
                         "%s('%020lld', %lld, %llu, 'k%lld', 1, JSON_VALUE(@prices, '$.\"%llu\"') "
                         "* 1, 'PENDING_PAYMENT', 1, '2026-12-03 10:00:00.000', "
                         "'2026-12-03 10:00:00.000')",
                         i ? "," : "", o[i].no, o[i].user, o[i].session, o[i].no, o[i].session);
            if (tokens) {
                at = put(q, at, cap,
                         "; INSERT IGNORE INTO order_tokens (order_id, token_hash, created_at) "
                         "SELECT id, LPAD(order_no, 64, '0'), created_at FROM orders WHERE "
                         "order_no IN (");
                for (int i = 0; i < batch; i++)
                    at = put(q, at, cap, "%s'%020lld'", i ? "," : "", o[i].no);
                at = put(q, at, cap, ")");
            }
            at = put(q, at, cap, "; UPDATE sessions SET stock = stock - CASE id");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, " WHEN %llu THEN 1", o[i].session);
            at = put(q, at, cap, " END, version = version + 1 WHERE id IN (");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s%llu", i ? "," : "", o[i].session);
            at = put(q, at, cap,
                     "); SELECT id, order_no, amount_cents FROM orders WHERE order_no IN (");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s'%020lld'", i ? "," : "", o[i].no);
            put(q, at, cap, "); COMMIT");
            rc = run(m, q);
        } else { /* twotrip: the merged batch before one round trip */
            at =
                put(q, at, cap,
                    "START TRANSACTION; SELECT id, stock, price_cents FROM sessions WHERE id IN (");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s%llu", i ? "," : "", o[i].session);
            at = put(q, at, cap,
                     ") ORDER BY id FOR UPDATE; SELECT user_id, request_id FROM orders WHERE "
                     "(user_id, request_id) IN (");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap, "%s(%lld, 'k%lld')", i ? "," : "", o[i].user, o[i].no);
            put(q, at, cap, ")");
            rc = run(m, q);
            at = put(q, 0, cap,
                     "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, "
                     "amount_cents, status, version, created_at, updated_at) VALUES ");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap,
                         "%s('%020lld', %lld, %llu, 'k%lld', 1, 1500, 'PENDING_PAYMENT', 1, "
                         "'2026-12-03 10:00:00.000', '2026-12-03 10:00:00.000')",
                         i ? "," : "", o[i].no, o[i].user, o[i].session, o[i].no);
            at = put(q, at, cap, " RETURNING id, order_no, amount_cents; ");
            for (int i = 0; i < batch; i++)
                at = put(q, at, cap,
                         "UPDATE sessions SET stock = stock - (SELECT COALESCE(SUM(quantity), 0) "
                         "FROM orders WHERE order_no IN ('%020lld')), version = version + 1 "
                         "WHERE id = %llu; ",
                         o[i].no, o[i].session);
            put(q, at, cap, "COMMIT");
            if (rc == 0)
                rc = run(m, q);
        }
        if (rc == 0) {
            atomic_fetch_add(&placed, batch);
        } else {
            atomic_fetch_add(&failures, 1);
            run(m, "ROLLBACK");
        }
    }
    free(q);
    mysql_close(m);
    return NULL;
}

static long long cpu_ticks(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof buf, f) == NULL)
        exit(1);
    fclose(f);
    const char *p = strrchr(buf, ')');
    long long ut = 0, st = 0;
    /* Fields after the name: state is 3, utime 14, stime 15. */
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &ut, &st) != 2)
        exit(1);
    return ut + st;
}

/* The server counters a batch's cost is read in: statements and rows. */
static const char *const counters[] = {
    "Com_insert",
    "Com_update",
    "Com_delete",
    "Com_select",
    "Com_savepoint",
    "Com_call_procedure",
    "Com_commit",
    "Handler_write",
    "Handler_update",
    "Handler_delete",
    "Handler_read_key",
    "Handler_read_next",
    "Handler_read_rnd_next",
    "Innodb_rows_inserted",
    "Innodb_rows_updated",
    "Innodb_rows_deleted",
};
#define NCOUNTERS (sizeof counters / sizeof counters[0])

static void read_counters(MYSQL *m, long long *v)
{
    if (mysql_query(m, "SHOW GLOBAL STATUS") != 0)
        exit(1);
    MYSQL_RES *r = mysql_store_result(m);
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) != NULL)
        for (size_t i = 0; i < NCOUNTERS; i++)
            if (strcmp(row[0], counters[i]) == 0)
                v[i] = atoll(row[1]);
    mysql_free_result(r);
}

/* The procedure's body from the migration: between its BEGIN and END //. */
static char *read_body(const char *file)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        exit(1);
    static char all[1 << 16];
    size_t n = fread(all, 1, sizeof all - 1, f);
    fclose(f);
    all[n] = '\0';
    char *b = strstr(all, "\nBEGIN\n"), *e = strstr(all, "\nEND //");
    if (b == NULL || e == NULL)
        exit(1);
    *e = '\0';
    return b + 7;
}

int main(int argc, char **argv)
{
    if (argc < 11) {
        fprintf(stderr, "usage: batchsql HOST PORT USER PASSWORD DB MYSQLD_PID MODE BATCH CONNS "
                        "SECONDS [SQL_FILE]\n");
        return 2;
    }
    host = argv[1];
    port = (unsigned)atoi(argv[2]);
    user = argv[3];
    pass = argv[4];
    db = argv[5];
    long pid = atol(argv[6]);
    mode = argv[7];
    batch = atoi(argv[8]);
    int conns = atoi(argv[9]);
    seconds = atoi(argv[10]);
    tokens = getenv("BATCHSQL_TOKENS") != NULL && strcmp(getenv("BATCHSQL_TOKENS"), "1") == 0;
    if (strcmp(mode, "block") == 0)
        block_body = read_body(argc > 11 ? argv[11] : "sql/013_place_orders.sql");
    if (batch < 1 || batch > 256 || conns < 1 || conns > 64)
        return 2;
    run_base = (long long)time(NULL) % 100000 * 10000000000LL;
    MYSQL *m = dial();
    char q[256];
    for (int i = 0; i < SESSIONS; i++) {
        snprintf(q, sizeof q,
                 "INSERT INTO sessions (title, price_cents, capacity, stock) VALUES ('batchsql "
                 "%d', 1500, 2000000000, 2000000000)",
                 i);
        if (mysql_query(m, q) != 0)
            return 1;
        session_ids[i] = mysql_insert_id(m);
    }
    pthread_t th[64];
    /* SHOW GLOBAL STATUS counts itself (its rows go through a temporary
     * table): read it twice, and take its own share off the run's deltas. */
    long long s0[NCOUNTERS] = {0}, s1[NCOUNTERS] = {0}, self[NCOUNTERS] = {0};
    read_counters(m, self);
    read_counters(m, s0);
    for (size_t i = 0; i < NCOUNTERS; i++)
        self[i] = s0[i] - self[i];
    long long c0 = cpu_ticks(pid);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < conns; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    struct timespec d = {seconds, 0};
    nanosleep(&d, NULL);
    atomic_store(&stop, true);
    for (int i = 0; i < conns; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long c1 = cpu_ticks(pid);
    read_counters(m, s1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    long long n = atomic_load(&placed);
    double cpu_us = (double)(c1 - c0) * 1e6 / (double)sysconf(_SC_CLK_TCK);
    printf("%-8s batch %3d conns %2d  %8.0f orders/s  MariaDB %6.1f us/order  failures %lld\n",
           mode, batch, conns, (double)n / secs, n ? cpu_us / (double)n : 0.0,
           atomic_load(&failures));
    printf("  per order:");
    for (size_t i = 0; i < NCOUNTERS; i++)
        if (s1[i] - s0[i] - self[i] != 0)
            printf(" %s %.2f", counters[i],
                   n ? (double)(s1[i] - s0[i] - self[i]) / (double)n : 0.0);
    printf("\n");
    /* What this run wrote goes again. */
    snprintf(q, sizeof q,
             "DELETE h FROM order_history h JOIN orders o ON o.id = h.order_id WHERE o.user_id "
             ">= %lld AND o.user_id < %lld",
             run_base, run_base + 10000000000LL);
    run(m, q);
    snprintf(q, sizeof q,
             "DELETE t FROM order_tokens t JOIN orders o ON o.id = t.order_id WHERE o.user_id "
             ">= %lld AND o.user_id < %lld",
             run_base, run_base + 10000000000LL);
    run(m, q);
    snprintf(q, sizeof q, "DELETE FROM orders WHERE user_id >= %lld AND user_id < %lld", run_base,
             run_base + 10000000000LL);
    run(m, q);
    run(m, "DELETE FROM sessions WHERE title LIKE 'batchsql %'");
    mysql_close(m);
    return 0;
}
