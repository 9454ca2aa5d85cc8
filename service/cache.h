/* cache.h - the Redis port: the fast, forgetful defences.
 *
 * Redis is an accelerator, never the arbiter: every function may fail with
 * TD_EUNAVAIL (down, paused, timed out, flushed under our feet) and the
 * caller must stay correct anyway, because the database decides. Each
 * thread uses its own connection; after a failure the thread skips Redis
 * for a short back-off, then reconnects on its own. Keys carry the user in
 * a {hash tag} so each script's keys share one Redis Cluster slot.
 * Safe to call from any thread. Out-parameters are cleared on entry. */
#ifndef TICKETD_CACHE_H
#define TICKETD_CACHE_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Remembers cfg (borrowed) and computes the scripts' SHA1s. Connects nothing. */
int cache_init(const struct config *cfg);
void cache_thread_release(void);
void cache_cleanup(void);

/* TD_OK when Redis answers PING. */
int cache_ping(void);

/* One-time order tokens: token:{user}:<token> = user, with a TTL. */
int cache_token_put(int64_t user_id, const char *token, int ttl_s);
/* Consumes a token atomically (one Lua script: GET == user, then DEL).
 * TD_OK: it was this user's and is now spent; TD_ENOTFOUND: unknown,
 * expired, spent or someone else's. */
int cache_token_take(int64_t user_id, const char *token);

/* The Idempotency-Key record idem:{user}:<key>. Sets it to marker with a
 * TTL if it does not exist (SET NX PX ... GET, one round trip). Returns
 * TD_OK when the marker was set (we own the key now), or TD_EDUP with the
 * record that was there in *existing (new string, caller frees). */
int cache_idem_begin(int64_t user_id, const char *key, const char *marker, int ttl_ms,
                     char **existing);

/* The user+session lock lock:order:{user}:<session> = owner (SET NX PX).
 * TD_OK when taken, TD_ECONFLICT when someone else holds it. */
int cache_lock_acquire(int64_t user_id, int64_t session_id, const char *owner, int ttl_ms);

/* Success: replaces our marker with the completed record (TTL ttl_s) and
 * releases our lock, both only if still ours (one Lua script). session_id
 * 0 or owner NULL: no lock to release. */
int cache_order_complete(int64_t user_id, const char *key, const char *marker, const char *record,
                         int ttl_s, int64_t session_id, const char *owner);

/* Failure: deletes our marker and releases our lock, each only if still
 * ours (compare-and-delete), so the client may retry the key. marker or
 * owner may be NULL when that one was not taken. */
int cache_order_release(int64_t user_id, const char *key, const char *marker, int64_t session_id,
                        const char *owner);

/* Deletes every key of the current database (tests and the demo only). */
int cache_flush(void);

#endif
