/* cache_names.c - the names ticketd gives its keys and channels in Redis
 * (cache_redis.h), one place for all of them: every name of a user's
 * things carries the user id as its hash tag, so that the keys a script
 * touches, and the channel it publishes on, share one slot of a Redis
 * Cluster (docs/scaling.md). */
#include "cache_redis.h"

#include <stdio.h>

void cache_redis_token_key(char *out, size_t cap, int64_t user_id, const char *token)
{
    snprintf(out, cap, "token:{%lld}:%s", (long long)user_id, token);
}

void cache_redis_idem_key(char *out, size_t cap, int64_t user_id, const char *key)
{
    snprintf(out, cap, "idem:{%lld}:%s", (long long)user_id, key);
}

void cache_redis_lock_key(char *out, size_t cap, int64_t user_id, int64_t session_id)
{
    snprintf(out, cap, "lock:order:{%lld}:%lld", (long long)user_id, (long long)session_id);
}

void cache_redis_wait_channel(char *out, size_t cap, int64_t user_id, const char *key)
{
    snprintf(out, cap, CACHE_REDIS_WAIT_PREFIX "{%lld}:%s", (long long)user_id, key);
}

void cache_redis_spend_args(struct cache_redis_spend *s, int64_t user_id, const char *token,
                            const char *idem_key)
{
    cache_redis_token_key(s->key, sizeof s->key, user_id, token);
    snprintf(s->uid, sizeof s->uid, "%lld", (long long)user_id);
    snprintf(s->spent, sizeof s->spent, "%lld|%s", (long long)user_id, idem_key);
}
