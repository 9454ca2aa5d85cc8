/* relay.h - the outbox relay, a background job (job.h): moves outbox rows to the event stream
 * (stream.h), each in the transaction that locked it (store_events.h), and
 * checks now and then that every published row whose consumers have not
 * recorded it still has its entry in the stream. The stream may lose
 * entries (Redis restarted without persistence, flushed, trimmed), the
 * database never does, so such rows are queued again.
 *
 * A crash after the append and before the row is marked costs a
 * duplicate entry, never a lost event: the consumers' dedup rows make the
 * duplicate harmless. Any number of relays may run at once (the rows are
 * locked FOR UPDATE SKIP LOCKED). Thread-safe. */
#ifndef TICKETD_RELAY_H
#define TICKETD_RELAY_H

#include "job.h"
#include "store_events.h"

#include <stdint.h>

/* Publishes a batch as soon as the last one was full, and polls the
 * outbox now and then when it is not. */
extern const struct job relay_job;

/* One batch: appends up to batch unpublished rows to the stream, oldest
 * first, and marks them published. scratch is a row buffer of the
 * caller's. TD_OK with *published; or the error that stopped the batch
 * (the rows appended before it are still marked). */
int relay_publish(struct outbox_event *scratch, int batch, int *published);

/* What the redrive check remembers between calls. */
struct redrive_mark {
    int64_t settled_below; /* every outbox row with a lower id is settled */
    int64_t scan_from;     /* where the next scan starts */
};

/* The redrive check: queues again the published rows that some group has
 * not recorded and whose entry the stream no longer holds. Scans a
 * bounded number of rows per call, resuming where it stopped, so a long
 * backlog costs each call the same; max_id is the outbox's highest id.
 * Returns how many rows it queued again (an error only ends the call
 * early: the next one starts from the same place). */
int relay_redrive(struct redrive_mark *m, int64_t max_id);

#endif
