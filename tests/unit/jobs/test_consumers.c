/* test_consumers.c - what a consumer does with one stream entry
 * (consumer_handle), against fakes of the stream and of the store: the
 * effect keyed by the event's business key, applied once however often it
 * is delivered, acknowledged only once it is committed, dead-lettered when
 * no delivery can apply it. Also the points rule. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_events.h"

#include "app.h"
#include "config.h"
#include "consume.h"
#include "consumers.h"
#include "consume_naive.h"
#include "defences.h"
#include "err.h"
#include "event_payload.h"
#include "metrics.h"
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORDER_NO "26120100000000000001"

static struct config cfg;
static struct app app;
static char *payload; /* an order.paid of ORDER_NO: user 42, 2599 cents */

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    cfg.tx_retries = 2;
    app =
        (struct app){.cfg = &cfg, .defences = DEFENCES_ALL, .dedup_key = consumers_key_by_business};
    fakes_reset();
    fake_events_reset();
    struct order o = {.id = 7, .user_id = 42, .session_id = 3, .quantity = 1, .amount_cents = 2599};
    snprintf(o.order_no, sizeof o.order_no, "%s", ORDER_NO);
    payload = event_paid_write(&o, "txn-1", "2026-12-01T08:00:00Z");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(payload);
    config_cleanup(&cfg);
    return 0;
}

static const struct consume_group *group(const char *name)
{
    const struct consume_group *g = consume_group_find(name);
    assert_non_null(g);
    return g;
}

/* The order.paid entry the relay appends, under stream id `id`. */
static struct stream_entry paid(const char *id)
{
    return (struct stream_entry){.id = id,
                                 .outbox_id = "1",
                                 .event_type = EVENT_ORDER_PAID,
                                 .biz_key = ORDER_NO,
                                 .payload = payload,
                                 .payload_len = strlen(payload)};
}

static void test_points_rule(void **state)
{
    (void)state;
    /* One point per whole 100 cents. */
    assert_int_equal(consume_points_for(0), 0);
    assert_int_equal(consume_points_for(99), 0);
    assert_int_equal(consume_points_for(100), 1);
    assert_int_equal(consume_points_for(2599), 25);
}

static void test_applies_then_acks(void **state)
{
    (void)state;
    struct stream_entry en = paid("1-0");
    int64_t consumed = metrics_get(M_EVENTS_CONSUMED_POINTS);
    assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_POINTS), &en, 1), ENTRY_DONE);
    /* The effect (with its dedup row: one store transaction), then the ack. */
    assert_string_equal(fake_calls, "points_credit stream_ack");
    assert_string_equal(fake_events.last_key, "points:" ORDER_NO);
    assert_int_equal(fake_events.points, 25);
    assert_int_equal(fake_events.user_id, 42);
    assert_string_equal(fake_stream.acked, "1-0");
    assert_int_equal(metrics_get(M_EVENTS_CONSUMED_POINTS) - consumed, 1);
}

static void test_redelivery_applies_once(void **state)
{
    (void)state;
    /* The same event delivered again, and published again under another
     * entry id (the relay crashed before marking its row): one effect. */
    const char *ids[] = {"1-0", "1-0", "9-0"};
    int64_t duplicates = metrics_get(M_EVENTS_DUPLICATE_TICKETING);
    for (size_t i = 0; i < 3; i++) {
        struct stream_entry en = paid(ids[i]);
        assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_TICKETING), &en, 1), ENTRY_DONE);
        assert_string_equal(fake_events.last_key, "ticketing:" ORDER_NO);
    }
    assert_int_equal(fake_events.effect_calls, 3);
    assert_int_equal(fake_events.tickets, 1);
    assert_int_equal(fake_stream.acks, 3); /* a duplicate is acked too */
    assert_int_equal(metrics_get(M_EVENTS_DUPLICATE_TICKETING) - duplicates, 2);
}

static void test_failed_effect_not_acked(void **state)
{
    (void)state;
    struct stream_entry en = paid("1-0");
    const struct consume_group *g = group(EVENTS_GROUP_POINTS);
    /* An effect that failed is left pending, to be claimed again. */
    fake_events.effect_rc = TD_EINTERNAL;
    assert_int_equal(consumer_handle(&app, g, &en, 1), ENTRY_KEPT);
    assert_string_equal(fake_calls, "points_credit");
    /* The database away: stop reading and back off, nothing acked. A
     * deadlock is tried again first. */
    fake_events.effect_rc = TD_EUNAVAIL;
    assert_int_equal(consumer_handle(&app, g, &en, 1), ENTRY_UNAVAIL);
    fake_events.effect_calls = 0;
    fake_events.effect_rc = TD_ERETRY;
    assert_int_equal(consumer_handle(&app, g, &en, 1), ENTRY_UNAVAIL);
    assert_int_equal(fake_events.effect_calls, 3);
    assert_int_equal(fake_stream.acks, 0);
    assert_int_equal(fake_events.points, 0);
    /* Its redelivery applies it: the failure took its dedup row with it. */
    fake_events.effect_rc = TD_OK;
    assert_int_equal(consumer_handle(&app, g, &en, 2), ENTRY_DONE);
    assert_int_equal(fake_events.points, 25);
    assert_int_equal(fake_stream.acks, 1);
}

static void test_ack_lost(void **state)
{
    (void)state;
    /* Committed, the ack lost: the redelivery finds the dedup row. */
    struct stream_entry en = paid("1-0");
    const struct consume_group *g = group(EVENTS_GROUP_POINTS);
    fake_stream.ack_rc = TD_EUNAVAIL;
    assert_int_equal(consumer_handle(&app, g, &en, 1), ENTRY_UNAVAIL);
    fake_stream.ack_rc = TD_OK;
    assert_int_equal(consumer_handle(&app, g, &en, 2), ENTRY_DONE);
    assert_int_equal(fake_events.points, 25);
}

static void test_unfit_is_dead_lettered(void **state)
{
    (void)state;
    /* No such order, or one whose state forbids the effect: no redelivery
     * helps; the letter waits for an operator, the entry is acked. */
    static const struct {
        int rc;
        const char *reason;
    } cases[] = {{TD_ENOTFOUND, "no such order"},
                 {TD_ECONFLICT, "the order's state does not allow it"}};
    for (size_t i = 0; i < 2; i++) {
        fakes_reset();
        fake_events_reset();
        fake_events.effect_rc = cases[i].rc;
        struct stream_entry en = paid("1-0");
        assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_TICKETING), &en, 3), ENTRY_DONE);
        assert_string_equal(fake_calls, "ticket_issue dead_letter stream_bury stream_ack");
        assert_string_equal(fake_events.dead_consumer, "ticketing");
        assert_string_equal(fake_events.dead_key, "ticketing:" ORDER_NO);
        assert_string_equal(fake_events.dead_reason, cases[i].reason);
        assert_int_equal(fake_events.dead_deliveries, 3);
    }
}

static void test_dead_letter_not_recorded(void **state)
{
    (void)state;
    /* The letter must be recorded before the entry is let go. */
    struct stream_entry en = paid("1-0");
    fake_events.effect_rc = TD_ENOTFOUND;
    fake_events.dead_rc = TD_EUNAVAIL;
    assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_TICKETING), &en, 1), ENTRY_UNAVAIL);
    fake_events.dead_rc = TD_EINTERNAL;
    assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_TICKETING), &en, 1), ENTRY_KEPT);
    fake_events.dead_rc = TD_OK;
    fake_stream.bury_rc = TD_EUNAVAIL;
    assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_TICKETING), &en, 1), ENTRY_UNAVAIL);
    assert_int_equal(fake_stream.acks, 0);
}

static void test_bad_payload_is_dead_lettered(void **state)
{
    (void)state;
    static const char *const bad[] = {"{}", "not json", "{\"order_no\":\"" ORDER_NO "\"}",
                                      "{\"order_no\":\"26120100000000000002\",\"user_id\":1,"
                                      "\"amount_cents\":1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fakes_reset();
        fake_events_reset();
        struct stream_entry en = paid("1-0");
        en.payload = bad[i];
        en.payload_len = strlen(bad[i]);
        assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_POINTS), &en, 1), ENTRY_DONE);
        assert_int_equal(fake_events.effect_calls, 0);
        assert_int_equal(fake_events.dead_letters, 1);
    }
}

static void test_other_entries_acked(void **state)
{
    (void)state;
    /* Not an event the group acts on, or trimmed away before it was read:
     * acked without an effect (a trimmed event is published again by the
     * relay's redrive check). */
    struct stream_entry refund = paid("1-0");
    refund.event_type = EVENT_REFUND_REQUIRED;
    struct stream_entry trimmed = {.id = "2-0", .deleted = true};
    assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_POINTS), &refund, 1), ENTRY_DONE);
    assert_int_equal(consumer_handle(&app, group(EVENTS_GROUP_POINTS), &trimmed, 1), ENTRY_DONE);
    assert_string_equal(fake_calls, "stream_ack stream_ack");
}

static void test_switched_off(void **state)
{
    (void)state;
    /* DEMO: dedup by stream entry id (the naive key boot.c picks with
     * consumer-dedup-business-key off), a copy under another id is applied
     * again; without the dedup row at all, every delivery is. */
    app.dedup_key = consume_naive_key_by_entry;
    struct stream_entry first = paid("1-0"), copy = paid("9-0");
    const struct consume_group *g = group(EVENTS_GROUP_POINTS);
    assert_int_equal(consumer_handle(&app, g, &first, 1), ENTRY_DONE);
    assert_string_equal(fake_events.last_key, "points:1-0");
    assert_int_equal(consumer_handle(&app, g, &copy, 1), ENTRY_DONE);
    assert_int_equal(fake_events.points, 50);

    fake_events_reset();
    app.dedup_key = consumers_key_by_business;
    app.defences = DEFENCES_ALL & ~DEFENCE_CONSUMER_DEDUP;
    assert_int_equal(consumer_handle(&app, g, &first, 1), ENTRY_DONE);
    assert_true(fake_events.dedup_null);
    assert_int_equal(consumer_handle(&app, g, &first, 2), ENTRY_DONE);
    assert_int_equal(fake_events.points, 50);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_points_rule),
        T(test_applies_then_acks),
        T(test_redelivery_applies_once),
        T(test_failed_effect_not_acked),
        T(test_ack_lost),
        T(test_unfit_is_dead_lettered),
        T(test_dead_letter_not_recorded),
        T(test_bad_payload_is_dead_lettered),
        T(test_other_entries_acked),
        T(test_switched_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
