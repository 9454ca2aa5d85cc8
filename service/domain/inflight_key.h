/* inflight_key.h - the Idempotency-Key protocol, written once for every
 * idempotent resource: an order's key (orders.c), a cart's batch key
 * (cart.c), and whatever comes next (docs/idempotent-resource.md walks
 * through adding one). A resource names its key as the cache knows it,
 * the fingerprint of its payload, and what the key's script may take
 * besides the marker (the session lock, the order token); the protocol
 * does the rest, as one SET with its options does in Redis:
 *
 *   begin       the key's record, else our in-flight marker (SET NX PX,
 *               with the fingerprint), then the lock and the token, in one
 *               round trip (cache_key_begin);
 *   in flight   another copy's marker: 409, or with Prefer: wait, a wait
 *               for the first copy (keywait.h) and a new begin;
 *   take over   a marker whose process no longer beats (liveness.h)
 *               becomes ours, with its lock;
 *   answer      a completed record is replayed byte for byte, or refused
 *               (422) when it was made for another payload;
 *   complete    our marker becomes the answer's record (a success);
 *   release     our marker and lock are given back (a failure), so that
 *               the key may be retried: only a success is remembered.
 *
 * Redis only accelerates: each step may fail with it, and under policy
 * degrade the request goes on without it (the database decides). With
 * both key layers switched off (the demo), begin takes the lock alone.
 * Domain logic: it calls the cache port and never sees HTTP or JSON. One
 * struct inflight_key per request; thread-safe across requests. */
#ifndef TICKETD_INFLIGHT_KEY_H
#define TICKETD_INFLIGHT_KEY_H

#include "idem.h"
#include "order_types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;
struct filter_note;

/* One request's hold on its key. */
struct inflight_key {
    /* Set by inflight_key_init; every pointer is borrowed and must outlive
     * the struct. */
    struct app *app;
    int64_t user_id;
    const char *name; /* the key as the cache knows it (cache.h) */
    const char *fp;   /* the payload's fingerprint (idem.h) */
    char owner[IDEM_OWNER_LEN + 1];
    /* What the resource asks for besides the marker, set before begin (0
     * and NULL: nothing). */
    int64_t session_id; /* the user+session lock, taken in the same script */
    const char *token;  /* the order token, spent in the same script */
    int wait_s;         /* Prefer: wait=N applied (keywait.h) */
    /* The order-key filter's bits, set in the same script when the request
     * goes on (borrowed; NULL: none, as for a cart's batch key). */
    const struct filter_note *note;
    /* What the request holds, for complete or release. */
    bool redis_ok; /* false once Redis failed: skip the rest of it */
    char *marker;  /* our marker, if we set one (or may have, after a Redis failure) */
    bool locked;   /* we hold (or may hold) the user+session lock */
    int token_rc;  /* the token's verdict in the script, or TOKEN_UNCHECKED */
    bool noted;    /* the script set the filter's bits (note) */
    bool ended;    /* completed or released: nothing more to give back */
};

/* How begin ended. */
enum inflight_key_end {
    INFLIGHT_RUN,         /* the request runs: what it took is in the struct */
    INFLIGHT_REPLAY,      /* a completed record: its answer is in *ans */
    INFLIGHT_REUSED,      /* the key was used for another payload: 422 */
    INFLIGHT_BUSY,        /* a copy runs, and no wait was asked or it ran out: 409 */
    INFLIGHT_LOCKED,      /* another key holds the user's session: 409 */
    INFLIGHT_UNAVAILABLE, /* Redis failed under policy strict: 503 */
};

/* The answer begin found under the key. */
struct inflight_key_answer {
    enum order_layer layer; /* the defence that answered */
    int status;             /* INFLIGHT_REPLAY: the status and body first given */
    char *body;             /* new, caller frees (inflight_key_answer_cleanup) */
    size_t body_len;
};

/* Starts a request's hold on user_id's key name for a payload of
 * fingerprint fp: nothing asked, nothing held yet. */
void inflight_key_init(struct inflight_key *k, struct app *app, int64_t user_id, const char *name,
                       const char *fp);

/* The begin step, with the wait for a copy in flight and the take-over of
 * a dead one. Clears *ans on entry. */
enum inflight_key_end inflight_key_begin(struct inflight_key *k, struct inflight_key_answer *ans);

/* Success: our marker becomes the record of the answer (status, body), for
 * the key's retries, and our lock is released. Also when the in-flight key
 * is switched off and no marker was set: the record is then stored if the
 * key has none. Tried even after a Redis failure (the breaker refuses it
 * at no cost). At most once per request. */
void inflight_key_complete(struct inflight_key *k, int status, const char *body, size_t len);

/* Failure: our marker and lock, if we took them, are given back, each only
 * if still ours. At most once per request. */
void inflight_key_release(struct inflight_key *k);

/* True while the request holds (or may hold) a marker or the lock. */
bool inflight_key_holds(const struct inflight_key *k);

/* Frees what k owns (not what it holds in Redis: complete or release). */
void inflight_key_cleanup(struct inflight_key *k);

void inflight_key_answer_cleanup(struct inflight_key_answer *ans);

#endif
