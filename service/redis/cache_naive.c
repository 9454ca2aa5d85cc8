/* cache_naive.c - the demo's naive cache entries (cache_naive.h), over the
 * Redis adapter. */
#include "cache_naive.h"

#include "cache_scripts.h"
#include "err.h"
#include "redis.h"

#include <hiredis.h>
#include <stdio.h>
#include <string.h>

/* The real scripts (cache_scripts.c) with the lock released the way the
 * articles warn against, `finally { delete(lockKey) }`: a plain DEL. The
 * key's record is compared and written as there (a marker a waiting copy
 * marked watched is still ours), but read first; nobody is told of the
 * end: waiting copies find it by their own looks. KEYS: idem, lock, the
 * key's channel (unused). ARGV: marker, record, ttl_s, owner (and the
 * real script's TTLs, unused). */
static const char complete_lua[] = CACHE_LUA_SAME_MARKER
    "local cur = redis.call('GET', KEYS[1])\n"
    "if (ARGV[1] ~= '' and same_marker(cur, ARGV[1])) or (ARGV[1] == '' and not cur) then\n"
    "  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])\n"
    "end\n"
    "if ARGV[4] ~= '' then redis.call('DEL', KEYS[2]) end\n"
    "return 1\n";

/* KEYS: idem, lock. ARGV: marker, owner ('' for one not taken). */
static const char release_lua[] =
    CACHE_LUA_SAME_MARKER "if same_marker(redis.call('GET', KEYS[1]), ARGV[1]) then\n"
                          "  redis.call('DEL', KEYS[1])\n"
                          "end\n"
                          "if ARGV[2] ~= '' then redis.call('DEL', KEYS[2]) end\n"
                          "return 1\n";

struct redis_script cache_naive_complete = {complete_lua, "", NULL};
struct redis_script cache_naive_release = {release_lua, "", NULL};

void cache_naive_init(void)
{
    redis_script_prepare(&cache_naive_complete);
    redis_script_prepare(&cache_naive_release);
}

/* GET, then a separate write. The second step marks the token spent by
 * the key (where the articles' version deletes it) so that nothing but the
 * window differs from the real script: a deleted token would read as one
 * Redis forgot. */
int cache_naive_token_take(int64_t user_id, const char *token, const char *idem_key)
{
    struct cache_redis_spend s;
    redisReply *r = NULL;
    cache_redis_spend_args(&s, user_id, token, idem_key);
    const char *get[] = {"GET", s.key};
    int rc = redis_command(2, get, NULL, &r);
    if (rc != TD_OK)
        goto out;
    if (r->type == REDIS_REPLY_NIL) {
        rc = TD_ENOTFOUND;
        goto out;
    }
    if (r->type != REDIS_REPLY_STRING) {
        rc = TD_EINTERNAL;
        goto out;
    }
    if (strcmp(r->str, s.spent) == 0)
        goto out; /* spent before by this key: TD_OK */
    if (strcmp(r->str, s.uid) != 0) {
        rc = TD_ECONFLICT;
        goto out;
    }
    freeReplyObject(r);
    r = NULL;
    const char *set[] = {"SET", s.key, s.spent, "KEEPTTL"};
    rc = redis_command(4, set, NULL, &r);
out:
    freeReplyObject(r);
    return rc;
}

enum key_begin cache_naive_key_begin(int64_t user_id, const char *key, const char *marker,
                                     int marker_ttl_ms, int64_t session_id, const char *owner,
                                     int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                                     const struct filter_note *note, bool *noted, char **existing)
{
    (void)tok; /* spent on its own, by cache_naive_token_take */
    return cache_redis_entries.key_begin(user_id, key, marker, marker_ttl_ms, session_id, owner,
                                         lock_ttl_ms, NULL, token_rc, note, noted, existing);
}

int cache_naive_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted,
                            bool *maybe)
{
    int rc = cache_redis_entries.bloom_check(shape, pos, k, trusted, maybe);
    if (rc == TD_OK)
        *trusted = true;
    return rc;
}
