/* fake_store_events.c - the events' database port (store_events.h), as
 * far as the relay and the consumers use it, answered from the knobs of
 * fake_events.h. */
#include "fake_events.h"
#include "store_events.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

struct fake_events fake_events;

void fake_events_reset(void)
{
    memset(&fake_events, 0, sizeof fake_events);
    memset(&fake_stream, 0, sizeof fake_stream);
}

int store_outbox_relay(struct outbox_event *ev, int limit, outbox_publish_fn publish, void *ctx,
                       int *published)
{
    char stream_id[STREAM_ID_MAX + 1];
    fake_call("outbox_relay");
    *published = 0;
    for (int i = 0; i < fake_events.nrows && i < limit; i++) {
        memset(ev, 0, sizeof *ev);
        ev->id = i + 1;
        snprintf(ev->event_type, sizeof ev->event_type, "%s", EVENT_ORDER_PAID);
        int rc = publish(ev, stream_id, ctx);
        if (rc != TD_OK)
            return rc;
        (*published)++;
    }
    return fake_events.relay_rc;
}

int store_outbox_scan(int64_t from_id, int limit, int min_age_s, int quiet_s,
                      int (*each)(const struct outbox_state *st, void *ctx), void *ctx)
{
    (void)min_age_s, (void)quiet_s;
    fake_call("outbox_scan");
    if (fake_events.scan_rc != TD_OK)
        return fake_events.scan_rc;
    int n = 0;
    for (int i = 0; i < fake_events.nscan && n < limit; i++) {
        if (fake_events.scan[i].id < from_id)
            continue;
        n++;
        int rc = each(&fake_events.scan[i], ctx);
        if (rc != 0)
            return rc;
    }
    return TD_OK;
}

int store_outbox_requeue(int64_t id, const char *stream_id, bool *requeued)
{
    (void)stream_id;
    fake_call("outbox_requeue");
    if (fake_events.nrequeued < FAKE_ROWS)
        fake_events.requeued[fake_events.nrequeued++] = id;
    *requeued = true;
    return TD_OK;
}

int store_outbox_stats(int64_t *unpublished, int64_t *max_id)
{
    *unpublished = 0;
    *max_id = fake_events.nscan > 0 ? fake_events.scan[fake_events.nscan - 1].id : 0;
    return TD_OK;
}

/* One effect's transaction: the dedup row first, then the effect; a
 * failed effect takes its row with it. */
static int effect(const char *dedup_key, bool *apply)
{
    *apply = false;
    fake_events.effect_calls++;
    fake_events.dedup_null = dedup_key == NULL;
    snprintf(fake_events.last_key, sizeof fake_events.last_key, "%s",
             dedup_key != NULL ? dedup_key : "");
    for (int i = 0; dedup_key != NULL && i < fake_events.nkeys; i++)
        if (strcmp(fake_events.keys[i], dedup_key) == 0)
            return TD_EDUP;
    if (fake_events.effect_rc != TD_OK)
        return fake_events.effect_rc;
    if (dedup_key != NULL && fake_events.nkeys < FAKE_ROWS)
        snprintf(fake_events.keys[fake_events.nkeys++], FAKE_STR, "%s", dedup_key);
    *apply = true;
    return TD_OK;
}

int store_points_credit(const char *dedup_key, const char *order_no, int64_t user_id,
                        int64_t points, int64_t redrive_id)
{
    bool apply;
    (void)order_no, (void)redrive_id;
    fake_call("points_credit");
    int rc = effect(dedup_key, &apply);
    if (apply) {
        fake_events.points += points;
        fake_events.user_id = user_id;
    }
    return rc;
}

int store_ticket_issue(const char *dedup_key, const char *order_no, int64_t redrive_id)
{
    bool apply;
    (void)order_no, (void)redrive_id;
    fake_call("ticket_issue");
    int rc = effect(dedup_key, &apply);
    fake_events.tickets += apply;
    return rc;
}

int store_dead_letter(const char *consumer, const char *dedup_key, int64_t outbox_id,
                      const char *stream_id, int64_t deliveries, const char *reason)
{
    (void)outbox_id, (void)stream_id;
    fake_call("dead_letter");
    if (fake_events.dead_rc != TD_OK)
        return fake_events.dead_rc;
    fake_events.dead_letters++;
    snprintf(fake_events.dead_consumer, sizeof fake_events.dead_consumer, "%s", consumer);
    snprintf(fake_events.dead_key, sizeof fake_events.dead_key, "%s", dedup_key);
    snprintf(fake_events.dead_reason, sizeof fake_events.dead_reason, "%s", reason);
    fake_events.dead_deliveries = deliveries;
    return TD_OK;
}
