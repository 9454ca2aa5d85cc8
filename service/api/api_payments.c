/* api_payments.c - the payment gateway's callback, an order's cancel and
 * complete, and the admin's audit: JSON and headers in, the domain's
 * answer out. The rules live in payments.c and lifecycle.c. */
#include "api_internal.h"
#include "app.h"
#include "err.h"
#include "jsonv.h"
#include "lifecycle.h"
#include "payments.h"
#include "store_audit.h"

#include <stdlib.h>
#include <string.h>

#define CENTS_MAX    9007199254740991LL /* 2^53 - 1: exact in every JSON reader */
#define ORDER_NO_MAX 64

static void signature_problem(struct resp *w, enum problem p, const char *detail)
{
    resp_problem(w, p, NULL, "%s", detail);
    resp_header(w, "WWW-Authenticate", "HMAC-SHA256 realm=\"ticketd-payments\"");
}

/* Step 1 of the defence (payments.h), before anything reads the body. */
static bool verify(struct req *r, struct resp *w)
{
    enum paysig_result sig =
        payments_verify(r->app, req_header(r, "X-Pay-Timestamp"), req_header(r, "X-Pay-Signature"),
                        r->body, r->body_len);
    switch (sig) {
    case PAYSIG_OK:
        return true;
    case PAYSIG_STALE:
        signature_problem(w, PROBLEM_TIMESTAMP_OUT_OF_TOLERANCE,
                          "X-Pay-Timestamp is too far from now; sign the callback again");
        return false;
    case PAYSIG_BAD:
        break;
    }
    signature_problem(w, PROBLEM_SIGNATURE_INVALID,
                      "X-Pay-Timestamp and X-Pay-Signature (lowercase hex HMAC-SHA256 of "
                      "\"<timestamp>.<body>\") are missing or do not match");
    return false;
}

/* Reads the callback's fields into cb, which borrows from *body (a new
 * reference on success; the caller decrefs it). */
static bool read_callback(struct req *r, struct resp *w, json_t **body, struct payment_callback *cb)
{
    char why[160];
    const char *status;
    *body = NULL;
    json_t *b = api_body_object(r, w);
    if (b == NULL)
        return false;
    if (jsonv_string(b, "txn_id", TXN_ID_BYTES, &cb->txn_id, why, sizeof why) != TD_OK ||
        !payments_txn_id_valid(cb->txn_id)) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "txn_id",
                     "txn_id must be a string of 1 to %d characters of A-Z a-z 0-9 . _ : -",
                     TXN_ID_MAX);
        goto fail;
    }
    if (jsonv_string(b, "order_no", ORDER_NO_MAX, &cb->order_no, why, sizeof why) != TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "order_no", "%s", why);
        goto fail;
    }
    if (jsonv_int(b, "amount_cents", 0, CENTS_MAX, &cb->amount_cents, why, sizeof why) != TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "amount_cents", "%s", why);
        goto fail;
    }
    if (jsonv_string(b, "status", 16, &status, why, sizeof why) != TD_OK ||
        (strcmp(status, "SUCCESS") != 0 && strcmp(status, "FAILED") != 0)) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "status", "status must be SUCCESS or FAILED");
        goto fail;
    }
    cb->success = strcmp(status, "SUCCESS") == 0;
    *body = b;
    return true;
fail:
    json_decref(b);
    return false;
}

void api_payment_callback(struct req *r, struct resp *w)
{
    struct payment_callback cb;
    struct payment_result res;
    json_t *body = NULL;
    if (!verify(r, w) || !read_callback(r, w, &body, &cb))
        return;
    int rc = payments_callback(r->app, &cb, &res);
    if (rc == TD_ENOTFOUND) {
        resp_problem(w, PROBLEM_ORDER_NOT_FOUND, NULL, "no order %s", cb.order_no);
        goto out;
    }
    if (rc == TD_EDUP) {
        /* Not a retry: a retry repeats the body it was recorded with. */
        resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_REUSED, "txn_id",
                     "txn_id %s was recorded for another order, amount or status", cb.txn_id);
        w->layer = "callback-dedup";
        goto out;
    }
    if (rc != TD_OK) {
        api_fail(w, rc, "recording the payment");
        goto out;
    }
    /* result SUCCESS: the callback is recorded, whatever its outcome, and
     * the gateway may stop retrying. */
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s}", "result", "SUCCESS", "txn_id", res.txn_id,
                          "order_no", res.order_no, "outcome", pay_outcome_name(res.outcome),
                          "order_status", order_status_name(res.order_status));
    if (res.replayed) {
        json_object_set_new(j, "replayed", json_true());
        w->layer = "callback-dedup";
    }
    resp_json(w, 200, j);
    if (res.replayed)
        resp_header(w, "Idempotent-Replayed", "true");
out:
    json_decref(body);
}

/* The answer to a cancel or a complete. needs: the state the order must
 * be in; verb: what the change does to it ("cancelled"); what: the action,
 * for errors ("cancelling the order"). */
static void answer_change(struct resp *w, int rc, const struct order *o, const char *order_no,
                          const char *needs, const char *verb, const char *what)
{
    switch (rc) {
    case TD_OK:
        resp_json(w, 200, api_order_json(o));
        return;
    case TD_ENOTFOUND:
        resp_problem(w, PROBLEM_ORDER_NOT_FOUND, NULL, "no order %s", order_no);
        return;
    case TD_ECONFLICT:
        resp_problem(w, PROBLEM_INVALID_TRANSITION, NULL, "order is %s; only a %s order can be %s",
                     order_status_name(o->status), needs, verb);
        return;
    default:
        api_fail(w, rc, what);
    }
}

/* An order number as sent in the path, exactly (see order_no_valid); else
 * 404 before anything reads the body or the store. */
static bool path_order_no(const struct req *r, struct resp *w)
{
    if (order_no_valid(r->match.params[0]))
        return true;
    resp_problem(w, PROBLEM_ORDER_NOT_FOUND, NULL, "no such order");
    return false;
}

void api_order_cancel(struct req *r, struct resp *w)
{
    struct order o;
    if (!path_order_no(r, w) || !api_no_input(r, w))
        return;
    int rc = lifecycle_cancel(r->app, r->match.params[0], r->who.user_id, &o);
    answer_change(w, rc, &o, r->match.params[0], "PENDING_PAYMENT", "cancelled",
                  "cancelling the order");
}

void api_order_complete(struct req *r, struct resp *w)
{
    struct order o;
    if (!path_order_no(r, w) || !api_no_input(r, w))
        return;
    int rc = lifecycle_complete(r->app, r->match.params[0], &o);
    answer_change(w, rc, &o, r->match.params[0], "TICKETED", "completed", "completing the order");
}

/* ?sessions=12,13: session ids joined by commas, each a positive integer,
 * at most AUDIT_SCOPE_MAX, rewritten canonically into scope ("" when the
 * argument is absent: the whole database). False after a 400 answer. */
static bool audit_scope(struct req *r, struct resp *w, char *scope, size_t cap)
{
    const char *arg = req_query(r, "sessions");
    size_t used = 0;
    int count = 0;
    scope[0] = '\0';
    if (arg == NULL)
        return true;
    for (const char *p = arg;; count++) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char one[24];
        int64_t id = 0;
        if (len == 0 || len >= sizeof one || count == AUDIT_SCOPE_MAX)
            goto bad;
        memcpy(one, p, len);
        one[len] = '\0';
        if (!api_parse_id(one, &id))
            goto bad;
        used += (size_t)snprintf(scope + used, cap - used, "%s%lld", count > 0 ? "," : "",
                                 (long long)id);
        if (comma == NULL)
            return true;
        p = comma + 1;
    }
bad:
    resp_problem(w, PROBLEM_VALIDATION_FAILED, "sessions",
                 "sessions must be up to %d session ids (positive integers) joined by commas",
                 AUDIT_SCOPE_MAX);
    return false;
}

/* The scope as the answer names it: null (the whole database) or the ids. */
static json_t *scope_json(const char *scope)
{
    if (scope[0] == '\0')
        return json_null();
    json_t *ids = json_array();
    for (const char *p = scope; p != NULL;) {
        json_array_append_new(ids, json_integer(strtoll(p, NULL, 10)));
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return ids;
}

void api_admin_audit(struct req *r, struct resp *w)
{
    struct audit_check checks[AUDIT_MAX_CHECKS];
    char scope[AUDIT_SCOPE_SIZE];
    int n = 0;
    if (!audit_scope(r, w, scope, sizeof scope))
        return;
    int rc = store_audit(scope, checks, &n);
    if (rc != TD_OK) {
        api_fail(w, rc, "the audit");
        return;
    }
    bool all = true;
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        all = all && checks[i].ok;
        json_array_append_new(arr, json_pack("{s:s,s:b,s:s}", "name", checks[i].name, "ok",
                                             checks[i].ok, "detail", checks[i].detail));
    }
    resp_json(w, 200,
              json_pack("{s:b,s:o,s:{s:o}}", "ok", all, "checks", arr, "scope", "sessions",
                        scope_json(scope)));
}
