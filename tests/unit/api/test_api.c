/* test_api.c - the HTTP API in process: requests through api_dispatch()
 * as the transport hands them over (method, path, headers, body), against
 * link-time fakes of every port (fakes.h, fake_lifecycle.h, fake_api.h),
 * so no socket, Redis or MySQL is involved.
 *
 * Each case is a row of a table: the request, what the fakes answer, and
 * the answer the contract promises (status, problem code and field, one
 * header) with the port calls the request made. One runner plays every row
 * as a cmocka test of its own, named by the row. A refusal must leave the
 * ports untouched: its row says no calls, and nothing may have changed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_api.h"
#include "fake_keys.h"
#include "fake_lifecycle.h"
#include "fakes.h"

#include "api.h"
#include "app.h"
#include "auth.h"
#include "config.h"
#include "defences.h"
#include "err.h"
#include "metrics.h"
#include "paysig.h"
#include "req.h"
#include "resp.h"
#include "respcache.h"
#include "router.h"
#include "util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JWT_SECRET "test-secret-of-at-least-32-bytes-long"
#define PAY_SECRET "pay-secret"
#define USER       42
#define ORDER_NO   "26120112345678901234"
#define JSON       "Content-Type: application/json"
#define KEY        "Idempotency-Key: key-1"
#define TOKEN      "X-Order-Token: tok-abc"

/* Who calls: the runner adds the Authorization header. */
enum who { ANON, USER_JWT, ADMIN_JWT, BAD_JWT };

/* How a payment callback is signed: the runner adds the X-Pay-* headers,
 * or for WEBHOOK_* the Standard Webhooks ones (webhook-id is the row's). */
enum sig { UNSIGNED, SIGNED, WRONG_SIG, STALE_SIG, WEBHOOK_SIGNED, WEBHOOK_WRONG };

#define MAX_HEADERS 6

/* A body nested 41 levels deep (JSONV_MAX_DEPTH is 32) under "txn_id". */
#define DEEP_BODY                                                                                  \
    "{\"txn_id\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["                                         \
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"

struct api_case {
    const char *name;
    const char *method;
    const char *path; /* with its query, if any */
    enum who who;
    enum sig sig;
    const char *headers[MAX_HEADERS]; /* "Name: value" */
    const char *body;                 /* NULL: none */
    void (*given)(void);              /* sets the fakes' knobs, or NULL */

    int status;
    const char *code;                   /* the problem's code; NULL: not a problem */
    const char *field;                  /* the problem's field, or NULL for none */
    const char *header;                 /* "Name: value" the answer carries, or NULL */
    const char *calls;                  /* the port calls, exactly ("" for none) */
    void (*then)(const struct resp *w); /* what only this row checks */
};

static struct config cfg;
static struct app app;

/* --- the transport's side: what a struct req reads (req_source) ---------- */

struct fake_request {
    const char *headers[MAX_HEADERS + 4];
    int nheaders;
    const char *query; /* after '?', or NULL */
    char arg[128];     /* the last query value looked up */
    char path[256];
};

static const char *fake_header(void *ctx, const char *name)
{
    struct fake_request *fr = ctx;
    size_t n = strlen(name);
    for (int i = 0; i < fr->nheaders; i++) {
        const char *h = fr->headers[i];
        if (strncasecmp(h, name, n) == 0 && h[n] == ':')
            return h[n + 1] == ' ' ? h + n + 2 : h + n + 1;
    }
    return NULL;
}

static const char *fake_query(void *ctx, const char *name)
{
    struct fake_request *fr = ctx;
    size_t n = strlen(name);
    for (const char *p = fr->query; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, "&");
        if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
            snprintf(fr->arg, sizeof fr->arg, "%.*s", (int)(len - n - 1), p + n + 1);
            return fr->arg;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return NULL;
}

static const struct req_source fake_source = {fake_header, fake_query};

/* --- knobs ------------------------------------------------------------------ */

static void store_down(void)
{
    fake_store.ping_rc = TD_EUNAVAIL;
    fake_store.get_rc = TD_EUNAVAIL;
    fake_store.session_rc = TD_EUNAVAIL;
}

static void redis_down(void)
{
    fake_cache.token_put_rc = TD_EUNAVAIL;
}

static void draining(void)
{
    atomic_store(&app.draining, true);
}

static void no_order(void)
{
    fake_store.get_rc = TD_ENOTFOUND;
    fake_store.session_rc = TD_ENOTFOUND;
    fake_lifecycle.rc[0] = TD_ENOTFOUND;
    fake_lifecycle.nrc = 1;
    fake_payments.rc[0] = TD_ENOTFOUND;
    fake_payments.nrc = 1;
}

static void order_paid(void)
{
    fake_lifecycle.rc[0] = TD_ECONFLICT;
    fake_lifecycle.nrc = 1;
}

static void sold_out(void)
{
    fake_store.create_rc[0] = TD_ECONFLICT;
    fake_store.ncreate_rc = 1;
}

static void tokens_optional(void)
{
    cfg.order_token_required = false;
}

static void pending_order(void)
{
    fake_payments.status = ORDER_PENDING_PAYMENT;
    fake_payments.amount_cents = 500;
}

static void delivery_of_another_body(void)
{
    fake_payments.delivery_find_rc = TD_OK;
    snprintf(fake_payments.delivery_fp, sizeof fake_payments.delivery_fp, "%064d", 0);
}

static void audit_down(void)
{
    fake_api.audit_rc = TD_EUNAVAIL;
    fake_api.points_rc = TD_EUNAVAIL;
}

/* --- what single rows check ------------------------------------------------ */

static json_t *body_of(const struct resp *w)
{
    json_t *j = json_loadb(w->body, w->body_len, 0, NULL);
    assert_non_null(j);
    return j;
}

static void then_audit_scope(const struct resp *w)
{
    assert_string_equal(fake_api.audit_scope, "12,13");
    json_t *j = body_of(w);
    json_t *ids = json_object_get(json_object_get(j, "scope"), "sessions");
    assert_int_equal(json_array_size(ids), 2);
    assert_int_equal(json_integer_value(json_array_get(ids, 1)), 13);
    assert_true(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
}

static void then_metrics_text(const struct resp *w)
{
    assert_string_equal(w->content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(w->body, "# TYPE ticketd_orders_created_total counter"));
}

static void then_not_ready(const struct resp *w)
{
    json_t *j = body_of(w);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "draining");
    json_decref(j);
}

static void then_points(const struct resp *w)
{
    json_t *j = body_of(w);
    assert_int_equal(json_integer_value(json_object_get(j, "user_id")), USER);
    json_decref(j);
}

static void then_order_no(const struct resp *w)
{
    json_t *j = body_of(w);
    assert_string_equal(json_string_value(json_object_get(j, "order_no")), ORDER_NO);
    json_decref(j);
}

/* Location names the number the order was created under. */
static void then_located(const struct resp *w)
{
    char want[64];
    assert_int_equal(fake_store.create_calls, 1);
    snprintf(want, sizeof want, "/api/v1/orders/%s", fake_store.order_nos[0]);
    assert_non_null(resp_get_header(w, "Location"));
    assert_string_equal(resp_get_header(w, "Location"), want);
}

static void then_lifecycle_untouched(const struct resp *w)
{
    (void)w;
    assert_int_equal(fake_lifecycle.changes, 0);
}

static void then_cancelled_by_user(const struct resp *w)
{
    (void)w;
    assert_int_equal(fake_lifecycle.changes, 1);
    assert_string_equal(fake_lifecycle.order_no, ORDER_NO);
}

static void then_callback_recorded(const struct resp *w)
{
    json_t *j = body_of(w);
    assert_string_equal(json_string_value(json_object_get(j, "result")), "SUCCESS");
    assert_string_equal(fake_payments.txn_id, "t-1");
    json_decref(j);
}

static void then_callback_dedup(const struct resp *w)
{
    assert_non_null(w->layer);
    assert_string_equal(w->layer, "callback-dedup");
}

/* --- the key look-up's knobs ------------------------------------------------ */

#define FP64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define KEYS "/api/v1/idempotency-keys/"

static void key_done_in_redis(void)
{
    snprintf(fake_keys.records[0], sizeof fake_keys.records[0],
             "D|" FP64 "|201|{\"order_no\":\"" ORDER_NO "\",\"status\":\"PENDING_PAYMENT\"}");
}

static void key_in_database(void)
{
    fake_keys.order_rc = TD_OK;
    snprintf(fake_keys.order.order_no, sizeof fake_keys.order.order_no, "%s", ORDER_NO);
}

/* Both: Redis forgot the order, and a retry's marker stands meanwhile. */
static void key_in_flight(void)
{
    snprintf(fake_keys.records[0], sizeof fake_keys.records[0], "P|" FP64 "|%s0123456789abcdef",
             app.instance);
    fake_keys.ttl_ms[0] = cfg.inflight_ttl_ms - 1234;
}

static void key_retried_after_flush(void)
{
    key_in_flight();
    key_in_database();
}

static void key_of_a_dead_copy(void)
{
    snprintf(fake_keys.records[0], sizeof fake_keys.records[0],
             "P|" FP64 "|00000000000000000123456789abcdef");
    fake_cache.alive_rc = TD_ENOTFOUND;
}

static void batch_done_in_redis(void)
{
    snprintf(fake_keys.records[1], sizeof fake_keys.records[1],
             "D|" FP64 "|200|{\"complete\":true,\"items\":[]}");
}

static void batch_in_flight(void)
{
    snprintf(fake_keys.records[1], sizeof fake_keys.records[1], "P|" FP64 "|%s0123456789abcdef",
             app.instance);
    fake_keys.ttl_ms[1] = cfg.inflight_ttl_ms;
}

static void key_redis_down(void)
{
    fake_keys.peek_rc = TD_EUNAVAIL;
}

static void key_mysql_down(void)
{
    fake_keys.order_rc = TD_EUNAVAIL;
}

static void then_key(const struct resp *w, const char *state, const char *kind)
{
    json_t *j = body_of(w);
    assert_string_equal(json_string_value(json_object_get(j, "key")), "k-1");
    assert_string_equal(json_string_value(json_object_get(j, "state")), state);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), kind);
    json_decref(j);
    assert_string_equal(fake_keys.names[0], "k-1");
    assert_string_equal(fake_keys.names[1], "batch/k-1");
}

static void then_key_order(const struct resp *w)
{
    then_key(w, "COMPLETED", "order");
    json_t *j = body_of(w);
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 201);
    assert_string_equal(json_string_value(json_object_get(j, "order_no")), ORDER_NO);
    assert_string_equal(json_string_value(json_object_get(j, "location")),
                        "/api/v1/orders/" ORDER_NO);
    json_decref(j);
}

static void then_key_running(const struct resp *w)
{
    then_key(w, "IN_PROGRESS", "order");
    json_t *j = body_of(w);
    assert_int_equal(json_integer_value(json_object_get(j, "age_ms")), 1234);
    json_decref(j);
}

static void then_key_batch(const struct resp *w)
{
    then_key(w, "COMPLETED", "batch");
    json_t *j = body_of(w);
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 200);
    assert_true(json_is_true(json_object_get(j, "complete")));
    json_decref(j);
}

static void then_batch_running(const struct resp *w)
{
    then_key(w, "IN_PROGRESS", "batch");
    json_t *j = body_of(w);
    assert_int_equal(json_integer_value(json_object_get(j, "age_ms")), 0);
    json_decref(j);
}

/* --- the table --------------------------------------------------------------- */

#define ORDER_BODY "{\"session_id\":7,\"quantity\":2}"
#define CB_BODY                                                                                    \
    "{\"txn_id\":\"t-1\",\"order_no\":\"" ORDER_NO "\",\"amount_cents\":500,\"status\":"           \
    "\"SUCCESS\"}"
#define CART_BODY        "{\"items\":[{\"key\":\"a\",\"session_id\":7,\"quantity\":1}]}"
#define ORDER_PATH(tail) "/api/v1/orders/" ORDER_NO tail
/* The order flow's port calls with every defence on (test_orders.c). */
#define PLACED "order_begin order_create order_complete"

static const struct api_case cases[] = {
    /* Routing, before anything else. */
    {"unknown path", "GET", "/nowhere", .status = 404, .code = "NOT_FOUND", .calls = ""},
    {"trailing slash", "GET", "/api/v1/orders/", USER_JWT, .status = 404, .code = "NOT_FOUND",
     .calls = ""},
    {"method not allowed", "DELETE", "/api/v1/orders", USER_JWT, .status = 405,
     .code = "METHOD_NOT_ALLOWED", .header = "Allow: GET, HEAD, POST", .calls = ""},
    {"405 before auth", "GET", "/api/v1/tokens", .status = 405, .code = "METHOD_NOT_ALLOWED",
     .header = "Allow: POST", .calls = ""},

    /* The probes and metrics: public, no body, the first two on the I/O
     * thread. */
    {"livez", "GET", "/livez", .status = 200, .calls = ""},
    {"healthz", "GET", "/healthz", .status = 200, .calls = ""},
    {"HEAD livez", "HEAD", "/livez", .status = 200, .calls = ""},
    {"metrics", "GET", "/metrics", .status = 200, .calls = "", .then = then_metrics_text},
    {"readyz", "GET", "/readyz", .status = 200, .calls = "store_ping cache_ping"},
    {"readyz without MySQL", "GET", "/readyz", .given = store_down, .status = 503,
     .header = "Retry-After: 1", .calls = "store_ping cache_ping"},
    {"readyz while draining", "GET", "/readyz", .given = draining, .status = 503,
     .header = "Retry-After: 1", .calls = "store_ping cache_ping", .then = then_not_ready},

    /* Access: a bearer token for users, an admin's for admin routes. */
    {"orders without a token", "POST", "/api/v1/orders", .headers = {JSON, KEY}, .body = ORDER_BODY,
     .status = 401, .code = "UNAUTHENTICATED",
     .header = "WWW-Authenticate: Bearer realm=\"ticketd\"", .calls = ""},
    {"orders with a forged token", "POST", "/api/v1/orders", BAD_JWT, .headers = {JSON, KEY},
     .body = ORDER_BODY, .status = 401, .code = "UNAUTHENTICATED", .calls = ""},
    {"sessions by a user", "POST", "/api/v1/sessions", USER_JWT, .headers = {JSON},
     .body = "{\"title\":\"x\",\"price_cents\":1,\"stock\":1}", .status = 403, .code = "FORBIDDEN",
     .calls = ""},
    {"complete by a user", "POST", ORDER_PATH("/complete"), USER_JWT, .status = 403,
     .code = "FORBIDDEN", .calls = "", .then = then_lifecycle_untouched},
    {"audit by a user", "GET", "/api/v1/admin/audit", USER_JWT, .status = 403, .code = "FORBIDDEN",
     .calls = ""},
    {"me without a token", "GET", "/api/v1/me", .status = 401, .code = "UNAUTHENTICATED",
     .calls = ""},

    /* Media type: a required body is JSON, an optional one when sent. */
    {"orders without Content-Type", "POST", "/api/v1/orders", USER_JWT, .headers = {KEY},
     .body = ORDER_BODY, .status = 415, .code = "UNSUPPORTED_MEDIA_TYPE", .calls = ""},
    {"orders as text/plain", "POST", "/api/v1/orders", USER_JWT,
     .headers = {"Content-Type: text/plain", KEY}, .body = ORDER_BODY, .status = 415,
     .code = "UNSUPPORTED_MEDIA_TYPE", .calls = ""},
    {"JSON with a charset", "POST", "/api/v1/tokens", USER_JWT,
     .headers = {"Content-Type: Application/JSON; charset=utf-8"}, .body = "{}", .status = 201,
     .calls = "token_put"},
    {"optional body sent untyped", "POST", "/api/v1/tokens", USER_JWT, .body = "{}", .status = 415,
     .code = "UNSUPPORTED_MEDIA_TYPE", .calls = ""},

    /* Every body's nesting is bounded before any handler reads it: the
     * unauthenticated callback before its signature, an order before its
     * headers. */
    {"callback nested too deep", "POST", "/api/v1/payments/callback", .headers = {JSON},
     .body = DEEP_BODY, .status = 400, .code = "VALIDATION_FAILED", .field = "txn_id", .calls = ""},
    {"order nested too deep", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON},
     .body = DEEP_BODY, .status = 400, .code = "VALIDATION_FAILED", .field = "txn_id", .calls = ""},
    {"token body nested too deep", "POST", "/api/v1/tokens", USER_JWT, .headers = {JSON},
     .body = DEEP_BODY, .status = 400, .code = "VALIDATION_FAILED", .field = "txn_id", .calls = ""},

    /* POST /api/v1/tokens */
    {"token", "POST", "/api/v1/tokens", USER_JWT, .status = 201, .calls = "token_put"},
    {"token with a field", "POST", "/api/v1/tokens", USER_JWT, .headers = {JSON},
     .body = "{\"x\":1}", .status = 400, .code = "VALIDATION_FAILED", .field = "x", .calls = ""},
    {"token with broken JSON", "POST", "/api/v1/tokens", USER_JWT, .headers = {JSON}, .body = "{",
     .status = 400, .code = "INVALID_JSON", .calls = ""},
    {"token without Redis", "POST", "/api/v1/tokens", USER_JWT, .given = redis_down, .status = 503,
     .code = "DEPENDENCY_UNAVAILABLE", .header = "Retry-After: 1", .calls = "token_put"},

    /* POST /api/v1/orders */
    {"order placed", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = ORDER_BODY, .status = 201, .calls = PLACED, .then = then_located},
    {"order without a key", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, TOKEN},
     .body = ORDER_BODY, .status = 400, .code = "IDEMPOTENCY_KEY_REQUIRED", .calls = ""},
    {"order with a bad key", "POST", "/api/v1/orders", USER_JWT,
     .headers = {JSON, "Idempotency-Key: a b", TOKEN}, .body = ORDER_BODY, .status = 400,
     .code = "IDEMPOTENCY_KEY_INVALID", .calls = ""},
    {"order with an empty body", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = "", .status = 400, .code = "INVALID_JSON", .calls = ""},
    {"order with an array", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = "[1]", .status = 400, .code = "INVALID_JSON", .calls = ""},
    {"order without session_id", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = "{\"quantity\":1}", .status = 400, .code = "VALIDATION_FAILED", .field = "session_id",
     .calls = ""},
    {"order with session_id 1e400", "POST", "/api/v1/orders", USER_JWT,
     .headers = {JSON, KEY, TOKEN}, .body = "{\"session_id\":1e400,\"quantity\":1}", .status = 400,
     .code = "VALIDATION_FAILED", .field = "session_id", .calls = ""},
    {"order of 0 seats", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = "{\"session_id\":7,\"quantity\":0}", .status = 400, .code = "VALIDATION_FAILED",
     .field = "quantity", .calls = ""},
    {"order over the limit", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = "{\"session_id\":7,\"quantity\":7}", .status = 400, .code = "VALIDATION_FAILED",
     .field = "quantity", .calls = ""},
    {"order without its token", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY},
     .body = ORDER_BODY, .status = 400, .code = "ORDER_TOKEN_REQUIRED", .calls = ""},
    {"order, tokens optional", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY},
     .body = ORDER_BODY, .given = tokens_optional, .status = 201, .calls = PLACED},
    {"order sold out", "POST", "/api/v1/orders", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = ORDER_BODY, .given = sold_out, .status = 409, .code = "SOLD_OUT",
     .calls = "order_begin order_create order_release"},

    /* POST /api/v1/orders/batch */
    {"cart without a key", "POST", "/api/v1/orders/batch", USER_JWT, .headers = {JSON, TOKEN},
     .body = CART_BODY, .status = 400, .code = "IDEMPOTENCY_KEY_REQUIRED", .calls = ""},
    {"cart without items", "POST", "/api/v1/orders/batch", USER_JWT, .headers = {JSON, KEY, TOKEN},
     .body = "{}", .status = 400, .code = "VALIDATION_FAILED", .field = "items", .calls = ""},
    {"cart without its token", "POST", "/api/v1/orders/batch", USER_JWT, .headers = {JSON, KEY},
     .body = CART_BODY, .status = 400, .code = "ORDER_TOKEN_REQUIRED", .calls = ""},
    {"cart untyped", "POST", "/api/v1/orders/batch", USER_JWT, .headers = {KEY, TOKEN},
     .body = CART_BODY, .status = 415, .code = "UNSUPPORTED_MEDIA_TYPE", .calls = ""},

    /* GET /api/v1/orders */
    {"list", "GET", "/api/v1/orders?limit=5", USER_JWT, .status = 200, .calls = "order_list"},
    {"list of 0", "GET", "/api/v1/orders?limit=0", USER_JWT, .status = 400,
     .code = "VALIDATION_FAILED", .field = "limit", .calls = ""},
    {"list of 101", "GET", "/api/v1/orders?limit=101", USER_JWT, .status = 400,
     .code = "VALIDATION_FAILED", .field = "limit", .calls = ""},
    {"list from a made-up cursor", "GET", "/api/v1/orders?cursor=x12", USER_JWT, .status = 400,
     .code = "VALIDATION_FAILED", .field = "cursor", .calls = ""},

    /* GET /api/v1/orders/{order_no} */
    {"order", "GET", ORDER_PATH(""), USER_JWT, .status = 200, .calls = "order_get",
     .then = then_order_no},
    {"order number not ours", "GET", "/api/v1/orders/abc", USER_JWT, .status = 404,
     .code = "ORDER_NOT_FOUND", .calls = ""},
    {"order number with a blank", "GET", "/api/v1/orders/2612011234567890123 ", USER_JWT,
     .status = 404, .code = "ORDER_NOT_FOUND", .calls = ""},
    {"order not found", "GET", ORDER_PATH(""), USER_JWT, .given = no_order, .status = 404,
     .code = "ORDER_NOT_FOUND", .calls = "order_get"},
    {"order without MySQL", "GET", ORDER_PATH(""), USER_JWT, .given = store_down, .status = 503,
     .code = "DEPENDENCY_UNAVAILABLE", .header = "Retry-After: 1", .calls = "order_get"},

    /* POST /api/v1/orders/{order_no}/cancel and /complete */
    {"cancel", "POST", ORDER_PATH("/cancel"), USER_JWT, .status = 200, .calls = "",
     .then = then_cancelled_by_user},
    {"cancel of a made-up number", "POST", "/api/v1/orders/abc/cancel", USER_JWT, .status = 404,
     .code = "ORDER_NOT_FOUND", .calls = "", .then = then_lifecycle_untouched},
    {"cancel with a field", "POST", ORDER_PATH("/cancel"), USER_JWT, .headers = {JSON},
     .body = "{\"why\":1}", .status = 400, .code = "VALIDATION_FAILED", .field = "why", .calls = "",
     .then = then_lifecycle_untouched},
    {"cancel of a paid order", "POST", ORDER_PATH("/cancel"), USER_JWT, .given = order_paid,
     .status = 409, .code = "INVALID_TRANSITION", .calls = ""},
    {"cancel of no order", "POST", ORDER_PATH("/cancel"), USER_JWT, .given = no_order,
     .status = 404, .code = "ORDER_NOT_FOUND", .calls = ""},
    {"complete", "POST", ORDER_PATH("/complete"), ADMIN_JWT, .headers = {JSON}, .body = "{}",
     .status = 200, .calls = ""},
    {"complete of a paid order", "POST", ORDER_PATH("/complete"), ADMIN_JWT, .given = order_paid,
     .status = 409, .code = "INVALID_TRANSITION", .calls = ""},

    /* POST /api/v1/payments/callback: the signature before the body. */
    {"callback", "POST", "/api/v1/payments/callback", .sig = SIGNED, .headers = {JSON},
     .body = CB_BODY, .given = pending_order, .status = 200,
     .calls = "payment_begin payment_lock payment_find payment_insert payment_move "
              "payment_event payment_commit",
     .then = then_callback_recorded},
    {"callback unsigned", "POST", "/api/v1/payments/callback", .headers = {JSON}, .body = CB_BODY,
     .status = 401, .code = "SIGNATURE_INVALID",
     .header = "WWW-Authenticate: HMAC-SHA256 realm=\"ticketd-payments\"", .calls = ""},
    {"callback signed wrong", "POST", "/api/v1/payments/callback", .sig = WRONG_SIG,
     .headers = {JSON}, .body = CB_BODY, .status = 401, .code = "SIGNATURE_INVALID", .calls = ""},
    {"callback signed long ago", "POST", "/api/v1/payments/callback", .sig = STALE_SIG,
     .headers = {JSON}, .body = CB_BODY, .status = 401, .code = "TIMESTAMP_OUT_OF_TOLERANCE",
     .calls = ""},
    {"callback untyped", "POST", "/api/v1/payments/callback", .sig = SIGNED, .body = CB_BODY,
     .status = 415, .code = "UNSUPPORTED_MEDIA_TYPE", .calls = ""},
    {"callback broken JSON", "POST", "/api/v1/payments/callback", .sig = SIGNED, .headers = {JSON},
     .body = "{\"txn_id\":", .status = 400, .code = "INVALID_JSON", .calls = ""},
    {"callback bad txn_id", "POST", "/api/v1/payments/callback", .sig = SIGNED, .headers = {JSON},
     .body = "{\"txn_id\":\"a b\",\"order_no\":\"" ORDER_NO
             "\",\"amount_cents\":500,\"status\":\"SUCCESS\"}",
     .status = 400, .code = "VALIDATION_FAILED", .field = "txn_id", .calls = ""},
    {"callback negative amount", "POST", "/api/v1/payments/callback", .sig = SIGNED,
     .headers = {JSON},
     .body = "{\"txn_id\":\"t-1\",\"order_no\":\"" ORDER_NO
             "\",\"amount_cents\":-1,\"status\":\"SUCCESS\"}",
     .status = 400, .code = "VALIDATION_FAILED", .field = "amount_cents", .calls = ""},
    {"callback unknown status", "POST", "/api/v1/payments/callback", .sig = SIGNED,
     .headers = {JSON},
     .body = "{\"txn_id\":\"t-1\",\"order_no\":\"" ORDER_NO
             "\",\"amount_cents\":500,\"status\":\"MAYBE\"}",
     .status = 400, .code = "VALIDATION_FAILED", .field = "status", .calls = ""},
    {"callback for no order", "POST", "/api/v1/payments/callback", .sig = SIGNED, .headers = {JSON},
     .body = CB_BODY, .given = no_order, .status = 404, .code = "ORDER_NOT_FOUND",
     .calls = "payment_begin payment_lock payment_rollback"},
    /* The Standard Webhooks scheme: its delivery id claimed with the payment. */
    {"webhook delivery", "POST", "/api/v1/payments/callback", .sig = WEBHOOK_SIGNED,
     .headers = {JSON, "webhook-id: msg-1"}, .body = CB_BODY, .given = pending_order, .status = 200,
     .calls = "delivery_find payment_begin delivery_claim payment_lock payment_find "
              "payment_insert payment_move payment_event payment_commit",
     .then = then_callback_recorded},
    {"webhook signed wrong", "POST", "/api/v1/payments/callback", .sig = WEBHOOK_WRONG,
     .headers = {JSON, "webhook-id: msg-1"}, .body = CB_BODY, .status = 401,
     .code = "SIGNATURE_INVALID", .calls = ""},
    {"webhook without an id", "POST", "/api/v1/payments/callback", .sig = WEBHOOK_SIGNED,
     .headers = {JSON}, .body = CB_BODY, .status = 400, .code = "VALIDATION_FAILED",
     .field = "webhook-id", .calls = ""},
    {"webhook id outside the grammar", "POST", "/api/v1/payments/callback", .sig = WEBHOOK_SIGNED,
     .headers = {JSON, "webhook-id: msg 1"}, .body = CB_BODY, .status = 400,
     .code = "VALIDATION_FAILED", .field = "webhook-id", .calls = ""},
    {"webhook id of another body", "POST", "/api/v1/payments/callback", .sig = WEBHOOK_SIGNED,
     .headers = {JSON, "webhook-id: msg-1"}, .body = CB_BODY, .given = delivery_of_another_body,
     .status = 422, .code = "IDEMPOTENCY_KEY_REUSED", .field = "webhook-id",
     .calls = "delivery_find", .then = then_callback_dedup},

    /* GET /api/v1/idempotency-keys/{key}: Redis's record first, the
     * database when Redis forgot; looking takes and writes nothing. */
    {"key answered by Redis", "GET", KEYS "k-1", USER_JWT, .given = key_done_in_redis,
     .status = 200, .header = "Cache-Control: no-store", .calls = "idem_peek",
     .then = then_key_order},
    {"key answered by the database", "GET", KEYS "k-1", USER_JWT, .given = key_in_database,
     .status = 200, .calls = "idem_peek order_peek", .then = then_key_order},
    {"key in flight", "GET", KEYS "k-1", USER_JWT, .given = key_in_flight, .status = 200,
     .calls = "idem_peek order_peek", .then = then_key_running},
    {"key completed while a retry runs", "GET", KEYS "k-1", USER_JWT,
     .given = key_retried_after_flush, .status = 200, .calls = "idem_peek order_peek",
     .then = then_key_order},
    {"key of a dead copy", "GET", KEYS "k-1", USER_JWT, .given = key_of_a_dead_copy, .status = 404,
     .code = "IDEMPOTENCY_KEY_NOT_FOUND", .calls = "idem_peek instance_alive order_peek idem_find"},
    {"batch key answered by Redis", "GET", KEYS "k-1", USER_JWT, .given = batch_done_in_redis,
     .status = 200, .calls = "idem_peek order_peek", .then = then_key_batch},
    {"batch key in flight", "GET", KEYS "k-1", USER_JWT, .given = batch_in_flight, .status = 200,
     .calls = "idem_peek order_peek idem_find", .then = then_batch_running},
    {"key unknown", "GET", KEYS "k-1", USER_JWT, .status = 404, .code = "IDEMPOTENCY_KEY_NOT_FOUND",
     .calls = "idem_peek order_peek idem_find"},
    {"key unknown without Redis", "GET", KEYS "k-1", USER_JWT, .given = key_redis_down,
     .status = 503, .code = "DEPENDENCY_UNAVAILABLE", .calls = "idem_peek order_peek idem_find"},
    {"key without MySQL", "GET", KEYS "k-1", USER_JWT, .given = key_mysql_down, .status = 503,
     .code = "DEPENDENCY_UNAVAILABLE", .header = "Retry-After: 1", .calls = "idem_peek order_peek"},
    {"key malformed", "GET", KEYS "k%201", USER_JWT, .status = 400,
     .code = "IDEMPOTENCY_KEY_INVALID", .calls = ""},
    {"key quoted", "GET", KEYS "\"k-1\"", USER_JWT, .status = 400,
     .code = "IDEMPOTENCY_KEY_INVALID", .calls = ""},
    {"key of 65 characters", "GET",
     KEYS "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", USER_JWT,
     .status = 400, .code = "IDEMPOTENCY_KEY_INVALID", .calls = ""},
    {"key without a token", "GET", KEYS "k-1", .status = 401, .code = "UNAUTHENTICATED",
     .calls = ""},
    {"key posted", "POST", KEYS "k-1", USER_JWT, .status = 405, .code = "METHOD_NOT_ALLOWED",
     .header = "Allow: GET, HEAD", .calls = ""},

    /* POST /api/v1/sessions, GET /api/v1/sessions/{id} */
    {"session created", "POST", "/api/v1/sessions", ADMIN_JWT, .headers = {JSON},
     .body = "{\"title\":\"Show\",\"price_cents\":500,\"stock\":10}", .status = 201,
     .header = "Location: /api/v1/sessions/1", .calls = "session_create"},
    {"session without a title", "POST", "/api/v1/sessions", ADMIN_JWT, .headers = {JSON},
     .body = "{\"price_cents\":500,\"stock\":10}", .status = 400, .code = "VALIDATION_FAILED",
     .field = "title", .calls = ""},
    {"session at a negative price", "POST", "/api/v1/sessions", ADMIN_JWT, .headers = {JSON},
     .body = "{\"title\":\"Show\",\"price_cents\":-1,\"stock\":10}", .status = 400,
     .code = "VALIDATION_FAILED", .field = "price_cents", .calls = ""},
    {"session with too much stock", "POST", "/api/v1/sessions", ADMIN_JWT, .headers = {JSON},
     .body = "{\"title\":\"Show\",\"price_cents\":1,\"stock\":10000001}", .status = 400,
     .code = "VALIDATION_FAILED", .field = "stock", .calls = ""},
    {"session without a body", "POST", "/api/v1/sessions", ADMIN_JWT, .headers = {JSON},
     .status = 400, .code = "INVALID_JSON", .calls = ""},
    {"session without MySQL", "POST", "/api/v1/sessions", ADMIN_JWT, .headers = {JSON},
     .body = "{\"title\":\"Show\",\"price_cents\":500,\"stock\":10}", .given = store_down,
     .status = 503, .code = "DEPENDENCY_UNAVAILABLE", .calls = "session_create"},
    {"session", "GET", "/api/v1/sessions/7", .status = 200, .calls = "session_get"},
    {"session id not a number", "GET", "/api/v1/sessions/abc", .status = 404,
     .code = "SESSION_NOT_FOUND", .calls = ""},
    {"session id with a leading 0", "GET", "/api/v1/sessions/07", .status = 404,
     .code = "SESSION_NOT_FOUND", .calls = ""},
    {"session not found", "GET", "/api/v1/sessions/7", .given = no_order, .status = 404,
     .code = "SESSION_NOT_FOUND", .calls = "session_get"},

    /* GET /api/v1/me */
    {"me", "GET", "/api/v1/me", USER_JWT, .status = 200, .calls = "user_points",
     .then = then_points},
    {"me without MySQL", "GET", "/api/v1/me", USER_JWT, .given = audit_down, .status = 503,
     .code = "DEPENDENCY_UNAVAILABLE", .calls = "user_points"},

    /* GET /api/v1/admin/audit */
    {"audit", "GET", "/api/v1/admin/audit", ADMIN_JWT, .status = 200, .calls = "audit"},
    {"audit of two sessions", "GET", "/api/v1/admin/audit?sessions=12,13", ADMIN_JWT, .status = 200,
     .calls = "audit", .then = then_audit_scope},
    {"audit of a made-up scope", "GET", "/api/v1/admin/audit?sessions=12,x", ADMIN_JWT,
     .status = 400, .code = "VALIDATION_FAILED", .field = "sessions", .calls = ""},
    {"audit of an empty id", "GET", "/api/v1/admin/audit?sessions=12,,13", ADMIN_JWT, .status = 400,
     .code = "VALIDATION_FAILED", .field = "sessions", .calls = ""},
    {"audit without MySQL", "GET", "/api/v1/admin/audit", ADMIN_JWT, .given = audit_down,
     .status = 503, .code = "DEPENDENCY_UNAVAILABLE", .calls = "audit"},
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* --- the runner ---------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    char err[128];
    config_defaults(&cfg);
    assert_int_equal(config_set(&cfg, "TICKETD_JWT_SECRET", JWT_SECRET, err, sizeof err), TD_OK);
    assert_int_equal(config_set(&cfg, "TICKETD_PAY_SECRET", PAY_SECRET, err, sizeof err), TD_OK);
    app = (struct app){.cfg = &cfg, .defences = DEFENCES_ALL, .respcache = respcache_new(64)};
    snprintf(app.instance, sizeof app.instance, "%s", "fedcba9876543210");
    fakes_reset();
    fake_lifecycle_reset();
    fake_payments_reset();
    fake_api_reset();
    /* The order GET and the lifecycle answer with. */
    snprintf(fake_store.found.order_no, sizeof fake_store.found.order_no, "%s", ORDER_NO);
    fake_store.found.user_id = USER;
    fake_store.get_rc = TD_OK;
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

/* The headers the row names, then those the runner makes: Authorization
 * and the gateway's signature (signed by paysig_sign, ticketd's own). */
static void build_headers(const struct api_case *c, struct fake_request *fr, char *auth,
                          size_t auth_cap, char sig[2][128])
{
    for (int i = 0; i < MAX_HEADERS && c->headers[i] != NULL; i++)
        fr->headers[fr->nheaders++] = c->headers[i];
    if (c->who != ANON) {
        char *jwt =
            c->who == BAD_JWT
                ? auth_issue("another-secret-of-at-least-32-bytes", USER, false, wall_s(), 600)
                : auth_issue(JWT_SECRET, USER, c->who == ADMIN_JWT, wall_s(), 600);
        assert_non_null(jwt);
        snprintf(auth, auth_cap, "Authorization: Bearer %s", jwt);
        free(jwt);
        fr->headers[fr->nheaders++] = auth;
    }
    if (c->sig == WEBHOOK_SIGNED || c->sig == WEBHOOK_WRONG) {
        char v1[PAYSIG_WEBHOOK_LEN + 1];
        const char *secret = c->sig == WEBHOOK_WRONG ? "not-the-secret" : PAY_SECRET;
        const char *id = fake_header(fr, "webhook-id");
        const char *body = c->body != NULL ? c->body : "";
        snprintf(sig[0], sizeof sig[0], "webhook-timestamp: %lld", (long long)wall_s());
        paysig_sign_webhook((const unsigned char *)secret, strlen(secret), id != NULL ? id : "",
                            sig[0] + strlen("webhook-timestamp: "), body, strlen(body), v1);
        snprintf(sig[1], sizeof sig[1], "webhook-signature: %s", v1);
        fr->headers[fr->nheaders++] = sig[0];
        fr->headers[fr->nheaders++] = sig[1];
    } else if (c->sig != UNSIGNED) {
        char ts[24], hex[PAYSIG_HEX_LEN + 1];
        int64_t when = c->sig == STALE_SIG ? wall_s() - cfg.pay_tolerance_s - 60 : wall_s();
        const char *body = c->body != NULL ? c->body : "";
        snprintf(ts, sizeof ts, "%lld", (long long)when);
        paysig_sign(c->sig == WRONG_SIG ? "not-the-secret" : PAY_SECRET, ts, body, strlen(body),
                    hex);
        snprintf(sig[0], sizeof sig[0], "X-Pay-Timestamp: %s", ts);
        snprintf(sig[1], sizeof sig[1], "X-Pay-Signature: %s", hex);
        fr->headers[fr->nheaders++] = sig[0];
        fr->headers[fr->nheaders++] = sig[1];
    }
}

/* The answer is the problem the row names: its JSON repeats the status and
 * the code, and names the field when the row does. */
static void check_problem(const struct api_case *c, const struct resp *w)
{
    if (c->code == NULL) {
        assert_null(w->code);
        return;
    }
    assert_non_null(w->code);
    assert_string_equal(w->code, c->code);
    assert_string_equal(w->content_type, "application/problem+json");
    json_t *j = body_of(w);
    assert_string_equal(json_string_value(json_object_get(j, "code")), c->code);
    assert_int_equal(json_integer_value(json_object_get(j, "status")), c->status);
    const char *field = json_string_value(json_object_get(j, "field"));
    if (c->field != NULL) {
        assert_non_null(field);
        assert_string_equal(field, c->field);
    } else {
        assert_null(field);
    }
    json_decref(j);
}

static void check_header(const struct api_case *c, const struct resp *w)
{
    if (c->header == NULL)
        return;
    char name[64];
    const char *colon = strchr(c->header, ':');
    snprintf(name, sizeof name, "%.*s", (int)(colon - c->header), c->header);
    const char *got = resp_get_header(w, name);
    if (got == NULL)
        fail_msg("no %s header", name);
    assert_string_equal(got, colon + 2);
}

static void run_case(void **state)
{
    const struct api_case *c = *state;
    struct fake_request fr = {0};
    char auth[700], sig[2][128];
    if (c->given != NULL)
        c->given();
    build_headers(c, &fr, auth, sizeof auth, sig);
    snprintf(fr.path, sizeof fr.path, "%s", c->path);
    char *q = strchr(fr.path, '?');
    if (q != NULL) {
        *q = '\0';
        fr.query = q + 1;
    }
    /* A body is NUL-terminated, as the transport keeps it. */
    char *body = c->body != NULL && c->body[0] != '\0' ? xstrdup(c->body) : NULL;
    struct req r = {
        .method = c->method,
        .version = "HTTP/1.1",
        .path = fr.path,
        .request_id = "test-request",
        .body = body,
        .body_len = body != NULL ? strlen(body) : 0,
        .route = ROUTE_NOT_FOUND,
        .app = &app,
        .src = &fake_source,
        .transport = &fr,
    };
    struct resp w;
    resp_init(&w);

    api_dispatch(&r, &w);

    if (w.status != c->status)
        fail_msg("status %d, want %d: %.*s", w.status, c->status, (int)w.body_len,
                 w.body != NULL ? w.body : "");
    check_problem(c, &w);
    check_header(c, &w);
    assert_string_equal(fake_calls, c->calls);
    if (c->then != NULL)
        c->then(&w);
    if (r.ctx_free != NULL)
        r.ctx_free(r.ctx);
    resp_reset(&w);
    free(body);
}

/* Every route of the table is asked at least once, so a route added
 * without a row here is noticed. */
static void test_every_route_has_a_row(void **state)
{
    (void)state;
    for (int id = 0; id < ROUTE_COUNT; id++) {
        bool seen = false;
        for (size_t i = 0; i < N_CASES && !seen; i++) {
            struct route_match m;
            char path[256];
            snprintf(path, sizeof path, "%s", cases[i].path);
            path[strcspn(path, "?")] = '\0';
            seen = router_match(cases[i].method, path, &m) == id;
        }
        if (!seen)
            fail_msg("route %s %s has no row", router_route(id)->method, router_pattern(id));
    }
}

int main(void)
{
    struct CMUnitTest tests[N_CASES + 1] = {
        cmocka_unit_test(test_every_route_has_a_row),
    };
    for (size_t i = 0; i < N_CASES; i++)
        tests[i + 1] = (struct CMUnitTest){.name = cases[i].name,
                                           .test_func = run_case,
                                           .setup_func = setup,
                                           .teardown_func = teardown,
                                           .initial_state = (void *)&cases[i]};
    return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
