/* Prefer: wait (RFC 7240) on POST /orders and POST /orders/batch: a copy
 * that meets its key in flight waits for the first copy instead of a 409.
 * Two real ticketd processes, the real Redis and MariaDB. The first copy is
 * held at the fault point order.after_redis (its marker set, nothing
 * written) until the waiters are seen waiting in /metrics: every step is
 * tied to progress, none to the clock. The figures printed (how long after
 * the first copy's answer each waiter got its own) are for the reader,
 * never judged. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define STORM_COPIES 16
#define WAIT_USER    7100

static long long metric0(const struct th_server *s, const char *sample)
{
    long long v = th_metric(s, sample);
    return v < 0 ? 0 : v;
}

/* Bounded: until the two servers count want waits between them. */
static void wait_waiting(const struct th_server *a, const struct th_server *b, long long want)
{
    long long n = 0;
    for (int i = 0; i < 1500; i++) {
        n = metric0(a, "ticketd_key_waits_total") + (b ? metric0(b, "ticketd_key_waits_total") : 0);
        if (n >= want)
            break;
        usleep(20 * 1000);
    }
    assert_int_equal(n, want);
}

/* POST /orders with a Prefer header (NULL: none). */
static struct th_resp order_prefer(const struct th_server *s, const char *key, int64_t session,
                                   int64_t quantity, const char *prefer)
{
    char url[128], body[128], kh[128], ph[160];
    snprintf(url, sizeof url, "%s/api/v1/orders", s->url);
    snprintf(body, sizeof body, "{\"session_id\":%lld,\"quantity\":%lld}", (long long)session,
             (long long)quantity);
    snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
    snprintf(ph, sizeof ph, "Prefer: %s", prefer != NULL ? prefer : "");
    const char *h[] = {th_auth_header(WAIT_USER, false), kh, prefer != NULL ? ph : NULL, NULL};
    return th_request("POST", url, h, body);
}

static void order_no_of(const struct th_resp *r, char *out)
{
    if (r->status != 201)
        fail_msg("expected 201, got %ld %s", r->status, r->body);
    json_t *j = th_json(r);
    snprintf(out, 32, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
}

static void expect_header(const struct th_resp *r, const char *name, const char *want)
{
    char v[64];
    if (th_header(r, name, v, sizeof v) == NULL)
        fail_msg("no %s on %ld %s", name, r->status, r->body);
    assert_string_equal(v, want);
}

static void expect_no_header(const struct th_resp *r, const char *name)
{
    char v[64];
    assert_null(th_header(r, name, v, sizeof v));
}

/* ---- a storm of copies ------------------------------------------------ */

/* The first copy and its copies, each answer with the time it came. */
struct storm {
    const struct th_server *a, *b;
    int64_t session;
    const char *key;
    int copies; /* besides the first */
    struct th_resp first;
    int64_t first_ms;
    struct th_resp resp[STORM_COPIES];
    int64_t at_ms[STORM_COPIES];
};

static void *first_copy(void *p)
{
    struct storm *st = p;
    st->first = order_prefer(st->a, st->key, st->session, 1, "wait=10");
    st->first_ms = th_now_ms();
    return NULL;
}

/* Copy i, on a or b in turn. */
static void storm_copy(int i, void *p)
{
    struct storm *st = p;
    st->resp[i] = order_prefer(i % 2 ? st->b : st->a, st->key, st->session, 1, "wait=10");
    st->at_ms[i] = th_now_ms();
}

static void *storm_copies(void *p)
{
    struct storm *st = p;
    th_parallel(st->copies, storm_copy, st);
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* How long after the first copy's answer the waiters got theirs. */
static void print_latency(const char *what, const struct storm *st)
{
    int64_t d[STORM_COPIES];
    for (int i = 0; i < st->copies; i++)
        d[i] = st->at_ms[i] - st->first_ms;
    qsort(d, (size_t)st->copies, sizeof d[0], cmp_i64);
    printf("wait latency (%s, %d waiters): min %lld ms, median %lld ms, max %lld ms after the "
           "first copy's answer\n",
           what, st->copies, (long long)d[0], (long long)d[st->copies / 2],
           (long long)d[st->copies - 1]);
}

/* The environment of the instance whose first copy is held at
 * order.after_redis until hold's release (marker set, nothing written). */
#define HELD_FIRST_COPY(hold)                                                                      \
    "TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_INFLIGHT_TTL_MS=60000",                             \
        "TICKETD_FAULT=order.after_redis:hold:300000:1", (hold).env, NULL

/* Sends st's first copy to st->a on thread t, and waits until it is held. */
static void hold_first_copy(struct storm *st, pthread_t *t)
{
    pthread_create(t, NULL, first_copy, st);
    th_wait_held(st->a, "order.after_redis");
}

/* Lets st's held first copy go on: it gets its order (201), the only one
 * of its session. */
static void let_first_copy_go(struct storm *st, const struct th_release *hold, pthread_t t)
{
    char no[32];
    th_release_now(hold);
    pthread_join(t, NULL);
    th_release_done(hold);
    order_no_of(&st->first, no);
    assert_int_equal(th_orders_of(st->session), 1);
}

/* The first copy held; the copies sent, and seen waiting on both servers;
 * then the first copy let go. Every copy gets the one order. */
static void run_storm(struct storm *st, const struct th_release *hold)
{
    pthread_t t1, t2;
    hold_first_copy(st, &t1);
    pthread_create(&t2, NULL, storm_copies, st);
    wait_waiting(st->a, st->b, st->copies);
    th_release_now(hold);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    th_release_done(hold);

    char first_no[32], no[32];
    order_no_of(&st->first, first_no);
    expect_header(&st->first, "Preference-Applied", "wait=10");
    for (int i = 0; i < st->copies; i++) {
        order_no_of(&st->resp[i], no); /* 201: not one 409 */
        assert_string_equal(no, first_no);
        expect_header(&st->resp[i], "Idempotent-Replayed", "true");
        expect_header(&st->resp[i], "Preference-Applied", "wait=10");
        th_expect_layer(&st->resp[i], "response-cache");
    }
    assert_int_equal(th_orders_of(st->session), 1);
    assert_int_equal(metric0(st->a, "ticketd_key_wait_outcomes_total{outcome=\"answered\"}") +
                         metric0(st->b, "ticketd_key_wait_outcomes_total{outcome=\"answered\"}"),
                     st->copies);
    assert_int_equal(metric0(st->a, "ticketd_key_wait_outcomes_total{outcome=\"ran_out\"}") +
                         metric0(st->b, "ticketd_key_wait_outcomes_total{outcome=\"ran_out\"}"),
                     0);
}

static void storm_free(struct storm *st)
{
    th_resp_free(&st->first);
    for (int i = 0; i < st->copies; i++)
        th_resp_free(&st->resp[i]);
}

/* 16 copies with Prefer: wait across two instances (the first among them):
 * all get the one order, none a 409. Instance a has one loop and one
 * database connection: the copies waiting there hold neither, or the first
 * copy, let go on that same loop, could never write its order. */
static void test_storm_of_waiting_copies(void **state)
{
    (void)state;
    static struct storm st;
    struct th_release hold;
    memset(&st, 0, sizeof st);
    th_release_init(&hold, "wait-storm");
    const char *env_a[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0",
                           "TICKETD_LOOPS=1",
                           "TICKETD_DB_CONNS=1",
                           "TICKETD_INFLIGHT_TTL_MS=60000",
                           "TICKETD_FAULT=order.after_redis:hold:300000:1",
                           hold.env,
                           NULL};
    const char *env_b[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", NULL};
    st.a = th_serve(0, env_a);
    st.b = th_serve(1, env_b);
    st.session = th_session(st.b, 10, 1000);
    st.key = "storm-1";
    st.copies = STORM_COPIES - 1;
    run_storm(&st, &hold);
    print_latency("announced", &st);
    storm_free(&st);
}

/* Every announcement lost (the listeners hear nothing): the waiters learn
 * of the first copy's end by looking again, and still all get the order. */
static void test_lost_announcements_fall_back_to_looking(void **state)
{
    (void)state;
    static struct storm st;
    struct th_release hold;
    memset(&st, 0, sizeof st);
    th_release_init(&hold, "wait-deaf");
    const char *env_a[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_INFLIGHT_TTL_MS=60000",
                           "TICKETD_FAULT=order.after_redis:hold:300000:1,keywait.deaf:fail",
                           hold.env, NULL};
    const char *env_b[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_FAULT=keywait.deaf:fail",
                           NULL};
    st.a = th_serve(2, env_a);
    st.b = th_serve(3, env_b);
    assert_true(th_log_contains(st.a, "fault point keywait.deaf: failing"));
    assert_true(th_log_contains(st.b, "fault point keywait.deaf: failing"));
    st.session = th_session(st.b, 10, 1000);
    st.key = "deaf-1";
    st.copies = 8;
    run_storm(&st, &hold);
    print_latency("announcements lost, polled", &st);
    storm_free(&st);
}

/* ---- a wait that runs out, and Prefer headers that ask for none ---------- */

static void test_wait_runs_out_and_malformed_is_ignored(void **state)
{
    (void)state;
    static struct storm st;
    struct th_release hold;
    memset(&st, 0, sizeof st);
    th_release_init(&hold, "wait-out");
    const char *env_a[] = {HELD_FIRST_COPY(hold)};
    const char *env_b[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_MAX_WAIT_S=1", NULL};
    st.a = th_serve(4, env_a);
    st.b = th_serve(5, env_b);
    st.session = th_session(st.b, 10, 1000);
    st.key = "out-1";
    pthread_t t;
    hold_first_copy(&st, &t);

    /* The first copy is held until these are answered: wait=30 is cut to
     * TICKETD_MAX_WAIT_S, and that second passes first. */
    struct th_resp r =
        order_prefer(st.b, st.key, st.session, 1, "respond-async, WAIT=\"30\"; foo=bar");
    th_expect_problem(&r, 409, "REQUEST_IN_PROGRESS");
    th_expect_layer(&r, "inflight-key");
    expect_header(&r, "Preference-Applied", "wait=1");
    expect_header(&r, "Retry-After", "1");
    th_resp_free(&r);
    assert_int_equal(metric0(st.b, "ticketd_key_waits_total"), 1);
    assert_int_equal(metric0(st.b, "ticketd_key_wait_outcomes_total{outcome=\"ran_out\"}"), 1);

    /* Malformed or 0: ignored, a 409 at once, no Preference-Applied. */
    static const char *const ignored[] = {"wait=0",  "wait=abc", "wait=",    "wait",
                                          "wait=-1", "wait=1x",  "wait=\"1", "handling=strict"};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        r = order_prefer(st.b, st.key, st.session, 1, ignored[i]);
        th_expect_problem(&r, 409, "REQUEST_IN_PROGRESS");
        expect_no_header(&r, "Preference-Applied");
        th_resp_free(&r);
    }
    assert_int_equal(metric0(st.b, "ticketd_key_waits_total"), 1);

    /* A valid wait on a request refused before its key: still said. */
    r = order_prefer(st.b, st.key, st.session, 0, "wait=5");
    th_expect_problem(&r, 400, "VALIDATION_FAILED");
    expect_header(&r, "Preference-Applied", "wait=1");
    th_resp_free(&r);

    let_first_copy_go(&st, &hold, t);
    th_resp_free(&st.first);
}

/* ---- an end gives back only what was its own ----------------------------- */

/* The completion writes before it compares (complete_lua: SET ... GET,
 * GETDEL): while the first copy is held, its marker is replaced by another
 * request's and its session lock by another owner's, as when both outlived
 * it and were taken. Its order is still placed and answered, and what was
 * not its own is back in Redis as it stood, with a TTL, after its end. */
static void test_an_end_gives_back_only_its_own(void **state)
{
    (void)state;
    static struct storm st = {.key = "own-1"};
    struct th_release hold;
    pthread_t t;
    th_release_init(&hold, "wait-own");
    const char *env[] = {HELD_FIRST_COPY(hold)};
    st.a = th_serve(6, env);
    st.session = th_session(st.a, 10, 1000);
    hold_first_copy(&st, &t);

    char *mine = th_redis_text("GET idem:{%d}:%s", WAIT_USER, st.key);
    assert_non_null(mine);
    assert_int_equal(strlen(mine), 2 + 64 + 1 + 32); /* "P|<fp>|<owner>" */
    assert_int_equal(mine[0], 'P');
    char other[128];
    snprintf(other, sizeof other, "%.67s%s", mine, "00000000000000000123456789abcdef");
    assert_string_not_equal(other, mine);
    assert_int_equal(th_redis_int("EXISTS lock:order:{%d}:%lld", WAIT_USER, (long long)st.session),
                     1);
    free(th_redis_text("SET idem:{%d}:%s %s PX 60000", WAIT_USER, st.key, other));
    free(th_redis_text("SET lock:order:{%d}:%lld someone-else PX 60000", WAIT_USER,
                       (long long)st.session));

    let_first_copy_go(&st, &hold, t);
    char *idem = th_redis_text("GET idem:{%d}:%s", WAIT_USER, st.key);
    char *lock = th_redis_text("GET lock:order:{%d}:%lld", WAIT_USER, (long long)st.session);
    assert_non_null(idem);
    assert_non_null(lock);
    assert_string_equal(idem, other);
    assert_string_equal(lock, "someone-else");
    assert_true(th_redis_int("PTTL idem:{%d}:%s", WAIT_USER, st.key) > 0);
    assert_true(th_redis_int("PTTL lock:order:{%d}:%lld", WAIT_USER, (long long)st.session) > 0);
    free(idem);
    free(lock);
    free(mine);
    th_resp_free(&st.first);
}

/* ---- a draining instance stops its waiters ------------------------------- */

struct drained {
    const struct th_server *b;
    int64_t session;
    struct th_resp resp;
};

static void *drained_copy(void *p)
{
    struct drained *d = p;
    d->resp = order_prefer(d->b, "drain-1", d->session, 1, "wait=300");
    return NULL;
}

/* SIGTERM on the instance where a copy waits (up to 300 s, far past the
 * harness's bound on a stop): the copy gets its 409 at its next look (its
 * client retries elsewhere) and the instance stops cleanly, rather than
 * holding the answer until the drain's timeout. */
static void test_drain_stops_the_waiters(void **state)
{
    (void)state;
    static struct storm st;
    static struct drained d;
    struct th_release hold;
    memset(&st, 0, sizeof st);
    memset(&d, 0, sizeof d);
    th_release_init(&hold, "wait-drain");
    const char *env_a[] = {HELD_FIRST_COPY(hold)};
    const char *env_b[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_MAX_WAIT_S=300",
                           "TICKETD_DRAIN_TIMEOUT_S=300", NULL};
    st.a = th_serve(10, env_a);
    struct th_server *b = th_serve(11, env_b);
    st.session = th_session(st.a, 10, 1000);
    st.key = "drain-1";
    d.b = b;
    d.session = st.session;
    pthread_t t1, t2;
    hold_first_copy(&st, &t1);
    pthread_create(&t2, NULL, drained_copy, &d);
    wait_waiting(b, NULL, 1);
    assert_int_equal(th_stop(b), 0);
    pthread_join(t2, NULL);
    th_expect_problem(&d.resp, 409, "REQUEST_IN_PROGRESS");
    expect_header(&d.resp, "Preference-Applied", "wait=300");
    th_release_now(&hold);
    pthread_join(t1, NULL);
    th_release_done(&hold);
    char no[32];
    order_no_of(&st.first, no);
    assert_int_equal(th_orders_of(st.session), 1);
    th_resp_free(&st.first);
    th_resp_free(&d.resp);
}

/* ---- the first copy fails: a waiter runs --------------------------------- */

struct fails {
    const struct th_server *a, *b;
    int64_t session;
    struct th_resp first;
    atomic_bool first_done;
    struct th_resp resp[4];
};

static void *failing_first(void *p)
{
    struct fails *f = p;
    f->first = order_prefer(f->a, "fails-1", f->session, 2, "wait=10");
    atomic_store(&f->first_done, true);
    return NULL;
}

static void failing_copy(int i, void *p)
{
    struct fails *f = p;
    f->resp[i] = order_prefer(f->b, "fails-1", f->session, 2, "wait=10");
}

static void *failing_copies(void *p)
{
    th_parallel(4, failing_copy, p);
    return NULL;
}

/* The first copy is sold out (one seat, two asked): not remembered, its
 * key released. One waiter runs, as a retry would, and is held in turn on
 * b while the stock is raised; the other three wait for it and get its
 * order. */
static void test_first_copy_fails_a_waiter_runs(void **state)
{
    (void)state;
    static struct fails f;
    struct th_release ha, hb;
    memset(&f, 0, sizeof f);
    th_release_init(&ha, "wait-fails-a");
    th_release_init(&hb, "wait-fails-b");
    const char *env_a[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_INFLIGHT_TTL_MS=60000",
                           "TICKETD_FAULT=order.after_redis:hold:300000:1", ha.env, NULL};
    const char *env_b[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", "TICKETD_INFLIGHT_TTL_MS=60000",
                           "TICKETD_FAULT=order.after_redis:hold:300000:1", hb.env, NULL};
    f.a = th_serve(6, env_a);
    f.b = th_serve(7, env_b);
    f.session = th_session(f.b, 1, 1000);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, failing_first, &f);
    th_wait_held(f.a, "order.after_redis");
    pthread_create(&t2, NULL, failing_copies, &f);
    wait_waiting(f.b, NULL, 4);

    th_release_now(&ha);
    pthread_join(t1, NULL);
    th_expect_problem(&f.first, 409, "SOLD_OUT");
    expect_header(&f.first, "Preference-Applied", "wait=10");
    /* One waiter took the key and is held on b before the database. */
    th_wait_held(f.b, "order.after_redis");
    th_db_exec("UPDATE sessions SET capacity = 5, stock = 5 WHERE id = %lld", (long long)f.session);
    th_release_now(&hb);
    pthread_join(t2, NULL);
    th_release_done(&ha);
    th_release_done(&hb);

    char first_no[32] = "", no[32];
    int created = 0;
    for (int i = 0; i < 4; i++) {
        char v[16];
        order_no_of(&f.resp[i], no);
        expect_header(&f.resp[i], "Preference-Applied", "wait=10");
        if (th_header(&f.resp[i], "Idempotent-Replayed", v, sizeof v) == NULL)
            created++;
        if (first_no[0] == '\0')
            snprintf(first_no, sizeof first_no, "%s", no);
        assert_string_equal(no, first_no);
    }
    assert_int_equal(created, 1);
    assert_int_equal(th_orders_of(f.session), 1);
    assert_int_equal(th_stock_of(f.session), 3);
    assert_int_equal(metric0(f.b, "ticketd_key_wait_outcomes_total{outcome=\"ran\"}"), 1);
    assert_int_equal(metric0(f.b, "ticketd_key_wait_outcomes_total{outcome=\"answered\"}"), 3);
    th_resp_free(&f.first);
    for (int i = 0; i < 4; i++)
        th_resp_free(&f.resp[i]);
}

/* ---- a cart ---------------------------------------------------------- */

struct cart {
    const struct th_server *a, *b;
    char body[256];
    struct th_resp first;
    struct th_resp resp[4];
};

static struct th_resp cart_prefer(const struct th_server *s, const char *body, const char *prefer)
{
    char url[128], ph[64];
    snprintf(url, sizeof url, "%s/api/v1/orders/batch", s->url);
    snprintf(ph, sizeof ph, "Prefer: %s", prefer);
    const char *h[] = {th_auth_header(WAIT_USER, false), "Idempotency-Key: cart-wait-1", ph, NULL};
    return th_request("POST", url, h, body);
}

static void *cart_first(void *p)
{
    struct cart *c = p;
    c->first = cart_prefer(c->a, c->body, "wait=10");
    return NULL;
}

static void cart_copy(int i, void *p)
{
    struct cart *c = p;
    c->resp[i] = cart_prefer(i % 2 ? c->b : c->a, c->body, "wait=10");
}

static void *cart_copies(void *p)
{
    th_parallel(4, cart_copy, p);
    return NULL;
}

/* A cart's copies wait for its first copy on either instance and get its
 * answer, replayed: two items, two orders, whatever the number of copies. */
static void test_cart_copies_wait(void **state)
{
    (void)state;
    static struct cart c;
    struct th_release hold;
    memset(&c, 0, sizeof c);
    th_release_init(&hold, "wait-cart");
    const char *env_a[] = {HELD_FIRST_COPY(hold)};
    const char *env_b[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", NULL};
    c.a = th_serve(8, env_a);
    c.b = th_serve(9, env_b);
    int64_t s = th_session(c.b, 10, 1000);
    snprintf(c.body, sizeof c.body,
             "{\"items\":[{\"key\":\"cw-a\",\"session_id\":%lld,\"quantity\":1},"
             "{\"key\":\"cw-b\",\"session_id\":%lld,\"quantity\":2}]}",
             (long long)s, (long long)s);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, cart_first, &c);
    th_wait_held(c.a, "order.after_redis");
    pthread_create(&t2, NULL, cart_copies, &c);
    wait_waiting(c.a, c.b, 4);
    th_release_now(&hold);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    th_release_done(&hold);

    assert_int_equal(c.first.status, 200);
    expect_header(&c.first, "Preference-Applied", "wait=10");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c.resp[i].status, 200);
        expect_header(&c.resp[i], "Idempotent-Replayed", "true");
        expect_header(&c.resp[i], "Preference-Applied", "wait=10");
        th_expect_layer(&c.resp[i], "response-cache");
        assert_int_equal(c.resp[i].body_len, c.first.body_len);
        assert_memory_equal(c.resp[i].body, c.first.body, c.first.body_len);
    }
    assert_int_equal(th_orders_of(s), 2);
    assert_int_equal(th_stock_of(s), 7);
    th_resp_free(&c.first);
    for (int i = 0; i < 4; i++)
        th_resp_free(&c.resp[i]);
}

#define T(f) cmocka_unit_test_setup_teardown(f, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_storm_of_waiting_copies),
        T(test_lost_announcements_fall_back_to_looking),
        T(test_wait_runs_out_and_malformed_is_ignored),
        T(test_first_copy_fails_a_waiter_runs),
        T(test_cart_copies_wait),
        T(test_drain_stops_the_waiters),
        T(test_an_end_gives_back_only_its_own),
    };
    return cmocka_run_group_tests_name("wait", tests, NULL, NULL);
}
