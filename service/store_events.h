/* store_events.h - the database side of ticketd's events: the outbox relay
 * (transactional outbox -> Redis stream), the consumers' effects with
 * their dedup rows, dead letters, and the points a user has.
 *
 * Like store.h: each call runs on the calling thread's own connection;
 * errors are TD_EUNAVAIL (database unreachable or timed out), TD_ERETRY
 * (deadlock or lock wait: rolled back, may be run again), TD_EINTERNAL.
 * Every transaction that fails is rolled back before returning. Safe to
 * call from any thread. Out-parameters are cleared on entry. */
#ifndef TICKETD_STORE_EVENTS_H
#define TICKETD_STORE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The one event type with consumers, and its consumer groups. The names
 * are also the `consumer` column of consume_records and dead_letters and
 * the prefix of their business keys ("points:<order_no>"). */
#define EVENT_ORDER_PAID       "order.paid"
#define EVENTS_GROUP_POINTS    "points"
#define EVENTS_GROUP_TICKETING "ticketing"

#define STREAM_ID_MAX  41 /* "<ms>-<seq>", two 64-bit decimals */
#define EVENT_TYPE_MAX 64
#define BIZ_KEY_MAX    512   /* VARCHAR(128) of up to 4-byte characters */
#define PAYLOAD_MAX    65535 /* TEXT */

/* One outbox row as the relay publishes it. Large (the payload buffer):
 * allocate it once per thread. */
struct outbox_event {
    int64_t id;
    char event_type[EVENT_TYPE_MAX + 1];
    char biz_key[BIZ_KEY_MAX + 1];
    char payload[PAYLOAD_MAX + 1];
};

/* Publishes one row. Returns TD_OK with the new stream entry id copied into
 * stream_id (STREAM_ID_MAX + 1 bytes), or an error that ends the batch. */
typedef int (*outbox_publish_fn)(const struct outbox_event *ev, char *stream_id, void *ctx);

/* One relay transaction: locks up to limit unpublished rows, oldest first,
 * skipping rows another relay holds (FOR UPDATE SKIP LOCKED); calls publish
 * for each (ev is a scratch buffer of the caller's); marks the published
 * ones with their entry id and the time; commits. A crash or a failed
 * commit after publish leaves the rows unpublished, so they are published
 * again: a duplicate entry, never a lost one. *published is the number of
 * rows marked. Returns TD_OK; the error of publish when it stopped the
 * batch (the rows published before it are still marked); or a db error. */
int store_outbox_relay(struct outbox_event *ev, int limit, outbox_publish_fn publish, void *ctx,
                       int *published);

/* What the redrive check needs to know of one outbox row. */
struct outbox_state {
    int64_t id;
    bool published;
    /* Every consumer group of the row's type has recorded it (applied
     * or dead-lettered); for a type without groups: published. */
    bool settled;
    bool old;                          /* created at least min_age_s ago */
    bool quiet;                        /* published at least quiet_s ago */
    char stream_id[STREAM_ID_MAX + 1]; /* "" when never published here */
};

/* Reads up to limit rows with id >= from_id, in id order, calling each for
 * every row (st is borrowed for the call); a non-zero return from each
 * stops and is returned. */
int store_outbox_scan(int64_t from_id, int limit, int min_age_s, int quiet_s,
                      int (*each)(const struct outbox_state *st, void *ctx), void *ctx);

/* Queues a published row again (published_at = NULL), but only if it is
 * still published as stream_id: a row that another relay has published
 * again meanwhile is left alone. *requeued says whether it was. */
int store_outbox_requeue(int64_t id, const char *stream_id, bool *requeued);

/* The number of unpublished rows and the highest row id (0 when empty). */
int store_outbox_stats(int64_t *unpublished, int64_t *max_id);

/* The points consumer: one transaction that inserts the dedup row
 * (EVENTS_GROUP_POINTS, dedup_key) and adds points to the user's total.
 * dedup_key NULL skips the dedup row (the consumer-dedup defence switched
 * off in a demo). Returns TD_OK when applied, TD_EDUP when the key was
 * already recorded (nothing changed), or an error. */
int store_points_credit(const char *dedup_key, int64_t user_id, int64_t points);

/* The ticketing consumer: one transaction that inserts the dedup row
 * (EVENTS_GROUP_TICKETING, dedup_key; skipped when NULL) and moves the
 * order PAID -> TICKETED by compare-and-set with its history row.
 * Returns TD_OK when applied; TD_EDUP when the key was already recorded or
 * the order was already ticketed (nothing changed but the dedup row);
 * TD_ENOTFOUND for no such order; TD_ECONFLICT when its state forbids
 * ticketing; or an error. */
int store_ticket_issue(const char *dedup_key, const char *order_no);

/* Records that consumer gave up on an event (see sql/002). */
int store_dead_letter(const char *consumer, const char *dedup_key, int64_t outbox_id,
                      const char *stream_id, int64_t deliveries, const char *reason);

/* The points of user_id (0 when none were ever credited). */
int store_user_points(int64_t user_id, int64_t *points);

#endif
