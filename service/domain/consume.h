/* consume.h - what one order.paid event does for each consumer group, in
 * one place. The live stream consumers (consumers.c) and the dead-letter
 * re-drive (deadletters.c) both read events with event_paid_parse and
 * apply them through this, so a re-driven letter goes through exactly the
 * code a delivery does: the effect and its dedup row consume_records
 * (group, "<group>:<biz_key>") in one transaction, run again on deadlock
 * by txretry.
 *
 * Owns the table of groups; the stream, acks and dead-lettering stay with
 * the callers. Thread-safe: no state of its own. */
#ifndef TICKETD_CONSUME_H
#define TICKETD_CONSUME_H

#include "event_payload.h"
#include "metrics.h"
#include "model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct consume_group {
    const char *name; /* EVENTS_GROUP_*: the stream group and the consumer column */
    enum metric consumed;
    enum metric duplicate;
    /* The group's store transaction (store_events.h): TD_OK applied, TD_EDUP
     * already applied, or an error. */
    int (*apply)(const struct paid_event *pe, const char *dedup_key, int64_t redrive_id);
};

/* The groups of order.paid, in a fixed order; events_mysql.c's settled
 * check names the same. */
#define CONSUME_GROUPS 2
extern const struct consume_group consume_groups[CONSUME_GROUPS];

/* The group called name, or NULL. */
const struct consume_group *consume_group_find(const char *name);

/* The group's dedup key of a business key, "<group>:<biz_key>" (caller
 * frees); NULL biz_key is taken as "". */
char *consume_dedup_key(const struct consume_group *g, const char *biz_key);

/* Applies the group's effect with its dedup row (dedup_key NULL: without,
 * the demo's switched-off defence), retrying deadlocks up to retries times.
 * redrive_id: 0, or the dead letter this re-drives (store_events.h).
 * Returns TD_OK applied; TD_EDUP already applied; TD_ENOTFOUND or
 * TD_ECONFLICT when the order does not allow it (consume_unfit_reason);
 * TD_EUNAVAIL / TD_ERETRY when the database is away or kept colliding;
 * another error otherwise. */
int consume_apply(const struct consume_group *g, const struct paid_event *pe, const char *dedup_key,
                  int64_t redrive_id, int retries);

/* The dead letter's reason for a consume_apply result that no retry will
 * change as things stand ("no such order", ...), or NULL for any other. */
const char *consume_unfit_reason(int rc);

#endif
