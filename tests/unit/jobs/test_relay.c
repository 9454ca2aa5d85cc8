/* test_relay.c - the outbox relay against fakes of the stream and of the
 * store: a batch appends each row and stops at the first failure; the
 * redrive check queues again exactly the published, unsettled rows whose
 * entry the stream lost, and remembers how far every row is settled. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_events.h"

#include "err.h"
#include "metrics.h"
#include "relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct outbox_event *scratch;

static int setup(void **state)
{
    (void)state;
    fakes_reset();
    fake_events_reset();
    scratch = calloc(1, sizeof *scratch);
    return scratch == NULL;
}

static int teardown(void **state)
{
    (void)state;
    free(scratch);
    return 0;
}

static void test_publish_batch(void **state)
{
    (void)state;
    int published = -1;
    int64_t before = metrics_get(M_EVENTS_PUBLISHED);
    fake_events.nrows = 3;
    assert_int_equal(relay_publish(scratch, 10, &published), TD_OK);
    assert_int_equal(published, 3);
    assert_string_equal(fake_calls, "outbox_relay stream_append stream_append stream_append");
    assert_int_equal(metrics_get(M_EVENTS_PUBLISHED) - before, 3);
}

static void test_publish_stream_down(void **state)
{
    (void)state;
    /* The stream away: the batch stops, its rows stay in the outbox. */
    int published = -1;
    fake_events.nrows = 3;
    fake_stream.append_rc = TD_EUNAVAIL;
    assert_int_equal(relay_publish(scratch, 10, &published), TD_EUNAVAIL);
    assert_int_equal(published, 0);
    assert_string_equal(fake_calls, "outbox_relay stream_append");
}

static struct outbox_state row(int64_t id, bool published, bool settled, bool old, bool quiet)
{
    struct outbox_state st = {
        .id = id, .published = published, .settled = settled, .old = old, .quiet = quiet};
    if (published)
        snprintf(st.stream_id, sizeof st.stream_id, "%lld-0", (long long)id);
    return st;
}

static void test_redrive_requeues_lost_entries(void **state)
{
    (void)state;
    fake_events.scan[0] = row(1, true, true, true, true);     /* settled and old */
    fake_events.scan[1] = row(2, true, false, true, true);    /* unsettled, entry there */
    fake_events.scan[2] = row(3, true, false, true, true);    /* unsettled, entry lost */
    fake_events.scan[3] = row(4, true, false, false, false);  /* published just now */
    fake_events.scan[4] = row(5, false, false, false, false); /* not yet published */
    fake_events.scan[5] = row(6, true, true, true, true);     /* settled, after a gap */
    fake_events.nscan = 6;
    snprintf(fake_stream.gone[0], sizeof fake_stream.gone[0], "3-0");
    snprintf(fake_stream.gone[1], sizeof fake_stream.gone[1], "4-0");
    fake_stream.ngone = 2;
    struct redrive_mark m = {0};
    assert_int_equal(relay_redrive(&m, 6), 1);
    assert_int_equal(fake_events.nrequeued, 1);
    assert_int_equal(fake_events.requeued[0], 3);
    /* Only the quiet, published, unsettled rows were asked about. */
    assert_int_equal(fake_stream.has_calls, 2);
    /* The settled prefix: row 1; row 2 holds the mark back. */
    assert_int_equal(m.settled_below, 2);
}

static void test_redrive_resumes_and_resets(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        fake_events.scan[i] = row(i + 1, true, true, true, true);
    fake_events.nscan = 4;
    struct redrive_mark m = {0};
    assert_int_equal(relay_redrive(&m, 4), 0);
    assert_int_equal(m.settled_below, 5);
    /* The next check starts at the mark: nothing below it is read. */
    fakes_reset();
    assert_int_equal(relay_redrive(&m, 4), 0);
    assert_int_equal(m.settled_below, 5);
    /* An emptied outbox (its highest id below the mark) starts over. */
    fake_events.nscan = 1;
    fake_events.scan[0] = row(1, true, false, true, true);
    snprintf(fake_stream.gone[0], sizeof fake_stream.gone[0], "1-0");
    fake_stream.ngone = 1;
    assert_int_equal(relay_redrive(&m, 1), 1);
    assert_int_equal(m.settled_below, 0);
}

static void test_redrive_store_down(void **state)
{
    (void)state;
    /* Nothing queued; the next check starts from the same place. */
    fake_events.scan_rc = TD_EUNAVAIL;
    struct redrive_mark m = {.settled_below = 7, .scan_from = 9};
    assert_int_equal(relay_redrive(&m, 20), 0);
    assert_int_equal(m.settled_below, 7);
    assert_int_equal(m.scan_from, 9);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_publish_batch),
        T(test_publish_stream_down),
        T(test_redrive_requeues_lost_entries),
        T(test_redrive_resumes_and_resets),
        T(test_redrive_store_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
