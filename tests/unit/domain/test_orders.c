/* test_orders.c - the order flow itself (orders.c): every layer passing
 * into one order, what Redis failing does under either policy
 * (TICKETD_REDIS_POLICY), the failure handed to the step boot.c chooses
 * with forget-failures off, the defences that are not the order's
 * business, all switched off, the result's cleanup, and Prefer: wait
 * carried to the key. The rows of each defence are in the test named
 * after it (test_response_cache.c, test_inflight_key.c,
 * test_session_lock.c, test_token.c, test_unique_index.c,
 * test_order_key_filter.c); the runner they share is order_rows.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"
#include "order_rows.h"

#include "defences.h"
#include "err.h"
#include "idem.h"
#include "metrics.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void then_success(const struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    struct idem_record rec;
    idem_fingerprint_order(SESSION, QTY, fp);

    /* Layers 1-2: one SET NX under the user's key, our marker inside. */
    assert_int_equal(fake_cache.idem_begin.user_id, USER);
    assert_string_equal(fake_cache.idem_begin.key, KEY);
    assert_int_equal(fake_cache.idem_begin.ttl_ms, rows_cfg.inflight_ttl_ms);
    const char *marker = fake_cache.idem_begin.marker;
    assert_true(idem_parse(marker, strlen(marker), &rec));
    assert_false(rec.done);
    assert_string_equal(rec.fingerprint, fp);

    /* Layer 3: the lock of this user and session, owned by the same random
     * owner as the marker, so each is released only by this request. */
    assert_int_equal(fake_cache.lock.user_id, USER);
    assert_int_equal(fake_cache.lock.session_id, SESSION);
    assert_int_equal(fake_cache.lock.ttl_ms, rows_cfg.lock_ttl_ms);
    assert_int_equal(strlen(fake_cache.lock.owner), IDEM_OWNER_LEN);
    assert_string_equal(marker + strlen(marker) - IDEM_OWNER_LEN, fake_cache.lock.owner);

    /* Layer 4: the token, spent as this user, in the key's own script: one
     * round trip to Redis before the database. */
    assert_int_equal(fake_cache.token_take.user_id, USER);
    assert_string_equal(fake_cache.token_take.token, TOKEN);
    assert_true(fake_cache.token_take.in_begin);

    /* Layers 5-6: one draft, with the key as request_id. */
    assert_int_equal(fake_store.create_calls, 1);
    assert_int_equal(fake_store.draft.user_id, USER);
    assert_int_equal(fake_store.draft.session_id, SESSION);
    assert_int_equal(fake_store.draft.quantity, QTY);
    assert_string_equal(fake_store.draft.request_id, KEY);

    /* Step 7: the marker becomes the completed record and the lock goes,
     * in one call, both only if still ours. */
    assert_int_equal(fake_cache.complete.user_id, USER);
    assert_string_equal(fake_cache.complete.key, KEY);
    assert_int_equal(fake_cache.complete.session_id, SESSION);
    assert_int_equal(fake_cache.complete.ttl_s, rows_cfg.idem_ttl_s);
    const char *record = fake_cache.complete.record;
    assert_true(idem_parse(record, strlen(record), &rec));
    assert_true(rec.done);
    assert_string_equal(rec.fingerprint, fp);
    assert_int_equal(rec.status, 201);
    assert_int_equal(rec.body_len, res->body_len);
    assert_memory_equal(rec.body, res->body, res->body_len);
}

/* The naive remembering of a failure: the API layer's failure body, kept
 * under the key like a success (in Redis and in process). */
static void then_failure_handed_over(const struct order_result *res)
{
    (void)res;
    assert_int_equal(rows_failure_step.calls, 1);
    assert_int_equal(rows_failure_step.outcome, ORDER_SOLD_OUT);
    assert_true(rows_failure_step.held);
    assert_int_equal(fake_cache.release.calls, 0);
}

static const struct order_case rows[] = {
    /* success */
    {"success: every layer passes, one order", .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED, .recorded = RECORDED_SENT,
     .counts = {COUNTS(M_ORDERS_CREATED, 1), COUNTS(M_REDIS_DEGRADED, 0)}, .then = then_success},
    /* Redis failing. degrade: the rest of Redis (and the token) is
     * skipped, the database decides, and what was already claimed is
     * finished normally; the in-process cache does not depend on Redis.
     * The key step, the lock and the token run in one script: when it
     * fails, what it may have set is treated as ours and handed back
     * (compare-and-delete). No defence answered: a dependency did. */
    {"degrade: key step unavailable", .begin_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED,
     .status = 201, .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    {"degrade: key step fails", .begin_rc = TD_EINTERNAL, .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    {"degrade: lock unavailable", .lock_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    {"degrade: token unavailable", .token_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED, .status = 201,
     .calls = FULL_PATH, .cached = CACHED, .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 1)}},
    /* strict: 503, nothing written, what was claimed given back. */
    {"strict: key step unavailable", .strict = true, .begin_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    {"strict: lock unavailable", .strict = true, .lock_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    {"strict: lock fails", .strict = true, .lock_rc = TD_EINTERNAL, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    {"strict: token unavailable", .strict = true, .token_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_REDIS_DEGRADED, 0)}},
    /* The order is committed: Redis failing to record it changes nothing
     * in the answer (the unique index replays it on a retry). */
    {"Redis fails to record the answer", .complete_rc = TD_EUNAVAIL, .outcome = ORDER_CREATED,
     .status = 201, .calls = FULL_PATH},
    /* Likewise a failed release does not hide the real answer. */
    {"Redis fails to release after sold out", .release_rc = TD_EUNAVAIL, .create_rc = TD_ECONFLICT,
     .outcome = ORDER_SOLD_OUT, .calls = "order_begin order_create order_release"},
    {"forget-failures off: the chosen step is handed the failure and the key",
     .off = DEFENCE_FORGET_FAILURES, .create_rc = TD_ECONFLICT, .outcome = ORDER_SOLD_OUT,
     .calls = "order_begin order_create", .claims = CLAIMS_KEPT, .then = then_failure_handed_over},
    /* The others are not the order transaction's business. */
    {"callback and consumer dedup off: the order is untouched",
     .off = DEFENCE_CALLBACK_DEDUP | DEFENCE_CONSUMER_DEDUP, .outcome = ORDER_CREATED,
     .calls = FULL_PATH},
    /* Nothing but the (unprotected) transaction. */
    {"all off", .off = ~0u, .local = LOCAL_SAME, .outcome = ORDER_CREATED, .calls = "order_create"},
};

static void test_result_cleanup(void **state)
{
    (void)state;
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    orders_create(&rows_app, &rq, &rows_render, &res);
    assert_non_null(res.body);
    order_result_cleanup(&res);
    assert_null(res.body);
    assert_int_equal(res.body_len, 0);
    assert_int_equal(res.status, 0);
    /* Twice is harmless. */
    order_result_cleanup(&res);
}

/* Prefer: wait off a fiber (no loop to park on): the request looks at its
 * key again after each poll interval until its N passes, then is refused
 * as without the header; the refusal and the wait are counted once. */
static void test_wait_runs_out_off_a_fiber(void **state)
{
    char fp[IDEM_FP_LEN + 1];
    struct order_request rq = {.user_id = USER,
                               .key = KEY,
                               .session_id = SESSION,
                               .quantity = QTY,
                               .token = TOKEN,
                               .wait_s = 1};
    struct order_result res;
    (void)state;
    idem_fingerprint_order(SESSION, QTY, fp);
    char *rec = idem_marker(fp, OTHER_INSTANCE "0123456789abcdef");
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", rec);
    free(rec);
    orders_create(&rows_app, &rq, &rows_render, &res);
    assert_int_equal(res.outcome, ORDER_IN_PROGRESS);
    assert_string_equal(order_layer_name(res.layer), "inflight-key");
    assert_true(fake_cache.idem_begin.calls >= 2);
    assert_int_equal(rows_delta(M_KEY_WAITS), 1);
    assert_int_equal(rows_delta(M_KEY_WAITS_RAN_OUT), 1);
    assert_int_equal(rows_delta(M_KEY_WAITS_ANSWERED), 0);
    assert_int_equal(rows_delta(M_DUP_INFLIGHT_KEY), 1);
    order_result_cleanup(&res);
}

/* Without a wait, the marker is refused at the first look. */
static void test_no_wait_refuses_at_once(void **state)
{
    char fp[IDEM_FP_LEN + 1];
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    (void)state;
    idem_fingerprint_order(SESSION, QTY, fp);
    char *rec = idem_marker(fp, OTHER_INSTANCE "0123456789abcdef");
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", rec);
    free(rec);
    orders_create(&rows_app, &rq, &rows_render, &res);
    assert_int_equal(res.outcome, ORDER_IN_PROGRESS);
    assert_int_equal(fake_cache.idem_begin.calls, 1);
    assert_int_equal(rows_delta(M_KEY_WAITS), 0);
    order_result_cleanup(&res);
}

int main(void)
{
    const struct CMUnitTest own[] = {
        cmocka_unit_test_setup_teardown(test_result_cleanup, rows_setup, rows_teardown),
        cmocka_unit_test_setup_teardown(test_wait_runs_out_off_a_fiber, rows_setup, rows_teardown),
        cmocka_unit_test_setup_teardown(test_no_wait_refuses_at_once, rows_setup, rows_teardown),
    };
    return rows_run("orders", own, sizeof own / sizeof own[0], rows, sizeof rows / sizeof rows[0]);
}
