/* stream.h - the event stream port: what the outbox relay and the
 * consumers need of a log with consumer groups, at-least-once delivery
 * and pending entries. stream_redis.c implements it on the Redis stream
 * ticketd:events (its dead letters on ticketd:events:dead); the unit tests
 * link fakes in its place.
 *
 * Errors: TD_EUNAVAIL when the server cannot be reached or timed out,
 * TD_EINTERNAL on an error reply (for a group: most likely NOGROUP, the
 * server lost it) or an answer that makes no sense. Called by background
 * jobs only: each call uses the calling thread's own blocking connection. */
#ifndef TICKETD_STREAM_H
#define TICKETD_STREAM_H

#include "store_events.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The stream's name, as operators and logs know it. */
#define STREAM_NAME "ticketd:events"

/* One entry, borrowed for the call it is handed to. */
struct stream_entry {
    const char *id;
    bool deleted; /* still pending, but its data was trimmed away */
    const char *outbox_id;
    const char *event_type;
    const char *biz_key;
    const char *payload;
    size_t payload_len;
};

/* Called for each entry of a read or claim. TD_OK goes on; a negative
 * value (a td_err) stops and is returned; a positive one stops without
 * an error. */
typedef int (*stream_entry_fn)(const struct stream_entry *en, void *ctx);

/* Call once before any job uses the stream. */
void stream_init(void);

/* Appends an outbox row (trimming the stream to a bounded length). TD_OK
 * with the new entry's id in stream_id. */
int stream_append(const struct outbox_event *ev, char stream_id[STREAM_ID_MAX + 1]);

/* Whether the stream still holds entry id. */
int stream_has(const char *id, bool *exists);

/* The entries the slowest group has not acknowledged (pending plus not
 * yet read); 0 when there is no stream yet. */
int stream_lag(int64_t *lag);

/* Creates group at the start of the stream (and the stream) unless it
 * exists; *created says whether it did. Starting at the beginning means a
 * group re-created after the server lost it reads whatever was appended
 * since. */
int stream_group_ensure(const char *group, bool *created);

/* Reads for consumer of group: its own pending entries after `own` (no
 * blocking), or, with own NULL, new entries, blocking up to block_ms. At
 * most count; each is called for every one; *n is how many came. */
int stream_read(const char *group, const char *consumer, const char *own, int count, int block_ms,
                stream_entry_fn each, void *ctx, size_t *n);

/* Takes over for consumer up to count entries of group pending longer than
 * idle_ms, scanning from *cursor, which is set where the next call goes
 * on ("0-0" when the scan is through). each is called for every one. */
int stream_claim(const char *group, const char *consumer, int idle_ms, int count,
                 char cursor[STREAM_ID_MAX + 1], stream_entry_fn each, void *ctx);

/* How many times group has delivered entry id; 0 when it is no longer
 * pending (acknowledged meanwhile). */
int stream_deliveries(const char *group, const char *id, int64_t *count);

int stream_ack(const char *group, const char *id);

/* Copies an entry group gives up on to the dead-letter stream, for an
 * operator, with how often it was delivered and why. */
int stream_bury(const char *group, const struct stream_entry *en, int64_t deliveries,
                const char *reason);

/* Removes consumer from group when it has nothing pending (restarts then
 * do not pile up names); one with pending entries stays, for another
 * consumer to claim them. */
void stream_leave(const char *group, const char *consumer);

#endif
