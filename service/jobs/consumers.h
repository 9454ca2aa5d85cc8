/* consumers.h - the stream consumers, a background job (job.h) with one
 * instance, on a thread of its own, per consumer group (consume.h): each
 * reads the event stream (stream.h), applies each entry's effect with its
 * dedup row in one transaction, then acknowledges it.
 *
 * Delivery is at least once; the dedup row, keyed by the business key
 * ("points:<order_no>"), makes the effect happen once. Entries another
 * consumer left pending too long are taken over; entries delivered more
 * than TICKETD_MAX_DELIVERIES times, or that can never apply, are
 * dead-lettered (the dead_letters row, a copy on the dead-letter stream),
 * from where `ticketd dead-letters replay` re-drives them (deadletters.h).
 *
 * A crash anywhere costs a redelivery, never a lost or doubled effect:
 *   before the effect's commit      the entry stays pending and is reclaimed
 *   after the commit, before the ack the redelivery finds the dedup row
 * Thread-safe. */
#ifndef TICKETD_CONSUMERS_H
#define TICKETD_CONSUMERS_H

#include "job.h"

#include <stdint.h>

struct app;
struct consume_group;
struct stream_entry;

/* Asked to stop, a consumer ends within TICKETD_CONSUMER_BLOCK_MS (its
 * blocking read returns) and leaves the group when nothing is pending. */
extern const struct job consumers_job;

enum entry_outcome {
    ENTRY_DONE,   /* acknowledged */
    ENTRY_KEPT,   /* left pending: it will be claimed again later */
    ENTRY_UNAVAIL /* the stream or the database is away: stop and back off */
};

/* Names an entry's dedup row for group g (a new string): how a consumer
 * tells two copies of one event apart from two events. app->dedup_key
 * holds the one in use, chosen at boot. */
typedef char *(*consumer_key_fn)(const struct consume_group *g, const struct stream_entry *en);

/* The real one: the entry's business key, so that every copy of one event
 * (a redelivery, the relay publishing again, a re-drive) finds the same
 * row (consume_dedup_key). The demo's naive one is consume_naive.h's. */
char *consumers_key_by_business(const struct consume_group *g, const struct stream_entry *en);

/* Applies one entry for group g and acknowledges it, or dead-letters it,
 * or leaves it pending when its effect failed. deliveries: how often the
 * stream has handed it out (for a dead letter; 0 when not known). */
enum entry_outcome consumer_handle(const struct app *app, const struct consume_group *g,
                                   const struct stream_entry *en, int64_t deliveries);

#endif
