/* store_events.h - the database side of ticketd's events: the outbox relay
 * (transactional outbox -> Redis stream), the consumers' effects with
 * their dedup rows, dead letters, and the points a user has.
 *
 * Connections as in store.h (a request's fiber borrows one of its loop's,
 * a background job's thread has its own); errors are TD_EUNAVAIL
 * (database unreachable or timed out), TD_ERETRY (deadlock or lock wait:
 * rolled back, may be run again), TD_EINTERNAL.
 * Every transaction that fails is rolled back before returning. Safe to
 * call from any fiber or thread. Out-parameters are cleared on entry. */
#ifndef TICKETD_STORE_EVENTS_H
#define TICKETD_STORE_EVENTS_H

#include "event_payload.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STREAM_ID_MAX  41 /* "<ms>-<seq>", two 64-bit decimals */
#define EVENT_TYPE_MAX 64
#define BIZ_KEY_MAX    512   /* VARCHAR(128) of up to 4-byte characters */
#define PAYLOAD_MAX    65535 /* TEXT */

/* One outbox row as the relay publishes it. Large (the payload buffer):
 * allocate it once per caller, never on a stack (a fiber's is small). */
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

/* The consumers' effects. Each is one transaction that inserts the dedup
 * row (consumer, dedup_key) first and then applies the effect; dedup_key
 * NULL skips the dedup row (the consumer-dedup defence switched off in a
 * demo). Both return TD_OK when applied, TD_EDUP when the key was already
 * recorded (nothing changed), or an error.
 *
 * redrive_id is 0 for a delivery from the stream. Otherwise the call
 * re-drives that dead letter (ticketd dead-letters replay): the letter's
 * row is locked first (SELECT ... FOR UPDATE, so re-drives of one letter
 * queue behind each other), and in the same transaction as the effect it
 * is stamped replayed_at with replay_result 'applied', or 'already applied'
 * when the dedup row existed (then that stamp alone is committed, and
 * TD_EDUP returned). A letter already re-driven is TD_EDUP with nothing
 * changed; a letter that does not exist, or belongs to another consumer,
 * is TD_EINVAL. A re-drive needs its dedup_key (TD_EINVAL when NULL): its
 * exactly-once rests on that row. When the effect fails the letter stays
 * open. */

/* The points consumer: records the credit in the points ledger under its
 * business key, the order, and adds points to the user's total. TD_EDUP
 * also when the ledger already holds the order: a redelivery after its
 * dedup row was dropped (or written on another day) credits nothing. */
int store_points_credit(const char *dedup_key, const char *order_no, int64_t user_id,
                        int64_t points, int64_t redrive_id);

/* The ticketing consumer: moves the order PAID -> TICKETED by
 * compare-and-set with its history row. Also TD_EDUP when the order was
 * already ticketed (nothing changed but the dedup row, which is kept);
 * TD_ENOTFOUND for no such order; TD_ECONFLICT when its state forbids
 * ticketing. */
int store_ticket_issue(const char *dedup_key, const char *order_no, int64_t redrive_id);

/* Records that consumer gave up on an event (see sql/002). */
int store_dead_letter(const char *consumer, const char *dedup_key, int64_t outbox_id,
                      const char *stream_id, int64_t deliveries, const char *reason);

#define DEAD_CONSUMER_MAX 128 /* VARCHAR(32) */
#define DEAD_REASON_MAX   800 /* VARCHAR(200) */
#define DEAD_TIME_MAX     31

/* One row of dead_letters (sql/002, sql/004). */
struct dead_letter {
    int64_t id;
    char consumer[DEAD_CONSUMER_MAX + 1];
    char biz_key[BIZ_KEY_MAX + 1]; /* the dedup key: "points:<order_no>" */
    int64_t outbox_id;
    int64_t deliveries;
    char reason[DEAD_REASON_MAX + 1];
    char created_at[DEAD_TIME_MAX + 1];    /* "2026-12-01T08:00:00Z" */
    char replayed_at[DEAD_TIME_MAX + 1];   /* "" while open */
    char replay_result[DEAD_CONSUMER_MAX]; /* "" while open */
};

/* Calls each for the open (not re-driven) dead letters with id > after_id,
 * of consumer (every consumer when NULL), in id order, at most limit of
 * them; dl is borrowed for the call, and each must not use the store (the
 * rows are still being read). A non-zero return from each stops and is
 * returned. */
int store_dead_letters_open(const char *consumer, int64_t after_id, int limit,
                            int (*each)(const struct dead_letter *dl, void *ctx), void *ctx);

/* One dead letter, open or re-driven. TD_ENOTFOUND if there is none. */
int store_dead_letter_get(int64_t id, struct dead_letter *out);

/* One outbox row (published or not). TD_ENOTFOUND if there is none. */
int store_outbox_get(int64_t id, struct outbox_event *out);

/* The points of user_id (0 when none were ever credited). */
int store_user_points(int64_t user_id, int64_t *points);

#endif
