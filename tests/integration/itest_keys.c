/* GET /api/v1/idempotency-keys/{key} against the real binary, Redis and
 * MariaDB, over two instances: a key answered from Redis's record and,
 * after Redis lost it, from the database; a copy in flight on the other
 * instance (held at a fault point until the look-ups are done, so no
 * clock decides); a dead copy's marker; carts; another user's key; and
 * that looking writes nothing and takes nothing over. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *const no_token[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0", NULL};

/* Looks key up as user on s. */
static struct th_resp lookup(const struct th_server *s, int64_t user, const char *key)
{
    char path[160];
    snprintf(path, sizeof path, "/api/v1/idempotency-keys/%s", key);
    const char *h[] = {th_auth_header(user, false), NULL};
    return th_call(s, "GET", path, h, NULL);
}

/* Fails unless r is the 200 of a COMPLETED order key naming order_no. */
static void expect_order(const struct th_resp *r, const char *key, const char *order_no)
{
    char location[64], cc[32];
    if (r->status != 200)
        fail_msg("lookup of %s: %ld %s", key, r->status, r->body);
    json_t *j = th_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "key")), key);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "COMPLETED");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "order");
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 201);
    assert_string_equal(json_string_value(json_object_get(j, "order_no")), order_no);
    snprintf(location, sizeof location, "/api/v1/orders/%s", order_no);
    assert_string_equal(json_string_value(json_object_get(j, "location")), location);
    json_decref(j);
    assert_non_null(th_header(r, "Cache-Control", cc, sizeof cc));
    assert_string_equal(cc, "no-store");
}

/* Fails unless r is the 200 of a key in flight of kind. */
static void expect_running(const struct th_resp *r, const char *key, const char *kind)
{
    if (r->status != 200)
        fail_msg("lookup of %s: %ld %s", key, r->status, r->body);
    json_t *j = th_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "IN_PROGRESS");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), kind);
    assert_true(json_is_integer(json_object_get(j, "age_ms")));
    assert_true(json_integer_value(json_object_get(j, "age_ms")) >= 0);
    assert_null(json_object_get(j, "order_no"));
    json_decref(j);
}

/* Fails unless r is the 200 of a COMPLETED batch key. */
static void expect_batch(const struct th_resp *r, const char *key, bool complete)
{
    if (r->status != 200)
        fail_msg("lookup of %s: %ld %s", key, r->status, r->body);
    json_t *j = th_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "COMPLETED");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "batch");
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 200);
    assert_true(json_is_boolean(json_object_get(j, "complete")));
    assert_int_equal(json_is_true(json_object_get(j, "complete")), complete);
    json_decref(j);
}

/* The order number of a 201. */
static void order_no_of(const struct th_resp *r, char out[21])
{
    if (r->status != 201)
        fail_msg("order: %ld %s", r->status, r->body);
    json_t *j = th_json(r);
    snprintf(out, 21, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
}

/* What the database and Redis hold, to show a look-up changed neither. */
struct snapshot {
    int64_t orders, records, stock;
    long long redis_keys;
};

static void snap(struct snapshot *s, int64_t session)
{
    s->orders = th_db_int("SELECT COUNT(*) FROM orders");
    s->records = th_db_int("SELECT COUNT(*) FROM idempotency_records");
    s->stock = th_stock_of(session);
    s->redis_keys = th_redis_int("DBSIZE");
}

static void expect_unchanged(const struct snapshot *before, int64_t session)
{
    struct snapshot now;
    snap(&now, session);
    assert_int_equal(now.orders, before->orders);
    assert_int_equal(now.records, before->records);
    assert_int_equal(now.stock, before->stock);
    /* Redis's key count is not checked here: the instances' heartbeats
     * and the order-key filter live there too. Each test checks the keys
     * it cares about by name. */
}

/* Sends a cart of n items (keys k1.., one seat each on session) under
 * batch key bkey. */
static struct th_resp send_cart(const struct th_server *s, int64_t user, const char *bkey,
                                const char *const *keys, size_t n, int64_t session)
{
    char key_h[128], body[1024];
    size_t len = (size_t)snprintf(body, sizeof body, "{\"items\":[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "%s{\"key\":\"%s\",\"session_id\":%lld,\"quantity\":1}",
                                i > 0 ? "," : "", keys[i], (long long)session);
    snprintf(body + len, sizeof body - len, "]}");
    snprintf(key_h, sizeof key_h, "Idempotency-Key: %s", bkey);
    const char *headers[] = {th_auth_header(user, false), key_h, NULL};
    return th_call(s, "POST", "/api/v1/orders/batch", headers, body);
}

/* ---- an order's key ---------------------------------------------------- */

/* Redis's record answers, on either instance; after FLUSHALL the database
 * does, with the same order; looking leaves no record in Redis and
 * nothing in the database. */
static void test_found_in_redis_then_in_the_database(void **state)
{
    char no[21];
    (void)state;
    struct th_server *a = th_serve(0, no_token);
    struct th_server *b = th_serve(1, no_token);
    int64_t s = th_session(a, 10, 1000);
    struct th_resp created = th_order(a, 901, "look-1", NULL, s, 2);
    order_no_of(&created, no);

    struct th_resp r1 = lookup(b, 901, "look-1");
    expect_order(&r1, "look-1", no);
    struct th_resp r2 = lookup(a, 901, "look-1");
    expect_order(&r2, "look-1", no);

    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct snapshot before;
    snap(&before, s);
    struct th_resp r3 = lookup(b, 901, "look-1");
    expect_order(&r3, "look-1", no);
    struct th_resp r4 = lookup(a, 901, "look-1");
    expect_order(&r4, "look-1", no);
    expect_unchanged(&before, s);
    /* The database's answer is not written back to Redis by a look. */
    assert_int_equal(th_redis_int("EXISTS idem:{901}:look-1"), 0);

    /* The order itself is still the client's to retry: a replay. */
    struct th_resp again = th_order(b, 901, "look-1", NULL, s, 2);
    assert_int_equal(again.status, 201);
    th_expect_layer(&again, "unique-index");
    assert_int_equal(th_orders_of(s), 1);

    th_resp_free(&created);
    th_resp_free(&r1);
    th_resp_free(&r2);
    th_resp_free(&r3);
    th_resp_free(&r4);
    th_resp_free(&again);
}

/* A key never used, one whose request failed (sold out: not remembered),
 * another user's, and malformed ones. */
static void test_unknown_failed_foreign_and_malformed(void **state)
{
    char no[21], path[200];
    (void)state;
    struct th_server *a = th_serve(0, no_token);
    int64_t s = th_session(a, 1, 1000);
    struct th_resp created = th_order(a, 902, "mine", NULL, s, 1);
    order_no_of(&created, no);
    struct th_resp sold_out = th_order(a, 902, "too-late", NULL, s, 1);
    th_expect_problem(&sold_out, 409, "SOLD_OUT");

    struct th_resp never = lookup(a, 902, "never-used");
    th_expect_problem(&never, 404, "IDEMPOTENCY_KEY_NOT_FOUND");
    struct th_resp failed = lookup(a, 902, "too-late");
    th_expect_problem(&failed, 404, "IDEMPOTENCY_KEY_NOT_FOUND");
    /* Another user's key: the same 404, from Redis's record and from the
     * database alike. */
    struct th_resp foreign = lookup(a, 903, "mine");
    th_expect_problem(&foreign, 404, "IDEMPOTENCY_KEY_NOT_FOUND");
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp foreign2 = lookup(a, 903, "mine");
    th_expect_problem(&foreign2, 404, "IDEMPOTENCY_KEY_NOT_FOUND");
    struct th_resp own = lookup(a, 902, "mine");
    expect_order(&own, "mine", no);

    /* Outside the Idempotency-Key grammar: 400, whatever the length. */
    static const char *const bad[] = {
        "a%20b", "%22mine%22", "a*b",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 65 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct th_resp r = lookup(a, 902, bad[i]);
        th_expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
        th_resp_free(&r);
    }
    /* Without a token: 401; another method: 405. */
    snprintf(path, sizeof path, "/api/v1/idempotency-keys/mine");
    struct th_resp anon = th_call(a, "GET", path, NULL, NULL);
    th_expect_problem(&anon, 401, "UNAUTHENTICATED");
    const char *h[] = {th_auth_header(902, false), NULL};
    struct th_resp del = th_call(a, "DELETE", path, h, NULL);
    th_expect_problem(&del, 405, "METHOD_NOT_ALLOWED");

    th_resp_free(&created);
    th_resp_free(&sold_out);
    th_resp_free(&never);
    th_resp_free(&failed);
    th_resp_free(&foreign);
    th_resp_free(&foreign2);
    th_resp_free(&own);
    th_resp_free(&anon);
    th_resp_free(&del);
}

/* ---- a copy in flight ---------------------------------------------------- */

struct held {
    const struct th_server *s;
    int64_t session;
    int64_t user;
    const char *key;
    bool cart;
    const char *const *items;
    struct th_resp r;
};

static void *held_request(void *p)
{
    struct held *h = p;
    if (h->cart)
        h->r = send_cart(h->s, h->user, h->key, h->items, 2, h->session);
    else
        h->r = th_order(h->s, h->user, h->key, NULL, h->session, 1);
    return NULL;
}

/* Starts h on a, held at order.after_redis until release exists. a's log
 * is its port's: each test that holds uses ports of its own, so that the
 * line waited for is this test's. */
static void hold(struct held *h, const struct th_server *a, pthread_t *t)
{
    pthread_create(t, NULL, held_request, h);
    th_wait_held(a, "order.after_redis");
}

static void release(const struct th_release *rel, pthread_t t)
{
    th_release_now(rel);
    pthread_join(t, NULL);
    th_release_done(rel);
}

/* An order held mid-flight on instance a is IN_PROGRESS from b; the look
 * neither answers for it nor takes its marker over; released, it
 * completes, and the key is COMPLETED with the order it made. */
static void test_order_in_flight(void **state)
{
    struct th_release rel;
    char no[21];
    (void)state;
    th_release_init(&rel, "keys");
    const char *held_env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0",
                              "TICKETD_FAULT=order.after_redis:hold:300000:1", rel.env, NULL};
    struct th_server *a = th_serve(2, held_env);
    struct th_server *b = th_serve(3, no_token);
    int64_t s = th_session(b, 10, 1000);
    struct held h = {.s = a, .session = s, .user = 904, .key = "slow-1"};
    pthread_t t;
    hold(&h, a, &t);

    char *marker = th_redis_text("GET idem:{904}:slow-1");
    assert_non_null(marker);
    assert_true(marker[0] == 'P');
    struct th_resp r1 = lookup(b, 904, "slow-1");
    expect_running(&r1, "slow-1", "order");
    struct th_resp r2 = lookup(a, 904, "slow-1");
    expect_running(&r2, "slow-1", "order");
    /* Untouched: the same marker, no order yet. */
    char *after = th_redis_text("GET idem:{904}:slow-1");
    assert_non_null(after);
    assert_string_equal(after, marker);
    assert_int_equal(th_orders_of(s), 0);

    release(&rel, t);
    order_no_of(&h.r, no);
    struct th_resp r3 = lookup(b, 904, "slow-1");
    expect_order(&r3, "slow-1", no);
    assert_int_equal(th_orders_of(s), 1);

    free(marker);
    free(after);
    th_resp_free(&h.r);
    th_resp_free(&r1);
    th_resp_free(&r2);
    th_resp_free(&r3);
}

/* A marker whose process no longer beats runs nothing: not in progress,
 * and, with no answer anywhere, not found. */
static void test_dead_copy_is_not_in_progress(void **state)
{
    (void)state;
    struct th_server *a = th_serve(0, no_token);
    char *set = th_redis_text("SET idem:{905}:orphan "
                              "P|0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef|"
                              "00000000000000000123456789abcdef PX 60000");
    assert_string_equal(set, "OK");
    struct th_resp r = lookup(a, 905, "orphan");
    th_expect_problem(&r, 404, "IDEMPOTENCY_KEY_NOT_FOUND");
    /* Its process beats again (a slow one, say): it is in progress. */
    char *beat = th_redis_text("SET ticketd:instance:0000000000000000 1 PX 60000");
    struct th_resp r2 = lookup(a, 905, "orphan");
    expect_running(&r2, "orphan", "order");
    free(set);
    free(beat);
    th_resp_free(&r);
    th_resp_free(&r2);
}

/* ---- a cart's batch key ------------------------------------------------- */

/* A cart held mid-flight: its batch key is IN_PROGRESS (kind batch) and
 * its first item's key IN_PROGRESS (kind order); released, the batch key
 * is COMPLETED and complete, from Redis and then from the database, and
 * each item key names its own order. */
static void test_cart_keys(void **state)
{
    struct th_release rel;
    (void)state;
    th_release_init(&rel, "keys-cart");
    const char *held_env[] = {"TICKETD_ORDER_TOKEN_REQUIRED=0",
                              "TICKETD_FAULT=order.after_redis:hold:300000:1", rel.env, NULL};
    struct th_server *a = th_serve(4, held_env);
    struct th_server *b = th_serve(5, no_token);
    int64_t s = th_session(b, 10, 1000);
    static const char *const items[] = {"seat-a", "seat-b"};
    struct held h = {
        .s = a, .session = s, .user = 906, .key = "cart-1", .cart = true, .items = items};
    pthread_t t;
    hold(&h, a, &t);
    struct th_resp r1 = lookup(b, 906, "cart-1");
    expect_running(&r1, "cart-1", "batch");
    struct th_resp r2 = lookup(b, 906, "seat-a");
    expect_running(&r2, "seat-a", "order");
    struct th_resp r3 = lookup(b, 906, "seat-b");
    th_expect_problem(&r3, 404, "IDEMPOTENCY_KEY_NOT_FOUND");
    release(&rel, t);
    if (h.r.status != 200)
        fail_msg("cart: %ld %s", h.r.status, h.r.body);

    struct th_resp r4 = lookup(b, 906, "cart-1");
    expect_batch(&r4, "cart-1", true);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp r5 = lookup(a, 906, "cart-1");
    expect_batch(&r5, "cart-1", true);
    for (size_t i = 0; i < 2; i++) {
        char no[21];
        struct th_resp r = lookup(b, 906, items[i]);
        json_t *j = th_json(&r);
        snprintf(no, sizeof no, "%s", json_string_value(json_object_get(j, "order_no")));
        json_decref(j);
        expect_order(&r, items[i], no);
        assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = 906 AND "
                                   "request_id = '%s' AND order_no = '%s'",
                                   items[i], no),
                         1);
        th_resp_free(&r);
    }
    th_resp_free(&h.r);
    th_resp_free(&r1);
    th_resp_free(&r2);
    th_resp_free(&r3);
    th_resp_free(&r4);
    th_resp_free(&r5);
}

/* A cart whose second item sold out has run: its batch key is COMPLETED
 * with complete false (the database keeps every run's answer; Redis only
 * a final one). One string naming an order and a batch answers the
 * order. */
static void test_incomplete_cart_and_shared_names(void **state)
{
    char no[21];
    (void)state;
    struct th_server *a = th_serve(0, no_token);
    int64_t s = th_session(a, 1, 1000);
    static const char *const items[] = {"first", "second"};
    struct th_resp cart = send_cart(a, 907, "cart-2", items, 2, s);
    assert_int_equal(cart.status, 200);
    struct th_resp r1 = lookup(a, 907, "cart-2");
    expect_batch(&r1, "cart-2", false);
    struct th_resp r2 = lookup(a, 907, "second");
    th_expect_problem(&r2, 404, "IDEMPOTENCY_KEY_NOT_FOUND");

    /* "both" names a batch, then an order: the order is answered. */
    int64_t s2 = th_session(a, 10, 1000);
    static const char *const one[] = {"both-item", "both-other"};
    struct th_resp c2 = send_cart(a, 907, "both", one, 2, s2);
    assert_int_equal(c2.status, 200);
    struct th_resp o = th_order(a, 907, "both", NULL, s2, 1);
    order_no_of(&o, no);
    struct th_resp r3 = lookup(a, 907, "both");
    expect_order(&r3, "both", no);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp r4 = lookup(a, 907, "both");
    expect_order(&r4, "both", no);

    th_resp_free(&cart);
    th_resp_free(&r1);
    th_resp_free(&r2);
    th_resp_free(&c2);
    th_resp_free(&o);
    th_resp_free(&r3);
    th_resp_free(&r4);
}

/* ---- Redis gone ----------------------------------------------------------- */

/* Without Redis an order's key is still found in the database; a key with
 * no answer cannot be called unknown (a copy could be running), so it is
 * 503, not 404. */
static void test_without_redis(void **state)
{
    char no[21], retry[16];
    (void)state;
    struct th_server *a = th_serve(0, no_token);
    int64_t s = th_session(a, 10, 1000);
    struct th_resp created = th_order(a, 908, "kept", NULL, s, 1);
    order_no_of(&created, no);
    th_services("stop-redis");
    struct th_resp r1 = lookup(a, 908, "kept");
    expect_order(&r1, "kept", no);
    struct th_resp r2 = lookup(a, 908, "unknown");
    th_expect_problem(&r2, 503, "DEPENDENCY_UNAVAILABLE");
    assert_non_null(th_header(&r2, "Retry-After", retry, sizeof retry));
    th_services("start-redis");
    th_resp_free(&created);
    th_resp_free(&r1);
    th_resp_free(&r2);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_found_in_redis_then_in_the_database),
        T(test_unknown_failed_foreign_and_malformed),
        T(test_order_in_flight),
        T(test_dead_copy_is_not_in_progress),
        T(test_cart_keys),
        T(test_incomplete_cart_and_shared_names),
        T(test_without_redis),
    };
    return cmocka_run_group_tests_name("keys", tests, NULL, NULL);
}
