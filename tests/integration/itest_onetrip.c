/* One round trip per batch, the database deciding each order: the defects
 * of the two-trip batch (issue 29), each reproduced from outside on the
 * real binary, Redis and MariaDB, and each answered now as the contract
 * says.
 *
 *  1. Redis flushed mid-storm across two instances, every defence on: no
 *     5xx but 503, and one order per key once the clients retried.
 *  2. The copy of an order its own batch did not place (sold out, no such
 *     session): 409 or 404, as alone, never 500.
 *  4. A batch waiting on another transaction's uncommitted copy of a key
 *     for longer than any client waits: the hot session is not locked, its
 *     other buyers get their seats meanwhile.
 *  5. A transaction the server dropped between statements commits nothing
 *     alone: the statements that write refuse to run outside it, and a
 *     batch whose connection dies mid-way leaves stock == orders.
 *  6. An answer row the process cannot read, after COMMIT: 503 (the outcome
 *     is unknown), never 500 for orders that committed; their retries get
 *     them back.
 * (3, leaders and followers sharing the pool, is itest_cart's
 * test_carts_and_orders_share_a_small_pool.)
 *
 * Batches are made by requests arriving (merge.wait_full) on one loop
 * (TICKETD_LOOPS=1: a batch holds one loop's orders), and every wait
 * is for a state the test can see (the queue gauge, a statement waiting in
 * the server's process list), bounded only as a safety net. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <mysql.h>

/* One buyer: a user of its own, a key and a token, and what it was told. */
struct buyer {
    const struct th_server *srv;
    int64_t user, session, quantity;
    char key[32], token[96];
    struct th_resp r;
};

static void buyer_init(struct buyer *b, const struct th_server *srv, const struct th_server *issuer,
                       int64_t user, int64_t session, const char *key)
{
    memset(b, 0, sizeof *b);
    b->srv = srv;
    b->user = user;
    b->session = session;
    b->quantity = 1;
    snprintf(b->key, sizeof b->key, "%s", key);
    th_order_token(issuer, user, b->token);
}

/* A copy of b: the same user, key, token and body. */
static void buyer_copy(struct buyer *to, const struct buyer *from)
{
    *to = *from;
    memset(&to->r, 0, sizeof to->r);
}

static void buy(struct buyer *b)
{
    th_resp_free(&b->r);
    b->r = th_order(b->srv, b->user, b->key, b->token, b->session, b->quantity);
}

static void *buy_thread(void *p)
{
    buy(p);
    return NULL;
}

static void buy_each(int i, void *ctx)
{
    buy(&((struct buyer *)ctx)[i]);
}

/* Sends b on a thread of its own and waits until it is queued as the
 * queued-th order of a's batch. */
static void send_queued(pthread_t *t, struct buyer *b, const struct th_server *a, int queued)
{
    assert_int_equal(pthread_create(t, NULL, buy_thread, b), 0);
    th_wait_metric(a, "ticketd_order_batch_queued", queued, 20000);
}

/* A connection of the test's own to the test MariaDB, for a transaction
 * held open across steps. */
static MYSQL *dial(void);

/* The connection holding a key: closed (its transaction rolled back) by
 * the teardown too, so that a failed test leaves no lock behind for the
 * next one's reset to wait on. */
static MYSQL *held;

static void release_held(void)
{
    if (held != NULL) {
        mysql_close(held);
        held = NULL;
    }
}

static int teardown(void **state)
{
    release_held();
    return th_teardown_stop(state);
}

static MYSQL *dial(void)
{
    MYSQL *m = mysql_init(NULL);
    const char *port = getenv("TICKETD_TEST_MYSQL_PORT");
    if (mysql_real_connect(m, "127.0.0.1", "ticketd", "ticketd", "ticketd",
                           (unsigned int)atoi(port != NULL && port[0] ? port : "23306"), NULL,
                           0) == NULL)
        fail_msg("cannot connect to the test MariaDB: %s", mysql_error(m));
    return m;
}

static void sql(MYSQL *m, const char *q)
{
    if (mysql_query(m, q) != 0)
        fail_msg("%s: %s", q, mysql_error(m));
}

/* Holds an uncommitted order for (user, key) in session s on m. */
static void hold_key(MYSQL *m, int64_t user, const char *key, int64_t s)
{
    char q[512];
    sql(m, "START TRANSACTION");
    snprintf(q, sizeof q,
             "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, "
             "amount_cents, status, version, created_at, updated_at) VALUES "
             "('HELD%016lld', %lld, %lld, '%s', 1, 500, 'PENDING_PAYMENT', 1, UTC_TIMESTAMP(3), "
             "UTC_TIMESTAMP(3))",
             (long long)user, (long long)user, (long long)s, key);
    sql(m, q);
}

/* Waits until a statement inserting an order waits in the server (the
 * batch met the held key), and returns its connection's id. */
static int64_t wait_insert_waiting(void)
{
    for (int i = 0; i < 400; i++) {
        int64_t id = th_db_int("SELECT COALESCE(MAX(ID), 0) FROM information_schema.PROCESSLIST "
                               "WHERE INFO LIKE 'INSERT INTO orders%%' AND COMMAND = 'Query' "
                               "AND ID <> CONNECTION_ID()");
        if (id > 0)
            return id;
        th_msleep(50);
    }
    fail_msg("no order INSERT came to wait on the held key");
    return 0;
}

/* ---- 2. the copy of an unplaced order --------------------------------- */

/* One batch of six: a key whose first copy finds its session sold out,
 * one whose first copy finds no session, each with a second copy that
 * passed Redis after a flush, and two neighbours. Each copy is answered as
 * its first copy (409 SOLD_OUT, 404), never 500, and the neighbours get
 * their orders. The seats and the session go behind Redis's back, as
 * another instance would take them, while the copies wait in the queue. */
static void test_copy_of_unplaced_order(void **state)
{
    struct buyer b[6];
    pthread_t t[6];
    (void)state;
    const char *six[] = {"TICKETD_MERGE_MAX=6", "TICKETD_LOOPS=1",
                         "TICKETD_FAULT=merge.wait_full:fail", NULL};
    struct th_server *a = th_serve(0, six), *plain = th_serve(1, NULL);
    int64_t gone = th_session(plain, 1, 500), none = th_session(plain, 5, 500),
            s = th_session(plain, 10, 500);
    buyer_init(&b[0], a, plain, 7001, gone, "sold-out-copy");
    buyer_init(&b[1], a, plain, 7002, none, "no-session-copy");
    buyer_copy(&b[2], &b[0]);
    buyer_copy(&b[3], &b[1]);
    buyer_init(&b[4], a, plain, 7003, s, "neighbour-1");
    buyer_init(&b[5], a, plain, 7004, s, "neighbour-2");
    send_queued(&t[0], &b[0], a, 1);
    send_queued(&t[1], &b[1], a, 2);
    /* Redis forgets the first copies' in-flight keys: the second copies
     * pass it and join the same batch. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    send_queued(&t[2], &b[2], a, 3);
    send_queued(&t[3], &b[3], a, 4);
    th_db_exec("UPDATE sessions SET stock = 0 WHERE id = %lld", (long long)gone);
    th_db_exec("DELETE FROM sessions WHERE id = %lld", (long long)none);
    send_queued(&t[4], &b[4], a, 5);
    assert_int_equal(pthread_create(&t[5], NULL, buy_thread, &b[5]), 0);
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(th_metric(a, "ticketd_order_batch_orders_total"), 6);
    for (int i = 0; i < 6; i++)
        print_message("buyer %d: %ld %s\n", i, b[i].r.status, th_code(&b[i].r));
    th_expect_problem(&b[0].r, 409, "SOLD_OUT");
    th_expect_problem(&b[2].r, 409, "SOLD_OUT");
    assert_int_equal(b[1].r.status, 404);
    assert_int_equal(b[3].r.status, 404);
    assert_int_equal(b[4].r.status, 201);
    assert_int_equal(b[5].r.status, 201);
    assert_int_equal(th_orders_of(gone), 0);
    assert_int_equal(th_orders_of(none), 0);
    assert_int_equal(th_orders_of(s), 2);
    assert_int_equal(th_stock_of(s), 8);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 2);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens"), 2);
    for (int i = 0; i < 6; i++)
        th_resp_free(&b[i].r);
}

/* ---- 4. a lock wait longer than any client waits ---------------------- */

/* A batch of two for the hot session meets a key another transaction
 * inserted and holds uncommitted (as a stuck writer would): the batch
 * waits at that INSERT. Meanwhile other buyers of the hot session, on
 * another instance, get their seats at once: the waiting batch holds no
 * lock on the session row (its stock is taken only after its inserts, just
 * before COMMIT). The key is released only after they were answered; the
 * batch then places both its orders. */
static void test_lock_wait_keeps_no_hot_session_locked(void **state)
{
    struct buyer b[2], other[3];
    pthread_t t[2];
    (void)state;
    /* A read timeout of 30 s lets a row lock be waited for 14 s
     * (db_lock_wait_s): the batch's wait ends with the release, however
     * slow the machine, not with the server's bound. */
    const char *two[] = {"TICKETD_MERGE_MAX=2", "TICKETD_LOOPS=1",
                         "TICKETD_FAULT=merge.wait_full:fail", "TICKETD_MYSQL_TIMEOUT_S=30", NULL};
    struct th_server *a = th_serve(0, two), *plain = th_serve(1, NULL);
    int64_t hot = th_session(plain, 20, 500);
    held = dial();
    hold_key(held, 7101, "held-key", hot);
    buyer_init(&b[0], a, plain, 7101, hot, "held-key");
    buyer_init(&b[1], a, plain, 7102, hot, "beside-held");
    send_queued(&t[0], &b[0], a, 1);
    assert_int_equal(pthread_create(&t[1], NULL, buy_thread, &b[1]), 0);
    (void)wait_insert_waiting();

    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "other-%d", i);
        buyer_init(&other[i], plain, plain, 7200 + i, hot, key);
    }
    th_parallel(3, buy_each, other);
    int64_t stock_meanwhile = th_stock_of(hot);

    /* Released (its transaction rolled back) and the batch joined before
     * anything is asserted: a failure must leave no thread behind. */
    release_held();
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++) {
        if (other[i].r.status != 201)
            fail_msg("buyer %d of the hot session, while the batch waited: %ld %s", i,
                     other[i].r.status, other[i].r.body);
    }
    assert_int_equal(stock_meanwhile, 17);
    assert_int_equal(b[0].r.status, 201);
    assert_int_equal(b[1].r.status, 201);
    assert_int_equal(th_orders_of(hot), 5);
    assert_int_equal(th_stock_of(hot), 15);
    for (int i = 0; i < 2; i++)
        th_resp_free(&b[i].r);
    for (int i = 0; i < 3; i++)
        th_resp_free(&other[i].r);
}

/* ---- 5. a transaction dropped between statements ---------------------- */

/* What a Galera node's rollback of a running transaction leaves: the
 * statements after it running outside any transaction. Simulated on one
 * server by running them in autocommit: each write refuses, nothing of
 * the order is kept, and the stock is untouched. */
static void test_dropped_transaction_writes_nothing_alone(void **state)
{
    (void)state;
    struct th_server *plain = th_serve(0, NULL);
    int64_t s = th_session(plain, 3, 500);
    MYSQL *m = dial();
    char q[1024];
    /* A batch's procedure, outside a transaction: refused before its
     * first write (1213, which the service retries whole). */
    snprintf(q, sizeof q,
             "CALL place_orders('[{\"n\":\"DROP0000000000000001\",\"u\":7301,\"s\":%lld,"
             "\"r\":\"dropped\",\"q\":1,\"c\":\"2026-12-03 10:00:00.000\"}]')",
             (long long)s);
    assert_int_not_equal(mysql_query(m, q), 0);
    assert_int_equal(mysql_errno(m), 1213);
    /* A lone order's statements, outside a transaction: the INSERT is
     * refused by its guard (a NULL status), the stock UPDATE matches no
     * row. */
    sql(m, "SET @order_price = 500");
    snprintf(q, sizeof q,
             "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, "
             "amount_cents, status, version, created_at, updated_at) VALUES "
             "('DROP0000000000000002', 7302, %lld, 'dropped', 1, @order_price * 1, "
             "IF(@@in_transaction, 'PENDING_PAYMENT', NULL), 1, UTC_TIMESTAMP(3), "
             "UTC_TIMESTAMP(3))",
             (long long)s);
    assert_int_not_equal(mysql_query(m, q), 0);
    assert_int_equal(mysql_errno(m), 1048);
    snprintf(q, sizeof q,
             "UPDATE sessions SET stock = stock - 1, version = version + 1 WHERE id = %lld AND "
             "@@in_transaction",
             (long long)s);
    sql(m, q);
    assert_int_equal(mysql_affected_rows(m), 0);
    mysql_close(m);
    assert_int_equal(th_orders_of(s), 0);
    assert_int_equal(th_stock_of(s), 3);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 0);
}

/* A batch's connection killed while the batch waits mid-way (at an INSERT
 * behind a held key): its clients are told 503, nothing of it is kept
 * (stock == orders), and their retries get one order each. */
static void test_batch_killed_mid_way_keeps_stock_equal_orders(void **state)
{
    struct buyer b[2];
    pthread_t t[2];
    (void)state;
    const char *two[] = {"TICKETD_MERGE_MAX=2", "TICKETD_LOOPS=1",
                         "TICKETD_FAULT=merge.wait_full:fail", NULL};
    struct th_server *a = th_serve(0, two), *plain = th_serve(1, NULL);
    int64_t s = th_session(plain, 3, 500);
    held = dial();
    hold_key(held, 7401, "killed-key", s);
    buyer_init(&b[0], a, plain, 7402, s, "killed-1");
    buyer_init(&b[1], a, plain, 7401, s, "killed-key");
    send_queued(&t[0], &b[0], a, 1);
    assert_int_equal(pthread_create(&t[1], NULL, buy_thread, &b[1]), 0);
    int64_t id = wait_insert_waiting();
    th_db_exec("KILL %lld", (long long)id);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    release_held();
    for (int i = 0; i < 2; i++) {
        if (b[i].r.status != 503)
            fail_msg("buyer %d: %ld %s", i, b[i].r.status, b[i].r.body);
    }
    assert_int_equal(th_orders_of(s), 0);
    assert_int_equal(th_stock_of(s), 3);
    for (int i = 0; i < 2; i++) {
        b[i].srv = plain;
        buy(&b[i]);
        assert_int_equal(b[i].r.status, 201);
        th_resp_free(&b[i].r);
    }
    assert_int_equal(th_orders_of(s), 2);
    assert_int_equal(th_stock_of(s), 1);
}

/* ---- 6. an answer that does not read ---------------------------------- */

/* The answer row of a committed batch is lost as if it did not read
 * (merge.outcome_unread), and a trigger of the test makes the rows differ
 * from what the process priced: every order committed, and each client is
 * told 503 (outcome unknown), never 500; each retry gets its order back
 * from the unique index, once. */
static void test_unread_answer_is_503_not_500(void **state)
{
    struct buyer b[4];
    (void)state;
    const char *four[] = {"TICKETD_MERGE_MAX=4", "TICKETD_LOOPS=1",
                          "TICKETD_FAULT=merge.wait_full:fail,merge.outcome_unread:fail:1", NULL};
    struct th_server *a = th_serve(0, four), *plain = th_serve(1, NULL);
    int64_t s = th_session(plain, 10, 500);
    th_db_exec("CREATE TRIGGER itest_amount_off BEFORE INSERT ON orders FOR EACH ROW "
               "SET NEW.amount_cents = IF(NEW.session_id = %lld, NEW.amount_cents + 1, "
               "NEW.amount_cents)",
               (long long)s);
    for (int i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof key, "unread-%d", i);
        buyer_init(&b[i], a, plain, 7501 + i, s, key);
    }
    th_parallel(4, buy_each, b);
    th_db_exec("DROP TRIGGER itest_amount_off");
    for (int i = 0; i < 4; i++) {
        if (b[i].r.status != 503)
            fail_msg("buyer %d: %ld %s", i, b[i].r.status, b[i].r.body);
    }
    assert_true(th_log_contains(a, "had no outcome"));
    assert_int_equal(th_orders_of(s), 4);
    assert_int_equal(th_stock_of(s), 6);
    for (int i = 0; i < 4; i++) {
        b[i].srv = plain;
        buy(&b[i]);
        assert_int_equal(b[i].r.status, 201);
        th_resp_free(&b[i].r);
    }
    assert_int_equal(th_orders_of(s), 4);
    assert_int_equal(th_stock_of(s), 6);
}

/* ---- 1. Redis flushed mid-storm, two instances ------------------------ */

#define LOAD_BIN    "build/loadtest/ticketd-load"
#define LOAD_WAIT_S 120

/* Runs ticketd-load retry-storm against a and b with a Redis FLUSHALL after
 * `after` answers; its figures into *out. Returns its exit status. */
static int storm(json_t **out, const struct th_server *a, const struct th_server *b,
                 const char *rounds, const char *copies, const char *after)
{
    const char *logs = getenv("TICKETD_TEST_LOGS");
    const char *port = getenv("TICKETD_TEST_REDIS_PORT");
    char json_path[512], log_path[512], flush[160];
    if (logs == NULL || logs[0] == '\0')
        logs = "/tmp";
    if (access(LOAD_BIN, X_OK) != 0)
        fail_msg("%s is missing: build it with make -C loadtest", LOAD_BIN);
    snprintf(json_path, sizeof json_path, "%s/onetrip-storm-%d.json", logs, (int)getpid());
    snprintf(log_path, sizeof log_path, "%s/onetrip-storm-%d.out", logs, (int)getpid());
    snprintf(flush, sizeof flush, "redis-cli -h 127.0.0.1 -p %s FLUSHALL",
             port != NULL && port[0] != '\0' ? port : "26379");
    unlink(json_path);
    const char *argv[] = {
        LOAD_BIN,      "retry-storm",   "--rounds",    rounds,       "--copies",
        copies,        "--fault-after", after,         "--fault",    flush,
        "--target",    a->url,          "--target",    b->url,       "--jwt-secret",
        TH_JWT_SECRET, "--pay-secret",  TH_PAY_SECRET, "--duration", "60",
        "--timeout",   "5000",          "--json",      json_path,    NULL};
    int rc = th_run_logged(argv, log_path, LOAD_WAIT_S);
    json_error_t err;
    *out = json_load_file(json_path, 0, &err);
    if (*out == NULL)
        fail_msg("ticketd-load wrote no JSON (%s); see %s", err.text, log_path);
    print_message("ticketd-load retry-storm: exit %d, %s\n", rc, log_path);
    return rc;
}

/* The storm: 600 keys, 8 copies each, over two instances with every
 * defence on, Redis flushed after 1,600 answers (by the load's progress,
 * not the clock). The flush sends copies of keys that are in a batch to
 * the database again: no answer may be a 5xx other than 503, and once the
 * clients retried, each key has exactly one order. */
static void test_redis_flush_mid_storm_no_500(void **state)
{
    json_t *j = NULL;
    (void)state;
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, NULL);
    int rc = storm(&j, a, b, "600", "8", "1600");
    size_t i;
    json_t *ans;
    long long bad = 0, unavailable = 0;
    json_array_foreach(json_object_get(j, "answers"), i, ans)
    {
        long long status = (long long)json_integer_value(json_object_get(ans, "status"));
        long long count = (long long)json_integer_value(json_object_get(ans, "count"));
        if (status == 503) {
            unavailable += count;
        } else if (status >= 500) {
            print_message("answered %lld times: %lld %s\n", count, status,
                          json_string_value(json_object_get(ans, "code")));
            bad += count;
        }
    }
    print_message("503 answers: %lld\n", unavailable);
    assert_int_equal(bad, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "damage"), "total")), 0);
    assert_true(json_is_true(json_object_get(json_object_get(j, "fault"), "during_load")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "figures"),
                                                        "retry_storm.keys_without_order")),
                     0);
    /* One order per key, and the books agree. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders"), 600);
    assert_int_equal(th_db_int("SELECT COUNT(DISTINCT user_id, request_id) FROM orders"), 600);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 600);
    assert_int_equal(th_db_int("SELECT SUM(capacity - stock) FROM sessions"),
                     th_db_int("SELECT COALESCE(SUM(quantity), 0) FROM orders"));
    json_decref(j);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, th_setup_fresh, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_copy_of_unplaced_order),
        T(test_lock_wait_keeps_no_hot_session_locked),
        T(test_dropped_transaction_writes_nothing_alone),
        T(test_batch_killed_mid_way_keeps_stock_equal_orders),
        T(test_unread_answer_is_503_not_500),
        T(test_redis_flush_mid_storm_no_500),
    };
    return cmocka_run_group_tests_name("onetrip", tests, NULL, NULL);
}
