/* respcache.h - the in-process response cache: completed order responses
 * by (user, Idempotency-Key), in front of the Redis record.
 *
 * It only answers faster what Redis (and then the database) would answer
 * anyway, so losing it is harmless. Bounded: `capacity` entries, rounded up
 * to a multiple of the 16 shards, the oldest of a shard evicted first, and each expires like its
 * Redis record. Thread-safe (sharded locks). */
#ifndef TICKETD_RESPCACHE_H
#define TICKETD_RESPCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct respcache;

/* Returns a new cache, or NULL when capacity is 0 (every call below
 * accepts NULL and then caches nothing). */
struct respcache *respcache_new(size_t capacity);
void respcache_free(struct respcache *c);

struct cached_response {
    char fingerprint[65];
    int status;
    char *body; /* new; caller frees */
    size_t body_len;
};

/* Looks up a live entry. Returns true and fills *out (body copied). */
bool respcache_get(struct respcache *c, int64_t user_id, const char *key, int64_t now_ms,
                   struct cached_response *out);

/* Stores a completed response (copied), valid until expires_ms. A live
 * entry for the same key wins (it is the same response); an expired one is
 * refreshed in place. */
void respcache_put(struct respcache *c, int64_t user_id, const char *key, const char *fingerprint,
                   int status, const char *body, size_t body_len, int64_t now_ms,
                   int64_t expires_ms);

/* How many entries are held (for tests and metrics). */
size_t respcache_size(struct respcache *c);

/* The most entries one lookup may have to walk: the longest hash chain
 * (for tests: the table must stay as flat as it was sized). */
size_t respcache_longest_chain(struct respcache *c);

#endif
