/* session_lock.h - the session lock (orders.h, layer 3): one order at a
 * time per user and session, against the double click that made a new key
 * and so passes the in-flight key. The lock is a Redis key,
 * lock:order:{user}:<session> = owner, SET NX PX, taken in the key's own
 * script when the key layers run (cache_key_begin, inflight_key.c) and on
 * its own here when they do not; released only by its owner, with the
 * key's record (cache_key_complete, cache_key_release). A release that
 * cannot reach Redis is not left to the lock's TTL: the cache sends it
 * again once Redis answers, before the user's next begin (cache.h).
 * Thread-safe. */
#ifndef TICKETD_SESSION_LOCK_H
#define TICKETD_SESSION_LOCK_H

#include <stdbool.h>
#include <stdint.h>

struct app;

/* True when the lesson has the lock: the demo may switch it off. */
bool session_lock_on(const struct app *app);

/* Takes the user+session lock for owner, alone. TD_OK when taken;
 * TD_ECONFLICT when another request holds it (counted); else Redis
 * failed. */
int session_lock_take(struct app *app, int64_t user_id, int64_t session_id, const char *owner);

#endif
