/* cache_keys.c - the key look-up's read of Redis (cache_idem_peek,
 * cache.h): the records of an order's key and of a batch key, and their
 * times left to live, read together and never written. */
#include "cache.h"
#include "cache_redis.h"

#include "err.h"
#include "redis.h"
#include "util.h"

#include <hiredis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: the two records. One script, so the two reads see one moment
 * (a copy cannot complete between them) and cost one round trip; it only
 * reads. A missing key is false (a nil reply) and a PTTL of -2. */
static struct redis_script peek_lua = {
    "return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), "
    "redis.call('GET', KEYS[2]), redis.call('PTTL', KEYS[2])}\n",
    "", NULL};

static pthread_once_t peek_once = PTHREAD_ONCE_INIT;

static void peek_prepare(void)
{
    redis_script_prepare(&peek_lua);
}

/* One record and its TTL from the script's reply. */
static int read_peek(const redisReply *rec, const redisReply *ttl, struct idem_peek *out)
{
    if (ttl->type != REDIS_REPLY_INTEGER)
        return TD_EINTERNAL;
    if (rec->type == REDIS_REPLY_NIL)
        return TD_OK;
    if (rec->type != REDIS_REPLY_STRING)
        return TD_EINTERNAL;
    out->record = xstrndup(rec->str, rec->len);
    out->len = rec->len;
    out->ttl_ms = ttl->integer >= 0 ? ttl->integer : -1;
    return TD_OK;
}

int cache_idem_peek(int64_t user_id, const char *name1, const char *name2, struct idem_peek out[2])
{
    char k1[256], k2[256];
    redisReply *r = NULL;
    for (int i = 0; i < 2; i++)
        out[i] = (struct idem_peek){.record = NULL, .len = 0, .ttl_ms = -1};
    pthread_once(&peek_once, peek_prepare);
    cache_redis_idem_key(k1, sizeof k1, user_id, name1);
    cache_redis_idem_key(k2, sizeof k2, user_id, name2);
    const char *keys[] = {k1, k2};
    int rc = redis_eval(&peek_lua, 2, keys, 0, NULL, &r);
    if (rc == TD_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 4))
        rc = TD_EINTERNAL;
    for (int i = 0; rc == TD_OK && i < 2; i++)
        rc = read_peek(r->element[2 * i], r->element[2 * i + 1], &out[i]);
    freeReplyObject(r);
    if (rc != TD_OK) {
        for (int i = 0; i < 2; i++) {
            free(out[i].record);
            out[i] = (struct idem_peek){.record = NULL, .len = 0, .ttl_ms = -1};
        }
    }
    return rc;
}
