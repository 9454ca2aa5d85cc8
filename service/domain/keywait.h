/* keywait.h - Prefer: wait (RFC 7240), for an order's key and a cart's
 * batch key alike: a copy of a request that meets its key in flight (the
 * first copy's marker, orders.h layer 2) waits for the first copy instead
 * of being refused with 409, for at most the N seconds it asked for
 * (TICKETD_MAX_WAIT_S at most).
 *
 * Its one caller is the key protocol (inflight_key.c), which keeps the
 * loop, for every resource: look at the key (begin in Redis); on a marker,
 * keywait_for; when that returns true, look again. So after the first copy completes the waiter
 * finds its record and replays it; after it failed (the key released) the waiter takes the key and
 * runs, as a retry would, and the other waiters then meet its marker and wait for it within what is
 * left of their N.
 *
 * While it waits, the request's fiber is parked: it holds no loop thread
 * and no database connection. It is woken when its key's end is announced
 * by whichever instance ran the first copy (keyevents.h: Redis pub/sub,
 * heard by one listener thread per process, handed to each waiter's own
 * loop), or, should an announcement be lost, by its own look again every
 * KEYWAIT_POLL_MS. Off a fiber (tests, background threads) it only looks
 * again. */
#ifndef TICKETD_KEYWAIT_H
#define TICKETD_KEYWAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct app;

/* How often a waiter looks at its key again when no announcement came: the
 * delay a lost announcement adds. The announcement is the rule, so this
 * only bounds the exceptions (a listener reconnecting, a Redis restart, a
 * marker that expired or whose process died); each look costs the waiter
 * two small Redis round trips, 8 a second, and stays well under the whole
 * seconds that N counts. */
#define KEYWAIT_POLL_MS 250

/* One request's wait, across its looks at the key. */
struct keywait {
    int wait_s;                   /* the N applied; 0: no wait asked */
    int64_t deadline_ms;          /* mono_ms when N runs out */
    bool waited;                  /* parked at least once: counted */
    const _Atomic bool *draining; /* the app's: a draining process stops waiting */
};

/* How a request that waited ended, for the metrics. */
enum keywait_end {
    KEYWAIT_ANSWERED, /* the first copy's answer, replayed */
    KEYWAIT_RAN,      /* the key was free again: this copy ran */
    KEYWAIT_RAN_OUT,  /* N passed first: 409 */
};

/* Starts the clock of a request that asked for wait_s seconds (0: none).
 * Once app drains (SIGTERM), its waiters stop waiting at their next look
 * and get the 409 they would have had without the header: their clients
 * retry on another instance rather than lose the answer to the drain's
 * timeout. */
void keywait_start(struct keywait *kw, const struct app *app, int wait_s);

/* The user's key (as the cache knows it) holds seen, the marker of a copy
 * in flight. Waits until its end is announced, or a poll interval passes,
 * or the wait runs out. Returns true when the caller should look at the
 * key again; false, at once, when no wait was asked or it ran out. */
bool keywait_for(struct keywait *kw, int64_t user_id, const char *key, const char *seen);

/* Counts how a request that waited ended (nothing when it never waited). */
void keywait_finish(const struct keywait *kw, enum keywait_end how);

/* The listener's (keyevents.h), from any thread: wakes the waiters of the
 * user's key, on their loops. */
void keywait_notify(int64_t user_id, const char *key, void *arg);
/* Wakes every waiter: announcements may have been lost. */
void keywait_notify_all(void *arg);

#endif
