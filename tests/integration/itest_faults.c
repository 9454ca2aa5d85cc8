/* Every answer true under faults: the real binary, several instances, the
 * real Redis and MariaDB, and the faults a production service meets (Redis
 * flushed or restarted, an instance killed after its COMMIT, a COMMIT whose
 * answer was lost, Redis stalling mid-request, MariaDB down mid-storm, a
 * downstream slower than the TTLs, SIGTERM under keep-alive load).
 *
 * Each test retries as a real client does, with the same key, the same
 * token and the same body, and asserts both what the client is told and
 * what the database holds: one order, the stock taken once, and never an
 * ORDER_TOKEN_INVALID for an order that exists. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* The order number in a 201's body, copied into out (32 bytes). */
static void order_no_of(const struct th_resp *r, char *out)
{
    if (r->status != 201)
        fail_msg("expected 201, got %ld %s", r->status, r->body);
    json_t *j = th_json(r);
    snprintf(out, 32, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
}

/* The retry of an order that exists: 201, replayed, the same order. */
static void expect_replay_of(const struct th_resp *r, const char *order_no)
{
    char no[32], v[16];
    if (r->status != 201)
        fail_msg("the retry of an existing order got %ld %s", r->status, r->body);
    order_no_of(r, no);
    assert_string_equal(no, order_no);
    assert_non_null(th_header(r, "Idempotent-Replayed", v, sizeof v));
}

/* Redis forgets everything; then the same request (user, key, token,
 * session, quantity 1) on s finds its order, no, in the database. */
static void copy_after_flush(const struct th_server *s, int64_t user, const char *key,
                             const char *tok, int64_t session, const char *no)
{
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp copy = th_order(s, user, key, tok, session, 1);
    expect_replay_of(&copy, no);
    th_expect_layer(&copy, "unique-index");
    th_resp_free(&copy);
}

/* One order for session s, and its stock taken once (quantity 1). */
static void expect_one_order(int64_t s, int64_t stock)
{
    assert_int_equal(th_orders_of(s), 1);
    assert_int_equal(th_stock_of(s), stock - 1);
}

/* ---- Redis loses its records ------------------------------------------ */

static void test_redis_flushed_after_201(void **state)
{
    char tok[96], no[32];
    (void)state;
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, NULL);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 61, tok);
    struct th_resp first = th_order(a, 61, "flush-1", tok, s, 1);
    order_no_of(&first, no);

    /* Redis forgets everything: the key's record and the spent token. The
     * same request on another instance finds its order in the database. */
    copy_after_flush(b, 61, "flush-1", tok, s, no);
    /* The answer is remembered again: the next retry stops at the cache. */
    struct th_resp third = th_order(b, 61, "flush-1", tok, s, 1);
    expect_replay_of(&third, no);
    th_expect_layer(&third, "response-cache");
    expect_one_order(s, 10);
    th_resp_free(&first);
    th_resp_free(&third);
}

static void test_redis_restarted_after_201(void **state)
{
    char tok[96], no[32];
    (void)state;
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, NULL);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 62, tok);
    struct th_resp first = th_order(a, 62, "restart-1", tok, s, 1);
    order_no_of(&first, no);
    th_services("stop-redis");
    th_services("start-redis");
    struct th_resp again = th_order(b, 62, "restart-1", tok, s, 1);
    expect_replay_of(&again, no);
    th_expect_layer(&again, "unique-index");
    expect_one_order(s, 10);
    th_resp_free(&first);
    th_resp_free(&again);
}

/* ---- a spent token after Redis forgot it ---------------------------------- */

#define TOKEN_THIEVES 8

struct thieves_ctx {
    struct th_server *inst[2];
    const char *token;
    int64_t user;
    int64_t session[TOKEN_THIEVES]; /* one each: no session lock between them */
    long status[TOKEN_THIEVES];
    char code[TOKEN_THIEVES][40];
    char layer[TOKEN_THIEVES][24];
};

/* A new key with the token another key spent, on either instance. */
static void present_spent_token(int i, void *p)
{
    struct thieves_ctx *c = p;
    char key[32], v[24];
    snprintf(key, sizeof key, "thief-%d", i);
    struct th_resp r = th_order(c->inst[i % 2], c->user, key, c->token, c->session[i], 1);
    c->status[i] = r.status;
    snprintf(c->code[i], sizeof c->code[i], "%s", th_code(&r));
    snprintf(c->layer[i], sizeof c->layer[i], "%s",
             th_header(&r, "Idempotency-Layer", v, sizeof v) ? v : "");
    th_resp_free(&r);
}

/* Every new key refused by the database's record of the token, and
 * nothing bought or taken from any session. */
static void expect_thieves_refused(const struct thieves_ctx *c)
{
    for (int i = 0; i < TOKEN_THIEVES; i++) {
        if (c->status[i] != 409 || strcmp(c->code[i], "ORDER_TOKEN_INVALID") != 0 ||
            strcmp(c->layer[i], "unique-index") != 0)
            fail_msg("key %d with a spent token Redis forgot: %ld %s (layer '%s')", i, c->status[i],
                     c->code[i], c->layer[i]);
        assert_int_equal(th_orders_of(c->session[i]), 0);
        assert_int_equal(th_stock_of(c->session[i]), 5);
    }
}

static void test_flushed_token_buys_nothing_more(void **state)
{
    char tok[96], no[32];
    static struct thieves_ctx c;
    (void)state;
    memset(&c, 0, sizeof c);
    c.inst[0] = th_serve(0, NULL);
    c.inst[1] = th_serve(1, NULL);
    c.token = tok;
    c.user = 64;
    int64_t s = th_session(c.inst[0], 10, 1000);
    for (int i = 0; i < TOKEN_THIEVES; i++)
        c.session[i] = th_session(c.inst[0], 5, 1000);
    th_order_token(c.inst[0], c.user, tok);
    struct th_resp first = th_order(c.inst[0], c.user, "spender", tok, s, 1);
    order_no_of(&first, no);

    /* Redis forgets the token and the key's record. Every new key, all at
     * once on both instances, meets the token's row in the database. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    th_parallel(TOKEN_THIEVES, present_spent_token, &c);
    expect_thieves_refused(&c);
    /* A second wave: the refusals left nothing behind that lets one in. */
    th_parallel(TOKEN_THIEVES, present_spent_token, &c);
    expect_thieves_refused(&c);

    /* The key that spent it still gets its order, on either instance. */
    for (int i = 0; i < 2; i++) {
        struct th_resp again = th_order(c.inst[i], c.user, "spender", tok, s, 1);
        expect_replay_of(&again, no);
        th_resp_free(&again);
    }
    expect_one_order(s, 10);
    assert_int_equal(
        th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = %lld", (long long)c.user), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens t JOIN orders o ON "
                               "o.id = t.order_id WHERE o.order_no = '%s'",
                               no),
                     1);
    /* The hash is kept, never the token. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_tokens WHERE token_hash = '%s'", tok),
                     0);
    th_resp_free(&first);
}

/* A token whose key bought nothing (sold out) spent nothing in the
 * database: after Redis forgot it, another key may use it, once. */
static void test_flushed_token_that_bought_nothing(void **state)
{
    char tok[96], other[96], no[32];
    (void)state;
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, NULL);
    int64_t empty = th_session(a, 1, 1000), s = th_session(a, 10, 1000);
    th_order_token(a, 66, other);
    struct th_resp fill = th_order(a, 66, "fill", other, empty, 1);
    assert_int_equal(fill.status, 201);
    th_resp_free(&fill);
    th_order_token(a, 65, tok);
    struct th_resp sold = th_order(a, 65, "too-late", tok, empty, 1);
    th_expect_problem(&sold, 409, "SOLD_OUT");

    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp bought = th_order(b, 65, "second-try", tok, s, 1);
    order_no_of(&bought, no);
    /* Now it bought an order: the next key is refused by the database. */
    struct th_resp third = th_order(a, 65, "third-try", tok, s, 1);
    th_expect_problem(&third, 409, "ORDER_TOKEN_INVALID");
    th_expect_layer(&third, "unique-index");
    expect_one_order(s, 10);
    th_resp_free(&sold);
    th_resp_free(&bought);
    th_resp_free(&third);
}

static void test_record_expired(void **state)
{
    char tok[96], no[32];
    (void)state;
    /* The key's record, in Redis and in process, lives one second. */
    const char *env[] = {"TICKETD_IDEM_TTL_S=1", NULL};
    struct th_server *a = th_serve(0, env);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 63, tok);
    struct th_resp first = th_order(a, 63, "late-1", tok, s, 1);
    order_no_of(&first, no);
    sleep(2);
    assert_int_equal(th_redis_int("EXISTS idem:{63}:late-1"), 0);
    struct th_resp late = th_order(a, 63, "late-1", tok, s, 1);
    expect_replay_of(&late, no);
    th_expect_layer(&late, "unique-index");
    expect_one_order(s, 10);
    th_resp_free(&first);
    th_resp_free(&late);
}

/* ---- an instance dies, a COMMIT's answer is lost ------------------------ */

static void test_killed_after_commit(void **state)
{
    char tok[96], no[32];
    (void)state;
    const char *crash[] = {"TICKETD_FAULT=order.after_commit:crash", NULL};
    struct th_server *a = th_serve(0, crash), *b = th_serve(1, NULL);
    int64_t s = th_session(b, 10, 1000);
    th_order_token(b, 64, tok);
    /* The order commits, then the instance dies: no answer, and its marker
     * and lock stay in Redis until their TTLs. */
    struct th_resp cut = th_order(a, 64, "killed-1", tok, s, 1);
    assert_int_equal(cut.status, 0);
    th_kill(a);
    assert_int_equal(th_orders_of(s), 1);
    assert_int_equal(th_redis_int("EXISTS idem:{64}:killed-1"), 1);
    /* The retry on another instance gets the order at once, not 409
     * REQUEST_IN_PROGRESS for the marker's 10 s, nor ORDER_TOKEN_INVALID. */
    struct th_resp again = th_order(b, 64, "killed-1", tok, s, 1);
    assert_int_equal(again.status, 201);
    order_no_of(&again, no);
    th_expect_layer(&again, "unique-index");
    struct th_resp third = th_order(b, 64, "killed-1", tok, s, 1);
    expect_replay_of(&third, no);
    expect_one_order(s, 10);
    th_resp_free(&cut);
    th_resp_free(&again);
    th_resp_free(&third);
}

static long long instances_beating(void)
{
    return th_redis_int("EVAL %s 0", "return #redis.call('KEYS', 'ticketd:instance:*')");
}

static void test_dead_process_marker_taken_over(void **state)
{
    char tok[96], v[16];
    (void)state;
    /* a dies after the Redis defences, before the database: its marker and
     * lock stay for 10 s, but its liveness key lapses within 600 ms. */
    const char *crash[] = {"TICKETD_FAULT=order.after_redis:crash", "TICKETD_INSTANCE_TTL_MS=600",
                           NULL};
    struct th_server *a = th_serve(0, crash), *b = th_serve(1, NULL);
    assert_int_equal(instances_beating(), 2);
    int64_t s = th_session(b, 10, 1000);
    th_order_token(b, 68, tok);
    struct th_resp cut = th_order(a, 68, "dead-1", tok, s, 1);
    assert_int_equal(cut.status, 0);
    th_kill(a);
    assert_int_equal(th_orders_of(s), 0);
    /* Right away the marker may still look alive: then the answer is
     * "in progress", with Retry-After. */
    struct th_resp early = th_order(b, 68, "dead-1", tok, s, 1);
    if (early.status != 201) {
        th_expect_problem(&early, 409, "REQUEST_IN_PROGRESS");
        assert_non_null(th_header(&early, "Retry-After", v, sizeof v));
    }
    /* A second later a's key is gone: the retry takes the marker over and
     * the order is made, long before the marker's own 10 s. */
    sleep(1);
    struct th_resp again = th_order(b, 68, "dead-1", tok, s, 1);
    assert_int_equal(again.status, 201);
    expect_one_order(s, 10);
    assert_int_equal(th_redis_int("EXISTS idem:{68}:dead-1"), 1);
    /* b stops cleanly and says so at once. */
    assert_int_equal(th_stop(b), 0);
    assert_int_equal(instances_beating(), 0);
    th_resp_free(&cut);
    th_resp_free(&early);
    th_resp_free(&again);
}

static void test_commit_lost(void **state)
{
    char tok[96], no[32], v[16];
    (void)state;
    const char *lost[] = {"TICKETD_FAULT=order.commit_lost:fail:1", NULL};
    struct th_server *a = th_serve(0, lost);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 65, tok);
    /* COMMIT succeeded, its answer never came: the client is told to retry. */
    struct th_resp r = th_order(a, 65, "lost-1", tok, s, 1);
    th_expect_problem(&r, 503, "DEPENDENCY_UNAVAILABLE");
    assert_non_null(th_header(&r, "Retry-After", v, sizeof v));
    assert_int_equal(th_orders_of(s), 1);
    /* The retry gets the order that exists. */
    struct th_resp again = th_order(a, 65, "lost-1", tok, s, 1);
    assert_int_equal(again.status, 201);
    order_no_of(&again, no);
    th_expect_layer(&again, "unique-index");
    expect_one_order(s, 10);
    th_resp_free(&r);
    th_resp_free(&again);
}

/* A copy that reaches the database after its order was made meets the
 * unique index, and the order is looked up by a locking read. A locking
 * read can be a deadlock's victim (or, on a Galera node, aborted by
 * another node's writeset): it wrote nothing, so it is asked again, and
 * the copy is answered with its order. When it loses every time, the
 * answer is "try again" (503), never a failure: the retry finds it. */
static void test_lookup_after_refusal_meets_a_conflict(void **state)
{
    char tok[96], no[32], v[16];
    (void)state;
    const char *once[] = {"TICKETD_FAULT=order.lookup_conflict:fail:1", NULL};
    const char *always[] = {"TICKETD_FAULT=order.lookup_conflict:fail", NULL};
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, once);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 66, tok);
    struct th_resp first = th_order(a, 66, "lookup-1", tok, s, 1);
    order_no_of(&first, no);

    /* Redis forgets the key: the copy goes to the database. */
    copy_after_flush(b, 66, "lookup-1", tok, s, no);

    /* Every look-up loses: 503 with Retry-After, nothing written. */
    struct th_server *c = th_serve(2, always);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp lost = th_order(c, 66, "lookup-1", tok, s, 1);
    th_expect_problem(&lost, 503, "DEPENDENCY_UNAVAILABLE");
    assert_non_null(th_header(&lost, "Retry-After", v, sizeof v));
    expect_one_order(s, 10);
    /* The retry, on an instance whose look-ups work, gets the order. */
    struct th_resp again = th_order(a, 66, "lookup-1", tok, s, 1);
    expect_replay_of(&again, no);
    expect_one_order(s, 10);
    th_resp_free(&first);
    th_resp_free(&lost);
    th_resp_free(&again);
}

static void test_answer_lost_then_sent_again_is_created(void **state)
{
    char tok[96], no[32], v[16];
    (void)state;
    /* The order's whole transaction ran to its COMMIT and its answer was
     * lost before the first result (as when a Galera node stalls past the
     * read timeout): the link counts as stale and the same text is sent
     * again. It meets the order this very request made: by its order
     * number first (taken for a random collision: the next attempt draws
     * another), then by its key. One loop, so that the session's creation
     * leaves the connection warm (a fresh link's failure is not taken for
     * a stale one). */
    const char *lost[] = {"TICKETD_FAULT=mysql.batch_answer_lost:fail:1", "TICKETD_LOOPS=1", NULL};
    struct th_server *a = th_serve(0, lost);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 67, tok);
    long long created = th_metric(a, "ticketd_orders_created_total");
    struct th_resp r = th_order(a, 67, "sent-once", tok, s, 1);
    order_no_of(&r, no);
    assert_true(th_log_contains(a, "dropping the connection before its answer was read"));
    /* Its own order, answered as made: not a replay of an earlier request. */
    if (th_header(&r, "Idempotent-Replayed", v, sizeof v) != NULL)
        fail_msg("a request sent once was told its order was replayed: %s %s", r.body,
                 th_header(&r, "Idempotency-Layer", v, sizeof v));
    if (th_header(&r, "Idempotency-Layer", v, sizeof v) != NULL)
        fail_msg("a new order names the layer %s", v);
    assert_int_equal(th_metric(a, "ticketd_orders_created_total"), created + 1);
    expect_one_order(s, 10);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE order_no = '%s'", no), 1);
    /* The client's own retry is the replay. */
    struct th_resp again = th_order(a, 67, "sent-once", tok, s, 1);
    expect_replay_of(&again, no);
    th_resp_free(&r);
    th_resp_free(&again);
}

static void test_redis_stalls_at_the_token(void **state)
{
    char tok[96], no[32];
    (void)state;
    /* Redis ran the token script, then its answer was lost to a stall:
     * the request goes on without Redis (degrade) and creates the order,
     * but cannot store its answer; its marker stays behind. */
    const char *stall[] = {"TICKETD_FAULT=redis.token_stall:fail:1", NULL};
    struct th_server *a = th_serve(0, stall), *b = th_serve(1, NULL);
    int64_t s = th_session(b, 10, 1000);
    th_order_token(b, 66, tok);
    struct th_resp first = th_order(a, 66, "stall-1", tok, s, 1);
    order_no_of(&first, no);
    /* Retries at once, on both instances: the order, never 409. */
    struct th_resp on_b = th_order(b, 66, "stall-1", tok, s, 1);
    expect_replay_of(&on_b, no);
    sleep(1); /* past the breaker's cooldown: a has Redis back */
    struct th_resp on_a = th_order(a, 66, "stall-1", tok, s, 1);
    expect_replay_of(&on_a, no);
    expect_one_order(s, 10);
    th_resp_free(&first);
    th_resp_free(&on_b);
    th_resp_free(&on_a);
}

/* ---- MariaDB down mid-storm: the retries that Retry-After invites ------- */

#define DOWN_CLIENTS 12

struct down_ctx {
    const struct th_server *s;
    int64_t session;
    char tokens[DOWN_CLIENTS][96];
    long status[DOWN_CLIENTS];
    char order_no[DOWN_CLIENTS][32];
};

static void order_for_client(int i, void *p)
{
    struct down_ctx *c = p;
    char key[32];
    snprintf(key, sizeof key, "down-%d", i);
    struct th_resp r = th_order(c->s, 700 + i, key, c->tokens[i], c->session, 1);
    c->status[i] = r.status;
    if (r.status == 201)
        order_no_of(&r, c->order_no[i]);
    th_resp_free(&r);
}

static void test_mysql_down_then_retries_succeed(void **state)
{
    (void)state;
    static struct down_ctx c;
    memset(&c, 0, sizeof c);
    struct th_server *a = th_serve(0, NULL);
    c.s = a;
    c.session = th_session(a, 100, 500);
    for (int i = 0; i < DOWN_CLIENTS; i++)
        th_order_token(a, 700 + i, c.tokens[i]);
    th_services("stop-mysql");
    th_parallel(DOWN_CLIENTS, order_for_client, &c);
    for (int i = 0; i < DOWN_CLIENTS; i++)
        assert_int_equal(c.status[i], 503);
    th_services("start-mysql");
    /* Every client retries as Retry-After says, with the token it already
     * spent: each gets its order, exactly one. */
    sleep(1);
    th_parallel(DOWN_CLIENTS, order_for_client, &c);
    for (int i = 0; i < DOWN_CLIENTS; i++) {
        if (c.status[i] != 201)
            fail_msg("client %d: the retry after MariaDB came back got %ld", i, c.status[i]);
    }
    assert_int_equal(th_orders_of(c.session), DOWN_CLIENTS);
    assert_int_equal(th_stock_of(c.session), 100 - DOWN_CLIENTS);
}

/* ---- one view of Redis's health for every thread ------------------------ */

#define PAUSED_ORDERS 40

struct paused_ctx {
    const struct th_server *s;
    int64_t session;
    long status[16];
};

static void order_after_resume(int i, void *p)
{
    struct paused_ctx *c = p;
    char key[32];
    snprintf(key, sizeof key, "resumed-%d", i);
    struct th_resp r = th_order(c->s, 900 + i, key, NULL, c->session, 1);
    c->status[i] = r.status;
    th_resp_free(&r);
}

static void test_redis_paused_then_back_for_every_thread(void **state)
{
    (void)state;
    static struct paused_ctx c;
    const char *env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_REDIS_TIMEOUT_MS=300", NULL};
    struct th_server *a = th_serve(0, env);
    c.s = a;
    c.session = th_session(a, 1000, 100);
    const char *errors = "ticketd_dependency_errors_total{dependency=\"redis\"}";
    long long before = th_metric(a, errors);

    /* Redis stops answering (SIGSTOP): orders go on without it (degrade),
     * and only the first call and one probe per cooldown wait for it; the
     * others fail fast instead of each paying the 300 ms timeout. */
    th_services("pause-redis");
    for (int i = 0; i < PAUSED_ORDERS; i++) {
        char key[32];
        snprintf(key, sizeof key, "paused-%d", i);
        struct th_resp r = th_order(a, 890, key, NULL, c.session, 1);
        assert_int_equal(r.status, 201);
        th_resp_free(&r);
    }
    th_services("resume-redis");
    long long timeouts = th_metric(a, errors) - before;
    print_message("redis paused: %lld of %d orders waited for it\n", timeouts, PAUSED_ORDERS);
    /* One for the call that found it paused, one per probe (500 ms
     * cooldown + 300 ms timeout): a handful. A back-off per thread would
     * cost at least one per server thread (8 here), and one per request
     * without any back-off at all. */
    assert_true(timeouts >= 1);
    assert_true(timeouts <= 6);
    assert_true(th_metric(a, "ticketd_dependency_breaker_opened_total{dependency=\"redis\"}") >= 1);

    /* Redis answers again: once the probe has seen it, every thread uses it
     * at once (no thread waits out a back-off of its own). Each of 16
     * concurrent orders, on the server's threads, stores its answer. */
    struct th_resp probe = th_call(a, "GET", "/readyz", NULL, NULL);
    th_resp_free(&probe);
    sleep(1);
    th_parallel(16, order_after_resume, &c);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(c.status[i], 201);
        assert_int_equal(th_redis_int("EXISTS idem:{%d}:resumed-%d", 900 + i, i), 1);
    }
    assert_int_equal(th_orders_of(c.session), PAUSED_ORDERS + 16);
}

/* ---- slower than the TTLs ---------------------------------------------- */

struct slow_ctx {
    const struct th_server *s;
    int64_t session;
    const char *token;
    struct th_resp resp;
};

static void *slow_order(void *p)
{
    struct slow_ctx *c = p;
    c->resp = th_order(c->s, 67, "slow-1", c->token, c->session, 1);
    return NULL;
}

static void test_slower_than_the_ttls(void **state)
{
    char tok[96], a_no[32], b_no[32], la[64], lb[64];
    (void)state;
    /* a's first order is held between the Redis defences and the
     * database, past its marker's and its lock's 500 ms, until the copy
     * below has its answer (the release file appears). */
    struct th_release release;
    th_release_init(&release, "slow");
    const char *slow[] = {"TICKETD_FAULT=order.after_redis:hold:300000:1",
                          "TICKETD_INFLIGHT_TTL_MS=500", "TICKETD_LOCK_TTL_MS=500", release.env,
                          NULL};
    const char *fast[] = {"TICKETD_INFLIGHT_TTL_MS=500", "TICKETD_LOCK_TTL_MS=500", NULL};
    struct th_server *a = th_serve(0, slow), *b = th_serve(1, fast);
    int64_t s = th_session(b, 10, 1000);
    th_order_token(b, 67, tok);
    struct slow_ctx c = {a, s, tok, {0}};
    pthread_t t;
    pthread_create(&t, NULL, slow_order, &c);
    /* Not a guess at the clock: the original is held at the fault point,
     * and its marker and lock are gone from Redis (bounded). */
    th_wait_held(a, "order.after_redis");
    for (int i = 0; i < 100 && (th_redis_int("EXISTS idem:{67}:slow-1") != 0 ||
                                th_redis_int("EXISTS lock:order:{67}:%lld", (long long)s) != 0);
         i++)
        usleep(20 * 1000);
    assert_int_equal(th_redis_int("EXISTS idem:{67}:slow-1"), 0);
    /* The marker and lock have expired: the copy on b passes every Redis
     * defence (the token was spent by this very key) and creates the
     * order; the slow original then meets the unique index. */
    struct th_resp copy = th_order(b, 67, "slow-1", tok, s, 1);
    th_release_now(&release);
    pthread_join(t, NULL);
    th_release_done(&release);
    order_no_of(&copy, b_no);
    order_no_of(&c.resp, a_no);
    assert_string_equal(a_no, b_no);
    /* One of them was caught, and its answer names the defence that did. */
    bool a_caught = th_header(&c.resp, "Idempotency-Layer", la, sizeof la) != NULL;
    bool b_caught = th_header(&copy, "Idempotency-Layer", lb, sizeof lb) != NULL;
    assert_true(a_caught != b_caught);
    assert_string_equal(a_caught ? la : lb, "unique-index");
    expect_one_order(s, 10);
    th_resp_free(&copy);
    th_resp_free(&c.resp);
}

/* ---- a held request holds up no other connection ---------------------- */

#define OTHER_CLIENTS 8 /* connections beside the held one, on the same loop */

struct held_ctx {
    const struct th_server *s;
    int64_t session;
    atomic_bool held_done;
    atomic_int answered_while_held; /* answers that came before the held one */
    atomic_int answered;
    /* The first client that got no good answer says why here; the test's
     * own thread fails on it (cmocka's fail_msg on a client thread would
     * end the whole binary). */
    pthread_mutex_t mu;
    char failure[512];
    char failed_id[48]; /* the X-Request-Id of the request that failed */
};

static void *held_order(void *p)
{
    struct held_ctx *c = p;
    struct th_resp r = th_order(c->s, 950, "held-1", NULL, c->session, 1);
    assert_int_equal(r.status, 201);
    atomic_store(&c->held_done, true);
    th_resp_free(&r);
    return NULL;
}

/* Each client, on its own kept-alive connection: /livez (no I/O), a
 * session read (MySQL), an order (Redis and MySQL), its replay. */
static void other_client(int i, void *p)
{
    struct held_ctx *c = p;
    struct th_client *cl = th_client_new();
    char url[160], key[32];
    snprintf(key, sizeof key, "other-%d", i);
    for (int step = 0; step < 4; step++) {
        struct th_resp r;
        if (step == 0) {
            snprintf(url, sizeof url, "%s/livez", c->s->url);
            r = th_client_request(cl, "GET", url, NULL, NULL);
        } else if (step == 1) {
            snprintf(url, sizeof url, "%s/api/v1/sessions/%lld", c->s->url, (long long)c->session);
            r = th_client_request(cl, "GET", url, NULL, NULL);
        } else {
            r = th_client_order(cl, c->s, 960 + i, key, NULL, c->session, 1);
        }
        if (r.status != 200 && r.status != 201) {
            pthread_mutex_lock(&c->mu);
            if (c->failure[0] == '\0') {
                snprintf(c->failure, sizeof c->failure,
                         "client %d step %d, request %s: %ld after %.1f s %s%.300s", i, step,
                         r.request_id, r.status, r.seconds, r.error, r.body);
                snprintf(c->failed_id, sizeof c->failed_id, "%s", r.request_id);
            }
            pthread_mutex_unlock(&c->mu);
            th_resp_free(&r);
            break;
        }
        atomic_fetch_add(&c->answered, 1);
        if (!atomic_load(&c->held_done))
            atomic_fetch_add(&c->answered_while_held, 1);
        th_resp_free(&r);
    }
    th_client_free(cl);
}

static void test_a_held_request_holds_up_no_other_connection(void **state)
{
    (void)state;
    static struct held_ctx c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    /* One loop serves every client; the first order is held at the fault
     * point until every other client has all its answers (the file below
     * appears), so the check holds however fast or slow the machine. */
    struct th_release release;
    th_release_init(&release, "held");
    const char *env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0",
                         "TICKETD_LOOPS=1",
                         "TICKETD_FAULT=order.after_redis:hold:300000:1",
                         "TICKETD_ACCESS_LOG=1", /* a failure's log says which answers went out */
                         release.env,
                         NULL};
    /* A port, and so a log, of its own: the sigterm test counts the 201s
     * in port 0's log. */
    struct th_server *a = th_serve(2, env);
    c.s = a;
    c.session = th_session(a, 100, 100);
    pthread_t t;
    pthread_create(&t, NULL, held_order, &c);
    /* The held order is parked on its fiber before the others start. */
    th_wait_held(a, "order.after_redis");
    th_parallel(OTHER_CLIENTS, other_client, &c);
    if (c.failure[0] != '\0') {
        /* What the server says of itself then (-1: no answer at all):
         * where its orders and batches stand. */
        static const char *const samples[] = {
            "ticketd_orders_created_total", "ticketd_inflight_requests",
            "ticketd_order_batches_total", "ticketd_order_batch_queued"};
        char seen[512] = "/metrics:";
        size_t o = strlen(seen);
        for (size_t i = 0; i < sizeof samples / sizeof samples[0] && o < sizeof seen; i++)
            o += (size_t)snprintf(seen + o, sizeof seen - o, " %s %lld;", samples[i],
                                  th_metric(a, samples[i]));
        th_release_now(&release);       /* let the held order go before failing */
        th_log_request(a, c.failed_id); /* its access line, its "late answer" line */
        fail_msg("%s; %s", c.failure, seen);
    }
    /* Every other connection got all its answers while the one request was
     * held: the held request waits on its fiber, not on its loop, nor on
     * the connections that loop serves. */
    assert_int_equal(atomic_load(&c.answered), OTHER_CLIENTS * 4);
    assert_int_equal(atomic_load(&c.answered_while_held), OTHER_CLIENTS * 4);
    assert_false(atomic_load(&c.held_done));
    th_release_now(&release);
    pthread_join(t, NULL);
    th_release_done(&release);
    assert_int_equal(th_orders_of(c.session), OTHER_CLIENTS + 1);
}

/* ---- a client that leaves while its request is suspended ----------------- */

/* libmicrohttpd does not watch a suspended connection, so a client that
 * gives up while its order waits goes unnoticed until the answer is ready.
 * Nothing is lost by that: the fiber goes on (the order commits and the
 * key's record is written, as for any answer), the connection is resumed,
 * the write to the closed socket fails and the connection is closed, and
 * the exchange is freed. The client's retry with the same key and body is
 * told the truth: 201, replayed, the order that was made. */
static void test_client_gone_while_suspended(void **state)
{
    (void)state;
    struct th_release release;
    th_release_init(&release, "gone");
    const char *env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_LOOPS=1",
                         "TICKETD_FAULT=order.after_redis:hold:300000:1", release.env, NULL};
    struct th_server *a = th_serve(3, env);
    int64_t s = th_session(a, 10, 100);

    /* The client gives up (1 s) while the order is held; only then is the
     * hold released, so it has left whatever the machine's speed. */
    struct th_client *cl = th_client_new();
    th_client_timeout(cl, 1);
    struct th_resp gone = th_client_order(cl, a, 970, "gone-1", NULL, s, 1);
    th_client_free(cl); /* closes its connection, if libcurl had not */
    assert_int_equal(gone.status, 0);
    assert_true(th_log_contains(a, "fault point order.after_redis: holding"));
    /* The late-answer check names it, as it would a lost answer: by the
     * client's request id, waiting on its fiber, its connection suspended
     * in libmicrohttpd's own books too. */
    char late[256];
    snprintf(late, sizeof late, "late answer: request %s POST /api/v1/orders on loop 0, ",
             gone.request_id);
    for (int i = 0; i < 300 && !th_log_contains(a, late); i++)
        th_msleep(100);
    assert_true(th_log_contains(a, late));
    assert_true(th_log_contains(a, "on its fiber, connection suspended by ticketd; answer not "
                                   "queued; libmicrohttpd: suspended"));
    th_release_now(&release);

    /* The order commits, and the exchange ends: the only request in flight
     * is the /metrics request that asks. */
    th_wait_db(1, 30000, "the abandoned order",
               "SELECT COUNT(*) FROM orders WHERE session_id = %lld", (long long)s);
    th_wait_metric(a, "ticketd_inflight_requests", 1, 30000);

    struct th_resp retry = th_order(a, 970, "gone-1", NULL, s, 1);
    char no[32], v[16];
    order_no_of(&retry, no);
    assert_non_null(th_header(&retry, "Idempotent-Replayed", v, sizeof v));
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE session_id = %lld AND "
                               "order_no = '%s'",
                               (long long)s, no),
                     1);
    expect_one_order(s, 10);
    th_release_done(&release);
    th_resp_free(&gone);
    th_resp_free(&retry);
}

/* ---- requests on fibers share the database connections ------------------ */

#define POOL_CONNS   2
#define POOL_CLIENTS 24
#define POOL_ORDERS  3

struct pool_ctx {
    const struct th_server *s;
    int64_t session;
    atomic_int created;
    atomic_bool done;
    int64_t most; /* the most connections of ticketd's user seen at once */
};

static void pool_client(int i, void *p)
{
    struct pool_ctx *c = p;
    struct th_client *cl = th_client_new();
    for (int n = 0; n < POOL_ORDERS; n++) {
        char key[48];
        snprintf(key, sizeof key, "pool-%d-%d", i, n);
        struct th_resp r = th_client_order(cl, c->s, 1200 + i, key, NULL, c->session, 1);
        if (r.status == 201)
            atomic_fetch_add(&c->created, 1);
        else
            fail_msg("client %d order %d: %ld %s", i, n, r.status, r.body);
        th_resp_free(&r);
    }
    th_client_free(cl);
}

static int64_t ticketd_connections(void)
{
    return th_db_int("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'ticketd'");
}

static void *count_connections(void *p)
{
    struct pool_ctx *c = p;
    while (!atomic_load(&c->done)) {
        int64_t n = ticketd_connections();
        if (n > c->most)
            c->most = n;
        usleep(5 * 1000);
    }
    return NULL;
}

static void test_fibers_share_the_database_connections(void **state)
{
    (void)state;
    static struct pool_ctx c;
    memset(&c, 0, sizeof c);
    /* Two database connections, no background threads (they keep
     * connections of their own): more concurrent orders than connections
     * keep every connection busy, and the database still sees two
     * sessions. */
    const char *env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_WORKERS=0",
                         "TICKETD_DB_CONNS=2", NULL};
    int64_t before = ticketd_connections(); /* this test's own, and any others */
    struct th_server *a = th_serve(0, env);
    c.s = a;
    c.session = th_session(a, 1000, 100);
    pthread_t t;
    pthread_create(&t, NULL, count_connections, &c);
    th_parallel(POOL_CLIENTS, pool_client, &c);
    atomic_store(&c.done, true);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&c.created), POOL_CLIENTS * POOL_ORDERS);
    assert_int_equal(th_orders_of(c.session), POOL_CLIENTS * POOL_ORDERS);
    /* The pool, plus the connection the main thread checked the schema
     * with at start-up. One per request in flight would be up to
     * POOL_CLIENTS. */
    if (c.most - before > POOL_CONNS + 1)
        fail_msg("ticketd held %lld database connections at once; at most %d expected",
                 (long long)(c.most - before), POOL_CONNS + 1);
    assert_true(c.most - before >= 1);
}

/* ---- SIGTERM under keep-alive load -------------------------------------- */

#define TERM_CLIENTS 8
#define TERM_MAX     400

struct term_ctx {
    const struct th_server *s;
    int64_t session;
    atomic_int created;          /* 201s that reached their client */
    atomic_int closes;           /* answers that said Connection: close */
    atomic_int ended_by_close;   /* clients whose last answer said close */
    atomic_int ended_by_refusal; /* clients whose next connection was refused */
};

static void keepalive_client(int i, void *p)
{
    struct term_ctx *c = p;
    struct th_client *cl = th_client_new();
    bool last_closed = false;
    for (int n = 0; n < TERM_MAX; n++) {
        char key[48], v[32];
        snprintf(key, sizeof key, "term-%d-%d", i, n);
        struct th_resp r = th_client_order(cl, c->s, 800 + i, key, NULL, c->session, 1);
        if (r.status == 0) {
            /* The listener is closed: the new connection was refused, so
             * this request was never read. */
            atomic_fetch_add(&c->ended_by_refusal, 1);
            if (last_closed)
                atomic_fetch_add(&c->ended_by_close, 1);
            th_resp_free(&r);
            break;
        }
        if (r.status == 201)
            atomic_fetch_add(&c->created, 1);
        last_closed = th_header(&r, "Connection", v, sizeof v) != NULL && strcmp(v, "close") == 0;
        if (last_closed)
            atomic_fetch_add(&c->closes, 1);
        th_resp_free(&r);
    }
    th_client_free(cl);
}

/* SIGTERM once TERM_AFTER orders reached their clients: mid-load on a
 * machine of any speed (bounded: at most 30 s of waiting). */
#define TERM_AFTER 100

static void *send_term(void *p)
{
    struct term_ctx *c = p;
    for (int i = 0; i < 6000 && atomic_load(&c->created) < TERM_AFTER; i++)
        usleep(5 * 1000);
    kill(c->s->pid, SIGTERM);
    return NULL;
}

static void test_sigterm_under_keepalive_load(void **state)
{
    (void)state;
    static struct term_ctx c;
    memset(&c, 0, sizeof c);
    const char *env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_ACCESS_LOG=1", NULL};
    struct th_server *a = th_serve(0, env);
    c.s = a;
    c.session = th_session(a, 100000, 100);
    pthread_t t;
    pthread_create(&t, NULL, send_term, &c);
    th_parallel(TERM_CLIENTS, keepalive_client, &c);
    pthread_join(t, NULL);
    /* It drained and exited by itself, cleanly. */
    assert_int_equal(th_stop(a), 0);
    int committed = (int)th_orders_of(c.session);
    print_message("sigterm: %d orders committed, %d 201s received, %d answers said close, "
                  "%d of %d connections ended by one\n",
                  committed, atomic_load(&c.created), atomic_load(&c.closes),
                  atomic_load(&c.ended_by_close), TERM_CLIENTS);
    assert_true(committed >= TERM_AFTER);
    /* Every order committed reached its client as a 201: none was cut off
     * with its connection. */
    assert_int_equal(atomic_load(&c.created), committed);
    /* Each kept-alive connection ended with an answer that said so, and
     * only then did its client find the listener closed. */
    assert_int_equal(atomic_load(&c.ended_by_refusal), TERM_CLIENTS);
    assert_int_equal(atomic_load(&c.ended_by_close), TERM_CLIENTS);
    /* The server's own log agrees: as many 201s as the clients received. */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "grep -c '\"status\":201' '%s'", a->log_path);
    FILE *f = popen(cmd, "r");
    int logged = -1;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &logged), 1);
    pclose(f);
    assert_int_equal(logged, committed + 1); /* + the session's 201 */
}

/* A build without the fault points (the release build), given
 * TICKETD_FAULT, says at start that it has none, and injects nothing: an
 * order armed to crash the process goes through. The fault build given the
 * same setting says it armed the point. */
static void test_release_build_says_it_has_no_fault_points(void **state)
{
    (void)state;
    char fault_bin[512];
    const char *env[] = {"TICKETD_FAULT=order.after_redis:crash", NULL};
    snprintf(fault_bin, sizeof fault_bin, "%s", getenv("TICKETD_BIN") ? getenv("TICKETD_BIN") : "");
    setenv("TICKETD_BIN", "build/release/ticketd", 1);
    struct th_server *rel = th_serve(0, env);
    if (fault_bin[0] != '\0')
        setenv("TICKETD_BIN", fault_bin, 1);
    else
        unsetenv("TICKETD_BIN");
    assert_true(th_log_contains(rel, "FAULT POINTS NOT COMPILED IN: "
                                     "TICKETD_FAULT=order.after_redis:crash is ignored"));
    int64_t session = th_session(rel, 5, 1000);
    char token[96];
    th_order_token(rel, 7001, token);
    struct th_resp r = th_order(rel, 7001, "no-fault-points", token, session, 1);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    assert_int_equal(th_stock_of(session), 4);

    struct th_server *faulty = th_serve(1, env);
    assert_true(th_log_contains(faulty, "fault point order.after_redis armed (crash)"));
    assert_false(th_log_contains(faulty, "FAULT POINTS NOT COMPILED IN"));
}

/* Each test runs between these fixtures. */
#define T(f) cmocka_unit_test_setup_teardown(f, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_redis_flushed_after_201),
        T(test_redis_restarted_after_201),
        T(test_flushed_token_buys_nothing_more),
        T(test_flushed_token_that_bought_nothing),
        T(test_record_expired),
        T(test_killed_after_commit),
        T(test_dead_process_marker_taken_over),
        T(test_commit_lost),
        T(test_lookup_after_refusal_meets_a_conflict),
        T(test_answer_lost_then_sent_again_is_created),
        T(test_redis_stalls_at_the_token),
        T(test_mysql_down_then_retries_succeed),
        T(test_redis_paused_then_back_for_every_thread),
        T(test_slower_than_the_ttls),
        T(test_fibers_share_the_database_connections),
        T(test_a_held_request_holds_up_no_other_connection),
        T(test_client_gone_while_suspended),
        T(test_sigterm_under_keepalive_load),
        T(test_release_build_says_it_has_no_fault_points),
    };
    /* TICKETD_TEST_CASE=<glob>: only the cases it matches (make
     * test-repeat runs one case many times). */
    const char *only = getenv("TICKETD_TEST_CASE");
    if (only != NULL && only[0] != '\0')
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
