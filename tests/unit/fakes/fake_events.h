/* fake_events.h - link-time fakes of the event stream port (stream.h, in
 * fake_stream.c) and of the events' database port (store_events.h, in
 * fake_store_events.c), for testing the relay and the consumers without
 * Redis or MariaDB. Like fakes.h: plain global knobs a test sets before
 * the call under test, the calls logged in fake_calls ("stream_ack ...").
 * fake_events_reset() sets every knob to "all is well". Not thread-safe. */
#ifndef TICKETD_TEST_FAKE_EVENTS_H
#define TICKETD_TEST_FAKE_EVENTS_H

#include "fakes.h"
#include "store_events.h"

#include <stdbool.h>
#include <stdint.h>

#define FAKE_ROWS 16

struct fake_stream {
    /* stream_append answers append_rc; on TD_OK the entry id is "<n>-0"
     * for the n-th append. */
    int append_rc;
    int appends;
    /* stream_has: an entry exists unless its id is listed in gone[]. */
    char gone[FAKE_ROWS][STREAM_ID_MAX + 1];
    int ngone;
    int has_calls;
    /* stream_ack and stream_bury answer these; the last id acked and the
     * last reason buried are kept. */
    int ack_rc;
    int acks;
    char acked[FAKE_STR];
    int bury_rc;
    int buries;
    char bury_reason[FAKE_STR];
};

struct fake_events {
    /* store_outbox_relay hands rows 1..nrows to publish (stopping at its
     * first error) and answers relay_rc, or publish's error. */
    int nrows;
    int relay_rc;
    /* store_outbox_scan answers these rows (those with id >= from_id, up
     * to limit) and scan_rc. */
    struct outbox_state scan[FAKE_ROWS];
    int nscan;
    int scan_rc;
    /* store_outbox_requeue: the ids asked for. */
    int64_t requeued[FAKE_ROWS];
    int nrequeued;

    /* The consumers' effects: store_points_credit and store_ticket_issue
     * answer effect_rc (TD_OK: applied). Like the real transaction, a
     * dedup key already recorded is TD_EDUP with nothing changed, and a
     * failed effect records no key. */
    int effect_rc;
    char keys[FAKE_ROWS][FAKE_STR];
    int nkeys;
    int64_t points;   /* credited, in total */
    int64_t user_id;  /* of the last credit */
    int tickets;      /* orders ticketed */
    int effect_calls; /* every attempt */
    bool dedup_null;  /* the last attempt had no dedup key */
    char last_key[FAKE_STR];
    /* store_dead_letter answers dead_rc and keeps the last one. */
    int dead_rc;
    int dead_letters;
    char dead_consumer[FAKE_STR];
    char dead_key[FAKE_STR];
    char dead_reason[FAKE_STR];
    int64_t dead_deliveries;
};

extern struct fake_stream fake_stream;
extern struct fake_events fake_events;

void fake_events_reset(void);

#endif
