/* The payment callback in the Standard Webhooks scheme against the real
 * binary, Redis and MariaDB, over two instances: a delivery applied, its
 * retry replayed (also after Redis lost its records, and 16 copies at once
 * make one payment), its id reused with another body refused, refusals
 * that record nothing, and a secret rotation. Every delivery is signed by
 * loadtest/common/paysign.c, the gateway's signer, apart from the
 * service's check. */
#include "harness.h"
#include "paysign.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

/* The rotation's secrets: the new one as Standard Webhooks writes it
 * (whsec_ and base64 of "new-key-bytes!!"), the old one plain. */
#define NEW_SECRET "whsec_bmV3LWtleS1ieXRlcyEh"
#define OLD_SECRET "old-plain-secret-0123456789"

/* Posts body as delivery id, signed with secret at now + skew_s. sigs,
 * when not NULL, is sent as webhook-signature instead of the signature. */
static struct th_resp deliver_as(const struct th_server *s, const char *id, const char *body,
                                 const char *secret, long skew_s, const char *sigs)
{
    char ts[32], sig[PAYSIGN_WEBHOOK_LEN], url[128], ih[128], th[64], sh[512];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL) + skew_s);
    if (paysign_webhook(secret, id, ts, body, strlen(body), sig) != 0)
        fail_msg("cannot sign with %s", secret);
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", s->url);
    snprintf(ih, sizeof ih, "webhook-id: %s", id);
    snprintf(th, sizeof th, "webhook-timestamp: %s", ts);
    snprintf(sh, sizeof sh, "webhook-signature: %s", sigs != NULL ? sigs : sig);
    const char *h[] = {ih, th, sh, NULL};
    return th_request("POST", url, h, body);
}

static struct th_resp deliver(const struct th_server *s, const char *id, const char *body)
{
    return deliver_as(s, id, body, TH_PAY_SECRET, 0, NULL);
}

static void body_of(char *out, size_t cap, const char *txn, const char *no, long long amount,
                    const char *status)
{
    snprintf(out, cap,
             "{\"txn_id\":\"%s\",\"order_no\":\"%s\",\"amount_cents\":%lld,\"status\":\"%s\"}", txn,
             no, amount, status);
}

/* A new order of user on a new session at 1000 a seat, 2 seats. */
static void place(const struct th_server *s, int64_t user, char no[32])
{
    char tok[96];
    int64_t session = th_session(s, 10, 1000);
    th_order_token(s, user, tok);
    char key[32];
    snprintf(key, sizeof key, "wh-%lld", (long long)user);
    struct th_resp r = th_order(s, user, key, tok, session, 2);
    if (r.status != 201)
        fail_msg("order: %ld %s", r.status, r.body);
    json_t *j = th_json(&r);
    snprintf(no, 32, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
    th_resp_free(&r);
}

/* Fails unless r is a 200 with this outcome, replayed or not. */
static void expect_outcome(const struct th_resp *r, const char *outcome, bool replayed)
{
    char v[16];
    if (r->status != 200)
        fail_msg("callback: %ld %s", r->status, r->body);
    json_t *j = th_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "result")), "SUCCESS");
    assert_string_equal(json_string_value(json_object_get(j, "outcome")), outcome);
    assert_int_equal(json_is_true(json_object_get(j, "replayed")), replayed);
    json_decref(j);
    assert_int_equal(th_header(r, "Idempotent-Replayed", v, sizeof v) != NULL, replayed);
}

static int64_t deliveries(void)
{
    return th_db_int("SELECT COUNT(*) FROM idempotency_records WHERE scope = 'webhook'");
}

/* ---- applied, retried, replayed ------------------------------------------ */

static void test_applied_then_retried(void **state)
{
    char no[32], body[256];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    struct th_server *b = th_serve(1, NULL);
    place(a, 51, no);
    body_of(body, sizeof body, "gw-w-1", no, 2000, "SUCCESS");

    struct th_resp first = deliver(a, "msg_1", body);
    expect_outcome(&first, "APPLIED", false);
    /* The gateway's retry of that delivery, on the other instance. */
    struct th_resp retry = deliver(b, "msg_1", body);
    expect_outcome(&retry, "APPLIED", true);
    /* And once Redis lost everything: the database keeps delivery ids. */
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    struct th_resp later = deliver(a, "msg_1", body);
    expect_outcome(&later, "APPLIED", true);

    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(deliveries(), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM idempotency_records WHERE scope = 'webhook' "
                               "AND idem_key = 'msg_1' AND user_id = 0 AND response = 'gw-w-1'"),
                     1);
    /* Paid once (the ticketing consumer may have moved it on since). */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON o.id = "
                               "h.order_id WHERE o.order_no = '%s' AND h.cause = 'pay'",
                               no),
                     1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox WHERE event_type = 'order.paid'"), 1);
    th_resp_free(&first);
    th_resp_free(&retry);
    th_resp_free(&later);
}

/* The same id with another raw body is not a retry: 422, nothing
 * recorded. Even a body that only differs in its spacing, since the
 * signature and the id cover the raw bytes. */
static void test_id_reused_with_another_body(void **state)
{
    char no[32], body[256], other[256], spaced[300];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    struct th_server *b = th_serve(1, NULL);
    place(a, 52, no);
    body_of(body, sizeof body, "gw-w-2", no, 2000, "SUCCESS");
    body_of(other, sizeof other, "gw-w-3", no, 2000, "SUCCESS");
    snprintf(spaced, sizeof spaced, "%s ", body);
    struct th_resp first = deliver(a, "msg_2", body);
    expect_outcome(&first, "APPLIED", false);
    struct th_resp r1 = deliver(b, "msg_2", other);
    th_expect_problem(&r1, 422, "IDEMPOTENCY_KEY_REUSED");
    json_t *j = th_json(&r1);
    assert_string_equal(json_string_value(json_object_get(j, "field")), "webhook-id");
    json_decref(j);
    struct th_resp r2 = deliver(a, "msg_2", spaced);
    th_expect_problem(&r2, 422, "IDEMPOTENCY_KEY_REUSED");
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE txn_id = 'gw-w-3'"), 0);
    assert_int_equal(deliveries(), 1);
    /* Counted where it was refused, once each. */
    static const char reused[] =
        "ticketd_payment_callbacks_rejected_total{reason=\"webhook_id_reused\"}";
    assert_int_equal(th_metric(a, reused), 1);
    assert_int_equal(th_metric(b, reused), 1);
    /* Under an id of its own the other payment is a delivery like any. */
    struct th_resp r3 = deliver(b, "msg_3", other);
    expect_outcome(&r3, "DUPLICATE_PAYMENT", false);
    th_resp_free(&first);
    th_resp_free(&r1);
    th_resp_free(&r2);
    th_resp_free(&r3);
}

/* A new id for a payment recorded before (by X-Pay-* here): its answer is
 * the replay, and the id is now bound to that body. */
static void test_new_id_for_a_recorded_payment(void **state)
{
    char no[32], body[256], other[256], ts[32], sig[PAYSIGN_HEX_LEN], url[128], th[64], sh[128];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    place(a, 53, no);
    body_of(body, sizeof body, "gw-w-4", no, 2000, "SUCCESS");
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    assert_int_equal(paysign(TH_PAY_SECRET, ts, body, strlen(body), sig), 0);
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", a->url);
    snprintf(th, sizeof th, "X-Pay-Timestamp: %s", ts);
    snprintf(sh, sizeof sh, "X-Pay-Signature: %s", sig);
    const char *h[] = {th, sh, NULL};
    struct th_resp xpay = th_request("POST", url, h, body);
    expect_outcome(&xpay, "APPLIED", false);
    struct th_resp r1 = deliver(a, "msg_4", body);
    expect_outcome(&r1, "APPLIED", true);
    assert_int_equal(deliveries(), 1);
    body_of(other, sizeof other, "gw-w-5", no, 2000, "SUCCESS");
    struct th_resp r2 = deliver(a, "msg_4", other);
    th_expect_problem(&r2, 422, "IDEMPOTENCY_KEY_REUSED");
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    th_resp_free(&xpay);
    th_resp_free(&r1);
    th_resp_free(&r2);
}

/* ---- 16 copies at once ---------------------------------------------------- */

#define COPIES 16

struct storm {
    const struct th_server *servers[2];
    const char *body;
    atomic_int fresh, replayed, other;
};

static void storm_one(int i, void *p)
{
    struct storm *st = p;
    struct th_resp r = deliver(st->servers[i % 2], "msg_storm", st->body);
    json_t *j = r.status == 200 ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    const char *oc = json_string_value(json_object_get(j, "outcome"));
    if (oc != NULL && strcmp(oc, "APPLIED") == 0)
        atomic_fetch_add(json_is_true(json_object_get(j, "replayed")) ? &st->replayed : &st->fresh,
                         1);
    else
        atomic_fetch_add(&st->other, 1);
    json_decref(j);
    th_resp_free(&r);
}

static void test_sixteen_copies_one_payment(void **state)
{
    char no[32], body[256];
    (void)state;
    struct storm st = {0};
    st.servers[0] = th_serve(0, NULL);
    st.servers[1] = th_serve(1, NULL);
    place(st.servers[0], 54, no);
    body_of(body, sizeof body, "gw-w-storm", no, 2000, "SUCCESS");
    st.body = body;
    th_parallel(COPIES, storm_one, &st);
    print_message("16 copies of one delivery over 2 instances: %d applied, %d replayed, %d other\n",
                  atomic_load(&st.fresh), atomic_load(&st.replayed), atomic_load(&st.other));
    assert_int_equal(atomic_load(&st.other), 0);
    assert_int_equal(atomic_load(&st.fresh), 1);
    assert_int_equal(atomic_load(&st.replayed), COPIES - 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(deliveries(), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox WHERE event_type = 'order.paid'"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON o.id = "
                               "h.order_id WHERE o.order_no = '%s' AND h.cause = 'pay'",
                               no),
                     1);
}

/* ---- refusals record nothing ---------------------------------------------- */

static void test_refusals(void **state)
{
    char no[32], body[256], req[1024], out[4096];
    (void)state;
    struct th_server *a = th_serve(0, NULL);
    place(a, 55, no);
    body_of(body, sizeof body, "gw-w-6", no, 2000, "SUCCESS");

    struct th_resp wrong = deliver_as(a, "msg_6", body, "not-the-secret", 0, NULL);
    th_expect_problem(&wrong, 401, "SIGNATURE_INVALID");
    struct th_resp old = deliver_as(a, "msg_6", body, TH_PAY_SECRET, -301, NULL);
    th_expect_problem(&old, 401, "TIMESTAMP_OUT_OF_TOLERANCE");
    struct th_resp none = deliver_as(a, "msg_6", body, TH_PAY_SECRET, 0,
                                     "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    th_expect_problem(&none, 401, "SIGNATURE_INVALID");
    struct th_resp bad_id = deliver(a, "msg 6", body);
    th_expect_problem(&bad_id, 400, "VALIDATION_FAILED");
    body_of(req, sizeof req, "gw-w-6", "26120100000000009999", 2000, "SUCCESS");
    struct th_resp unknown = deliver(a, "msg_6", req);
    th_expect_problem(&unknown, 404, "ORDER_NOT_FOUND");
    assert_int_equal(deliveries(), 0);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 0);

    /* A second webhook-signature header: which would a proxy have read? */
    char ts[32], sig[PAYSIGN_WEBHOOK_LEN];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    assert_int_equal(paysign_webhook(TH_PAY_SECRET, "msg_6", ts, body, strlen(body), sig), 0);
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/payments/callback HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                     "webhook-id: msg_6\r\nwebhook-timestamp: %s\r\nwebhook-signature: %s\r\n"
                     "webhook-signature: %s\r\n\r\n%s",
                     strlen(body), ts, sig, sig, body);
    assert_int_equal(th_raw(a->port, req, (size_t)n, out, sizeof out, 5000), 400);
    assert_non_null(strstr(out, "BAD_REQUEST"));
    n = snprintf(req, sizeof req,
                 "POST /api/v1/payments/callback HTTP/1.1\r\nHost: x\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                 "webhook-id: msg_6\r\nWebhook-Id: msg_7\r\nwebhook-timestamp: %s\r\n"
                 "webhook-signature: %s\r\n\r\n%s",
                 strlen(body), ts, sig, body);
    assert_int_equal(th_raw(a->port, req, (size_t)n, out, sizeof out, 5000), 400);
    assert_int_equal(deliveries(), 0);

    /* Refused, nothing kept: the genuine delivery under the same id goes. */
    struct th_resp ok = deliver(a, "msg_6", body);
    expect_outcome(&ok, "APPLIED", false);
    assert_int_equal(deliveries(), 1);
    th_resp_free(&wrong);
    th_resp_free(&old);
    th_resp_free(&none);
    th_resp_free(&bad_id);
    th_resp_free(&unknown);
    th_resp_free(&ok);
}

/* ---- a rotation ---------------------------------------------------------- */

static void test_rotation(void **state)
{
    char no[32], body[256];
    (void)state;
    const char *env[] = {"TICKETD_PAY_SECRET=" NEW_SECRET ", " OLD_SECRET, NULL};
    struct th_server *a = th_serve(0, env);
    struct th_server *b = th_serve(1, env);
    place(a, 56, no);
    body_of(body, sizeof body, "gw-w-7", no, 2000, "SUCCESS");
    /* A third secret: refused, nothing recorded. */
    struct th_resp third = deliver_as(a, "msg_7", body, "whsec_dGhpcmQtc2VjcmV0", 0, NULL);
    th_expect_problem(&third, 401, "SIGNATURE_INVALID");
    assert_int_equal(deliveries(), 0);
    /* The old secret (the gateway has not switched yet), then the new. */
    struct th_resp old = deliver_as(a, "msg_7", body, OLD_SECRET, 0, NULL);
    expect_outcome(&old, "APPLIED", false);
    struct th_resp fresh = deliver_as(b, "msg_7", body, NEW_SECRET, 0, NULL);
    expect_outcome(&fresh, "APPLIED", true);
    /* Both signatures in one list, the way a sender signs during its own
     * rotation: one match is enough. */
    char ts[32], s1[PAYSIGN_WEBHOOK_LEN], s2[PAYSIGN_WEBHOOK_LEN], list[128];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    assert_int_equal(paysign_webhook("whsec_dGhpcmQtc2VjcmV0", "msg_7", ts, body, strlen(body), s1),
                     0);
    assert_int_equal(paysign_webhook(NEW_SECRET, "msg_7", ts, body, strlen(body), s2), 0);
    snprintf(list, sizeof list, "%s %s", s1, s2);
    struct th_resp both = deliver_as(b, "msg_7", body, NEW_SECRET, 0, list);
    expect_outcome(&both, "APPLIED", true);
    /* X-Pay-* during the rotation: either secret's bytes. */
    char xs[PAYSIGN_HEX_LEN], url[128], th[64], sh[128];
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", a->url);
    snprintf(th, sizeof th, "X-Pay-Timestamp: %s", ts);
    const char *h[] = {th, sh, NULL};
    static const char *const secrets[] = {NEW_SECRET, OLD_SECRET, "a-third-secret"};
    static const long want[] = {200, 200, 401};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(paysign(secrets[i], ts, body, strlen(body), xs), 0);
        snprintf(sh, sizeof sh, "X-Pay-Signature: %s", xs);
        struct th_resp r = th_request("POST", url, h, body);
        if (r.status != want[i])
            fail_msg("X-Pay with secret %d: %ld %s", i, r.status, r.body);
        th_resp_free(&r);
    }
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(deliveries(), 1);
    th_resp_free(&third);
    th_resp_free(&old);
    th_resp_free(&fresh);
    th_resp_free(&both);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, th_setup_fresh, th_teardown_stop)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_applied_then_retried),
        T(test_id_reused_with_another_body),
        T(test_new_id_for_a_recorded_payment),
        T(test_sixteen_copies_one_payment),
        T(test_refusals),
        T(test_rotation),
    };
    return cmocka_run_group_tests_name("webhooks", tests, NULL, NULL);
}
