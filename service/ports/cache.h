/* cache.h - the Redis port: the fast, forgetful defences.
 *
 * Redis is an accelerator, never the arbiter: every function may fail with
 * TD_EUNAVAIL (down, paused, timed out, flushed under our feet) and the
 * caller must stay correct anyway, because the database decides. On a
 * request's fiber a call goes on its loop's one asynchronous connection,
 * shared by the loop's fibers (the commands of a loop turn leave in one
 * write) and the fiber parks until its reply; on a plain thread (a
 * background job) it goes on the thread's own blocking connection. After a
 * failure every caller of the process skips Redis for a short back-off,
 * then one probe finds out whether it is back. Keys carry the user in a
 * {hash tag} so each script's keys share one Redis Cluster slot. Safe to
 * call from any fiber or thread. Out-parameters are cleared on entry. */
#ifndef TICKETD_CACHE_H
#define TICKETD_CACHE_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Remembers cfg (borrowed) and computes the scripts' SHA1s. Connects nothing. */
int cache_init(const struct config *cfg);
/* Closes the calling thread's blocking connection (the loops' connections
 * live as long as the loops). */
void cache_thread_release(void);
void cache_cleanup(void);

/* TD_OK when Redis answers PING. */
int cache_ping(void);

/* One-time order tokens: token:{user}:<token> = user, with a TTL. */
int cache_token_put(int64_t user_id, const char *token, int ttl_s);
/* Spends a token on behalf of an Idempotency-Key, atomically (one Lua
 * script: the token's value goes from user to "<user>|<idem_key>", keeping
 * the token's own TTL). TD_OK: it was this user's and unspent, or spent
 * before by this same key (a retry of the same intent); TD_ENOTFOUND:
 * unknown or expired; TD_ECONFLICT: someone else's, or spent by another
 * key. */
int cache_token_take(int64_t user_id, const char *token, const char *idem_key);

/* The token an order spends in cache_key_begin: spent on behalf of the
 * request's Idempotency-Key, as cache_token_take does. */
struct token_spend {
    const char *token;
};

/* The order-key filter's bits of the request's key (bloom.h, order_key_filter.h),
 * for cache_key_begin to set when it lets the request go on. */
struct filter_note {
    const uint64_t *pos; /* borrowed */
    int k;               /* how many; 0: nothing to set */
};

/* *token_rc when no token was looked at. */
#define TOKEN_UNCHECKED 1

/* What the key's script found (cache_key_begin). */
enum key_begin {
    KEY_BEGUN,          /* our marker (if any) and the lock (if asked) are ours */
    KEY_HAS_RECORD,     /* the key has a record already: *existing; nothing taken */
    KEY_SESSION_LOCKED, /* another key of this user holds the session; nothing kept */
    KEY_FAILED,         /* Redis failed: the script may or may not have run */
    KEY_NOT_SENT,       /* Redis failed before the script was sent: nothing taken */
};

/* The Idempotency-Key protocol's steps (domain/inflight_key.h), one
 * script each, for any idempotent resource: key names the resource's key
 * in the user's idem:{user}: space (an order's Idempotency-Key as it is,
 * a cart's batch key as "batch/<key>"), and the session lock is asked only
 * by a resource that has one (session_id, owner). */

/* Every Redis defence before the database, in one round trip (one Lua
 * script, so nothing can happen between them):
 *   - the Idempotency-Key record idem:{user}:<key>: if one exists, answers
 *     KEY_HAS_RECORD with it in *existing (new string, caller frees) and
 *     takes nothing; otherwise sets it to marker with a TTL (SET NX PX), or
 *     only looks when marker is NULL;
 *   - then, when owner is not NULL, the user+session lock
 *     lock:order:{user}:<session> = owner (SET NX PX): held by someone
 *     else, the marker just set is deleted again (KEY_SESSION_LOCKED);
 *   - then, when tok is not NULL, the token is spent for key (see
 *     cache_token_take) and its verdict put in *token_rc (TD_OK,
 *     TD_ECONFLICT or TD_ENOTFOUND; TOKEN_UNCHECKED when it was not
 *     reached). Marker and lock stay taken whatever the verdict;
 *   - then, when note is not NULL (and note->k > 0) and the request goes
 *     on (no token asked, or the token's verdict TD_OK), the order-key
 *     filter's bits are set: *noted true. A refused token sets none.
 * *noted is false whenever the bits may not have been set. */
enum key_begin cache_key_begin(int64_t user_id, const char *key, const char *marker,
                               int marker_ttl_ms, int64_t session_id, const char *owner,
                               int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                               const struct filter_note *note, bool *noted, char **existing);

/* The user+session lock alone (SET NX PX), for when the key defences are
 * switched off. TD_OK when taken, TD_ECONFLICT when someone else holds it. */
int cache_lock_acquire(int64_t user_id, int64_t session_id, const char *owner, int ttl_ms);

/* Success: replaces our marker with the completed record (TTL ttl_s) and
 * releases our lock, both only if still ours (one Lua script). marker NULL
 * (no marker was set: the in-flight key is switched off): the record is
 * stored if the key has none. session_id 0 or owner NULL: no lock to
 * release. */
int cache_key_complete(int64_t user_id, const char *key, const char *marker, const char *record,
                       int ttl_s, int64_t session_id, const char *owner);

/* Failure: deletes our marker and releases our lock, each only if still
 * ours (compare-and-delete), so the client may retry the key. marker or
 * owner may be NULL when that one was not taken.
 *
 * A complete or release that cannot reach Redis (TD_EUNAVAIL) is kept and
 * sent again once Redis answers: before the same user's next
 * cache_key_begin, and in the background for the others, until the
 * marker's and lock's TTLs are over. A lock whose request has ended thus
 * refuses no one once Redis is back. */
int cache_key_release(int64_t user_id, const char *key, const char *marker, int64_t session_id,
                      const char *owner);

/* The marker of a request whose process died (its instance key is gone):
 * replaces marker stale with ours, and when owner is not NULL also takes
 * the user+session lock if it is free or still held by stale_owner (one Lua
 * script). TD_OK: both are ours; TD_EDUP: the record changed meanwhile
 * (completed, released or taken over by someone else); TD_ECONFLICT: the
 * lock is held by another request (nothing was changed). */
int cache_key_take_over(int64_t user_id, const char *key, const char *stale, const char *marker,
                        int marker_ttl_ms, int64_t session_id, const char *stale_owner,
                        const char *owner, int lock_ttl_ms);

/* Liveness of ticketd processes: ticketd:instance:<id> exists while the
 * process beats (SET PX ttl_ms GET, renewed well before it expires).
 * *had_key: the key was still there (false for a first beat, and after
 * Redis lost its records). */
int cache_instance_beat(const char *instance, int ttl_ms, bool *had_key);
/* TD_OK when instance beats, TD_ENOTFOUND when its key is gone. */
int cache_instance_alive(const char *instance);
/* A process that stops cleanly says so at once. */
int cache_instance_gone(const char *instance);

/* The Bloom filter of the keys that have orders (bloom.h, order_key_filter.c): its
 * bits ticketd:bloom:{orders}, and its state ticketd:bloom:{orders}:state,
 * "<shape>:<born ms>:<0 building | 1 complete>", where shape is "m:k". A
 * filter is trusted by a process only when its state is complete and of
 * the process's own shape: a flushed or restarted Redis has no state, so
 * an empty filter is never taken at its word. */

/* Reads the k bits of one key (one script): *maybe when all are set,
 * *trusted when the state is complete and of shape. */
int cache_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted, bool *maybe);
/* Sets n bits (the positions of one key or of a page of keys, any number),
 * in one round trip. */
int cache_bloom_add(const uint64_t *pos, int n);
/* Starts a build when there is no state at all: empties the bits and sets
 * the state to building (with a TTL of ttl_ms, so a builder that dies
 * leaves no filter stuck half built). TD_OK: ours to build; TD_EDUP: a
 * filter exists or is being built. */
int cache_bloom_build_begin(const char *building, int ttl_ms);
/* Renews a build's TTL while the state is still building; TD_ECONFLICT
 * when it is gone (flushed, or untrusted meanwhile): the build is void. */
int cache_bloom_build_progress(const char *building, int ttl_ms);
/* building -> complete (no TTL), only if still building; TD_ECONFLICT
 * otherwise. */
int cache_bloom_build_complete(const char *building, const char *complete);
/* Deletes the state: the filter is not trusted until it is built again. */
int cache_bloom_untrust(void);

/* What Redis holds under one name of the idem:{user}: space (an order's
 * Idempotency-Key, or "batch/<key>" for a cart's batch key), for a look
 * that changes nothing (keys.h). */
struct idem_peek {
    char *record;   /* the record's text (new, caller frees), or NULL: none */
    size_t len;     /* its length */
    int64_t ttl_ms; /* its time left to live in ms; -1: none (or no record) */
};

/* Reads the records of two names of user_id's keys and their times left
 * to live, in one round trip (one read-only script): writes nothing, takes
 * nothing over. out[i] is cleared on entry; free each record. */
int cache_idem_peek(int64_t user_id, const char *name1, const char *name2, struct idem_peek out[2]);

#endif
