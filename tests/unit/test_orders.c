/* test_orders.c - the decisions of orders_create(), layer by layer, against
 * fake ports (fakes.h): which defence answers, which port calls it makes,
 * and what it gives back when a request fails after claiming something. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"

#include "app.h"
#include "config.h"
#include "defenses.h"
#include "err.h"
#include "idem.h"
#include "log.h"
#include "metrics.h"
#include "orders.h"
#include "ordertoken.h"
#include "respcache.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USER    42
#define KEY     "key-1"
#define SESSION 7
#define QTY     2
#define TOKEN   "tok-abc"

static struct config cfg;
static struct app app;
static int64_t metrics_before[M_COUNT];

/* This process's id; redis_has_marker's markers name another process. */
#define OUR_INSTANCE   "fedcba9876543210"
#define OTHER_INSTANCE "0123456789abcdef"

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    cfg.tx_retries = 2;
    app = (struct app){.cfg = &cfg, .defenses = DEFENSES_ALL, .respcache = respcache_new(64)};
    snprintf(app.instance, sizeof app.instance, "%s", OUR_INSTANCE);
    fakes_reset();
    for (int m = 0; m < M_COUNT; m++)
        metrics_before[m] = metrics_get(m);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    respcache_free(app.respcache);
    app.respcache = NULL;
    config_cleanup(&cfg);
    return 0;
}

/* Between the cases of one table: forget all calls and cached responses. */
static void fresh(void)
{
    fakes_reset();
    respcache_free(app.respcache);
    app.respcache = respcache_new(64);
}

static int64_t delta(enum metric m)
{
    return metrics_get(m) - metrics_before[m];
}

/* The API layer's renderer, reduced to what the tests look at. */
static char *render(const struct order *o, size_t *len)
{
    char *s = xasprintf("{\"order_no\":\"%s\",\"session_id\":%lld,\"quantity\":%lld}", o->order_no,
                        (long long)o->session_id, (long long)o->quantity);
    *len = strlen(s);
    return s;
}

static struct order_request request(void)
{
    return (struct order_request){
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
}

static void fingerprint(int64_t session, int64_t qty, char *out)
{
    idem_fingerprint_order(session, qty, out);
}

/* Puts a completed record for (session, qty) under the key, as another
 * request that finished earlier would have left it in Redis. */
static void redis_has_done(int64_t session, int64_t qty, int status, const char *body)
{
    char fp[IDEM_FP_LEN + 1];
    fingerprint(session, qty, fp);
    char *d = idem_done(fp, status, body, strlen(body));
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", d);
    free(d);
}

/* The marker of a request still in flight with (session, qty). */
static void redis_has_marker(int64_t session, int64_t qty)
{
    char fp[IDEM_FP_LEN + 1];
    fingerprint(session, qty, fp);
    char *m = idem_marker(fp, OTHER_INSTANCE "0123456789abcdef");
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", m);
    free(m);
}

static void cache_locally(int64_t session, int64_t qty, const char *body)
{
    char fp[IDEM_FP_LEN + 1];
    fingerprint(session, qty, fp);
    respcache_put(app.respcache, USER, KEY, fp, 201, body, strlen(body), mono_ms(),
                  mono_ms() + 60000);
}

static void run(const struct order_request *rq, struct order_result *res)
{
    orders_create(&app, rq, render, res);
}

static void assert_calls(const char *want)
{
    if (strcmp(fake_calls, want) != 0)
        fail_msg("port calls\n   were: %s\n   want: %s", fake_calls, want);
}

static bool locally_cached(char *body_out, size_t cap)
{
    struct cached_response r;
    bool hit = respcache_get(app.respcache, USER, KEY, mono_ms(), &r);
    if (hit && body_out != NULL)
        snprintf(body_out, cap, "%s", r.body);
    free(r.body);
    return hit;
}

#define FULL_PATH "order_begin order_create order_complete"
/* The path when the key step found a record that a switched-off layer
 * would have answered (or garbage): the lock is then taken on its own. */
#define LOCK_APART "order_begin lock_acquire token_take order_create order_complete"

/* --- success ------------------------------------------------------------ */

static void test_success(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    char fp[IDEM_FP_LEN + 1];
    fingerprint(SESSION, QTY, fp);
    run(&rq, &res);

    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_null(res.layer);
    assert_int_equal(res.status, 201);
    assert_calls(FULL_PATH);

    /* Layers 1-2: one SET NX under the user's key, our marker inside. */
    assert_int_equal(fake_cache.idem_begin.user_id, USER);
    assert_string_equal(fake_cache.idem_begin.key, KEY);
    assert_int_equal(fake_cache.idem_begin.ttl_ms, cfg.inflight_ttl_ms);
    struct idem_record rec;
    const char *marker = fake_cache.idem_begin.marker;
    assert_true(idem_parse(marker, strlen(marker), &rec));
    assert_false(rec.done);
    assert_string_equal(rec.fingerprint, fp);

    /* Layer 3: the lock of this user and session, owned by the same random
     * owner as the marker, so each is released only by this request. */
    assert_int_equal(fake_cache.lock.user_id, USER);
    assert_int_equal(fake_cache.lock.session_id, SESSION);
    assert_int_equal(fake_cache.lock.ttl_ms, cfg.lock_ttl_ms);
    assert_int_equal(strlen(fake_cache.lock.owner), IDEM_OWNER_LEN);
    assert_string_equal(marker + strlen(marker) - IDEM_OWNER_LEN, fake_cache.lock.owner);

    /* Layer 4: the token, spent as this user. */
    assert_int_equal(fake_cache.token_take.user_id, USER);
    assert_string_equal(fake_cache.token_take.token, TOKEN);
    /* One round trip to Redis before the database: the token is spent in
     * the key's own script. */
    assert_true(fake_cache.token_take.in_begin);

    /* Layers 5-6: one draft, with the key as request_id and the real
     * (not the demo's) database defences. */
    assert_int_equal(fake_store.create_calls, 1);
    assert_int_equal(fake_store.draft.user_id, USER);
    assert_int_equal(fake_store.draft.session_id, SESSION);
    assert_int_equal(fake_store.draft.quantity, QTY);
    assert_string_equal(fake_store.draft.request_id, KEY);
    assert_false(fake_store.draft.read_then_write);
    assert_false(fake_store.draft.check_then_insert);

    /* The body is the renderer's, of the order the store made. */
    char want[128];
    snprintf(want, sizeof want, "{\"order_no\":\"%s\",\"session_id\":7,\"quantity\":2}",
             fake_store.order_nos[0]);
    assert_non_null(res.body);
    assert_string_equal(res.body, want);
    assert_int_equal(res.body_len, strlen(want));

    /* Step 7: the marker becomes the completed record and the lock goes,
     * in one call, both only if still ours. */
    assert_int_equal(fake_cache.complete.calls, 1);
    assert_int_equal(fake_cache.complete.user_id, USER);
    assert_string_equal(fake_cache.complete.key, KEY);
    assert_false(fake_cache.complete.marker.null);
    assert_string_equal(fake_cache.complete.marker.s, marker);
    assert_false(fake_cache.complete.owner.null);
    assert_string_equal(fake_cache.complete.owner.s, fake_cache.lock.owner);
    assert_int_equal(fake_cache.complete.session_id, SESSION);
    assert_int_equal(fake_cache.complete.ttl_s, cfg.idem_ttl_s);
    const char *record = fake_cache.complete.record;
    assert_true(idem_parse(record, strlen(record), &rec));
    assert_true(rec.done);
    assert_string_equal(rec.fingerprint, fp);
    assert_int_equal(rec.status, 201);
    assert_int_equal(rec.body_len, res.body_len);
    assert_memory_equal(rec.body, res.body, res.body_len);
    assert_int_equal(fake_cache.release.calls, 0);

    /* And the in-process copy for the next retry. */
    char cached[256];
    assert_true(locally_cached(cached, sizeof cached));
    assert_string_equal(cached, res.body);

    assert_int_equal(delta(M_ORDERS_CREATED), 1);
    assert_int_equal(delta(M_REDIS_DEGRADED), 0);
    order_result_cleanup(&res);
}

static void test_order_numbers(void **state)
{
    (void)state;
    char a[ORDER_NO_LEN + 1], b[ORDER_NO_LEN + 1], day[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    snprintf(day, sizeof day, "%02d%02d%02d", tm.tm_year % 100, tm.tm_mon + 1, tm.tm_mday);
    orders_new_number(a);
    orders_new_number(b);
    assert_int_equal(strlen(a), ORDER_NO_LEN);
    assert_int_equal(strspn(a, "0123456789"), ORDER_NO_LEN);
    /* The UTC day first, then randomness: two numbers never collide. */
    assert_memory_equal(a, day, 6);
    assert_string_not_equal(a, b);
}

static void test_result_cleanup(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    run(&rq, &res);
    assert_non_null(res.body);
    order_result_cleanup(&res);
    assert_null(res.body);
    assert_int_equal(res.body_len, 0);
    assert_int_equal(res.status, 0);
    /* Twice is harmless. */
    order_result_cleanup(&res);
}

/* --- layer 1: the response cache ---------------------------------------- */

static void test_local_cache_replays(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    cache_locally(SESSION, QTY, "{\"cached\":1}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_REPLAYED);
    assert_string_equal(res.layer, "response-cache");
    assert_int_equal(res.status, 201);
    assert_string_equal(res.body, "{\"cached\":1}");
    assert_int_equal(res.body_len, strlen("{\"cached\":1}"));
    /* Answered before any port is asked, the token included. */
    assert_calls("");
    assert_int_equal(delta(M_DUP_RESPONSE_CACHE), 1);
    order_result_cleanup(&res);
}

static void test_local_cache_other_payload(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    cache_locally(SESSION, QTY + 1, "{\"cached\":1}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_KEY_REUSED);
    assert_string_equal(res.layer, "response-cache");
    assert_null(res.body);
    assert_calls("");
    assert_int_equal(delta(M_DUP_KEY_REUSED), 1);
    order_result_cleanup(&res);

    /* A different session is a different payload too. */
    fakes_reset();
    rq.session_id = SESSION + 1;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_KEY_REUSED);
    assert_calls("");
    order_result_cleanup(&res);
}

static void test_local_cache_is_per_user(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    cache_locally(SESSION, QTY, "{\"cached\":1}");
    rq.user_id = USER + 1;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls(FULL_PATH);
    order_result_cleanup(&res);
}

static void test_no_local_cache(void **state)
{
    (void)state;
    /* TICKETD_RESPCACHE_ENTRIES=0: the layer falls through to Redis. */
    respcache_free(app.respcache);
    app.respcache = NULL;
    struct order_request rq = request();
    struct order_result res;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls(FULL_PATH);
    order_result_cleanup(&res);
}

static void test_redis_record_done_replays(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    redis_has_done(SESSION, QTY, 201, "{\"from\":\"redis\"}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_REPLAYED);
    assert_string_equal(res.layer, "response-cache");
    assert_int_equal(res.status, 201);
    assert_string_equal(res.body, "{\"from\":\"redis\"}");
    /* No lock, no token, no database; and nothing released, since the
     * record under the key is not this request's. */
    assert_calls("order_begin");
    assert_int_equal(delta(M_DUP_RESPONSE_CACHE), 1);
    /* Copied in-process, so the next retry does not reach Redis. */
    char cached[64];
    assert_true(locally_cached(cached, sizeof cached));
    assert_string_equal(cached, "{\"from\":\"redis\"}");
    order_result_cleanup(&res);
}

static void test_redis_record_done_other_payload(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    redis_has_done(SESSION, QTY + 1, 201, "{\"from\":\"redis\"}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_KEY_REUSED);
    assert_string_equal(res.layer, "response-cache");
    assert_null(res.body);
    assert_calls("order_begin");
    assert_false(locally_cached(NULL, 0));
    assert_int_equal(delta(M_DUP_KEY_REUSED), 1);
    order_result_cleanup(&res);
}

/* --- layer 2: the in-flight key ----------------------------------------- */

static void test_in_flight_same_payload(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    redis_has_marker(SESSION, QTY);
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_IN_PROGRESS);
    assert_string_equal(res.layer, "inflight-key");
    assert_null(res.body);
    /* The marker belongs to the first request, whose process still beats:
     * deleting it here would let a third copy through while the first
     * still runs. The database was asked first: no order under the key, so
     * the refusal stands. */
    assert_calls("order_begin instance_alive order_find_request");
    assert_string_equal(fake_cache.alive_asked, OTHER_INSTANCE);
    assert_int_equal(delta(M_DUP_INFLIGHT_KEY), 1);
    order_result_cleanup(&res);
}

static void test_in_flight_of_a_dead_process_is_taken_over(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    redis_has_marker(SESSION, QTY);
    fake_cache.alive_rc = TD_ENOTFOUND; /* its process stopped beating */
    run(&rq, &res);
    /* Nobody will finish or release that marker: the retry takes it (and
     * its lock) over and goes on; the unique index has the last word. */
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls("order_begin instance_alive order_take_over token_take order_create "
                 "order_complete");
    assert_string_equal(fake_cache.take_over.stale, fake_cache.existing);
    assert_string_equal(fake_cache.take_over.stale_owner, OTHER_INSTANCE "0123456789abcdef");
    assert_false(fake_cache.take_over.owner.null);
    assert_memory_equal(fake_cache.take_over.owner.s, OUR_INSTANCE, IDEM_INSTANCE_LEN);
    assert_string_equal(fake_cache.complete.marker.s, fake_cache.take_over.marker);
    assert_string_equal(fake_cache.complete.owner.s, fake_cache.take_over.owner.s);
    assert_int_equal(delta(M_INFLIGHT_TAKEOVERS), 1);
    assert_int_equal(delta(M_DUP_INFLIGHT_KEY), 0);
    order_result_cleanup(&res);
}

static void test_take_over_outcomes(void **state)
{
    (void)state;
    static const struct {
        int alive_rc, take_over_rc;
        enum order_outcome want;
        const char *calls;
    } cases[] = {
        /* Redis cannot tell whether the process lives: the marker stands. */
        {TD_EUNAVAIL, TD_OK, ORDER_IN_PROGRESS, "order_begin instance_alive order_find_request"},
        /* Someone else completed, released or took the marker meanwhile. */
        {TD_ENOTFOUND, TD_EDUP, ORDER_IN_PROGRESS,
         "order_begin instance_alive order_take_over order_find_request"},
        /* Another key of the user holds the session now. */
        {TD_ENOTFOUND, TD_ECONFLICT, ORDER_DUPLICATE_SUBMISSION,
         "order_begin instance_alive order_take_over order_find_request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        redis_has_marker(SESSION, QTY);
        fake_cache.alive_rc = cases[i].alive_rc;
        fake_cache.take_over_rc = cases[i].take_over_rc;
        run(&rq, &res);
        assert_int_equal(res.outcome, cases[i].want);
        assert_calls(cases[i].calls);
        assert_int_equal(fake_store.create_calls, 0);
        order_result_cleanup(&res);
    }
}

static void test_own_marker_is_never_taken_over(void **state)
{
    (void)state;
    char fp[IDEM_FP_LEN + 1];
    struct order_request rq = request();
    struct order_result res;
    fingerprint(SESSION, QTY, fp);
    char *m = idem_marker(fp, OUR_INSTANCE "0123456789abcdef");
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", m);
    free(m);
    fake_cache.alive_rc = TD_ENOTFOUND;
    run(&rq, &res);
    /* This process is alive by definition: no question asked. */
    assert_int_equal(res.outcome, ORDER_IN_PROGRESS);
    assert_calls("order_begin order_find_request");
    order_result_cleanup(&res);
}

static void test_in_flight_other_payload(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    redis_has_marker(SESSION + 1, QTY);
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_KEY_REUSED);
    assert_string_equal(res.layer, "inflight-key");
    assert_calls("order_begin");
    assert_int_equal(delta(M_DUP_KEY_REUSED), 1);
    order_result_cleanup(&res);
}

static void test_malformed_record_is_ignored(void **state)
{
    (void)state;
    /* Garbage under the key is no answer: the database decides. */
    struct order_request rq = request();
    struct order_result res;
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "not a record");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls(LOCK_APART);
    /* The key holds someone else's text, not our marker: the completion
     * must not claim a marker it never set. */
    assert_true(fake_cache.complete.marker.null);
    assert_false(fake_cache.complete.owner.null);
    order_result_cleanup(&res);
}

/* --- layers 3 and 4: session lock and token ----------------------------- */

static void test_lock_taken(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_cache.lock_rc = TD_ECONFLICT;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_DUPLICATE_SUBMISSION);
    assert_string_equal(res.layer, "session-lock");
    assert_null(res.body);
    /* The script itself takes our marker back (so the key can be
     * retried); the lock is someone else's and stays: nothing to release. */
    assert_calls("order_begin order_find_request");
    assert_true(fake_cache.idem_begin.marker[0] != '\0');
    assert_int_equal(fake_cache.lock.calls, 1);
    assert_int_equal(fake_cache.release.calls, 0);
    assert_int_equal(delta(M_DUP_SESSION_LOCK), 1);
    order_result_cleanup(&res);
}

static void test_token_invalid(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_cache.token_rc = TD_ENOTFOUND;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_TOKEN_INVALID);
    assert_string_equal(res.layer, "token");
    assert_calls("order_begin order_find_request order_release");
    /* The token is spent on behalf of this key: its retries may bring it. */
    assert_string_equal(fake_cache.token_take.key, KEY);
    /* Both the marker and the lock are ours and both go. */
    assert_string_equal(fake_cache.release.marker.s, fake_cache.idem_begin.marker);
    assert_false(fake_cache.release.owner.null);
    assert_string_equal(fake_cache.release.owner.s, fake_cache.lock.owner);
    assert_int_equal(fake_cache.release.session_id, SESSION);
    assert_false(locally_cached(NULL, 0));
    assert_int_equal(delta(M_DUP_TOKEN), 1);
    order_result_cleanup(&res);
}

/* --- a Redis refusal is checked against the database ------------------- */

/* Redis may have forgotten (flushed, restarted, expired) or the instance
 * that placed the order died before storing its answer: every refusal that
 * only Redis vouches for is checked against the unique index first. */
static void redis_refuses(int which)
{
    switch (which) {
    case 0:
        redis_has_marker(SESSION, QTY);
        break;
    case 1:
        fake_cache.lock_rc = TD_ECONFLICT;
        break;
    default:
        fake_cache.token_rc = TD_ENOTFOUND;
        break;
    }
}

static void test_refusal_replays_the_order_in_the_database(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "order_begin instance_alive order_find_request",
        "order_begin order_find_request",
        /* Marker and lock are ours here: the answer is stored under them. */
        "order_begin order_find_request order_complete",
    };
    for (int i = 0; i < 3; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        redis_refuses(i);
        fake_store.find_rc = TD_OK;
        fake_store.found = (struct order){.order_no = "26113000000000000042",
                                          .user_id = USER,
                                          .session_id = SESSION,
                                          .request_id = KEY,
                                          .quantity = QTY};
        int64_t replays = metrics_get(M_DUP_UNIQUE_INDEX);
        run(&rq, &res);
        assert_int_equal(res.outcome, ORDER_REPLAYED);
        assert_string_equal(res.layer, "unique-index");
        assert_int_equal(res.status, 201);
        assert_string_equal(
            res.body, "{\"order_no\":\"26113000000000000042\",\"session_id\":7,\"quantity\":2}");
        assert_calls(paths[i]);
        assert_int_equal(fake_store.create_calls, 0);
        assert_int_equal(fake_cache.release.calls, 0);
        assert_true(locally_cached(NULL, 0));
        assert_int_equal(metrics_get(M_DUP_UNIQUE_INDEX) - replays, 1);
        order_result_cleanup(&res);
    }
}

static void test_refusal_database_says_other_payload(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        redis_refuses(i);
        fake_store.find_rc = TD_OK;
        fake_store.found = (struct order){.order_no = "26113000000000000042",
                                          .user_id = USER,
                                          .session_id = SESSION,
                                          .request_id = KEY,
                                          .quantity = QTY + 1};
        run(&rq, &res);
        assert_int_equal(res.outcome, ORDER_KEY_REUSED);
        assert_string_equal(res.layer, "unique-index");
        assert_false(locally_cached(NULL, 0));
        order_result_cleanup(&res);
    }
}

static void test_refusal_unchecked_is_unavailable(void **state)
{
    (void)state;
    /* Without the database the refusal cannot be checked: "try again" is
     * true, "your token is invalid" might not be. */
    for (int i = 0; i < 3; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        redis_refuses(i);
        fake_store.find_rc = TD_EUNAVAIL;
        run(&rq, &res);
        assert_int_equal(res.outcome, ORDER_UNAVAILABLE);
        assert_null(res.layer);
        assert_null(res.body);
        assert_int_equal(fake_store.create_calls, 0);
        order_result_cleanup(&res);
    }
}

static void test_token_redis_forgot(void **state)
{
    (void)state;
    char token[ORDERTOKEN_MAX + 1];
    struct order_request rq = request();
    struct order_result res;
    /* Issued by us to this user, unexpired, and unknown to Redis: Redis
     * lost it. The request goes on; the database decides. */
    ordertoken_new(cfg.jwt_secret, USER, wall_s() + 600, token);
    rq.token = token;
    fake_cache.token_rc = TD_ENOTFOUND;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls(FULL_PATH);
    assert_int_equal(delta(M_TOKEN_FORGOTTEN), 1);
    order_result_cleanup(&res);

    /* Known to Redis as spent by another key: refused, signature or not. */
    fresh();
    fake_cache.token_rc = TD_ECONFLICT;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_TOKEN_INVALID);
    order_result_cleanup(&res);

    /* Expired, or another user's: refused. */
    fresh();
    fake_cache.token_rc = TD_ENOTFOUND;
    ordertoken_new(cfg.jwt_secret, USER, wall_s() - 1, token);
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_TOKEN_INVALID);
    order_result_cleanup(&res);
    fresh();
    fake_cache.token_rc = TD_ENOTFOUND;
    ordertoken_new(cfg.jwt_secret, USER + 1, wall_s() + 600, token);
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_TOKEN_INVALID);
    order_result_cleanup(&res);
}

static void test_no_token_sent(void **state)
{
    (void)state;
    /* TICKETD_ORDER_TOKEN_REQUIRED=0: the API passes no token. */
    struct order_request rq = request();
    struct order_result res;
    rq.token = NULL;
    fake_cache.token_rc = TD_ENOTFOUND;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls("order_begin order_create order_complete");
    order_result_cleanup(&res);
}

/* --- layers 5 and 6: the database --------------------------------------- */

/* Every failure after the marker and the lock were taken gives both back,
 * answers without a body, and remembers nothing. */
static void assert_failed_and_released(const struct order_result *res, enum order_outcome want)
{
    if (res->outcome != want)
        fail_msg("outcome %d, want %d", res->outcome, want);
    assert_null(res->body);
    assert_int_equal(fake_cache.complete.calls, 0);
    assert_int_equal(fake_cache.release.calls, 1);
    assert_string_equal(fake_cache.release.marker.s, fake_cache.idem_begin.marker);
    assert_string_equal(fake_cache.release.owner.s, fake_cache.lock.owner);
    assert_false(locally_cached(NULL, 0));
}

static void test_sold_out(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_store.create_rc[0] = TD_ECONFLICT;
    fake_store.ncreate_rc = 1;
    run(&rq, &res);
    assert_failed_and_released(&res, ORDER_SOLD_OUT);
    assert_null(res.layer);
    /* The token was spent before the stock ran out, as the contract says. */
    assert_calls("order_begin order_create order_release");
    assert_int_equal(fake_store.create_calls, 1);
    assert_int_equal(delta(M_STOCK_CONFLICTS), 1);
    assert_int_equal(delta(M_ORDERS_CREATED), 0);
    order_result_cleanup(&res);
}

static void test_unknown_session(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_store.create_rc[0] = TD_ENOTFOUND;
    fake_store.ncreate_rc = 1;
    run(&rq, &res);
    assert_failed_and_released(&res, ORDER_SESSION_NOT_FOUND);
    assert_null(res.layer);
    assert_int_equal(fake_store.create_calls, 1);
    order_result_cleanup(&res);
}

static void test_unique_index_replays(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_store.create_rc[0] = TD_EDUP;
    fake_store.ncreate_rc = 1;
    fake_store.find_rc = TD_OK;
    fake_store.found = (struct order){.id = 9,
                                      .order_no = "26113000000000000042",
                                      .user_id = USER,
                                      .session_id = SESSION,
                                      .request_id = KEY,
                                      .quantity = QTY};
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_REPLAYED);
    assert_string_equal(res.layer, "unique-index");
    assert_int_equal(res.status, 201);
    /* The first order, not a new one. */
    assert_string_equal(res.body,
                        "{\"order_no\":\"26113000000000000042\",\"session_id\":7,\"quantity\":2}");
    assert_calls("order_begin order_create order_find_request "
                 "order_complete");
    assert_int_equal(fake_store.find.user_id, USER);
    assert_string_equal(fake_store.find.request_id, KEY);
    /* Remembered like a success, so the next retry stops at layer 1. */
    struct idem_record rec;
    const char *record = fake_cache.complete.record;
    assert_true(idem_parse(record, strlen(record), &rec));
    assert_true(rec.done);
    assert_memory_equal(rec.body, res.body, res.body_len);
    char cached[128];
    assert_true(locally_cached(cached, sizeof cached));
    assert_string_equal(cached, res.body);
    assert_int_equal(delta(M_DUP_UNIQUE_INDEX), 1);
    assert_int_equal(delta(M_ORDERS_CREATED), 0);
    order_result_cleanup(&res);
}

static void test_unique_index_other_quantity(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_store.create_rc[0] = TD_EDUP;
    fake_store.ncreate_rc = 1;
    fake_store.find_rc = TD_OK;
    fake_store.found = (struct order){.order_no = "26113000000000000042",
                                      .user_id = USER,
                                      .session_id = SESSION,
                                      .request_id = KEY,
                                      .quantity = QTY + 1};
    run(&rq, &res);
    assert_failed_and_released(&res, ORDER_KEY_REUSED);
    assert_string_equal(res.layer, "unique-index");
    assert_int_equal(delta(M_DUP_KEY_REUSED), 1);
    order_result_cleanup(&res);
}

static void test_unique_index_other_session(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_store.create_rc[0] = TD_EDUP;
    fake_store.ncreate_rc = 1;
    fake_store.find_rc = TD_OK;
    fake_store.found = (struct order){.order_no = "26113000000000000042",
                                      .user_id = USER,
                                      .session_id = SESSION + 1,
                                      .request_id = KEY,
                                      .quantity = QTY};
    run(&rq, &res);
    assert_failed_and_released(&res, ORDER_KEY_REUSED);
    assert_string_equal(res.layer, "unique-index");
    order_result_cleanup(&res);
}

static void test_unique_index_lookup_fails(void **state)
{
    (void)state;
    static const struct {
        int find_rc;
        enum order_outcome want;
    } cases[] = {
        {TD_EUNAVAIL, ORDER_UNAVAILABLE},
        {TD_ENOTFOUND, ORDER_FAILED},
        {TD_EINTERNAL, ORDER_FAILED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        fake_store.create_rc[0] = TD_EDUP;
        fake_store.ncreate_rc = 1;
        fake_store.find_rc = cases[i].find_rc;
        run(&rq, &res);
        assert_failed_and_released(&res, cases[i].want);
        assert_int_equal(fake_store.find_calls, 1);
        order_result_cleanup(&res);
    }
}

static void test_deadlock_retried_then_created(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    fake_store.create_rc[0] = TD_ERETRY;
    fake_store.create_rc[1] = TD_OK;
    fake_store.ncreate_rc = 2;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(fake_store.create_calls, 2);
    /* Each attempt is a new transaction with a new order number. */
    assert_string_not_equal(fake_store.order_nos[0], fake_store.order_nos[1]);
    assert_non_null(strstr(res.body, fake_store.order_nos[1]));
    assert_int_equal(delta(M_TX_RETRIES_OTHER), 1); /* the fake notes no cause */
    ;
    assert_calls("order_begin order_create order_create order_complete");
    order_result_cleanup(&res);
}

static void test_deadlock_retries_are_bounded(void **state)
{
    (void)state;
    for (int retries = 0; retries <= 3; retries++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        int64_t before = metrics_tx_retries();
        cfg.tx_retries = retries;
        fake_store.create_rc[0] = TD_ERETRY;
        fake_store.ncreate_rc = 1;
        run(&rq, &res);
        /* The first try and tx_retries more, then a dependency error. */
        assert_int_equal(fake_store.create_calls, retries + 1);
        assert_int_equal(metrics_tx_retries() - before, retries);
        assert_failed_and_released(&res, ORDER_UNAVAILABLE);
        order_result_cleanup(&res);
    }
}

static void test_store_errors(void **state)
{
    (void)state;
    static const struct {
        int rc;
        enum order_outcome want;
    } cases[] = {
        {TD_EUNAVAIL, ORDER_UNAVAILABLE},
        {TD_EINTERNAL, ORDER_FAILED},
        {TD_EINVAL, ORDER_FAILED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        fake_store.create_rc[0] = cases[i].rc;
        fake_store.ncreate_rc = 1;
        run(&rq, &res);
        assert_failed_and_released(&res, cases[i].want);
        /* Only deadlocks are retried. */
        assert_int_equal(fake_store.create_calls, 1);
        order_result_cleanup(&res);
    }
}

/* --- Redis failing at each step ----------------------------------------- */

enum step { AT_IDEM_BEGIN, AT_LOCK, AT_TOKEN };

struct redis_case {
    enum step at;
    int rc;
    int policy;
    enum order_outcome want;
    const char *calls;
    bool marker_kept; /* the marker was set before Redis failed */
    bool lock_kept;   /* so was the lock */
};

static const struct redis_case redis_cases[] = {
    /* degrade: the rest of Redis (and the token) is skipped, the database
     * decides, and what was already claimed is finished normally. */
    /* The key step, the lock and the token run in one script: when it
     * fails, what it may have set is treated as ours and handed back
     * (compare-and-delete). */
    {AT_IDEM_BEGIN, TD_EUNAVAIL, REDIS_POLICY_DEGRADE, ORDER_CREATED,
     "order_begin order_create order_complete", true, true},
    {AT_IDEM_BEGIN, TD_EINTERNAL, REDIS_POLICY_DEGRADE, ORDER_CREATED,
     "order_begin order_create order_complete", true, true},
    {AT_LOCK, TD_EUNAVAIL, REDIS_POLICY_DEGRADE, ORDER_CREATED,
     "order_begin order_create order_complete", true, true},
    {AT_TOKEN, TD_EUNAVAIL, REDIS_POLICY_DEGRADE, ORDER_CREATED,
     "order_begin order_create order_complete", true, true},
    /* strict: 503, nothing written, what was claimed given back. */
    {AT_IDEM_BEGIN, TD_EUNAVAIL, REDIS_POLICY_STRICT, ORDER_UNAVAILABLE,
     "order_begin order_release", true, true},
    {AT_LOCK, TD_EUNAVAIL, REDIS_POLICY_STRICT, ORDER_UNAVAILABLE, "order_begin order_release",
     true, true},
    {AT_LOCK, TD_EINTERNAL, REDIS_POLICY_STRICT, ORDER_UNAVAILABLE, "order_begin order_release",
     true, true},
    {AT_TOKEN, TD_EUNAVAIL, REDIS_POLICY_STRICT, ORDER_UNAVAILABLE, "order_begin order_release",
     true, true},
};

static void test_redis_failures(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof redis_cases / sizeof redis_cases[0]; i++) {
        const struct redis_case *c = &redis_cases[i];
        struct order_request rq = request();
        struct order_result res;
        fresh();
        cfg.redis_policy = c->policy;
        int64_t degraded = metrics_get(M_REDIS_DEGRADED);
        if (c->at == AT_IDEM_BEGIN)
            fake_cache.idem_begin_rc = c->rc;
        else if (c->at == AT_LOCK)
            fake_cache.lock_rc = c->rc;
        else
            fake_cache.token_rc = c->rc;

        run(&rq, &res);
        if (res.outcome != c->want)
            fail_msg("case %zu: outcome %d, want %d", i, res.outcome, c->want);
        if (strcmp(fake_calls, c->calls) != 0)
            fail_msg("case %zu: calls '%s', want '%s'", i, fake_calls, c->calls);
        /* No defence answered: a dependency did. */
        assert_null(res.layer);

        /* What was claimed is finished (success) or released (failure),
         * each with exactly the claims this request made. */
        const struct fake_str *m = NULL, *o = NULL;
        if (fake_cache.complete.calls > 0) {
            m = &fake_cache.complete.marker;
            o = &fake_cache.complete.owner;
        } else if (fake_cache.release.calls > 0) {
            m = &fake_cache.release.marker;
            o = &fake_cache.release.owner;
        }
        if (m != NULL) {
            assert_int_equal(!m->null, c->marker_kept);
            assert_int_equal(!o->null, c->lock_kept);
        } else {
            assert_false(c->marker_kept || c->lock_kept);
        }

        if (c->want == ORDER_CREATED) {
            assert_int_equal(res.status, 201);
            assert_int_equal(metrics_get(M_REDIS_DEGRADED) - degraded, 1);
            /* The in-process cache does not depend on Redis. */
            assert_true(locally_cached(NULL, 0));
        } else {
            assert_null(res.body);
            assert_int_equal(fake_store.create_calls, 0);
            assert_int_equal(metrics_get(M_REDIS_DEGRADED) - degraded, 0);
            assert_false(locally_cached(NULL, 0));
        }
        order_result_cleanup(&res);
    }
}

static void test_redis_fails_at_the_end(void **state)
{
    (void)state;
    /* The order is committed: Redis failing to record it changes nothing
     * in the answer (the unique index replays it on a retry). */
    struct order_request rq = request();
    struct order_result res;
    fake_cache.complete_rc = TD_EUNAVAIL;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(res.status, 201);
    order_result_cleanup(&res);

    /* Likewise a failed release does not hide the real answer. */
    fresh();
    fake_cache.release_rc = TD_EUNAVAIL;
    fake_store.create_rc[0] = TD_ECONFLICT;
    fake_store.ncreate_rc = 1;
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_SOLD_OUT);
    order_result_cleanup(&res);
}

/* --- each defence switched off (TICKETD_DEFENSES, demo only) ------------ */

static void test_response_cache_off(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    app.defenses = DEFENSES_ALL & ~DEFENSE_RESPONSE_CACHE;
    /* Neither the in-process copy nor a completed record in Redis answers. */
    cache_locally(SESSION, QTY, "{\"cached\":1}");
    redis_has_done(SESSION, QTY, 201, "{\"from\":\"redis\"}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls(LOCK_APART);
    order_result_cleanup(&res);

    /* And a success is not stored in-process. */
    fresh();
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(respcache_size(app.respcache), 0);
    order_result_cleanup(&res);
}

static void test_inflight_key_off(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    app.defenses = DEFENSES_ALL & ~DEFENSE_INFLIGHT_KEY;
    /* The lookup still runs for the response cache, but sets no marker,
     * so a concurrent copy is not stopped by one. */
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls("order_begin order_create order_complete");
    assert_string_equal(fake_cache.idem_begin.marker, "");
    assert_true(fake_cache.complete.marker.null);
    order_result_cleanup(&res);

    /* Another request's marker does not stop this one... */
    fresh();
    redis_has_marker(SESSION, QTY);
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls(LOCK_APART);
    order_result_cleanup(&res);

    /* ...but a completed record is still replayed. */
    fresh();
    redis_has_done(SESSION, QTY, 201, "{\"from\":\"redis\"}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_REPLAYED);
    assert_string_equal(res.layer, "response-cache");
    order_result_cleanup(&res);
}

static void test_both_key_layers_off(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    app.defenses = DEFENSES_ALL & ~(DEFENSE_RESPONSE_CACHE | DEFENSE_INFLIGHT_KEY);
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls("lock_acquire token_take order_create order_complete");
    assert_true(fake_cache.complete.marker.null);
    order_result_cleanup(&res);
}

static void test_session_lock_off(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    app.defenses = DEFENSES_ALL & ~DEFENSE_SESSION_LOCK;
    fake_cache.lock_rc = TD_ECONFLICT; /* would refuse, if asked */
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls("order_begin order_create order_complete");
    assert_true(fake_cache.complete.owner.null);
    order_result_cleanup(&res);
}

static void test_token_off(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    app.defenses = DEFENSES_ALL & ~DEFENSE_TOKEN;
    fake_cache.token_rc = TD_ENOTFOUND; /* would refuse, if asked */
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_calls("order_begin order_create order_complete");
    order_result_cleanup(&res);
}

static void test_database_defences_off(void **state)
{
    (void)state;
    static const struct {
        unsigned off;
        bool read_then_write, check_then_insert;
    } cases[] = {
        {DEFENSE_STOCK_CAS, true, false},
        {DEFENSE_UNIQUE_INDEX, false, true},
        {DEFENSE_STOCK_CAS | DEFENSE_UNIQUE_INDEX, true, true},
        /* The others are not the order transaction's business. */
        {DEFENSE_CALLBACK_DEDUP | DEFENSE_CONSUMER_DEDUP, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct order_request rq = request();
        struct order_result res;
        fresh();
        app.defenses = DEFENSES_ALL & ~cases[i].off;
        run(&rq, &res);
        assert_int_equal(res.outcome, ORDER_CREATED);
        assert_calls(FULL_PATH);
        assert_int_equal(fake_store.draft.read_then_write, cases[i].read_then_write);
        assert_int_equal(fake_store.draft.check_then_insert, cases[i].check_then_insert);
        order_result_cleanup(&res);
    }
}

static void test_all_off(void **state)
{
    (void)state;
    struct order_request rq = request();
    struct order_result res;
    app.defenses = 0;
    cache_locally(SESSION, QTY, "{\"cached\":1}");
    run(&rq, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    /* Nothing but the (unprotected) transaction. */
    assert_calls("order_create");
    assert_true(fake_store.draft.read_then_write);
    assert_true(fake_store.draft.check_then_insert);
    order_result_cleanup(&res);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    /* The malformed-record test logs a warning by design. */
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        T(test_success),
        T(test_order_numbers),
        T(test_result_cleanup),
        T(test_local_cache_replays),
        T(test_local_cache_other_payload),
        T(test_local_cache_is_per_user),
        T(test_no_local_cache),
        T(test_redis_record_done_replays),
        T(test_redis_record_done_other_payload),
        T(test_in_flight_same_payload),
        T(test_in_flight_of_a_dead_process_is_taken_over),
        T(test_take_over_outcomes),
        T(test_own_marker_is_never_taken_over),
        T(test_in_flight_other_payload),
        T(test_malformed_record_is_ignored),
        T(test_lock_taken),
        T(test_token_invalid),
        T(test_refusal_replays_the_order_in_the_database),
        T(test_refusal_database_says_other_payload),
        T(test_refusal_unchecked_is_unavailable),
        T(test_token_redis_forgot),
        T(test_no_token_sent),
        T(test_sold_out),
        T(test_unknown_session),
        T(test_unique_index_replays),
        T(test_unique_index_other_quantity),
        T(test_unique_index_other_session),
        T(test_unique_index_lookup_fails),
        T(test_deadlock_retried_then_created),
        T(test_deadlock_retries_are_bounded),
        T(test_store_errors),
        T(test_redis_failures),
        T(test_redis_fails_at_the_end),
        T(test_response_cache_off),
        T(test_inflight_key_off),
        T(test_both_key_layers_off),
        T(test_session_lock_off),
        T(test_token_off),
        T(test_database_defences_off),
        T(test_all_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
