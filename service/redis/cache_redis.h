/* cache_redis.h - the Redis adapter's pieces that its naive variants
 * (cache_naive.h) build on: the key names, and the table of the entries
 * of the cache port (cache.h) that have a second implementation.
 * Internal to the Redis adapters and boot.c, which picks the entries at
 * boot; the domain never sees it. */
#ifndef TICKETD_CACHE_REDIS_H
#define TICKETD_CACHE_REDIS_H

#include "cache.h"
#include "redis.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The keys of a token, an Idempotency-Key's record and a user+session
 * lock (cache.h), into out (cap bytes). These names, the channel's below
 * and the spend's arguments are built in cache_names.c. */
void cache_redis_token_key(char *out, size_t cap, int64_t user_id, const char *token);
void cache_redis_idem_key(char *out, size_t cap, int64_t user_id, const char *key);
void cache_redis_lock_key(char *out, size_t cap, int64_t user_id, int64_t session_id);
/* The channel a key's end is announced on when copies wait for it (Prefer:
 * wait), "keywait:{<user>}:<key>" (keyevents_redis.c listens to it). It
 * keeps the user's hash tag: the scripts that publish on it name it among
 * their KEYS, in the user's slot. */
#define CACHE_REDIS_WAIT_PREFIX "keywait:"
void cache_redis_wait_channel(char *out, size_t cap, int64_t user_id, const char *key);

/* What spending a token is told (SPEND_LUA, cache_scripts.c): the token's
 * key, the user it must hold, the "<user>|<key>" it becomes (keeping the
 * token's own TTL). */
struct cache_redis_spend {
    char key[256], uid[24], spent[24 + 1 + 128];
};
void cache_redis_spend_args(struct cache_redis_spend *s, int64_t user_id, const char *token,
                            const char *idem_key);

struct redis_script;

/* One key's end, complete (record set) or release (cache.h), as
 * cache_key_complete and cache_key_release are given it. */
struct cache_end {
    bool complete;
    int64_t user_id;
    const char *key;
    const char *marker; /* NULL: none was set */
    const char *record; /* complete only */
    int ttl_s;          /* the record's, complete only */
    int64_t session_id;
    const char *owner; /* NULL: no lock to release */
};

/* Sends end e with script s (a complete's or a release's, the real ones
 * of cache_scripts.c or the naive ones of cache_naive.c: they take the
 * same KEYS and ARGV and differ only in what they check, so the C that
 * builds those is one) and waits for Redis's reply: rc as redis_eval
 * answers. */
int cache_redis_end_with(struct redis_script *s, const struct cache_end *e);

/* The ends Redis missed (cache_missed.c): kept when an end could not
 * reach Redis, and sent again through send, first on the user's next
 * begin and meanwhile by a thread of its own, until Redis took them or
 * the marker's and lock's TTLs are over. cache_missed_init starts the
 * thread (cache_init); cache_missed_cleanup stops it and forgets what is
 * left (cache_cleanup). */
int cache_missed_init(const struct config *cfg, int (*send)(const struct cache_end *e));
void cache_missed_cleanup(void);
/* Keeps a copy of e, which could not reach Redis (TD_EUNAVAIL). */
void cache_missed_keep(const struct cache_end *e);
/* Sends the kept ends of user_id, in order, on the calling thread's
 * connection (a fiber's: its loop's), before what the caller sends next;
 * what reaches Redis is forgotten. True when none of the user's is left
 * kept. One atomic load when nothing is kept. */
bool cache_missed_resend(int64_t user_id);

/* The cache port's entries that the demo's naive variants replace, with
 * the port's signatures and contracts (cache.h). cache_redis.c answers
 * every one of them through the table cache_redis_use was given; boot.c
 * fills it once at boot from TICKETD_DEFENSES, taking each entry from
 * cache_redis_entries unless its defence is switched off. No adapter asks
 * which defences are on. */
struct cache_entries {
    int (*token_take)(int64_t user_id, const char *token, const char *idem_key);
    enum key_begin (*key_begin)(int64_t user_id, const char *key, const char *marker,
                                int marker_ttl_ms, int64_t session_id, const char *owner,
                                int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                                const struct filter_note *note, bool *noted, char **existing);
    /* cache_key_complete's and cache_key_release's script, sent by
     * cache_redis_end_with. */
    struct redis_script *key_complete;
    struct redis_script *key_release;
    int (*bloom_check)(const char *shape, const uint64_t *pos, int k, bool *trusted, bool *maybe);
};

/* The real entries: every defence on. */
extern const struct cache_entries cache_redis_entries;

/* The entries to answer with from now on (borrowed: they must outlive
 * the cache, as boot.c's static table does). Call once, before any thread
 * uses the cache; until then the real entries answer. */
void cache_redis_use(const struct cache_entries *e);

#endif
