/* Payment callbacks, cancel, complete and the expiry sweep against the real
 * binary, Redis and MariaDB: one outcome per txn_id however often and
 * wherever it arrives, exactly one winner between a payment and a cancel
 * or the sweep, seats given back once, and an audit that agrees. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static struct th_server srv;

static int setup(void **state)
{
    (void)state;
    th_fresh_start(&srv, th_port(0), NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_stop_clean(&srv);
    return 0;
}

/* ---- helpers ---- */

/* The first column of the first row of a query, as text, into out. */
static const char *db_str(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static const char *db_str(char *out, size_t cap, const char *fmt, ...)
{
    char q[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    MYSQL *m = th_db();
    if (mysql_query(m, q) != 0)
        fail_msg("query failed: %s: %s", q, mysql_error(m));
    MYSQL_RES *res = mysql_store_result(m);
    MYSQL_ROW row = res != NULL ? mysql_fetch_row(res) : NULL;
    if (row == NULL || row[0] == NULL)
        fail_msg("no value for %s", q);
    snprintf(out, cap, "%s", row[0]);
    mysql_free_result(res);
    return out;
}

/* Posts body to the callback with the given header values (NULL: the
 * header is left out). */
static struct th_resp post_callback(const struct th_server *s, const char *body, const char *ts,
                                    const char *sig)
{
    char url[128], th[96], sh[128];
    const char *h[3] = {NULL, NULL, NULL};
    int n = 0;
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", s->url);
    if (ts != NULL) {
        snprintf(th, sizeof th, "X-Pay-Timestamp: %s", ts);
        h[n++] = th;
    }
    if (sig != NULL) {
        snprintf(sh, sizeof sh, "X-Pay-Signature: %s", sig);
        h[n++] = sh;
    }
    return th_request("POST", url, h, body);
}

/* Signs body at now + skew_s with secret and posts it. */
static struct th_resp signed_post(const struct th_server *s, const char *body, long skew_s,
                                  const char *secret)
{
    char ts[32], sig[65];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL) + skew_s);
    th_pay_sign(secret, ts, body, sig);
    return post_callback(s, body, ts, sig);
}

static struct th_resp pay(const struct th_server *s, const char *txn, const char *order_no,
                          int64_t amount, const char *status)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"txn_id\":\"%s\",\"order_no\":\"%s\",\"amount_cents\":%lld,\"status\":\"%s\"}", txn,
             order_no, (long long)amount, status);
    return signed_post(s, body, 0, TH_PAY_SECRET);
}

static const char *str_of(const json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    return v != NULL ? v : "";
}

struct outcome {
    long status;
    char outcome[32];
    char order_status[24];
    char txn_id[72];
    char order_no[32];
    bool replayed;
    char raw[512];
};

static struct outcome read_outcome(const struct th_resp *r)
{
    struct outcome o;
    memset(&o, 0, sizeof o);
    o.status = r->status;
    snprintf(o.raw, sizeof o.raw, "%ld %s", r->status, r->body);
    if (r->status != 200)
        return o;
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    if (strcmp(str_of(j, "result"), "SUCCESS") != 0)
        fail_msg("callback answered 200 without result SUCCESS: %s", r->body);
    snprintf(o.outcome, sizeof o.outcome, "%s", str_of(j, "outcome"));
    snprintf(o.order_status, sizeof o.order_status, "%s", str_of(j, "order_status"));
    snprintf(o.txn_id, sizeof o.txn_id, "%s", str_of(j, "txn_id"));
    snprintf(o.order_no, sizeof o.order_no, "%s", str_of(j, "order_no"));
    json_t *rp = json_object_get(j, "replayed");
    o.replayed = json_is_true(rp);
    if (rp != NULL && !json_is_true(rp))
        fail_msg("\"replayed\" is present but not true: %s", r->body);
    json_decref(j);
    return o;
}

static struct outcome pay_outcome(const struct th_server *s, const char *txn, const char *order_no,
                                  int64_t amount, const char *status)
{
    struct th_resp r = pay(s, txn, order_no, amount, status);
    struct outcome o = read_outcome(&r);
    th_resp_free(&r);
    return o;
}

static void expect_outcome(const struct outcome *o, const char *outcome, const char *order_status,
                           bool replayed)
{
    if (o->status != 200 || strcmp(o->outcome, outcome) != 0 ||
        strcmp(o->order_status, order_status) != 0 || o->replayed != replayed)
        fail_msg("expected %s / %s%s, got %s", outcome, order_status, replayed ? " (replayed)" : "",
                 o->raw);
}

/* Places an order of quantity seats for user; its number into no. */
static void place(const struct th_server *s, int64_t user, int64_t session, int64_t quantity,
                  char no[32])
{
    char tok[96], key[48];
    static int seq;
    snprintf(key, sizeof key, "pay-%d-%lld", __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED),
             (long long)user);
    th_order_token(s, user, tok);
    struct th_resp r = th_order(s, user, key, tok, session, quantity);
    if (r.status != 201)
        fail_msg("placing an order: %ld %s", r.status, r.body);
    json_t *j = th_json(&r);
    snprintf(no, 32, "%s", json_string_value(json_object_get(j, "order_no")));
    json_decref(j);
    th_resp_free(&r);
}

static struct th_resp order_action(const struct th_server *s, const char *no, const char *action,
                                   int64_t user, bool admin)
{
    char url[160];
    snprintf(url, sizeof url, "%s/api/v1/orders/%s/%s", s->url, no, action);
    const char *h[] = {th_auth_header(user, admin), NULL};
    return th_request("POST", url, h, NULL);
}

static int64_t version_of(const char *no)
{
    return th_db_int("SELECT version FROM orders WHERE order_no = '%s'", no);
}

static const char *status_of(const char *no, char out[24])
{
    return db_str(out, 24, "SELECT status FROM orders WHERE order_no = '%s'", no);
}

static bool is_paid(const char *status)
{
    return strcmp(status, "PAID") == 0 || strcmp(status, "TICKETED") == 0 ||
           strcmp(status, "COMPLETED") == 0;
}

static int64_t outbox_rows(const char *type, const char *biz_key)
{
    return th_db_int("SELECT COUNT(*) FROM outbox WHERE event_type = '%s' AND biz_key = '%s'", type,
                     biz_key);
}

static json_t *outbox_payload(const char *type, const char *biz_key)
{
    char text[2048];
    db_str(text, sizeof text,
           "SELECT payload FROM outbox WHERE event_type = '%s' AND biz_key = '%s'", type, biz_key);
    json_t *j = json_loads(text, 0, NULL);
    if (j == NULL)
        fail_msg("outbox payload is not JSON: %s", text);
    return j;
}

/* The audit, as an admin: every check must pass. Points are credited by
 * the consumers after the fact, so a failure is looked at again for a
 * while before it counts. Non-admins are refused. */
static void expect_audit_ok(const struct th_server *s)
{
    char url[128];
    snprintf(url, sizeof url, "%s/api/v1/admin/audit", s->url);
    const char *user[] = {th_auth_header(5, false), NULL};
    struct th_resp f = th_request("GET", url, user, NULL);
    th_expect_problem(&f, 403, "FORBIDDEN");
    th_resp_free(&f);
    struct th_resp none = th_request("GET", url, NULL, NULL);
    th_expect_problem(&none, 401, "UNAUTHENTICATED");
    th_resp_free(&none);

    const char *admin[] = {th_auth_header(1, true), NULL};
    char last[2048] = "";
    for (int i = 0; i < 150; i++) {
        struct th_resp r = th_request("GET", url, admin, NULL);
        assert_int_equal(r.status, 200);
        json_t *j = th_json(&r);
        json_t *checks = json_object_get(j, "checks");
        assert_true(json_array_size(checks) >= 6);
        bool ok = json_is_true(json_object_get(j, "ok"));
        bool all = true;
        size_t k;
        json_t *c;
        json_array_foreach(checks, k, c)
        {
            assert_non_null(json_string_value(json_object_get(c, "name")));
            assert_non_null(json_string_value(json_object_get(c, "detail")));
            all = all && json_is_true(json_object_get(c, "ok"));
        }
        assert_true(ok == all);
        snprintf(last, sizeof last, "%s", r.body);
        json_decref(j);
        th_resp_free(&r);
        if (ok)
            return;
        th_msleep(100);
    }
    fail_msg("the audit did not pass: %s", last);
}

/* The named audit check's result. */
static bool audit_check(const struct th_server *s, const char *name)
{
    char url[128];
    bool ok = false, found = false;
    snprintf(url, sizeof url, "%s/api/v1/admin/audit", s->url);
    const char *admin[] = {th_auth_header(1, true), NULL};
    struct th_resp r = th_request("GET", url, admin, NULL);
    json_t *j = th_json(&r);
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(j, "checks"), k, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0) {
            found = true;
            ok = json_is_true(json_object_get(c, "ok"));
        }
    }
    json_decref(j);
    th_resp_free(&r);
    if (!found)
        fail_msg("the audit has no check %s", name);
    return ok;
}

/* ---- one txn_id, many times ---- */

struct storm {
    const struct th_server *servers;
    const char *order_no;
    const char *txn;
    int64_t amount;
    pthread_mutex_t mu;
    int fresh, replayed, other;
    char first[32], unexpected[512];
    bool mixed;
};

static void storm_one(int i, void *ctx)
{
    struct storm *st = ctx;
    struct outcome o =
        pay_outcome(&st->servers[i % 2], st->txn, st->order_no, st->amount, "SUCCESS");
    pthread_mutex_lock(&st->mu);
    if (o.status != 200) {
        st->other++;
        snprintf(st->unexpected, sizeof st->unexpected, "%s", o.raw);
    } else {
        if (o.replayed)
            st->replayed++;
        else
            st->fresh++;
        if (st->first[0] == '\0')
            snprintf(st->first, sizeof st->first, "%s", o.outcome);
        else if (strcmp(st->first, o.outcome) != 0 || strcmp(o.order_status, "PAID") != 0)
            st->mixed = true;
    }
    pthread_mutex_unlock(&st->mu);
}

static void test_callback_storm(void **state)
{
    struct th_server two[2];
    struct storm st = {0};
    char no[32];
    (void)state;
    two[0] = srv;
    th_start(&two[1], th_port(1), NULL);
    int64_t s = th_session(&srv, 10, 1000);
    place(&srv, 42, s, 2, no);

    pthread_mutex_init(&st.mu, NULL);
    st.servers = two;
    st.order_no = no;
    st.txn = "gw-storm-1";
    st.amount = 2000;
    int64_t t0 = th_now_ms();
    th_parallel(20, storm_one, &st);
    print_message("storm: 20 callbacks of one txn_id over 2 instances in %lld ms: %d applied, "
                  "%d replayed, %d other\n",
                  (long long)(th_now_ms() - t0), st.fresh, st.replayed, st.other);
    if (st.other != 0)
        fail_msg("unexpected answer: %s", st.unexpected);
    assert_int_equal(st.fresh, 1);
    assert_int_equal(st.replayed, 19);
    assert_false(st.mixed);
    assert_string_equal(st.first, "APPLIED");

    /* The order moved once; one payment, one event, in one transaction. */
    assert_true(version_of(no) >= 2);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON "
                               "o.id = h.order_id WHERE o.order_no = '%s' AND h.cause = 'pay'",
                               no),
                     1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE applied_order_id IS NOT NULL"),
                     1);
    assert_int_equal(outbox_rows("order.paid", no), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 1);

    /* The event carries what the consumers need. */
    json_t *e = outbox_payload("order.paid", no);
    assert_string_equal(json_string_value(json_object_get(e, "event_type")), "order.paid");
    assert_string_equal(json_string_value(json_object_get(e, "order_no")), no);
    assert_int_equal(json_integer_value(json_object_get(e, "order_id")),
                     th_db_int("SELECT id FROM orders WHERE order_no = '%s'", no));
    assert_int_equal(json_integer_value(json_object_get(e, "user_id")), 42);
    assert_int_equal(json_integer_value(json_object_get(e, "session_id")), s);
    assert_int_equal(json_integer_value(json_object_get(e, "quantity")), 2);
    assert_int_equal(json_integer_value(json_object_get(e, "amount_cents")), 2000);
    assert_string_equal(json_string_value(json_object_get(e, "txn_id")), "gw-storm-1");
    const char *at = json_string_value(json_object_get(e, "occurred_at"));
    assert_non_null(at);
    assert_int_equal(strlen(at), 20);
    assert_int_equal(at[19], 'Z');
    json_decref(e);

    /* Later, in sequence: the same body is the first outcome again; a
     * changed body under the same txn_id is no retry, and is refused. */
    struct outcome again = pay_outcome(&two[1], "gw-storm-1", no, 2000, "SUCCESS");
    expect_outcome(&again, "APPLIED", "PAID", true);
    assert_string_equal(again.order_no, no);
    struct th_resp changed = pay(&two[1], "gw-storm-1", no, 1, "FAILED");
    th_expect_problem(&changed, 422, "IDEMPOTENCY_KEY_REUSED");
    th_resp_free(&changed);
    struct th_resp r = pay(&srv, "gw-storm-1", no, 2000, "SUCCESS");
    char v[16];
    assert_non_null(th_header(&r, "Idempotent-Replayed", v, sizeof v));
    assert_string_equal(v, "true");
    th_resp_free(&r);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(th_stock_of(s), 8);
    expect_audit_ok(&srv);
    assert_int_equal(th_stop(&two[1]), 0);
}

/* ---- the other outcomes ---- */

static void test_duplicate_payment(void **state)
{
    char no[32];
    (void)state;
    int64_t s = th_session(&srv, 10, 1500);
    place(&srv, 7, s, 1, no);
    struct outcome a = pay_outcome(&srv, "gw-first", no, 1500, "SUCCESS");
    expect_outcome(&a, "APPLIED", "PAID", false);

    /* Another txn_id for the paid order: the money came twice. */
    struct outcome d = pay_outcome(&srv, "gw-second", no, 1500, "SUCCESS");
    assert_int_equal(d.status, 200);
    assert_string_equal(d.outcome, "DUPLICATE_PAYMENT");
    assert_false(d.replayed);
    assert_true(is_paid(d.order_status));
    assert_int_equal(outbox_rows("payment.refund_required", "gw-second"), 1);
    json_t *e = outbox_payload("payment.refund_required", "gw-second");
    assert_string_equal(json_string_value(json_object_get(e, "event_type")),
                        "payment.refund_required");
    assert_string_equal(json_string_value(json_object_get(e, "txn_id")), "gw-second");
    assert_string_equal(json_string_value(json_object_get(e, "order_no")), no);
    assert_int_equal(json_integer_value(json_object_get(e, "user_id")), 7);
    assert_int_equal(json_integer_value(json_object_get(e, "amount_cents")), 1500);
    assert_string_equal(json_string_value(json_object_get(e, "reason")), "DUPLICATE_PAYMENT");
    assert_non_null(json_string_value(json_object_get(e, "occurred_at")));
    json_decref(e);

    /* Its retry is a replay: still one refund. */
    struct outcome d2 = pay_outcome(&srv, "gw-second", no, 1500, "SUCCESS");
    assert_string_equal(d2.outcome, "DUPLICATE_PAYMENT");
    assert_true(d2.replayed);
    assert_int_equal(outbox_rows("payment.refund_required", "gw-second"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 2);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE applied_order_id IS NOT NULL"),
                     1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON "
                               "o.id = h.order_id WHERE o.order_no = '%s' AND h.cause = 'pay'",
                               no),
                     1);
    expect_audit_ok(&srv);
}

static void test_late_payment(void **state)
{
    char no[32], st[24];
    (void)state;
    int64_t s = th_session(&srv, 5, 1000);
    place(&srv, 8, s, 3, no);
    assert_int_equal(th_stock_of(s), 2);
    struct th_resp c = order_action(&srv, no, "cancel", 8, false);
    assert_int_equal(c.status, 200);
    th_resp_free(&c);
    assert_int_equal(th_stock_of(s), 5);

    struct outcome l = pay_outcome(&srv, "gw-late", no, 3000, "SUCCESS");
    expect_outcome(&l, "LATE_PAYMENT", "CANCELLED", false);
    assert_string_equal(status_of(no, st), "CANCELLED");
    assert_int_equal(version_of(no), 2);
    assert_int_equal(th_stock_of(s), 5);
    assert_int_equal(outbox_rows("payment.refund_required", "gw-late"), 1);
    assert_int_equal(outbox_rows("order.paid", no), 0);
    json_t *e = outbox_payload("payment.refund_required", "gw-late");
    assert_string_equal(json_string_value(json_object_get(e, "reason")), "LATE_PAYMENT");
    assert_int_equal(json_integer_value(json_object_get(e, "amount_cents")), 3000);
    json_decref(e);
    struct outcome l2 = pay_outcome(&srv, "gw-late", no, 3000, "SUCCESS");
    expect_outcome(&l2, "LATE_PAYMENT", "CANCELLED", true);
    assert_int_equal(outbox_rows("payment.refund_required", "gw-late"), 1);
    expect_audit_ok(&srv);
}

static void test_mismatch_and_failed(void **state)
{
    char no[32], st[24];
    (void)state;
    int64_t s = th_session(&srv, 5, 1000);
    place(&srv, 9, s, 2, no);

    struct outcome m = pay_outcome(&srv, "gw-short", no, 1999, "SUCCESS");
    expect_outcome(&m, "AMOUNT_MISMATCH", "PENDING_PAYMENT", false);
    assert_string_equal(status_of(no, st), "PENDING_PAYMENT");
    assert_int_equal(version_of(no), 1);

    struct outcome f = pay_outcome(&srv, "gw-declined", no, 2000, "FAILED");
    expect_outcome(&f, "PAYMENT_FAILED", "PENDING_PAYMENT", false);
    assert_int_equal(version_of(no), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 0);

    /* Each is recorded: its retry is a replay; the same txn_id with the
     * right amount is not a retry but the gateway's fault: refused. */
    struct outcome m2 = pay_outcome(&srv, "gw-short", no, 1999, "SUCCESS");
    expect_outcome(&m2, "AMOUNT_MISMATCH", "PENDING_PAYMENT", true);
    struct th_resp m3 = pay(&srv, "gw-short", no, 2000, "SUCCESS");
    th_expect_problem(&m3, 422, "IDEMPOTENCY_KEY_REUSED");
    th_resp_free(&m3);
    assert_int_equal(version_of(no), 1);

    /* The right payment then goes through. */
    struct outcome ok = pay_outcome(&srv, "gw-good", no, 2000, "SUCCESS");
    expect_outcome(&ok, "APPLIED", "PAID", false);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 3);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE applied_order_id IS NOT NULL "
                               "AND txn_id = 'gw-good'"),
                     1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 1);
    /* A FAILED report for a paid order changes nothing and owes nothing. */
    struct outcome f2 = pay_outcome(&srv, "gw-declined-2", no, 2000, "FAILED");
    assert_string_equal(f2.outcome, "PAYMENT_FAILED");
    assert_true(is_paid(f2.order_status));
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 1);
    expect_audit_ok(&srv);
}

/* ---- signatures ---- */

static void test_signature_rules(void **state)
{
    char no[32], body[256], ts[32], sig[65], old[32];
    (void)state;
    int64_t s = th_session(&srv, 5, 1000);
    place(&srv, 10, s, 1, no);
    snprintf(body, sizeof body,
             "{\"txn_id\":\"gw-sig\",\"order_no\":\"%s\",\"amount_cents\":1000,\"status\":"
             "\"SUCCESS\"}",
             no);

    struct th_resp r = signed_post(&srv, body, 0, "not-the-secret-0123456789abcdef");
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    char v[128];
    assert_non_null(th_header(&r, "WWW-Authenticate", v, sizeof v));
    th_resp_free(&r);

    /* Stale and future timestamps, genuinely signed. */
    r = signed_post(&srv, body, -400, TH_PAY_SECRET);
    th_expect_problem(&r, 401, "TIMESTAMP_OUT_OF_TOLERANCE");
    th_resp_free(&r);
    r = signed_post(&srv, body, 400, TH_PAY_SECRET);
    th_expect_problem(&r, 401, "TIMESTAMP_OUT_OF_TOLERANCE");
    th_resp_free(&r);
    /* A stale timestamp with a forged signature: the signature is what fails. */
    r = signed_post(&srv, body, -400, "not-the-secret-0123456789abcdef");
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);

    /* The body changed after signing. */
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    th_pay_sign(TH_PAY_SECRET, ts, body, sig);
    char changed[256];
    snprintf(changed, sizeof changed, "%s", body);
    *strstr(changed, "1000") = '9';
    r = post_callback(&srv, changed, ts, sig);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    /* The timestamp changed after signing (a replay made to look fresh). */
    snprintf(old, sizeof old, "%lld", (long long)time(NULL) - 1000);
    char old_sig[65];
    th_pay_sign(TH_PAY_SECRET, old, body, old_sig);
    r = post_callback(&srv, body, ts, old_sig);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    /* Missing headers. */
    r = post_callback(&srv, body, ts, NULL);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    r = post_callback(&srv, body, NULL, sig);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    r = post_callback(&srv, body, NULL, NULL);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    /* Uppercase hex is not the signature's form; nor is a prefix of it. */
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] = (char)(sig[i] >= 'a' && sig[i] <= 'f' ? sig[i] - 32 : sig[i]);
    r = post_callback(&srv, body, ts, upper);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    char prefix[65];
    memcpy(prefix, sig, 63);
    prefix[63] = '\0';
    r = post_callback(&srv, body, ts, prefix);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    /* A signed but unreadable timestamp. */
    th_pay_sign(TH_PAY_SECRET, "soon", body, sig);
    r = post_callback(&srv, body, "soon", sig);
    th_expect_problem(&r, 401, "SIGNATURE_INVALID");
    th_resp_free(&r);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 0);

    /* Inside the window (with room for the clock ticking) it is accepted. */
    r = signed_post(&srv, body, -290, TH_PAY_SECRET);
    struct outcome o = read_outcome(&r);
    th_resp_free(&r);
    expect_outcome(&o, "APPLIED", "PAID", false);
    expect_audit_ok(&srv);
}

/* Copies tmpl into out with each '@' replaced by no. */
static void fill(char *out, size_t cap, const char *tmpl, const char *no)
{
    size_t n = 0, nl = strlen(no);
    for (const char *p = tmpl; *p != '\0' && n + nl + 1 < cap; p++) {
        if (*p == '@') {
            memcpy(out + n, no, nl);
            n += nl;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static void test_callback_validation(void **state)
{
    char no[32], body[512];
    (void)state;
    int64_t s = th_session(&srv, 5, 1000);
    place(&srv, 11, s, 1, no);

    struct th_resp r = pay(&srv, "gw-x", "26120100000000000000", 1000, "SUCCESS");
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);
    r = pay(&srv, "gw-x", "nope", 1000, "SUCCESS");
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);

    static const struct {
        const char *tmpl; /* @ stands for the order number */
        const char *field;
    } bad[] = {
        {"{\"order_no\":\"@\",\"amount_cents\":1000,\"status\":\"SUCCESS\"}", "txn_id"},
        {"{\"txn_id\":\"\",\"order_no\":\"@\",\"amount_cents\":1000,\"status\":\"SUCCESS\"}",
         "txn_id"},
        {"{\"txn_id\":\"has space\",\"order_no\":\"@\",\"amount_cents\":1000,\"status\":"
         "\"SUCCESS\"}",
         "txn_id"},
        {"{\"txn_id\":\"12345678901234567890123456789012345678901234567890123456789012345\","
         "\"order_no\":\"@\",\"amount_cents\":1000,\"status\":\"SUCCESS\"}",
         "txn_id"},
        {"{\"txn_id\":7,\"order_no\":\"@\",\"amount_cents\":1000,\"status\":\"SUCCESS\"}",
         "txn_id"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":42,\"amount_cents\":1000,\"status\":\"SUCCESS\"}",
         "order_no"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":\"@\",\"status\":\"SUCCESS\"}", "amount_cents"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":\"@\",\"amount_cents\":-1,\"status\":\"SUCCESS\"}",
         "amount_cents"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":\"@\",\"amount_cents\":1000.0,\"status\":"
         "\"SUCCESS\"}",
         "amount_cents"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":\"@\",\"amount_cents\":\"1000\",\"status\":"
         "\"SUCCESS\"}",
         "amount_cents"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":\"@\",\"amount_cents\":1000}", "status"},
        {"{\"txn_id\":\"gw-v\",\"order_no\":\"@\",\"amount_cents\":1000,\"status\":\"success\"}",
         "status"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fill(body, sizeof body, bad[i].tmpl, no);
        r = signed_post(&srv, body, 0, TH_PAY_SECRET);
        th_expect_problem(&r, 400, "VALIDATION_FAILED");
        json_t *j = th_json(&r);
        const char *field = json_string_value(json_object_get(j, "field"));
        if (field == NULL || strcmp(field, bad[i].field) != 0)
            fail_msg("%s: expected field %s, got %s", body, bad[i].field, r.body);
        json_decref(j);
        th_resp_free(&r);
    }
    /* Numbers too large to parse are out of range for their field. */
    static const char *const huge[] = {"9223372036854775808", "1e309", "-9223372036854775809"};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"txn_id\":\"gw-huge\",\"order_no\":\"%s\",\"amount_cents\":%s,"
                 "\"status\":\"SUCCESS\"}",
                 no, huge[i]);
        r = signed_post(&srv, body, 0, TH_PAY_SECRET);
        th_expect_problem(&r, 400, "VALIDATION_FAILED");
        json_t *j = th_json(&r);
        assert_string_equal(json_string_value(json_object_get(j, "field")), "amount_cents");
        json_decref(j);
        th_resp_free(&r);
    }
    r = signed_post(&srv, "{\"txn_id\":", 0, TH_PAY_SECRET);
    th_expect_problem(&r, 400, "INVALID_JSON");
    th_resp_free(&r);
    r = signed_post(&srv, "[1]", 0, TH_PAY_SECRET);
    th_expect_problem(&r, 400, "INVALID_JSON");
    th_resp_free(&r);
    snprintf(body, sizeof body,
             "{\"txn_id\":\"a\",\"txn_id\":\"b\",\"order_no\":\"%s\",\"amount_cents\":1000,"
             "\"status\":\"SUCCESS\"}",
             no);
    r = signed_post(&srv, body, 0, TH_PAY_SECRET);
    th_expect_problem(&r, 400, "INVALID_JSON");
    th_resp_free(&r);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 0);

    /* Fields the gateway adds are its business; a 64-character txn_id is fine. */
    snprintf(
        body, sizeof body,
        "{\"txn_id\":\"1234567890123456789012345678901234567890123456789012345678901234\","
        "\"order_no\":\"%s\",\"amount_cents\":1000,\"status\":\"SUCCESS\",\"method\":\"card\"}",
        no);
    r = signed_post(&srv, body, 0, TH_PAY_SECRET);
    struct outcome o = read_outcome(&r);
    th_resp_free(&r);
    expect_outcome(&o, "APPLIED", "PAID", false);
    expect_audit_ok(&srv);
}

/* ---- cancel ---- */

struct cancels {
    const struct th_server *servers;
    const char *no;
    int64_t user;
    pthread_mutex_t mu;
    int ok, other;
    char first[1024], unexpected[512];
    bool differ;
};

static void cancel_one(int i, void *ctx)
{
    struct cancels *c = ctx;
    struct th_resp r = order_action(&c->servers[i % 2], c->no, "cancel", c->user, false);
    pthread_mutex_lock(&c->mu);
    if (r.status == 200) {
        c->ok++;
        json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
        json_object_del(j, "updated_at");
        char *norm = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        if (c->first[0] == '\0')
            snprintf(c->first, sizeof c->first, "%s", norm);
        else if (strcmp(c->first, norm) != 0)
            c->differ = true;
        free(norm);
        json_decref(j);
    } else {
        c->other++;
        snprintf(c->unexpected, sizeof c->unexpected, "%ld %s", r.status, r.body);
    }
    pthread_mutex_unlock(&c->mu);
    th_resp_free(&r);
}

static void test_cancel_rules(void **state)
{
    struct th_server two[2];
    struct cancels c = {0};
    char no[32], paid[32];
    (void)state;
    two[0] = srv;
    th_start(&two[1], th_port(1), NULL);
    int64_t s = th_session(&srv, 10, 1000);
    place(&srv, 12, s, 4, no);
    assert_int_equal(th_stock_of(s), 6);

    /* Someone else's order does not exist for them. */
    struct th_resp r = order_action(&srv, no, "cancel", 13, false);
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);
    r = order_action(&srv, "26120100000000000000", "cancel", 12, false);
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);

    /* Ten at once, over two instances: one cancel, ten equal answers. */
    pthread_mutex_init(&c.mu, NULL);
    c.servers = two;
    c.no = no;
    c.user = 12;
    th_parallel(10, cancel_one, &c);
    if (c.other != 0)
        fail_msg("unexpected answer to a cancel: %s", c.unexpected);
    assert_int_equal(c.ok, 10);
    assert_false(c.differ);
    assert_non_null(strstr(c.first, "\"status\":\"CANCELLED\""));
    assert_non_null(strstr(c.first, "\"version\":2"));
    assert_int_equal(th_stock_of(s), 10);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON "
                               "o.id = h.order_id WHERE o.order_no = '%s' AND h.cause = 'cancel'",
                               no),
                     1);

    /* And again, in sequence: 200, the same order, nothing moves. */
    r = order_action(&srv, no, "cancel", 12, false);
    assert_int_equal(r.status, 200);
    json_t *j = th_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "CANCELLED");
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
    json_decref(j);
    th_resp_free(&r);
    assert_int_equal(th_stock_of(s), 10);
    assert_int_equal(version_of(no), 2);

    /* A body is optional; if sent it must be empty JSON. */
    char url[160];
    snprintf(url, sizeof url, "%s/api/v1/orders/%s/cancel", srv.url, no);
    const char *h[] = {th_auth_header(12, false), NULL};
    r = th_request("POST", url, h, "{}");
    assert_int_equal(r.status, 200);
    th_resp_free(&r);
    r = th_request("POST", url, h, "{\"reason\":\"changed my mind\"}");
    th_expect_problem(&r, 400, "VALIDATION_FAILED");
    th_resp_free(&r);
    r = th_request("POST", url, h, "nope");
    th_expect_problem(&r, 400, "INVALID_JSON");
    th_resp_free(&r);

    /* A paid order cannot be cancelled. */
    place(&srv, 12, s, 1, paid);
    struct outcome o = pay_outcome(&srv, "gw-paid", paid, 1000, "SUCCESS");
    expect_outcome(&o, "APPLIED", "PAID", false);
    r = order_action(&srv, paid, "cancel", 12, false);
    th_expect_problem(&r, 409, "INVALID_TRANSITION");
    th_resp_free(&r);
    assert_int_equal(th_stock_of(s), 9);
    expect_audit_ok(&srv);
    assert_int_equal(th_stop(&two[1]), 0);
}

/* ---- who wins: a payment against a cancel or the sweep ---- */

#define RACE_ORDERS 30

struct race {
    const struct th_server *pay_srv;
    char no[RACE_ORDERS][32];
    int64_t placed_ms[RACE_ORDERS];
    int64_t user[RACE_ORDERS];
    int64_t price;
    bool with_cancel; /* else the sweep is the other side */
    struct outcome paid[RACE_ORDERS];
    long cancel_status[RACE_ORDERS];
    char cancel_state[RACE_ORDERS][24];
};

static void race_one(int i, void *ctx)
{
    struct race *ra = ctx;
    int k = ra->with_cancel ? i / 2 : i;
    char txn[48];
    snprintf(txn, sizeof txn, "gw-race-%d", k);
    if (ra->with_cancel && i % 2 == 0) {
        struct th_resp r = order_action(&srv, ra->no[k], "cancel", ra->user[k], false);
        ra->cancel_status[k] = r.status;
        if (r.status == 200) {
            json_t *j = th_json(&r);
            snprintf(ra->cancel_state[k], 24, "%s",
                     json_string_value(json_object_get(j, "status")));
            json_decref(j);
        }
        th_resp_free(&r);
        return;
    }
    if (!ra->with_cancel) {
        /* Aim around the moment the order turns 1 s old, when the sweep
         * (every 50 ms) takes it: some payments come first, some after. */
        int64_t at = ra->placed_ms[k] + 850 + (int64_t)(k % 10) * 45;
        int64_t wait = at - th_now_ms();
        if (wait > 0)
            th_msleep((int)wait);
    }
    ra->paid[k] = pay_outcome(ra->pay_srv, txn, ra->no[k], ra->price, "SUCCESS");
}

/* Exactly one side won each order, and the books agree. */
static void race_judge(struct race *ra, int64_t session, int64_t capacity, const char *what)
{
    int paid = 0, lost = 0;
    char st[24];
    for (int k = 0; k < RACE_ORDERS; k++) {
        const struct outcome *o = &ra->paid[k];
        status_of(ra->no[k], st);
        if (o->status != 200)
            fail_msg("%s: order %d: payment answered %s", what, k, o->raw);
        if (strcmp(o->outcome, "APPLIED") == 0) {
            paid++;
            if (!is_paid(st))
                fail_msg("%s: order %s: payment APPLIED but the order is %s", what, ra->no[k], st);
            if (ra->with_cancel && ra->cancel_status[k] != 409)
                fail_msg("%s: order %s: paid, and the cancel answered %ld", what, ra->no[k],
                         ra->cancel_status[k]);
            assert_int_equal(outbox_rows("order.paid", ra->no[k]), 1);
        } else if (strcmp(o->outcome, "LATE_PAYMENT") == 0) {
            lost++;
            if (strcmp(st, "CANCELLED") != 0)
                fail_msg("%s: order %s: LATE_PAYMENT but the order is %s", what, ra->no[k], st);
            if (ra->with_cancel &&
                (ra->cancel_status[k] != 200 || strcmp(ra->cancel_state[k], "CANCELLED") != 0))
                fail_msg("%s: order %s: cancelled, but the cancel answered %ld", what, ra->no[k],
                         ra->cancel_status[k]);
            char txn[48];
            snprintf(txn, sizeof txn, "gw-race-%d", k);
            assert_int_equal(outbox_rows("payment.refund_required", txn), 1);
        } else {
            fail_msg("%s: order %s: unexpected outcome %s", what, ra->no[k], o->raw);
        }
        int64_t moves =
            th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON o.id = h.order_id "
                      "WHERE o.order_no = '%s' AND h.cause IN ('pay', 'cancel', 'expire')",
                      ra->no[k]);
        assert_int_equal(moves, 1);
    }
    print_message("%s: %d orders, payment won %d, %s won %d\n", what, RACE_ORDERS, paid,
                  ra->with_cancel ? "cancel" : "sweep", lost);
    assert_int_equal(paid + lost, RACE_ORDERS);
    assert_int_equal(th_stock_of(session), capacity - paid);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), RACE_ORDERS);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE applied_order_id IS NOT NULL"),
                     paid);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox WHERE event_type = "
                               "'payment.refund_required'"),
                     lost);
}

static void test_cancel_races_payment(void **state)
{
    struct race *ra = calloc(1, sizeof *ra);
    (void)state;
    int64_t s = th_session(&srv, 100, 700);
    ra->pay_srv = &srv;
    ra->price = 700;
    ra->with_cancel = true;
    for (int k = 0; k < RACE_ORDERS; k++) {
        ra->user[k] = 500 + k;
        place(&srv, ra->user[k], s, 1, ra->no[k]);
    }
    th_parallel(2 * RACE_ORDERS, race_one, ra);
    race_judge(ra, s, 100, "cancel vs payment");
    expect_audit_ok(&srv);
    free(ra);
}

static void test_sweep_races_payment(void **state)
{
    struct th_server sweeper;
    struct race *ra = calloc(1, sizeof *ra);
    (void)state;
    const char *env[] = {"TICKETD_ORDER_TTL_S=1", "TICKETD_SWEEP_INTERVAL_MS=50", NULL};
    th_start(&sweeper, th_port(2), env);
    int64_t s = th_session(&srv, 100, 900);
    ra->pay_srv = &sweeper; /* a callback arriving at the sweeping instance itself */
    ra->price = 900;
    for (int k = 0; k < RACE_ORDERS; k++) {
        ra->user[k] = 600 + k;
        place(&srv, ra->user[k], s, 1, ra->no[k]);
        ra->placed_ms[k] = th_now_ms();
    }
    th_parallel(RACE_ORDERS, race_one, ra);
    race_judge(ra, s, 100, "sweep vs payment");

    /* Left alone, an unpaid order is expired by the sweep, seats back once. */
    char no[32], st[24];
    place(&srv, 700, s, 3, no);
    int64_t before = th_stock_of(s);
    for (int i = 0; i < 60 && strcmp(status_of(no, st), "CANCELLED") != 0; i++)
        th_msleep(50);
    assert_string_equal(st, "CANCELLED");
    assert_int_equal(th_stock_of(s), before + 3);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history h JOIN orders o ON "
                               "o.id = h.order_id WHERE o.order_no = '%s' AND h.cause = 'expire'",
                               no),
                     1);
    /* Its owner's cancel now answers the cancelled order. */
    struct th_resp r = order_action(&srv, no, "cancel", 700, false);
    assert_int_equal(r.status, 200);
    th_resp_free(&r);
    assert_int_equal(th_stock_of(s), before + 3);
    assert_int_equal(th_stop(&sweeper), 0);
    expect_audit_ok(&srv);
    free(ra);
}

/* ---- complete ---- */

static void test_complete_rules(void **state)
{
    char no[32], pending[32], gone[32], st[24];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    place(&srv, 14, s, 1, no);
    place(&srv, 14, s, 1, pending);
    place(&srv, 14, s, 1, gone);

    /* Admin only; unknown orders are not found. */
    struct th_resp r = order_action(&srv, no, "complete", 14, false);
    th_expect_problem(&r, 403, "FORBIDDEN");
    th_resp_free(&r);
    r = order_action(&srv, "26120100000000000000", "complete", 1, true);
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);
    /* Only a ticketed order can be completed. */
    r = order_action(&srv, pending, "complete", 1, true);
    th_expect_problem(&r, 409, "INVALID_TRANSITION");
    th_resp_free(&r);
    r = order_action(&srv, gone, "cancel", 14, false);
    assert_int_equal(r.status, 200);
    th_resp_free(&r);
    r = order_action(&srv, gone, "complete", 1, true);
    th_expect_problem(&r, 409, "INVALID_TRANSITION");
    th_resp_free(&r);

    /* Paid, the ticketing consumer issues the tickets; then the door. */
    struct outcome o = pay_outcome(&srv, "gw-door", no, 1000, "SUCCESS");
    expect_outcome(&o, "APPLIED", "PAID", false);
    for (int i = 0; i < 200 && strcmp(status_of(no, st), "TICKETED") != 0; i++)
        th_msleep(50);
    if (strcmp(st, "TICKETED") != 0)
        fail_msg("the ticketing consumer did not ticket order %s in 10 s (it is %s)", no, st);
    r = order_action(&srv, no, "complete", 1, true);
    assert_int_equal(r.status, 200);
    json_t *j = th_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "COMPLETED");
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "user_id")), 14);
    json_decref(j);
    th_resp_free(&r);
    /* Again: the same order, nothing moves. */
    r = order_action(&srv, no, "complete", 1, true);
    assert_int_equal(r.status, 200);
    j = th_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "COMPLETED");
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 4);
    json_decref(j);
    th_resp_free(&r);
    assert_int_equal(version_of(no), 4);
    /* A completed order cannot be cancelled. */
    r = order_action(&srv, no, "cancel", 14, false);
    th_expect_problem(&r, 409, "INVALID_TRANSITION");
    th_resp_free(&r);
    expect_audit_ok(&srv);
}

/* ---- one txn_id, another callback ---- */

#define REUSED_METRIC "ticketd_payment_callbacks_rejected_total{reason=\"txn_id_reused\"}"

static void test_txn_id_reused(void **state)
{
    char a[32], b[32], st[24];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    place(&srv, 16, s, 1, a);
    place(&srv, 17, s, 1, b);
    long long before = th_metric(&srv, REUSED_METRIC);
    assert_true(before >= 0);
    struct outcome first = pay_outcome(&srv, "gw-reuse", a, 1000, "SUCCESS");
    expect_outcome(&first, "APPLIED", "PAID", false);

    /* The same txn_id for another order, another amount, another status:
     * a gateway fault, not a retry. Nothing is recorded for any of them,
     * and the first order's outcome is not handed out. */
    struct th_resp r = pay(&srv, "gw-reuse", b, 1000, "SUCCESS");
    th_expect_problem(&r, 422, "IDEMPOTENCY_KEY_REUSED");
    json_t *j = th_json(&r);
    assert_null(strstr(r.body, a));
    assert_string_equal(json_string_value(json_object_get(j, "field")), "txn_id");
    json_decref(j);
    th_resp_free(&r);
    r = pay(&srv, "gw-reuse", a, 999, "SUCCESS");
    th_expect_problem(&r, 422, "IDEMPOTENCY_KEY_REUSED");
    th_resp_free(&r);
    r = pay(&srv, "gw-reuse", a, 1000, "FAILED");
    th_expect_problem(&r, 422, "IDEMPOTENCY_KEY_REUSED");
    th_resp_free(&r);
    assert_int_equal(th_metric(&srv, REUSED_METRIC) - before, 3);
    assert_string_equal(status_of(b, st), "PENDING_PAYMENT");
    assert_int_equal(version_of(b), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM outbox"), 1);

    /* The gateway's real retry is still a replay; order b pays with its own id. */
    struct outcome again = pay_outcome(&srv, "gw-reuse", a, 1000, "SUCCESS");
    expect_outcome(&again, "APPLIED", "PAID", true);
    assert_string_equal(again.order_no, a);
    struct outcome own = pay_outcome(&srv, "gw-reuse-b", b, 1000, "SUCCESS");
    expect_outcome(&own, "APPLIED", "PAID", false);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 2);
    expect_audit_ok(&srv);
}

#define REUSE_ROUNDS 12

struct reuse_race {
    const struct th_server *servers;
    char no[2][REUSE_ROUNDS][32];
    long status[2][REUSE_ROUNDS];
    char code[2][REUSE_ROUNDS][40];
    int round;
};

static void reuse_one(int i, void *ctx)
{
    struct reuse_race *rr = ctx;
    char txn[32];
    snprintf(txn, sizeof txn, "gw-twice-%d", rr->round);
    /* Side 0 pays its order in full; side 1 sends the same txn_id for
     * another order (odd rounds) or the same order with another amount. */
    const char *no = rr->no[i][rr->round];
    struct th_resp r =
        pay(&rr->servers[i], txn, no, i == 0 || rr->round % 2 == 1 ? 1000 : 1001, "SUCCESS");
    rr->status[i][rr->round] = r.status;
    snprintf(rr->code[i][rr->round], 40, "%s", r.status == 200 ? "" : th_code(&r));
    th_resp_free(&r);
}

static void test_txn_id_reused_concurrently(void **state)
{
    struct th_server two[2];
    struct reuse_race *rr = calloc(1, sizeof *rr);
    (void)state;
    two[0] = srv;
    th_start(&two[1], th_port(1), NULL);
    rr->servers = two;
    int64_t s = th_session(&srv, 100, 1000);
    for (int k = 0; k < REUSE_ROUNDS; k++) {
        place(&srv, 800 + k, s, 1, rr->no[0][k]);
        if (k % 2 == 1)
            place(&srv, 900 + k, s, 1, rr->no[1][k]);
        else
            snprintf(rr->no[1][k], 32, "%s", rr->no[0][k]);
    }
    long long before = th_metric(&srv, REUSED_METRIC) + th_metric(&two[1], REUSED_METRIC);
    for (rr->round = 0; rr->round < REUSE_ROUNDS; rr->round++)
        th_parallel(2, reuse_one, rr);

    /* Each round: exactly one callback recorded, the other refused. */
    int won[2] = {0, 0};
    for (int k = 0; k < REUSE_ROUNDS; k++) {
        int ok = 0;
        for (int i = 0; i < 2; i++) {
            if (rr->status[i][k] == 200) {
                ok++;
                won[i]++;
            } else if (rr->status[i][k] != 422 ||
                       strcmp(rr->code[i][k], "IDEMPOTENCY_KEY_REUSED") != 0) {
                fail_msg("round %d side %d: %ld %s", k, i, rr->status[i][k], rr->code[i][k]);
            }
        }
        if (ok != 1)
            fail_msg("round %d: %d callbacks recorded, want 1", k, ok);
        char txn[32];
        snprintf(txn, sizeof txn, "gw-twice-%d", k);
        assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE txn_id = '%s'", txn), 1);
    }
    print_message("txn_id reused at once, %d rounds: side 0 won %d, side 1 won %d\n", REUSE_ROUNDS,
                  won[0], won[1]);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), REUSE_ROUNDS);
    long long after = th_metric(&srv, REUSED_METRIC) + th_metric(&two[1], REUSED_METRIC);
    assert_int_equal(after - before, REUSE_ROUNDS);
    expect_audit_ok(&srv);
    assert_int_equal(th_stop(&two[1]), 0);
    free(rr);
}

/* ---- ids match exactly ---- */

static void test_ids_match_exactly(void **state)
{
    char no[32], url[192], st[24];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    place(&srv, 18, s, 2, no);

    /* MariaDB's utf8mb4_bin ignores trailing spaces: "<order_no> " must
     * not read, cancel or complete the order. */
    static const char *const suffixes[] = {"%20", "%20%20", "%09", "%0A", "0", "%00"};
    const char *owner[] = {th_auth_header(18, false), NULL};
    const char *admin[] = {th_auth_header(1, true), NULL};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        static const char *const actions[] = {"", "/cancel", "/complete"};
        for (int a = 0; a < 3; a++) {
            snprintf(url, sizeof url, "%s/api/v1/orders/%s%s%s", srv.url, no, suffixes[i],
                     actions[a]);
            struct th_resp r =
                th_request(a == 0 ? "GET" : "POST", url, a == 2 ? admin : owner, NULL);
            /* %00 matches no route at all (NOT_FOUND); the others no order. */
            th_expect_problem(&r, 404, th_code(&r)[0] == 'N' ? "NOT_FOUND" : "ORDER_NOT_FOUND");
            th_resp_free(&r);
        }
    }
    assert_string_equal(status_of(no, st), "PENDING_PAYMENT");
    assert_int_equal(version_of(no), 1);
    assert_int_equal(th_stock_of(s), 8);

    /* The callback's order_no likewise: 404, nothing recorded. */
    char padded[40];
    snprintf(padded, sizeof padded, "%s ", no);
    struct th_resp r = pay(&srv, "gw-exact", padded, 2000, "SUCCESS");
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);
    snprintf(padded, sizeof padded, "%s\\t", no);
    r = pay(&srv, "gw-exact", padded, 2000, "SUCCESS");
    th_expect_problem(&r, 404, "ORDER_NOT_FOUND");
    th_resp_free(&r);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 0);
    assert_string_equal(status_of(no, st), "PENDING_PAYMENT");

    /* A txn_id with a trailing space would be the same key as without:
     * txn_id is A-Z a-z 0-9 . _ : - only. */
    static const char *const bad_txn[] = {"gw-exact ", "gw exact", "gw/exact", "gw\\u00e9"};
    for (size_t i = 0; i < sizeof bad_txn / sizeof bad_txn[0]; i++) {
        r = pay(&srv, bad_txn[i], no, 2000, "SUCCESS");
        th_expect_problem(&r, 400, "VALIDATION_FAILED");
        json_t *j = th_json(&r);
        assert_string_equal(json_string_value(json_object_get(j, "field")), "txn_id");
        json_decref(j);
        th_resp_free(&r);
    }
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 0);

    /* The exact ones still work. */
    struct outcome o = pay_outcome(&srv, "gw-exact", no, 2000, "SUCCESS");
    expect_outcome(&o, "APPLIED", "PAID", false);
    r = pay(&srv, "gw-exact ", no, 2000, "SUCCESS");
    th_expect_problem(&r, 400, "VALIDATION_FAILED");
    th_resp_free(&r);
    snprintf(url, sizeof url, "%s/api/v1/orders/%s", srv.url, no);
    r = th_request("GET", url, owner, NULL);
    assert_int_equal(r.status, 200);
    th_resp_free(&r);
}

/* ---- the defence switched off ---- */

static void test_demo_without_callback_dedup(void **state)
{
    struct th_server demo;
    char no[32];
    (void)state;
    const char *env[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-callback-dedup", NULL};
    th_start(&demo, th_port(3), env);
    int64_t s = th_session(&srv, 5, 1000);
    place(&srv, 15, s, 1, no);
    struct outcome a = pay_outcome(&demo, "gw-demo", no, 1000, "SUCCESS");
    expect_outcome(&a, "APPLIED", "PAID", false);
    /* The gateway's retry of the same payment, no longer recognised: taken
     * for a second payment and sent for refund, though it paid the order. */
    struct outcome b = pay_outcome(&demo, "gw-demo", no, 1000, "SUCCESS");
    assert_string_equal(b.outcome, "DUPLICATE_PAYMENT");
    assert_false(b.replayed);
    assert_int_equal(outbox_rows("payment.refund_required", "gw-demo"), 1);
    assert_false(audit_check(&srv, "no_refund_of_applied_payment"));
    assert_int_equal(th_stop(&demo), 0);
}

/* Two payments of one order at once, with state-cas off (a demo): both read
 * the order unpaid, without its lock, and both decide APPLIED; the unique
 * key on applied payments lets one through. The other is what it would be
 * had it come second, a duplicate payment to refund, never a 500. */
struct pay_race {
    const struct th_server *s;
    const char *no;
    struct outcome o[2];
};

static void pay_race_one(int i, void *ctx)
{
    struct pay_race *pr = ctx;
    char txn[32];
    snprintf(txn, sizeof txn, "gw-race-%d", i);
    pr->o[i] = pay_outcome(pr->s, txn, pr->no, 1000, "SUCCESS");
}

static void test_demo_without_state_cas_payments_race(void **state)
{
    struct th_server demo;
    char no[32];
    (void)state;
    /* 300 ms between reading the order and writing: both read it unpaid. */
    const char *env[] = {"TICKETD_ENV=demo", "TICKETD_DEFENSES=-state-cas",
                         "TICKETD_FAULT=order.before_transition:delay:300", NULL};
    th_start(&demo, th_port(3), env);
    int64_t s = th_session(&srv, 5, 1000);
    place(&srv, 16, s, 1, no);
    static struct pay_race pr;
    memset(&pr, 0, sizeof pr);
    pr.s = &demo;
    pr.no = no;
    th_parallel(2, pay_race_one, &pr);
    int applied = 0, duplicate = 0;
    for (int i = 0; i < 2; i++) {
        if (pr.o[i].status != 200)
            fail_msg("callback %d: %s", i, pr.o[i].raw);
        applied += strcmp(pr.o[i].outcome, "APPLIED") == 0;
        duplicate += strcmp(pr.o[i].outcome, "DUPLICATE_PAYMENT") == 0;
    }
    assert_int_equal(applied, 1);
    assert_int_equal(duplicate, 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 2);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments WHERE applied_order_id IS NOT NULL"),
                     1);
    const char *dup = strcmp(pr.o[0].outcome, "DUPLICATE_PAYMENT") == 0 ? "gw-race-0" : "gw-race-1";
    assert_int_equal(outbox_rows("payment.refund_required", dup), 1);
    assert_int_equal(th_stop(&demo), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_callback_storm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_payment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_payment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_and_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signature_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_races_payment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_races_payment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_id_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_id_reused_concurrently, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_match_exactly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_demo_without_callback_dedup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_demo_without_state_cas_payments_race, setup, teardown),
    };
    return cmocka_run_group_tests_name("payments", tests, NULL, NULL);
}
