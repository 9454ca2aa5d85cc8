/* keys.h - what became of one of a user's Idempotency-Keys (GET
 * /api/v1/idempotency-keys/{key}), for a client that lost its answer and
 * wants to know before it retries.
 *
 * A key names an order (its request_id; a cart's item keys are order
 * keys), a cart's batch key, or both; the order is answered first. Each
 * kind is looked for where its defences keep it, Redis's record first
 * and the database when Redis forgot:
 *
 *   order   Redis idem:{user}:<key> (a completed answer, or a copy's
 *           marker), then orders (user_id, request_id);
 *   batch   Redis idem:{user}:batch/<key> (a final answer, or a copy's
 *           marker), then idempotency_records (scope batch), which keeps
 *           every run's answer, complete or not.
 *
 * An answer found (Redis's or the database's) is COMPLETED even while a
 * later retry of the key runs; a marker is IN_PROGRESS only when no answer
 * exists and the process that set it still beats (liveness.h): a dead
 * copy's marker runs nothing. Looking reads and never writes: no marker is
 * set or taken over, no lock taken, no row locked or waited for.
 *
 * Domain logic only: it calls the cache and store ports; the API layer
 * reads an order number out of a record's bytes (struct keys_reader).
 * Thread-safe. */
#ifndef TICKETD_KEYS_H
#define TICKETD_KEYS_H

#include "model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;

enum key_state {
    KEY_COMPLETED,   /* the key has its answer */
    KEY_IN_PROGRESS, /* a copy is running now, on some instance */
};

enum key_kind {
    KEY_KIND_ORDER,
    KEY_KIND_BATCH,
};

struct key_status {
    enum key_state state;
    enum key_kind kind;
    int status;                      /* COMPLETED: the answer's HTTP status */
    char order_no[ORDER_NO_LEN + 1]; /* COMPLETED order */
    bool complete;                   /* COMPLETED batch: every item has its order */
    int64_t age_ms;                  /* IN_PROGRESS: since the copy set its marker */
};

/* Reads the order number out of the bytes of an order's answer (as the
 * API rendered it) into out; false when they hold none. */
typedef bool (*keys_order_no_fn)(const char *body, size_t len, char out[ORDER_NO_LEN + 1]);

/* Looks key up for user_id. Returns TD_OK with *out filled (cleared on
 * entry); TD_ENOTFOUND when the key has neither answer nor copy in flight
 * (never used, failed and forgotten, or another user's); TD_EUNAVAIL when
 * that cannot be told: the database could not be asked, or Redis, which
 * alone knows of a copy in flight, could not (a COMPLETED found anyway is
 * still answered). */
int keys_lookup(struct app *app, int64_t user_id, const char *key, keys_order_no_fn order_no,
                struct key_status *out);

#endif
