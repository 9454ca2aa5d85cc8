/* Merged new orders (TICKETD_MERGE=1): many orders in one transaction,
 * each with its own outcome, on the real binary, Redis and MariaDB.
 *
 * The tests that need orders to share one batch arm merge.wait_full (and
 * run one loop: a batch is one loop's): the batch waits until
 * TICKETD_MERGE_MAX orders are queued, so it is made by the requests
 * arriving, never by a timer. Which order
 * came first is made certain the same way: the next request is sent only
 * once the queue gauge shows the previous one waiting in it. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* One buyer: a user of its own, a key and a token, and what it was told. */
struct buyer {
    const struct th_server *srv;
    int64_t user, session, quantity;
    char key[32], token[96];
    struct th_resp r;
};

static void buyer_init(struct buyer *b, const struct th_server *srv, const struct th_server *issuer,
                       int64_t user, int64_t session, int64_t quantity, const char *key)
{
    memset(b, 0, sizeof *b);
    b->srv = srv;
    b->user = user;
    b->session = session;
    b->quantity = quantity;
    snprintf(b->key, sizeof b->key, "%s", key);
    th_order_token(issuer, user, b->token);
}

/* b[from..to): buyers of one seat of session each, user base + i and key
 * "<prefix>-<i>", sending to srv with tokens from issuer. */
static void buyers_init(struct buyer *b, int from, int to, const struct th_server *srv,
                        const struct th_server *issuer, int64_t base, int64_t session,
                        const char *prefix)
{
    for (int i = from; i < to; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s-%d", prefix, i);
        buyer_init(&b[i], srv, issuer, base + i, session, 1, key);
    }
}

static void buy(struct buyer *b)
{
    th_resp_free(&b->r);
    b->r = th_order(b->srv, b->user, b->key, b->token, b->session, b->quantity);
}

static void buy_each(int i, void *ctx)
{
    buy(&((struct buyer *)ctx)[i]);
}

static void *buy_thread(void *p)
{
    buy(p);
    return NULL;
}

static long long batches(const struct th_server *s)
{
    return th_metric(s, "ticketd_order_batches_total");
}

static long long batch_orders(const struct th_server *s)
{
    return th_metric(s, "ticketd_order_batch_orders_total");
}

/* ---- the last seats -------------------------------------------------- */

#define LAST_BUYERS 120
#define LAST_SEATS  30

/* Four times as many buyers as seats, over three instances at once:
 * exactly the seats are sold, each to one buyer, every other buyer is told
 * SOLD_OUT, and the books agree (orders, history rows, tokens, stock). */
static void test_last_seats_three_instances(void **state)
{
    static struct buyer b[LAST_BUYERS];
    struct th_server *srv[3];
    (void)state;
    for (int i = 0; i < 3; i++)
        srv[i] = th_serve(i, NULL);
    int64_t s = th_session(srv[0], LAST_SEATS, 700);
    for (int i = 0; i < LAST_BUYERS; i++) {
        char key[32];
        snprintf(key, sizeof key, "last-%d", i);
        buyer_init(&b[i], srv[i % 3], srv[0], 5000 + i, s, 1, key);
    }
    th_parallel(LAST_BUYERS, buy_each, b);
    int created = 0, sold_out = 0;
    for (int i = 0; i < LAST_BUYERS; i++) {
        if (b[i].r.status == 201) {
            created++;
        } else if (b[i].r.status == 409 && strcmp(th_code(&b[i].r), "SOLD_OUT") == 0) {
            sold_out++;
        } else {
            fail_msg("buyer %d: unexpected %ld %s", i, b[i].r.status, b[i].r.body);
        }
    }
    long long nb = 0, no = 0;
    for (int i = 0; i < 3; i++) {
        nb += batches(srv[i]);
        no += batch_orders(srv[i]);
    }
    print_message("last seats: %d created, %d sold out; %lld orders in %lld transactions\n",
                  created, sold_out, no, nb);
    assert_int_equal(created, LAST_SEATS);
    assert_int_equal(sold_out, LAST_BUYERS - LAST_SEATS);
    assert_int_equal(th_stock_of(s), 0);
    assert_int_equal(th_orders_of(s), LAST_SEATS);
    assert_int_equal(th_db_int("SELECT COUNT(DISTINCT user_id) FROM orders WHERE session_id = %lld",
                               (long long)s),
                     LAST_SEATS);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON o.id = "
                               "h.order_id WHERE o.session_id = %lld",
                               (long long)s),
                     LAST_SEATS);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens t JOIN orders o ON o.id = "
                               "t.order_id WHERE o.session_id = %lld",
                               (long long)s),
                     LAST_SEATS);
    for (int i = 0; i < LAST_BUYERS; i++)
        th_resp_free(&b[i].r);
}

/* ---- one batch, an outcome per order --------------------------------- */

/* A batch is made of the orders of one loop: the tests that need four
 * orders in one batch run one loop, so that the connections the orders
 * come on cannot spread them over two. */
static const char *const batch_of_4[] = {"TICKETD_MERGE_MAX=4", "TICKETD_LOOPS=1",
                                         "TICKETD_FAULT=merge.wait_full:fail", NULL};

/* One batch of four: a copy of an order that exists (Redis forgot it, so
 * only the unique index knows), an order for a sold-out session, and two
 * that fit. The copy is answered with its order, the sold-out one with
 * SOLD_OUT, and both neighbours get their orders. */
static void test_duplicate_and_sold_out_fail_alone(void **state)
{
    struct buyer b[4];
    char no[32];
    (void)state;
    struct th_server *a = th_serve(0, batch_of_4), *plain = th_serve(1, NULL);
    int64_t s = th_session(plain, 10, 500), gone = th_session(plain, 1, 500);
    buyer_init(&b[0], a, plain, 6001, s, 1, "dup-1");
    struct th_resp first = th_order(plain, 6001, "dup-1", b[0].token, s, 1);
    assert_int_equal(first.status, 201);
    json_t *j = th_json(&first);
    snprintf(no, sizeof no, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
    char tok[96];
    th_order_token(plain, 6099, tok);
    struct th_resp last = th_order(plain, 6099, "last-seat", tok, gone, 1);
    assert_int_equal(last.status, 201);
    /* Redis forgets the copy's record and its spent token: the batch's
     * unique index is what answers it. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    buyer_init(&b[1], a, plain, 6002, s, 2, "fits-1");
    buyer_init(&b[2], a, plain, 6003, gone, 1, "gone-1");
    buyer_init(&b[3], a, plain, 6004, s, 1, "fits-2");
    long long before = batches(a);
    th_parallel(4, buy_each, b);
    assert_int_equal(batches(a) - before, 1);
    assert_int_equal(batch_orders(a), 4);
    /* The batch size histogram holds that one batch of four, and nothing
     * in the buckets below it (the refusals inside the batch do not make
     * it smaller). */
    assert_int_equal(th_metric(a, "ticketd_order_batch_size_bucket{le=\"2\"}"), 0);
    assert_int_equal(th_metric(a, "ticketd_order_batch_size_bucket{le=\"4\"}"), 1);
    assert_int_equal(th_metric(a, "ticketd_order_batch_size_count"), 1);
    assert_int_equal(th_metric(a, "ticketd_order_batch_size_sum"), 4);
    /* Its time, once, beside its size. */
    assert_int_equal(th_metric(a, "ticketd_order_batch_seconds_count"), 1);

    assert_int_equal(b[0].r.status, 201);
    th_expect_layer(&b[0].r, "unique-index");
    j = th_json(&b[0].r);
    assert_string_equal(json_string_value(json_object_get(j, "order_no")), no);
    json_decref(j);
    assert_int_equal(b[1].r.status, 201);
    th_expect_problem(&b[2].r, 409, "SOLD_OUT");
    assert_int_equal(b[3].r.status, 201);
    assert_int_equal(th_orders_of(s), 3);
    assert_int_equal(th_stock_of(s), 10 - 1 - 2 - 1);
    assert_int_equal(th_orders_of(gone), 1);
    assert_int_equal(th_stock_of(gone), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 4);
    for (int i = 0; i < 4; i++)
        th_resp_free(&b[i].r);
    th_resp_free(&first);
    th_resp_free(&last);
}

/* A batch of four ran to its COMMIT and its answer was lost (the link
 * dropped before the reply was read). The batch is one CALL that answers
 * only after its COMMIT, so a lost answer is a link lost after the send:
 * the outcome is unknown, each client is told 503 and the CALL is never
 * sent again. Every order was kept once, and each client's retry gets its
 * order from the unique index. The session is made through the same
 * instance, so that the batch's connection is warm (a fresh link's
 * failure would not be taken for a stale one, either): the 503 is the
 * CALL's rule, not the fresh link's. */
static void test_answer_lost_batch_is_unknown(void **state)
{
    struct buyer b[4];
    (void)state;
    const char *lost[] = {"TICKETD_MERGE_MAX=4", "TICKETD_LOOPS=1",
                          "TICKETD_FAULT=merge.wait_full:fail,mysql.batch_answer_lost:fail:1",
                          NULL};
    struct th_server *a = th_serve(0, lost), *plain = th_serve(1, NULL);
    int64_t s = th_session(a, 10, 500);
    buyers_init(b, 0, 4, a, a, 6201, s, "lost-answer");
    th_parallel(4, buy_each, b);
    assert_true(th_log_contains(a, "dropping the connection before its answer was read"));
    for (int i = 0; i < 4; i++) {
        if (b[i].r.status != 503)
            fail_msg("buyer %d: %ld %s", i, b[i].r.status, b[i].r.body);
    }
    assert_int_equal(th_orders_of(s), 4);
    assert_int_equal(th_stock_of(s), 10 - 4);
    for (int i = 0; i < 4; i++) {
        b[i].srv = plain; /* a holds a lone order for a batch of four */
        buy(&b[i]);
        if (b[i].r.status != 201)
            fail_msg("retry %d: %ld %s", i, b[i].r.status, b[i].r.body);
        json_t *j = th_json(&b[i].r);
        assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE order_no = '%s' AND "
                                   "user_id = %lld",
                                   json_string_value(json_object_get(j, "order_no")),
                                   (long long)b[i].user),
                         1);
        json_decref(j);
        th_resp_free(&b[i].r);
    }
    assert_int_equal(th_orders_of(s), 4);
    assert_int_equal(th_stock_of(s), 10 - 4);
}

/* ---- one statement, one reply ---------------------------------------- */

#define REPLY_ROUNDS 10

/* MariaDB's count of one status variable (SHOW GLOBAL STATUS). */
static long long mysql_status(const char *name)
{
    return th_db_int("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
                     "VARIABLE_NAME = '%s'",
                     name);
}

/* A batch is one statement (a CALL that begins, commits and then answers),
 * so MariaDB writes its answer as one reply, after the COMMIT: counted by
 * MariaDB itself, the statements clients sent (Questions, where the
 * statements inside a procedure do not count) grow by one per batch, not
 * by one per statement of a transaction's text (four, before). Rounds of
 * four buyers, each round one batch (merge.wait_full). The instance runs
 * without its background jobs (TICKETD_WORKERS=0): the sweep's, relay's
 * and consumers' statements come by the clock and by the events of the
 * orders, so on a slow machine more of them fell inside the rounds (a run
 * counted 20 statements for 10 batches, 4 of them the jobs' COMMITs).
 * What is left besides the batches (these samples) stays well below the
 * three statements a batch of several would add. */
static void test_batch_is_one_statement(void **state)
{
    struct buyer b[4];
    (void)state;
    static const char *const quiet_batch_of_4[] = {"TICKETD_MERGE_MAX=4", "TICKETD_LOOPS=1",
                                                   "TICKETD_FAULT=merge.wait_full:fail",
                                                   "TICKETD_WORKERS=0", NULL};
    struct th_server *a = th_serve(0, quiet_batch_of_4);
    int64_t s = th_session(a, 4 * REPLY_ROUNDS, 500);
    long long commits = mysql_status("COM_COMMIT"), calls = mysql_status("COM_CALL_PROCEDURE");
    long long before = batches(a), questions = mysql_status("QUESTIONS");
    for (int round = 0; round < REPLY_ROUNDS; round++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "reply%d", round);
        buyers_init(b, 0, 4, a, a, 6600 + round * 4, s, prefix);
        th_parallel(4, buy_each, b);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(b[i].r.status, 201);
            th_resp_free(&b[i].r);
        }
    }
    questions = mysql_status("QUESTIONS") - questions;
    long long nb = batches(a) - before;
    commits = mysql_status("COM_COMMIT") - commits;
    calls = mysql_status("COM_CALL_PROCEDURE") - calls;
    print_message("one reply: %lld batches: %lld statements sent, %lld CALLs (the nested "
                  "place_orders' too), %lld COMMITs\n",
                  nb, questions, calls, commits);
    assert_int_equal(nb, REPLY_ROUNDS);
    assert_int_equal(th_orders_of(s), 4 * REPLY_ROUNDS);
    assert_true(questions < 2 * nb); /* one statement each, and a little else */
    assert_true(calls >= 2 * nb);    /* place_batch, and place_orders within it */
    assert_true(commits >= nb);      /* one COMMIT each, inside the CALL */
}

/* place_batch rolls its transaction back before it passes an error on: a
 * failed CALL leaves no transaction open on its connection (MariaDB does
 * not end one when a procedure fails), and nothing of the batch is kept.
 * A trigger of the test makes one order's INSERT fail with an error
 * place_orders does not catch (1048); the CALL is made from the test's own
 * connection, so that nothing of ticketd's rolls back after it. */
static void test_failed_call_leaves_no_transaction(void **state)
{
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s = th_session(a, 10, 500);
    th_db_exec("CREATE TRIGGER itest_one_fails BEFORE INSERT ON orders FOR EACH ROW "
               "SET NEW.quantity = IF(NEW.request_id = 'fails', NULL, NEW.quantity)");
    char call[1024];
    snprintf(call, sizeof call,
             "CALL place_batch('[{\"n\":\"FAIL0000000000000001\",\"u\":6701,\"s\":%lld,"
             "\"r\":\"placed\",\"q\":1,\"c\":\"2026-12-05 00:00:00.000\"},"
             "{\"n\":\"FAIL0000000000000002\",\"u\":6702,\"s\":%lld,\"r\":\"fails\","
             "\"q\":1,\"c\":\"2026-12-05 00:00:00.000\"}]')",
             (long long)s, (long long)s);
    MYSQL *m = th_db();
    int failed = mysql_query(m, call);
    unsigned int e = mysql_errno(m);
    /* Read before anything else runs on the connection (the DROP below
     * would end a transaction left open). */
    int64_t open = th_db_int("SELECT @@in_transaction");
    th_db_exec("DROP TRIGGER itest_one_fails");
    assert_int_not_equal(failed, 0);
    assert_int_equal(e, 1048);
    assert_int_equal(open, 0);
    assert_int_equal(th_orders_of(s), 0);
    assert_int_equal(th_stock_of(s), 10);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 0);
}

/* A token that bought another order (Redis forgot it) refuses its batch
 * whole at the token's unique key; each order then runs alone, and only
 * the one with the spent token is refused. */
static void test_spent_token_in_batch_fails_alone(void **state)
{
    struct buyer b[4];
    (void)state;
    struct th_server *a = th_serve(0, batch_of_4), *plain = th_serve(1, NULL);
    int64_t s = th_session(plain, 10, 500);
    buyer_init(&b[0], a, plain, 6101, s, 1, "second-key");
    struct th_resp first = th_order(plain, 6101, "first-key", b[0].token, s, 1);
    assert_int_equal(first.status, 201);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    buyers_init(b, 1, 4, a, plain, 6101, s, "ok");
    th_parallel(4, buy_each, b);
    assert_int_equal(batch_orders(a), 4);
    th_expect_problem(&b[0].r, 409, "ORDER_TOKEN_INVALID");
    for (int i = 1; i < 4; i++)
        assert_int_equal(b[i].r.status, 201);
    assert_int_equal(th_orders_of(s), 4);
    assert_int_equal(th_stock_of(s), 6);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens"), 4);
    for (int i = 0; i < 4; i++)
        th_resp_free(&b[i].r);
    th_resp_free(&first);
}

/* First come, first served inside one batch: two seats, four buyers who
 * join the batch one after another (each sent once the one before waits in
 * the queue). The first two get the seats, the last two SOLD_OUT. */
static void test_first_come_first_served(void **state)
{
    struct buyer b[4];
    pthread_t t[4];
    (void)state;
    struct th_server *a = th_serve(0, batch_of_4), *plain = th_serve(1, NULL);
    int64_t s = th_session(plain, 2, 500);
    buyers_init(b, 0, 4, a, plain, 6201, s, "fcfs");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, buy_thread, &b[i]), 0);
        if (i < 3)
            th_wait_metric(a, "ticketd_order_batch_queued", i + 1, 20000);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(batch_orders(a), 4);
    assert_int_equal(b[0].r.status, 201);
    assert_int_equal(b[1].r.status, 201);
    th_expect_problem(&b[2].r, 409, "SOLD_OUT");
    th_expect_problem(&b[3].r, 409, "SOLD_OUT");
    assert_int_equal(th_stock_of(s), 0);
    for (int i = 0; i < 4; i++)
        th_resp_free(&b[i].r);
}

/* ---- a crash mid-batch ------------------------------------------------ */

/* The process dies after its batch's statements ran and before their
 * COMMIT: the server rolls the whole batch back (no order, history row,
 * token or seat of it stays), and every client's retry with the same key,
 * token and body on another instance gets its order, once. */
static void test_killed_mid_batch(void **state)
{
    struct buyer b[3];
    (void)state;
    const char *crash[] = {"TICKETD_MERGE_MAX=3", "TICKETD_LOOPS=1", "TICKETD_INSTANCE_TTL_MS=600",
                           "TICKETD_FAULT=merge.wait_full:fail,merge.killed_mid_batch:crash", NULL};
    struct th_server *a = th_serve(0, crash), *plain = th_serve(1, NULL);
    int64_t s = th_session(plain, 10, 500);
    buyers_init(b, 0, 3, a, plain, 6301, s, "mid");
    th_parallel(3, buy_each, b);
    th_kill(a);
    for (int i = 0; i < 3; i++)
        assert_int_equal(b[i].r.status, 0);
    assert_true(th_log_contains(a, "fault point merge.killed_mid_batch: crashing"));
    assert_int_equal(th_orders_of(s), 0);
    assert_int_equal(th_stock_of(s), 10);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens"), 0);
    /* The retries: the dead process's markers are taken over once its
     * liveness key lapses; until then the answer is "in progress". Bounded
     * by attempts; each waits for the one before to be answered. */
    for (int i = 0; i < 3; i++) {
        b[i].srv = plain;
        for (int attempt = 0; attempt < 100; attempt++) {
            buy(&b[i]);
            if (b[i].r.status != 409 || strcmp(th_code(&b[i].r), "REQUEST_IN_PROGRESS") != 0)
                break;
            th_msleep(50);
        }
        if (b[i].r.status != 201)
            fail_msg("retry %d: %ld %s", i, b[i].r.status, b[i].r.body);
    }
    assert_int_equal(th_orders_of(s), 3);
    assert_int_equal(th_stock_of(s), 7);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens"), 3);
    for (int i = 0; i < 3; i++) {
        buy(&b[i]);
        assert_int_equal(b[i].r.status, 201);
        th_resp_free(&b[i].r);
    }
    assert_int_equal(th_orders_of(s), 3);
}

/* TICKETD_MERGE=0: every order its own transaction, as before merging. */
static void test_merge_off_one_per_transaction(void **state)
{
    struct buyer b[8];
    (void)state;
    const char *off[] = {"TICKETD_MERGE=0", NULL};
    struct th_server *a = th_serve(0, off);
    int64_t s = th_session(a, 5, 500);
    buyers_init(b, 0, 8, a, a, 6401, s, "off");
    th_parallel(8, buy_each, b);
    int created = 0;
    for (int i = 0; i < 8; i++) {
        created += b[i].r.status == 201;
        th_resp_free(&b[i].r);
    }
    assert_int_equal(created, 5);
    assert_int_equal(th_stock_of(s), 0);
    assert_int_equal(batches(a), 0);
}

/* ---- one batch at the server over the loops --------------------------- */

#define TURN_BUYERS 48
#define TURN_ROUNDS 20

/* Rounds of TURN_BUYERS concurrent buyers on a's session s, each answered
 * 201, until a's counter metric is above 0 or TURN_ROUNDS rounds passed
 * (a bound on rounds, not a time). Returns the orders created; *rounds
 * says how many rounds it took. */
static int buy_until(struct th_server *a, int64_t s, const char *metric, const char *tag,
                     int *rounds)
{
    static struct buyer b[TURN_BUYERS];
    int created = 0;
    for (*rounds = 0; *rounds < TURN_ROUNDS && th_metric(a, metric) <= 0; (*rounds)++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%s%d", tag, *rounds);
        buyers_init(b, 0, TURN_BUYERS, a, a, 6500 + *rounds * TURN_BUYERS, s, prefix);
        th_parallel(TURN_BUYERS, buy_each, b);
        for (int i = 0; i < TURN_BUYERS; i++) {
            assert_int_equal(b[i].r.status, 201);
            created++;
            th_resp_free(&b[i].r);
        }
    }
    return created;
}

/* Two loops, each with orders of its own at once: while one loop's batch
 * is at the server, the other's orders wait in line, and when the batch
 * ends its own loop keeps the turn and sends them with its next batch, so
 * the server sees one batch at a time, made of what both loops gathered,
 * and no loop is woken only to send. Rounds of concurrent buyers until a
 * turn was kept with another loop in line (it takes both loops busy at
 * once: a bound on rounds, not a time); every buyer is answered 201 and
 * the books agree. */
static void test_loops_take_turns_at_the_server(void **state)
{
    (void)state;
    const char *two[] = {"TICKETD_LOOPS=2", NULL};
    struct th_server *a = th_serve(0, two);
    int64_t s = th_session(a, TURN_BUYERS * TURN_ROUNDS, 500);
    int rounds;
    int created = buy_until(a, s, "ticketd_order_batch_turns_kept_total", "turn", &rounds);
    long long kept = th_metric(a, "ticketd_order_batch_turns_kept_total");
    print_message("loops' turns: %lld kept with another loop in line, %lld handed over, in %d "
                  "rounds of %d buyers; %lld orders in %lld batches, %lld beside another\n",
                  kept, th_metric(a, "ticketd_order_batch_turns_handed_total"), rounds, TURN_BUYERS,
                  batch_orders(a), batches(a), th_metric(a, "ticketd_order_batches_beside_total"));
    assert_true(kept > 0);
    assert_int_equal(th_orders_of(s), created);
    assert_int_equal(th_stock_of(s), (long long)TURN_BUYERS * TURN_ROUNDS - created);
}

/* Two loops, each with orders due at once: a batch takes the orders of
 * both loops' queues, whichever loop sends it, and the orders of the other
 * loop are handed back to it with their outcomes. Rounds of concurrent
 * buyers until a batch carried another loop's orders (a bound on rounds,
 * not a time); every buyer is answered 201, the orders are the ones the
 * clients were told of, and the stock agrees. */
static void test_a_batch_carries_every_loops_orders(void **state)
{
    (void)state;
    const char *two[] = {"TICKETD_LOOPS=2", NULL};
    struct th_server *a = th_serve(0, two);
    int64_t s = th_session(a, TURN_BUYERS * TURN_ROUNDS, 500);
    const char *other = "ticketd_order_batch_orders_other_loop_total";
    int rounds;
    int created = buy_until(a, s, other, "all", &rounds);
    print_message("every loop's orders: %lld sent in another loop's batch in %d rounds of %d "
                  "buyers; %lld orders in %lld batches\n",
                  th_metric(a, other), rounds, TURN_BUYERS, batch_orders(a), batches(a));
    assert_true(th_metric(a, other) > 0);
    assert_int_equal(th_orders_of(s), created);
    assert_int_equal(th_stock_of(s), (long long)TURN_BUYERS * TURN_ROUNDS - created);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_last_seats_three_instances),
        T(test_duplicate_and_sold_out_fail_alone),
        T(test_answer_lost_batch_is_unknown),
        T(test_batch_is_one_statement),
        T(test_failed_call_leaves_no_transaction),
        T(test_spent_token_in_batch_fails_alone),
        T(test_first_come_first_served),
        T(test_merge_off_one_per_transaction),
        T(test_loops_take_turns_at_the_server),
        T(test_a_batch_carries_every_loops_orders),
        cmocka_unit_test_setup_teardown(test_killed_mid_batch, th_setup_fresh, th_teardown_kill),
    };
    return cmocka_run_group_tests_name("merge", tests, NULL, NULL);
}
