/* A cart, POST /api/v1/orders/batch: a key per item and a key for the
 * batch. The real binary, the real Redis and MariaDB; each test asserts
 * what the client is told and what the database holds: one order per item
 * key, the stock taken once per item, and a batch's final answer the same
 * on every retry, through a Redis flush and a MariaDB restart. */
#include "harness.h"
#include "digest.h"
#include "util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* One item of a test cart. */
struct item {
    const char *key;
    int64_t session;
    int64_t quantity;
};

/* The body of a cart of n items (a new string). */
static char *cart_body(const struct item *items, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "key", items[i].key, "session_id",
                                             (json_int_t)items[i].session, "quantity",
                                             (json_int_t)items[i].quantity));
    json_t *o = json_pack("{s:o}", "items", arr);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* Sends a cart under batch key bkey with token (NULL: none). */
static struct th_resp send_cart(const struct th_server *s, int64_t user, const char *bkey,
                                const char *token, const struct item *items, size_t n)
{
    char key_h[128], tok_h[160];
    char *body = cart_body(items, n);
    snprintf(key_h, sizeof key_h, "Idempotency-Key: %s", bkey);
    snprintf(tok_h, sizeof tok_h, "X-Order-Token: %s", token != NULL ? token : "");
    const char *headers[] = {th_auth_header(user, false), key_h, token != NULL ? tok_h : NULL,
                             NULL};
    struct th_resp r = th_call(s, "POST", "/api/v1/orders/batch", headers, body);
    free(body);
    return r;
}

/* The i-th item of a 200's body (borrowed from j). */
static json_t *item_of(json_t *j, size_t i)
{
    return json_array_get(json_object_get(j, "items"), i);
}

static bool is_complete(json_t *j)
{
    return json_is_true(json_object_get(j, "complete"));
}

static long item_status(json_t *j, size_t i)
{
    return (long)json_integer_value(json_object_get(item_of(j, i), "status"));
}

static const char *item_order_no(json_t *j, size_t i)
{
    return json_string_value(json_object_get(json_object_get(item_of(j, i), "order"), "order_no"));
}

static const char *item_code(json_t *j, size_t i)
{
    return json_string_value(json_object_get(json_object_get(item_of(j, i), "problem"), "code"));
}

/* Orders under item key of user, as MariaDB has them. */
static int64_t orders_under(int64_t user, const char *key)
{
    return th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = %lld AND request_id = '%s'",
                     (long long)user, key);
}

static bool replayed(const struct th_resp *r)
{
    char v[16];
    return th_header(r, "Idempotent-Replayed", v, sizeof v) != NULL && strcmp(v, "true") == 0;
}

/* Fails unless r is a 200 whose every item is a 201 with its order, and
 * each item key holds exactly one order of user. */
static void expect_complete(const struct th_resp *r, int64_t user, const struct item *items,
                            size_t n)
{
    if (r->status != 200)
        fail_msg("cart answered %ld %s", r->status, r->body);
    json_t *j = th_json(r);
    assert_true(is_complete(j));
    assert_int_equal(json_array_size(json_object_get(j, "items")), n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(json_string_value(json_object_get(item_of(j, i), "key")), items[i].key);
        assert_int_equal(item_status(j, i), 201);
        assert_non_null(item_order_no(j, i));
        assert_int_equal(orders_under(user, items[i].key), 1);
    }
    json_decref(j);
}

/* ---- the cart answers each item ---------------------------------------- */

static void test_cart_buys_each_item_once(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s1 = th_session(a, 10, 1000), s2 = th_session(a, 10, 500);
    struct item items[] = {{"seat-a", s1, 2}, {"seat-b", s2, 1}, {"seat-c", s1, 1}};
    th_order_token(a, 801, tok);
    struct th_resp first = send_cart(a, 801, "cart-1", tok, items, 3);
    expect_complete(&first, 801, items, 3);
    assert_false(replayed(&first));
    json_t *j = th_json(&first);
    assert_int_equal(json_integer_value(
                         json_object_get(json_object_get(item_of(j, 0), "order"), "amount_cents")),
                     2000);
    json_decref(j);
    assert_int_equal(th_stock_of(s1), 7);
    assert_int_equal(th_stock_of(s2), 9);
    /* The batch's answer is in the database, final. */
    assert_int_equal(th_db_int("SELECT complete FROM idempotency_records WHERE scope = 'batch' "
                               "AND user_id = 801 AND idem_key = 'cart-1'"),
                     1);

    /* The retry, token and all: the same bytes, replayed, nothing bought. */
    struct th_resp again = send_cart(a, 801, "cart-1", tok, items, 3);
    assert_int_equal(again.status, 200);
    assert_true(replayed(&again));
    th_expect_layer(&again, "response-cache");
    assert_string_equal(again.body, first.body);
    assert_int_equal(th_stock_of(s1), 7);
    assert_int_equal(th_stock_of(s2), 9);

    /* The batch key spent the token: another key presenting it is refused. */
    struct th_resp other = th_order(a, 801, "single-1", tok, s2, 1);
    th_expect_problem(&other, 409, "ORDER_TOKEN_INVALID");
    th_resp_free(&first);
    th_resp_free(&again);
    th_resp_free(&other);
}

/* An item key a single order used is that order, replayed; the same key
 * with another quantity is refused for that item alone. */
static void test_item_key_of_a_single_order(void **state)
{
    char tok[96], tok2[96], no[32];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 802, tok);
    struct th_resp single = th_order(a, 802, "seat-1", tok, s, 1);
    assert_int_equal(single.status, 201);
    json_t *sj = th_json(&single);
    snprintf(no, sizeof no, "%s", json_string_value(json_object_get(sj, "order_no")));
    json_decref(sj);

    struct item items[] = {{"seat-1", s, 1}, {"seat-2", s, 1}, {"seat-3", s, 1}};
    th_order_token(a, 802, tok2);
    struct th_resp r = send_cart(a, 802, "cart-2", tok2, items, 3);
    expect_complete(&r, 802, items, 3);
    json_t *j = th_json(&r);
    assert_string_equal(item_order_no(j, 0), no);
    json_decref(j);
    assert_int_equal(th_stock_of(s), 7);

    struct item reused[] = {{"seat-1", s, 2}, {"seat-4", s, 1}};
    struct th_resp r2 = send_cart(a, 802, "cart-3", tok2, reused, 2);
    assert_int_equal(r2.status, 409); /* the token belongs to cart-2 */
    th_expect_problem(&r2, 409, "ORDER_TOKEN_INVALID");
    char tok3[96];
    th_order_token(a, 802, tok3);
    struct th_resp r3 = send_cart(a, 802, "cart-3", tok3, reused, 2);
    assert_int_equal(r3.status, 200);
    json_t *j3 = th_json(&r3);
    assert_false(is_complete(j3));
    assert_int_equal(item_status(j3, 0), 422);
    assert_string_equal(item_code(j3, 0), "IDEMPOTENCY_KEY_REUSED");
    assert_int_equal(item_status(j3, 1), 201);
    json_decref(j3);
    assert_int_equal(orders_under(802, "seat-1"), 1);
    assert_int_equal(th_stock_of(s), 6);
    th_resp_free(&single);
    th_resp_free(&r);
    th_resp_free(&r2);
    th_resp_free(&r3);
}

/* ---- a sold-out item fails alone; the retry completes what it can ------- */

static void test_sold_out_item_fails_alone(void **state)
{
    char tok[96], tok_other[96], other_no[32], kept[2][32];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t plenty = th_session(a, 10, 1000), last = th_session(a, 1, 1000);
    /* Someone else takes the last seat first. */
    th_order_token(a, 899, tok_other);
    struct th_resp taken = th_order(a, 899, "last-seat", tok_other, last, 1);
    assert_int_equal(taken.status, 201);
    json_t *tj = th_json(&taken);
    snprintf(other_no, sizeof other_no, "%s", json_string_value(json_object_get(tj, "order_no")));
    json_decref(tj);

    struct item items[] = {{"p-1", plenty, 1}, {"l-1", last, 1}, {"p-2", plenty, 2}};
    th_order_token(a, 803, tok);
    struct th_resp r = send_cart(a, 803, "cart-so", tok, items, 3);
    assert_int_equal(r.status, 200);
    assert_false(replayed(&r));
    json_t *j = th_json(&r);
    assert_false(is_complete(j));
    assert_int_equal(item_status(j, 0), 201);
    assert_int_equal(item_status(j, 1), 409);
    assert_string_equal(item_code(j, 1), "SOLD_OUT");
    assert_int_equal(item_status(j, 2), 201);
    snprintf(kept[0], sizeof kept[0], "%s", item_order_no(j, 0));
    snprintf(kept[1], sizeof kept[1], "%s", item_order_no(j, 2));
    json_decref(j);
    assert_int_equal(th_stock_of(plenty), 7);
    assert_int_equal(th_db_int("SELECT complete FROM idempotency_records WHERE user_id = 803"), 0);

    /* A retry while the seat is still gone: the bought items are their
     * orders again, no stock is touched, the sold-out one is still refused. */
    struct th_resp again = send_cart(a, 803, "cart-so", tok, items, 3);
    assert_int_equal(again.status, 200);
    assert_false(replayed(&again));
    json_t *ja = th_json(&again);
    assert_false(is_complete(ja));
    assert_string_equal(item_order_no(ja, 0), kept[0]);
    assert_string_equal(item_order_no(ja, 2), kept[1]);
    assert_string_equal(item_code(ja, 1), "SOLD_OUT");
    json_decref(ja);
    assert_int_equal(th_stock_of(plenty), 7);

    /* The seat comes back; the retry buys it and only it. */
    char path[96];
    snprintf(path, sizeof path, "/api/v1/orders/%s/cancel", other_no);
    const char *h[] = {th_auth_header(899, false), NULL};
    struct th_resp cancel = th_call(a, "POST", path, h, NULL);
    assert_int_equal(cancel.status, 200);
    assert_int_equal(th_stock_of(last), 1);
    struct th_resp done = send_cart(a, 803, "cart-so", tok, items, 3);
    expect_complete(&done, 803, items, 3);
    assert_false(replayed(&done)); /* this run bought the last seat */
    json_t *jd = th_json(&done);
    assert_string_equal(item_order_no(jd, 0), kept[0]);
    assert_string_equal(item_order_no(jd, 2), kept[1]);
    json_decref(jd);
    assert_int_equal(th_stock_of(last), 0);
    assert_int_equal(th_stock_of(plenty), 7);
    struct th_resp final = send_cart(a, 803, "cart-so", tok, items, 3);
    assert_true(replayed(&final));
    assert_string_equal(final.body, done.body);
    th_resp_free(&taken);
    th_resp_free(&r);
    th_resp_free(&again);
    th_resp_free(&cancel);
    th_resp_free(&done);
    th_resp_free(&final);
}

/* The token the batch key spent is recorded with the cart's first order
 * (order_tokens), so it stays spent when Redis forgets it. */
static int64_t tokens_of(int64_t user)
{
    return th_db_int("SELECT COUNT(*) FROM order_tokens t JOIN orders o ON o.id = t.order_id "
                     "WHERE o.user_id = %lld",
                     (long long)user);
}

static void test_cart_token_outlives_redis(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, NULL);
    int64_t s1 = th_session(a, 10, 1000), s2 = th_session(a, 10, 500);
    struct item items[] = {{"t-1", s1, 1}, {"t-2", s2, 2}};
    th_order_token(a, 811, tok);
    struct th_resp first = send_cart(a, 811, "cart-t", tok, items, 2);
    expect_complete(&first, 811, items, 2);
    assert_int_equal(tokens_of(811), 1); /* once for the cart, not per item */

    /* Redis forgets the token. Another batch key presenting it, on either
     * instance, is refused by the token's row, and buys nothing. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct item others[] = {{"t-3", s1, 1}, {"t-4", s2, 1}};
    struct th_resp stolen = send_cart(b, 811, "cart-t2", tok, others, 2);
    th_expect_problem(&stolen, 409, "ORDER_TOKEN_INVALID");
    struct th_resp stolen2 = send_cart(a, 811, "cart-t2", tok, others, 2);
    th_expect_problem(&stolen2, 409, "ORDER_TOKEN_INVALID");
    assert_int_equal(orders_under(811, "t-3"), 0);
    assert_int_equal(orders_under(811, "t-4"), 0);
    assert_int_equal(th_stock_of(s1), 9);
    assert_int_equal(th_stock_of(s2), 8);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM idempotency_records WHERE user_id = 811 "
                               "AND idem_key = 'cart-t2'"),
                     0);
    /* A single order under another key is refused the same way. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp single = th_order(b, 811, "t-single", tok, s1, 1);
    th_expect_problem(&single, 409, "ORDER_TOKEN_INVALID");
    assert_int_equal(orders_under(811, "t-single"), 0);

    /* The cart's own retry, key, token and body: the same answer. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp again = send_cart(b, 811, "cart-t", tok, items, 2);
    assert_int_equal(again.status, 200);
    assert_true(replayed(&again));
    assert_string_equal(again.body, first.body);
    assert_int_equal(th_stock_of(s1), 9);
    assert_int_equal(th_stock_of(s2), 8);
    assert_int_equal(tokens_of(811), 1);
    th_resp_free(&first);
    th_resp_free(&stolen);
    th_resp_free(&stolen2);
    th_resp_free(&single);
    th_resp_free(&again);
}

/* The cart's first item sold out, its second bought with the token; the
 * seat comes back and the retry buys the first: the token's row is the
 * cart's own, so the item is bought, not refused. */
static void test_cart_token_with_a_later_item(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t gone = th_session(a, 0, 1000), plenty = th_session(a, 10, 500);
    struct item items[] = {{"g-1", gone, 1}, {"g-2", plenty, 1}};
    th_order_token(a, 812, tok);
    struct th_resp r = send_cart(a, 812, "cart-g", tok, items, 2);
    assert_int_equal(r.status, 200);
    json_t *j = th_json(&r);
    assert_false(is_complete(j));
    assert_string_equal(item_code(j, 0), "SOLD_OUT");
    assert_int_equal(item_status(j, 1), 201);
    json_decref(j);
    assert_int_equal(tokens_of(812), 1);

    th_db_exec("UPDATE sessions SET capacity = 1, stock = 1 WHERE id = %lld", (long long)gone);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp done = send_cart(a, 812, "cart-g", tok, items, 2);
    expect_complete(&done, 812, items, 2);
    assert_int_equal(th_stock_of(gone), 0);
    assert_int_equal(th_stock_of(plenty), 9);
    assert_int_equal(tokens_of(812), 1);
    th_resp_free(&r);
    th_resp_free(&done);
}

/* ---- the batch key ------------------------------------------------------ */

static void test_another_list_is_422(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s = th_session(a, 10, 1000);
    struct item first[] = {{"x-1", s, 1}, {"x-2", s, 1}};
    struct item second[] = {{"x-1", s, 1}, {"x-2", s, 2}};
    th_order_token(a, 804, tok);
    struct th_resp r = send_cart(a, 804, "cart-x", tok, first, 2);
    expect_complete(&r, 804, first, 2);
    struct th_resp other = send_cart(a, 804, "cart-x", tok, second, 2);
    th_expect_problem(&other, 422, "IDEMPOTENCY_KEY_REUSED");
    th_expect_layer(&other, "response-cache");
    /* Redis forgets; the database's record still knows the list. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp later = send_cart(a, 804, "cart-x", tok, second, 2);
    th_expect_problem(&later, 422, "IDEMPOTENCY_KEY_REUSED");
    th_expect_layer(&later, "unique-index");
    assert_int_equal(th_stock_of(s), 8);
    th_resp_free(&r);
    th_resp_free(&other);
    th_resp_free(&later);
}

/* The marker a running copy leaves under idem:{user}:batch/<key>
 * ("P|<fingerprint>|<owner>", the owner's first 16 characters naming its
 * process), for the two-item cart f-1, f-2 on session s, written here so
 * the tests need no timing. */
static void put_marker(int64_t user, const char *bkey, int64_t s, const char *owner)
{
    char canon[512], fp[65];
    unsigned char md[SHA256_BYTES];
    int n = snprintf(canon, sizeof canon,
                     "POST /api/v1/orders/batch\nitems=2\nkey=f-1\nsession_id=%lld\nquantity=1\n"
                     "key=f-2\nsession_id=%lld\nquantity=1\n",
                     (long long)s, (long long)s);
    sha256(canon, (size_t)n, md);
    hex_encode(md, sizeof md, fp);
    char *set = th_redis_text("SET idem:{%lld}:batch/%s P|%s|%s PX 60000", (long long)user, bkey,
                              fp, owner);
    assert_non_null(set);
    assert_string_equal(set, "OK");
    free(set);
}

/* A copy in flight, its process alive: the same list gets 409 with
 * Retry-After, another list 422, and nothing runs. */
static void test_copy_in_flight_is_409(void **state)
{
    char tok[96], retry[16];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s = th_session(a, 10, 1000);
    struct item items[] = {{"f-1", s, 1}, {"f-2", s, 1}};
    put_marker(805, "cart-f", s, "0123456789abcdef0123456789abcdef");
    /* Its process beats. */
    char *beat = th_redis_text("SET ticketd:instance:0123456789abcdef 1 PX 60000");
    free(beat);
    th_order_token(a, 805, tok);
    struct th_resp r = send_cart(a, 805, "cart-f", tok, items, 2);
    th_expect_problem(&r, 409, "REQUEST_IN_PROGRESS");
    th_expect_layer(&r, "inflight-key");
    assert_non_null(th_header(&r, "Retry-After", retry, sizeof retry));
    struct item other[] = {{"f-1", s, 1}};
    struct th_resp r2 = send_cart(a, 805, "cart-f", tok, other, 1);
    th_expect_problem(&r2, 422, "IDEMPOTENCY_KEY_REUSED");
    assert_int_equal(th_orders_of(s), 0);
    /* The copy finishes (its marker goes): the retry runs. */
    assert_int_equal(th_redis_int("DEL idem:{805}:batch/cart-f"), 1);
    struct th_resp r3 = send_cart(a, 805, "cart-f", tok, items, 2);
    expect_complete(&r3, 805, items, 2);
    th_resp_free(&r);
    th_resp_free(&r2);
    th_resp_free(&r3);
}

/* A copy whose process died (no liveness key) never finishes: its marker
 * is taken over by the retry, which buys the cart. */
static void test_dead_copy_is_taken_over(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s = th_session(a, 10, 1000);
    struct item items[] = {{"f-1", s, 1}, {"f-2", s, 1}};
    put_marker(810, "cart-dead", s, "fedcba9876543210fedcba9876543210");
    th_order_token(a, 810, tok);
    struct th_resp r = send_cart(a, 810, "cart-dead", tok, items, 2);
    expect_complete(&r, 810, items, 2);
    assert_int_equal(th_stock_of(s), 8);
    th_resp_free(&r);
}

static void test_bad_carts_change_nothing(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    int64_t s = th_session(a, 10, 1000);
    th_order_token(a, 806, tok);
    struct item dup[] = {{"d-1", s, 1}, {"d-2", s, 1}, {"d-1", s, 1}};
    struct th_resp r = send_cart(a, 806, "cart-d", tok, dup, 3);
    th_expect_problem(&r, 400, "VALIDATION_FAILED");
    json_t *j = th_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "field")), "items[2].key");
    json_decref(j);
    struct item bad[] = {{"ok", s, 1}, {"not ok", s, 1}};
    struct th_resp r2 = send_cart(a, 806, "cart-d", tok, bad, 2);
    th_expect_problem(&r2, 400, "VALIDATION_FAILED");
    const char *h[] = {th_auth_header(806, false), NULL};
    struct th_resp r3 = th_call(a, "POST", "/api/v1/orders/batch", h,
                                "{\"items\":[{\"key\":\"a\",\"session_id\":1,\"quantity\":1}]}");
    th_expect_problem(&r3, 400, "IDEMPOTENCY_KEY_REQUIRED");
    struct th_resp r4 = th_call(a, "GET", "/api/v1/orders/batch", h, NULL);
    th_expect_problem(&r4, 404, "ORDER_NOT_FOUND");
    /* A bad cart spends no token: the good one that follows uses it. */
    struct item good[] = {{"d-1", s, 1}};
    struct th_resp r5 = send_cart(a, 806, "cart-d", tok, good, 1);
    expect_complete(&r5, 806, good, 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM idempotency_records"), 1);
    th_resp_free(&r);
    th_resp_free(&r2);
    th_resp_free(&r3);
    th_resp_free(&r4);
    th_resp_free(&r5);
}

/* ---- many copies at once ------------------------------------------------ */

#define COPIES 12

struct storm {
    const struct th_server *s;
    int64_t user;
    const char *tokens[4];
    const char *bkeys[4];
    const struct item *items[4];
    size_t n[4];
    int nbatches;
    long status[COPIES];
    _Atomic int bad; /* answers that are neither a 200 nor a 409 in flight */
};

static void storm_copy(int i, void *p)
{
    struct storm *st = p;
    int b = i % st->nbatches;
    struct th_resp r =
        send_cart(st->s, st->user, st->bkeys[b], st->tokens[b], st->items[b], st->n[b]);
    st->status[i] = r.status;
    if (r.status == 409 && strcmp(th_code(&r), "REQUEST_IN_PROGRESS") != 0)
        atomic_fetch_add(&st->bad, 1);
    else if (r.status != 200 && r.status != 409)
        atomic_fetch_add(&st->bad, 1);
    th_resp_free(&r);
}

/* Retries batch b until its answer is final, as a client following
 * Retry-After would; bounded in count. Returns the final answer. */
static struct th_resp retry_until_complete(struct storm *st, int b)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        struct th_resp r =
            send_cart(st->s, st->user, st->bkeys[b], st->tokens[b], st->items[b], st->n[b]);
        if (r.status == 200) {
            json_t *j = th_json(&r);
            bool done = is_complete(j);
            json_decref(j);
            if (done)
                return r;
        }
        th_resp_free(&r);
        th_msleep(50);
    }
    fail_msg("batch %s never completed", st->bkeys[b]);
    return (struct th_resp){0};
}

static void test_concurrent_copies_of_one_cart(void **state)
{
    static struct storm st;
    char tok[96];
    (void)state;
    memset(&st, 0, sizeof st);
    struct th_server *a = th_serve(0, NULL);
    int64_t s1 = th_session(a, 50, 1000), s2 = th_session(a, 50, 700), s3 = th_session(a, 50, 300);
    struct item items[] = {{"c-1", s1, 1}, {"c-2", s2, 2}, {"c-3", s3, 1}, {"c-4", s1, 3}};
    th_order_token(a, 807, tok);
    st.s = a;
    st.user = 807;
    st.nbatches = 1;
    st.tokens[0] = tok;
    st.bkeys[0] = "cart-storm";
    st.items[0] = items;
    st.n[0] = 4;
    th_parallel(COPIES, storm_copy, &st);
    assert_int_equal(atomic_load(&st.bad), 0);
    struct th_resp final = retry_until_complete(&st, 0);
    expect_complete(&final, 807, items, 4);
    assert_int_equal(th_stock_of(s1), 46);
    assert_int_equal(th_stock_of(s2), 48);
    assert_int_equal(th_stock_of(s3), 49);
    th_resp_free(&final);
}

/* Batches under different batch keys sharing item keys, at once: each
 * shared item is one order, and every batch names that same order. */
static void test_overlapping_carts(void **state)
{
    static struct storm st;
    char toks[4][96];
    (void)state;
    memset(&st, 0, sizeof st);
    struct th_server *a = th_serve(0, NULL);
    int64_t s1 = th_session(a, 50, 1000), s2 = th_session(a, 50, 700);
    static struct item all[5];
    struct item init[5] = {
        {"o-0", s1, 1}, {"o-1", s2, 1}, {"o-2", s1, 1}, {"o-3", s2, 1}, {"o-4", s1, 1}};
    memcpy(all, init, sizeof init);
    static const char *const names[] = {"ov-a", "ov-b", "ov-c", "ov-d"};
    st.s = a;
    st.user = 808;
    st.nbatches = 4;
    for (int b = 0; b < 4; b++) {
        th_order_token(a, 808, toks[b]);
        st.tokens[b] = toks[b];
        st.bkeys[b] = names[b];
        st.items[b] = &all[b]; /* o-b and o-(b+1) */
        st.n[b] = 2;
    }
    th_parallel(COPIES, storm_copy, &st);
    assert_int_equal(atomic_load(&st.bad), 0);
    char seen[5][32];
    memset(seen, 0, sizeof seen);
    for (int b = 0; b < 4; b++) {
        struct th_resp r = retry_until_complete(&st, b);
        json_t *j = th_json(&r);
        for (int k = 0; k < 2; k++) {
            const char *no = item_order_no(j, (size_t)k);
            if (seen[b + k][0] == '\0')
                snprintf(seen[b + k], sizeof seen[b + k], "%s", no);
            assert_string_equal(no, seen[b + k]);
        }
        json_decref(j);
        th_resp_free(&r);
    }
    for (int k = 0; k < 5; k++)
        assert_int_equal(orders_under(808, all[k].key), 1);
    assert_int_equal(th_stock_of(s1), 47);
    assert_int_equal(th_stock_of(s2), 48);
}

/* ---- through a Redis flush and a MariaDB restart ------------------------ */

/* Sends the cart until it is answered other than 503 (MariaDB coming
 * back), as Retry-After says; bounded in count. */
static struct th_resp send_past_503(const struct th_server *s, int64_t user, const char *bkey,
                                    const char *tok, const struct item *items, size_t n)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        struct th_resp r = send_cart(s, user, bkey, tok, items, n);
        if (r.status != 503)
            return r;
        th_resp_free(&r);
        th_msleep(100);
    }
    fail_msg("the cart kept getting 503");
    return (struct th_resp){0};
}

static void test_cart_through_flush_and_restart(void **state)
{
    char tok[96];
    (void)state;
    struct th_server *a = th_serve(0, NULL), *b = th_serve(1, NULL);
    int64_t s1 = th_session(a, 5, 1000), s2 = th_session(a, 5, 500), s3 = th_session(a, 5, 200);
    struct item items[] = {{"r-1", s1, 1}, {"r-2", s2, 2}, {"r-3", s3, 1}};
    th_order_token(a, 809, tok);

    /* MariaDB down: the cart is refused whole, nothing is bought. */
    th_services("stop-mysql");
    struct th_resp down = send_cart(a, 809, "cart-r", tok, items, 3);
    th_expect_problem(&down, 503, "DEPENDENCY_UNAVAILABLE");
    th_services("start-mysql");
    struct th_resp first = send_past_503(a, 809, "cart-r", tok, items, 3);
    expect_complete(&first, 809, items, 3);

    /* Redis forgets: another instance answers from the database record.
     * b is retried past 503 as well: its own jobs (the sweep, the relay)
     * may have met MariaDB down and opened its breaker, which then fails
     * fast for 500 ms with 503 and Retry-After, as it should (a CI run
     * caught b's sweep tripping it 300 ms before the cart came). */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp after_flush = send_past_503(b, 809, "cart-r", tok, items, 3);
    assert_int_equal(after_flush.status, 200);
    assert_true(replayed(&after_flush));
    th_expect_layer(&after_flush, "unique-index");
    assert_string_equal(after_flush.body, first.body);

    /* MariaDB restarts and Redis forgets again. */
    th_services("stop-mysql");
    th_services("start-mysql");
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp after_restart = send_past_503(a, 809, "cart-r", tok, items, 3);
    assert_int_equal(after_restart.status, 200);
    assert_true(replayed(&after_restart));
    assert_string_equal(after_restart.body, first.body);

    /* Even without the batch's record the orders answer: the same bytes. */
    th_db_exec("DELETE FROM idempotency_records");
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp from_orders = send_past_503(b, 809, "cart-r", tok, items, 3);
    assert_int_equal(from_orders.status, 200);
    assert_true(replayed(&from_orders));
    assert_string_equal(from_orders.body, first.body);

    for (size_t i = 0; i < 3; i++)
        assert_int_equal(orders_under(809, items[i].key), 1);
    assert_int_equal(th_stock_of(s1), 4);
    assert_int_equal(th_stock_of(s2), 3);
    assert_int_equal(th_stock_of(s3), 4);
    th_resp_free(&down);
    th_resp_free(&first);
    th_resp_free(&after_flush);
    th_resp_free(&after_restart);
    th_resp_free(&from_orders);
}

/* ---- carts and single orders on a small pool ----------------------------- */

/* A cart reads the database (its batch key's record) before its items'
 * orders go to the merged batch. If the cart held that connection while it
 * waited for the batch, the batch would wait for a connection held by the
 * requests waiting for it: with a pool of two, eight carts and eight
 * buyers of single orders at once answered some 503 after the MySQL
 * timeout. Every request must be answered on its merits: each cart
 * complete, each order placed, and no request ever found the pool empty
 * for a whole timeout. */
#define POOL_CARTS     8
#define POOL_ITEMS     4
#define POOL_SINGLES   8
#define POOL_SINGLE_N  4
#define POOL_CART_USER 900
#define POOL_ONE_USER  950

struct pool_run {
    const struct th_server *srv;
    int64_t session;
    long carts[POOL_CARTS];
    long singles[POOL_SINGLES][POOL_SINGLE_N];
};

static void pool_client(int i, void *ctx)
{
    struct pool_run *run = ctx;
    char tok[96], key[32];
    if (i < POOL_CARTS) {
        char keys[POOL_ITEMS][32];
        struct item items[POOL_ITEMS];
        for (int k = 0; k < POOL_ITEMS; k++) {
            snprintf(keys[k], sizeof keys[k], "pool-%d-%d", i, k);
            items[k] = (struct item){keys[k], run->session, 1};
        }
        snprintf(key, sizeof key, "pool-cart-%d", i);
        th_order_token(run->srv, POOL_CART_USER + i, tok);
        struct th_resp r = send_cart(run->srv, POOL_CART_USER + i, key, tok, items, POOL_ITEMS);
        json_t *j = r.status == 200 ? th_json(&r) : NULL;
        run->carts[i] = j != NULL && is_complete(j) ? r.status : -r.status;
        json_decref(j);
        th_resp_free(&r);
        return;
    }
    int b = i - POOL_CARTS;
    for (int k = 0; k < POOL_SINGLE_N; k++) {
        snprintf(key, sizeof key, "pool-one-%d-%d", b, k);
        th_order_token(run->srv, POOL_ONE_USER + b, tok);
        struct th_resp r = th_order(run->srv, POOL_ONE_USER + b, key, tok, run->session, 1);
        run->singles[b][k] = r.status;
        th_resp_free(&r);
    }
}

static void test_carts_and_orders_share_a_small_pool(void **state)
{
    (void)state;
    const char *env[] = {"TICKETD_DB_CONNS=2", NULL};
    struct th_server *a = th_serve(0, env);
    struct pool_run run = {.srv = a, .session = th_session(a, 1000, 100)};
    th_parallel(POOL_CARTS + POOL_SINGLES, pool_client, &run);
    for (int i = 0; i < POOL_CARTS; i++) {
        if (run.carts[i] != 200)
            fail_msg("cart %d answered %ld (negative: not complete)", i, run.carts[i]);
    }
    for (int b = 0; b < POOL_SINGLES; b++) {
        for (int k = 0; k < POOL_SINGLE_N; k++) {
            if (run.singles[b][k] != 201)
                fail_msg("buyer %d's order %d answered %ld", b, k, run.singles[b][k]);
        }
    }
    assert_int_equal(th_orders_of(run.session),
                     POOL_CARTS * POOL_ITEMS + POOL_SINGLES * POOL_SINGLE_N);
    assert_int_equal(th_stock_of(run.session),
                     1000 - POOL_CARTS * POOL_ITEMS - POOL_SINGLES * POOL_SINGLE_N);
    /* No request waited a whole MySQL timeout for a connection. */
    assert_false(th_log_contains(a, "came free"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cart_buys_each_item_once),
        T(test_item_key_of_a_single_order),
        T(test_sold_out_item_fails_alone),
        T(test_another_list_is_422),
        T(test_copy_in_flight_is_409),
        T(test_dead_copy_is_taken_over),
        T(test_bad_carts_change_nothing),
        T(test_concurrent_copies_of_one_cart),
        T(test_overlapping_carts),
        T(test_cart_through_flush_and_restart),
        T(test_cart_token_outlives_redis),
        T(test_cart_token_with_a_later_item),
        T(test_carts_and_orders_share_a_small_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
