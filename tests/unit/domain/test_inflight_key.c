/* test_inflight_key.c - the Idempotency-Key protocol (inflight_key.c) on
 * its own, step by step, against the fake cache port (fakes.h): begin and
 * what it takes, the answers from a record (replay, 422, 409), the
 * take-over of a dead owner, Redis failing under either policy, the lock
 * alone, complete and release (each once), and the wait for a copy in
 * flight; here no resource is involved. Then the same in the order flow,
 * as rows of order_rows.h: a copy in flight refused or taken over, garbage
 * under the key, and the defence switched off. Carts run these steps
 * through their own flow (the integration tests). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"
#include "order_rows.h"

#include "app.h"
#include "cache.h"
#include "config.h"
#include "defences.h"
#include "err.h"
#include "idem.h"
#include "inflight_key.h"
#include "log.h"
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USER    42
#define NAME    "batch/key-1" /* any resource's key: the protocol does not care */
#define SESSION 7

#define OUR_INSTANCE   "fedcba9876543210"
#define OTHER_INSTANCE "0123456789abcdef"

static struct config cfg;
static struct app app;
static char fp[IDEM_FP_LEN + 1], other_fp[IDEM_FP_LEN + 1];

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    app = (struct app){.cfg = &cfg, .defences = DEFENCES_ALL};
    snprintf(app.instance, sizeof app.instance, "%s", OUR_INSTANCE);
    idem_fingerprint_order(SESSION, 2, fp);
    idem_fingerprint_order(SESSION, 3, other_fp);
    fakes_reset();
    fake_metrics_mark();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    config_cleanup(&cfg);
    return 0;
}

static int64_t delta(enum metric m)
{
    return fake_metrics_delta(m);
}

/* The key holds rec (new, freed here). */
static void under_key(char *rec)
{
    fake_cache.idem_begin_rc = TD_EDUP;
    snprintf(fake_cache.existing, sizeof fake_cache.existing, "%s", rec);
    free(rec);
}

static enum inflight_key_end begin(struct inflight_key *k, struct inflight_key_answer *ans,
                                   int64_t session, const char *token)
{
    inflight_key_init(k, &app, USER, NAME, fp);
    k->session_id = session;
    k->token = token;
    return inflight_key_begin(k, ans);
}

static void assert_calls(const char *want)
{
    if (strcmp(fake_calls, want) != 0)
        fail_msg("port calls\n   were: %s\n   want: %s", fake_calls, want);
}

/* Begin: one script takes our marker (with the fingerprint), the lock and
 * the token. */
static void test_begin_takes_marker_lock_and_token(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    assert_int_equal(begin(&k, &ans, SESSION, "tok"), INFLIGHT_RUN);
    assert_calls("order_begin");
    assert_string_equal(fake_cache.idem_begin.key, NAME);
    assert_non_null(strstr(fake_cache.idem_begin.marker, fp));
    assert_int_equal(fake_cache.lock.calls, 1);
    assert_true(fake_cache.token_take.in_begin);
    assert_int_equal(k.token_rc, TD_OK);
    assert_true(inflight_key_holds(&k));
    assert_true(k.locked);
    inflight_key_cleanup(&k);
}

/* A resource without a session asks for no lock. */
static void test_begin_without_a_session_takes_no_lock(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    assert_int_equal(begin(&k, &ans, 0, NULL), INFLIGHT_RUN);
    assert_int_equal(fake_cache.lock.calls, 0);
    assert_false(k.locked);
    assert_int_equal(k.token_rc, TOKEN_UNCHECKED);
    inflight_key_cleanup(&k);
}

/* Answer: a completed record is replayed byte for byte, nothing taken. */
static void test_completed_record_replayed(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    under_key(idem_done(fp, 201, "{\"n\":1}", 7));
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_REPLAY);
    assert_int_equal(ans.layer, LAYER_RESPONSE_CACHE);
    assert_int_equal(ans.status, 201);
    assert_int_equal(ans.body_len, 7);
    assert_memory_equal(ans.body, "{\"n\":1}", 7);
    assert_false(inflight_key_holds(&k));
    assert_int_equal(delta(M_DUP_RESPONSE_CACHE), 1);
    inflight_key_answer_cleanup(&ans);
    inflight_key_cleanup(&k);
}

/* Answer: another payload under the key is 422, from a record or a marker,
 * named by the layer that holds it. */
static void test_other_payload_refused(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    under_key(idem_done(other_fp, 201, "{}", 2));
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_REUSED);
    assert_int_equal(ans.layer, LAYER_RESPONSE_CACHE);
    inflight_key_cleanup(&k);
    under_key(idem_marker(other_fp, OTHER_INSTANCE "0123456789abcdef"));
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_REUSED);
    assert_int_equal(ans.layer, LAYER_INFLIGHT_KEY);
    assert_int_equal(delta(M_DUP_KEY_REUSED), 2);
    inflight_key_cleanup(&k);
}

/* In flight: a live process's marker is 409, counted once. */
static void test_copy_in_flight(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    under_key(idem_marker(fp, OTHER_INSTANCE "0123456789abcdef"));
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_BUSY);
    assert_int_equal(ans.layer, LAYER_INFLIGHT_KEY);
    assert_string_equal(fake_cache.alive_asked, OTHER_INSTANCE);
    assert_int_equal(fake_cache.take_over.calls, 0);
    assert_int_equal(delta(M_DUP_INFLIGHT_KEY), 1);
    assert_false(inflight_key_holds(&k));
    inflight_key_cleanup(&k);
}

/* Take over: a dead process's marker and lock become ours. */
static void test_dead_owner_taken_over(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    under_key(idem_marker(fp, OTHER_INSTANCE "0123456789abcdef"));
    fake_cache.alive_rc = TD_ENOTFOUND;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_RUN);
    assert_calls("order_begin instance_alive order_take_over");
    assert_string_equal(fake_cache.take_over.stale_owner, OTHER_INSTANCE "0123456789abcdef");
    assert_false(fake_cache.take_over.owner.null);
    assert_true(inflight_key_holds(&k));
    assert_true(k.locked);
    assert_int_equal(delta(M_INFLIGHT_TAKEOVERS), 1);
    inflight_key_cleanup(&k);
}

/* Take over refused because another key holds the session: 409 of the
 * session lock; and our own process's marker is never taken over. */
static void test_take_over_refused(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    under_key(idem_marker(fp, OTHER_INSTANCE "0123456789abcdef"));
    fake_cache.alive_rc = TD_ENOTFOUND;
    fake_cache.take_over_rc = TD_ECONFLICT;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_LOCKED);
    assert_int_equal(ans.layer, LAYER_SESSION_LOCK);
    assert_int_equal(delta(M_DUP_SESSION_LOCK), 1);
    inflight_key_cleanup(&k);
    fakes_reset();
    under_key(idem_marker(fp, OUR_INSTANCE "0123456789abcdef"));
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_BUSY);
    assert_calls("order_begin");
    inflight_key_cleanup(&k);
}

/* The session held by another key: 409, nothing kept. */
static void test_session_locked(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    fake_cache.lock_rc = TD_ECONFLICT;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_LOCKED);
    assert_int_equal(ans.layer, LAYER_SESSION_LOCK);
    assert_false(inflight_key_holds(&k));
    inflight_key_cleanup(&k);
}

/* Redis fails: degrade goes on without it, strict ends the request; what
 * the script may have taken is kept, to be given back. */
static void test_redis_failed(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    fake_cache.idem_begin_rc = TD_EUNAVAIL;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_RUN);
    assert_false(k.redis_ok);
    assert_true(inflight_key_holds(&k));
    inflight_key_release(&k);
    assert_int_equal(fake_cache.release.calls, 1);
    inflight_key_cleanup(&k);
    cfg.redis_policy = REDIS_POLICY_STRICT;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_UNAVAILABLE);
    inflight_key_cleanup(&k);
}

/* The begin was not sent (an end of the user's, kept while Redis was
 * unreachable, could not go first): as after a failure, but nothing can
 * be ours, so nothing is given back. */
static void test_begin_not_sent(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    fake_cache.begin_not_sent = true;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_RUN);
    assert_false(k.redis_ok);
    assert_false(inflight_key_holds(&k));
    inflight_key_release(&k);
    assert_int_equal(fake_cache.release.calls, 0);
    inflight_key_cleanup(&k);
    cfg.redis_policy = REDIS_POLICY_STRICT;
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_UNAVAILABLE);
    assert_false(inflight_key_holds(&k));
    inflight_key_cleanup(&k);
}

/* Both key layers off (the demo): the key is not looked at, and the lock
 * is taken alone. */
static void test_key_layers_off_lock_alone(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    app.defences = DEFENCES_ALL & ~(DEFENCE_RESPONSE_CACHE | DEFENCE_INFLIGHT_KEY);
    assert_int_equal(begin(&k, &ans, SESSION, NULL), INFLIGHT_RUN);
    assert_calls("lock_acquire");
    assert_true(k.locked);
    inflight_key_cleanup(&k);
}

/* Complete: our marker becomes the record, the lock is released, once;
 * a release after it gives nothing back. */
static void test_complete_once(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    begin(&k, &ans, SESSION, NULL);
    inflight_key_complete(&k, 201, "{\"n\":1}", 7);
    inflight_key_complete(&k, 201, "{\"n\":1}", 7);
    inflight_key_release(&k);
    assert_calls("order_begin order_complete");
    assert_string_equal(fake_cache.complete.key, NAME);
    assert_false(fake_cache.complete.marker.null);
    assert_false(fake_cache.complete.owner.null);
    assert_non_null(strstr(fake_cache.complete.record, "{\"n\":1}"));
    assert_false(inflight_key_holds(&k));
    inflight_key_cleanup(&k);
}

/* Complete with the in-flight key off: no marker, yet the record is kept
 * for the response cache. With both off, nothing is kept. */
static void test_complete_without_marker(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    app.defences = DEFENCES_ALL & ~(DEFENCE_INFLIGHT_KEY | DEFENCE_SESSION_LOCK);
    begin(&k, &ans, SESSION, NULL);
    inflight_key_complete(&k, 201, "{}", 2);
    assert_calls("order_begin order_complete");
    assert_true(fake_cache.complete.marker.null);
    inflight_key_cleanup(&k);
    fakes_reset();
    app.defences &= ~DEFENCE_RESPONSE_CACHE;
    begin(&k, &ans, SESSION, NULL);
    inflight_key_complete(&k, 201, "{}", 2);
    assert_calls("");
    inflight_key_cleanup(&k);
}

/* Release: marker and lock given back, once; nothing held, nothing sent. */
static void test_release_once(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    begin(&k, &ans, SESSION, NULL);
    inflight_key_release(&k);
    inflight_key_release(&k);
    assert_calls("order_begin order_release");
    assert_false(fake_cache.release.marker.null);
    assert_false(fake_cache.release.owner.null);
    assert_int_equal(fake_cache.release.session_id, SESSION);
    inflight_key_cleanup(&k);
    fakes_reset();
    under_key(idem_done(fp, 201, "{}", 2));
    begin(&k, &ans, SESSION, NULL);
    inflight_key_release(&k);
    assert_calls("order_begin");
    inflight_key_answer_cleanup(&ans);
    inflight_key_cleanup(&k);
}

/* Prefer: wait, off a fiber: the key is looked at again until the wait
 * runs out, then 409 as without it, counted once. */
static void test_wait_looks_again(void **state)
{
    struct inflight_key k;
    struct inflight_key_answer ans;
    (void)state;
    under_key(idem_marker(fp, OTHER_INSTANCE "0123456789abcdef"));
    inflight_key_init(&k, &app, USER, NAME, fp);
    k.wait_s = 1;
    assert_int_equal(inflight_key_begin(&k, &ans), INFLIGHT_BUSY);
    assert_true(fake_cache.idem_begin.calls > 1);
    assert_int_equal(delta(M_DUP_INFLIGHT_KEY), 1);
    assert_int_equal(delta(M_KEY_WAITS), 1);
    assert_int_equal(delta(M_KEY_WAITS_RAN_OUT), 1);
    inflight_key_cleanup(&k);
}

/* --- the key in the order flow (rows of order_rows.h) ------------------ */

static void then_alive_asked(const struct order_result *res)
{
    (void)res;
    /* The marker belongs to the first request, whose process still beats:
     * deleting it here would let a third copy through while the first
     * still runs. */
    assert_string_equal(fake_cache.alive_asked, OTHER_INSTANCE);
}

static void then_taken_over(const struct order_result *res)
{
    (void)res;
    /* Nobody will finish or release that marker: the retry takes it (and
     * its lock) over, and completes under what it took. */
    assert_string_equal(fake_cache.take_over.stale, fake_cache.existing);
    assert_string_equal(fake_cache.take_over.stale_owner, OTHER_INSTANCE "0123456789abcdef");
    assert_false(fake_cache.take_over.owner.null);
    assert_memory_equal(fake_cache.take_over.owner.s, OUR_INSTANCE, IDEM_INSTANCE_LEN);
    assert_string_equal(fake_cache.complete.marker.s, fake_cache.take_over.marker);
    assert_string_equal(fake_cache.complete.owner.s, fake_cache.take_over.owner.s);
}

static void then_no_marker_claimed(const struct order_result *res)
{
    (void)res;
    /* The key holds someone else's text, not our marker: the completion
     * must not claim a marker it never set. */
    assert_true(fake_cache.complete.marker.null);
    assert_false(fake_cache.complete.owner.null);
}

static void then_no_marker_set(const struct order_result *res)
{
    (void)res;
    /* The lookup still runs for the response cache, but sets no marker,
     * so a concurrent copy is not stopped by one. */
    assert_string_equal(fake_cache.idem_begin.marker, "");
    assert_true(fake_cache.complete.marker.null);
}

static void then_no_marker_completed(const struct order_result *res)
{
    (void)res;
    assert_true(fake_cache.complete.marker.null);
}

/* With no marker and no lock to hand back, the answer is still stored in
 * Redis for the key's retries (the Redis half of the response cache). */
static void then_stored_without_claims(const struct order_result *res)
{
    assert_int_equal(fake_cache.complete.calls, 1);
    assert_true(fake_cache.complete.marker.null);
    assert_true(fake_cache.complete.owner.null);
    assert_non_null(strstr(fake_cache.complete.record, res->body));
}

static const struct order_case rows[] = {
    /* layer 2: the in-flight key; a refusal is checked against the
     * database first (no order under the key here, so it stands) */
    {"in flight, same payload", .under_key = KEY_MARKER, .outcome = ORDER_IN_PROGRESS,
     .layer = "inflight-key", .calls = ALIVE_THEN_DB, .counts = {COUNTS(M_DUP_INFLIGHT_KEY, 1)},
     .then = then_alive_asked},
    {"in flight of a dead process: taken over", .under_key = KEY_MARKER, .alive_rc = TD_ENOTFOUND,
     .outcome = ORDER_CREATED,
     .calls = "order_begin instance_alive order_take_over token_take order_create order_complete",
     .counts = {COUNTS(M_INFLIGHT_TAKEOVERS, 1), COUNTS(M_DUP_INFLIGHT_KEY, 0)},
     .then = then_taken_over},
    {"in flight, Redis cannot tell if its process lives: it stands", .under_key = KEY_MARKER,
     .alive_rc = TD_EUNAVAIL, .outcome = ORDER_IN_PROGRESS, .layer = "inflight-key",
     .calls = ALIVE_THEN_DB},
    {"in flight, taken by someone else meanwhile", .under_key = KEY_MARKER,
     .alive_rc = TD_ENOTFOUND, .take_over_rc = TD_EDUP, .outcome = ORDER_IN_PROGRESS,
     .layer = "inflight-key", .calls = TAKE_OVER_THEN_DB},
    {"in flight, another key holds the session now", .under_key = KEY_MARKER,
     .alive_rc = TD_ENOTFOUND, .take_over_rc = TD_ECONFLICT, .outcome = ORDER_DUPLICATE_SUBMISSION,
     .layer = "session-lock", .calls = TAKE_OVER_THEN_DB},
    /* This process is alive by definition: no question asked. */
    {"own marker is never taken over", .under_key = KEY_MARKER_OURS, .alive_rc = TD_ENOTFOUND,
     .outcome = ORDER_IN_PROGRESS, .layer = "inflight-key",
     .calls = "order_begin order_find_request"},
    {"in flight, another payload", .under_key = KEY_MARKER_OTHER_SESSION,
     .outcome = ORDER_KEY_REUSED, .layer = "inflight-key", .calls = "order_begin",
     .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    /* Garbage under the key is no answer: the database decides. */
    {"malformed record is ignored", .under_key = KEY_GARBAGE, .outcome = ORDER_CREATED,
     .calls = LOCK_APART, .then = then_no_marker_claimed},
    {"in-flight key off: no marker set", .off = DEFENCE_INFLIGHT_KEY, .outcome = ORDER_CREATED,
     .calls = FULL_PATH, .then = then_no_marker_set},
    {"in-flight key off: another's marker does not stop it", .off = DEFENCE_INFLIGHT_KEY,
     .under_key = KEY_MARKER, .outcome = ORDER_CREATED, .calls = LOCK_APART},
    {"in-flight key off: a completed record still replays", .off = DEFENCE_INFLIGHT_KEY,
     .under_key = KEY_DONE, .outcome = ORDER_REPLAYED, .layer = "response-cache",
     .body = REDIS_BODY, .calls = "order_begin"},
    {"in-flight key and session lock off: the answer is still stored",
     .off = DEFENCE_INFLIGHT_KEY | DEFENCE_SESSION_LOCK, .outcome = ORDER_CREATED,
     .calls = FULL_PATH, .then = then_stored_without_claims},
    {"both key layers off", .off = DEFENCE_RESPONSE_CACHE | DEFENCE_INFLIGHT_KEY,
     .outcome = ORDER_CREATED, .calls = "lock_acquire token_take order_create order_complete",
     .then = then_no_marker_completed},
};

int main(void)
{
    /* A take-over logs what it did, by design. */
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_begin_takes_marker_lock_and_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_without_a_session_takes_no_lock, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_completed_record_replayed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_payload_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_owner_taken_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_take_over_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_not_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_layers_off_lock_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_without_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_looks_again, setup, teardown),
    };
    return rows_run("inflight_key", tests, sizeof tests / sizeof tests[0], rows,
                    sizeof rows / sizeof rows[0]);
}
