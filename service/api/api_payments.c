/* api_payments.c - the payment gateway's callback: its signature, JSON in,
 * the domain's answer out. The rules live in payments.c. */
#include "api_internal.h"
#include "app.h"
#include "err.h"
#include "idem.h"
#include "jsonv.h"
#include "payments.h"

#include <stdlib.h>
#include <string.h>

#define CENTS_MAX    9007199254740991LL /* 2^53 - 1: exact in every JSON reader */
#define ORDER_NO_MAX 64

static void signature_problem(struct resp *w, enum problem p, const char *detail)
{
    resp_problem(w, p, NULL, "%s", detail);
    resp_header_add(w, "WWW-Authenticate", "HMAC-SHA256 realm=\"ticketd-payments\"");
}

/* Step 1 of the defence (payments.h), before anything reads the body: the
 * Standard Webhooks scheme when webhook-signature is sent, else X-Pay-*.
 * A webhook-id, the delivery's key, obeys the Idempotency-Key grammar. */
static bool verify(struct req *r, struct resp *w, bool *webhook)
{
    struct payment_proof proof = {
        .pay_timestamp = req_header(r, "X-Pay-Timestamp"),
        .pay_signature = req_header(r, "X-Pay-Signature"),
        .webhook_id = req_header(r, "webhook-id"),
        .webhook_timestamp = req_header(r, "webhook-timestamp"),
        .webhook_signature = req_header(r, "webhook-signature"),
    };
    *webhook = payments_proof_is_webhook(&proof);
    if (*webhook && (proof.webhook_id == NULL || !idem_key_valid(proof.webhook_id))) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, "webhook-id",
                     "webhook-id must be 1 to %d characters of A-Z a-z 0-9 . _ : -", IDEM_KEY_MAX);
        return false;
    }
    switch (payments_verify(r->app, &proof, r->body, r->body_len)) {
    case PAYSIG_OK:
        return true;
    case PAYSIG_STALE:
        signature_problem(w, PROBLEM_TIMESTAMP_OUT_OF_TOLERANCE,
                          *webhook
                              ? "webhook-timestamp is too far from now; sign the delivery again"
                              : "X-Pay-Timestamp is too far from now; sign the callback again");
        return false;
    case PAYSIG_BAD:
        break;
    }
    signature_problem(w, PROBLEM_SIGNATURE_INVALID,
                      *webhook
                          ? "webhook-timestamp and webhook-signature (v1,<base64 HMAC-SHA256 "
                            "of \"<webhook-id>.<webhook-timestamp>.<body>\">, "
                            "space-separated) are missing or none matches"
                          : "X-Pay-Timestamp and X-Pay-Signature (lowercase hex HMAC-SHA256 of "
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
    struct payment_delivery dl;
    struct payment_result res;
    json_t *body = NULL;
    bool webhook = false;
    if (!verify(r, w, &webhook) || !read_callback(r, w, &body, &cb))
        return;
    if (webhook)
        payments_delivery_init(&dl, req_header(r, "webhook-id"), r->body, r->body_len);
    int rc = payments_callback_delivery(r->app, &cb, webhook ? &dl : NULL, &res);
    if (rc == TD_ECONFLICT) {
        /* Not a retry: a retry of a delivery repeats its raw body. */
        resp_problem(w, PROBLEM_IDEMPOTENCY_KEY_REUSED, "webhook-id",
                     "webhook-id %s was delivered before with another body", dl.id);
        w->layer = "callback-dedup";
        goto out;
    }
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
        resp_header_add(w, "Idempotent-Replayed", "true");
out:
    json_decref(body);
}
