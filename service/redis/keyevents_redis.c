/* keyevents_redis.c - the key events port (keyevents.h) on Redis pub/sub:
 * a waiter's watch is a script that marks the key's marker watched
 * (cache_scripts.c, watch_lua: "P|" becomes "W|"), and the scripts that
 * complete or release a key publish on the key's channel when the marker
 * they replace or delete was watched. The listener is one connection per
 * process, PSUBSCRIBEd to every key's channel, read by one thread.
 *
 * Why pub/sub and not keyspace notifications: notifications need
 * notify-keyspace-events set on the server (an operator's setting this
 * service cannot assume), and they would fire for every order's record,
 * waited for or not; a publish only for keys that have waiters costs the
 * hot path nothing: the command that replaces the marker answers whether
 * it was watched. In a Redis
 * Cluster a PUBLISH reaches every node's subscribers, and the channel
 * keeps the {user} hash tag so that a sharded SPUBLISH could take over. */
#include "keyevents.h"

#include "cache_redis.h"
#include "cache_scripts.h"
#include "redis.h"
#include "redis_conn.h"
#include "sentinel.h"

#include "err.h"
#include "log.h"
#include "metrics.h"

#include <errno.h>
#include <hiredis.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int keyevents_watch(int64_t user_id, const char *key, const char *seen)
{
    char ik[256];
    redisReply *r = NULL;
    cache_redis_idem_key(ik, sizeof ik, user_id, key);
    const char *keys[] = {ik};
    const char *args[] = {seen};
    int rc = redis_eval(&cache_lua_watch, 1, keys, 1, args, &r);
    if (rc == TD_OK)
        rc = r->type == REDIS_REPLY_INTEGER && r->integer == 1 ? TD_OK
             : r->type == REDIS_REPLY_INTEGER                  ? TD_ECONFLICT
                                                               : TD_EINTERNAL;
    freeReplyObject(r);
    return rc;
}

/* The most announcements one listen hands on before it returns, so that
 * its thread still sees a stop under a flood. */
#define KEYEVENTS_BATCH 4096

/* The listener's connection: its thread's alone, and the generation of
 * the primary's address it was opened to (redis_conn.h). */
static redisContext *sub;
static unsigned sub_gen;

void keyevents_close(void)
{
    if (sub != NULL)
        redisFree(sub);
    sub = NULL;
}

static int fail(const char *what)
{
    metrics_inc(M_DEP_ERRORS_REDIS);
    log_warn("redis: the key events listener %s: %s; waiting copies look again on their own", what,
             sub != NULL && sub->err ? sub->errstr : "no connection");
    keyevents_close();
    redis_forget_primary(sub_gen); /* with Sentinel: ask again where the primary is */
    return TD_EUNAVAIL;
}

static int subscribe(void)
{
    const struct config *cfg = redis_config();
    char host[SENTINEL_HOST_MAX];
    int port;
    struct timeval tv = {.tv_sec = cfg->redis_timeout_ms / 1000,
                         .tv_usec = (cfg->redis_timeout_ms % 1000) * 1000};
    if (redis_primary(host, sizeof host, &port, &sub_gen) != TD_OK)
        return fail("found no primary");
    sub = host[0] == '/' ? redisConnectUnixWithTimeout(host, tv)
                         : redisConnectWithTimeout(host, port, tv);
    if (sub == NULL || sub->err)
        return fail("cannot connect");
    if (redisSetTimeout(sub, tv) != REDIS_OK)
        return fail("cannot set its timeout");
    redisReply *r = redisCommand(sub, "PSUBSCRIBE %s*", CACHE_REDIS_WAIT_PREFIX);
    bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    freeReplyObject(r);
    if (!ok)
        return fail("cannot subscribe");
    log_info("redis: listening for the ends of waited-for keys (%s*)", CACHE_REDIS_WAIT_PREFIX);
    return TD_OK;
}

/* "keywait:{<user>}:<key>" -> user and key; false for anything else. */
static bool parse_channel(const char *ch, size_t len, int64_t *user_id, char *key, size_t cap)
{
    size_t p = strlen(CACHE_REDIS_WAIT_PREFIX);
    if (len <= p + 3 || memcmp(ch, CACHE_REDIS_WAIT_PREFIX, p) != 0 || ch[p] != '{')
        return false;
    int64_t u = 0;
    size_t i = p + 1;
    for (; i < len && ch[i] >= '0' && ch[i] <= '9' && i < p + 20; i++)
        u = u * 10 + (ch[i] - '0');
    if (i + 2 > len || ch[i] != '}' || ch[i + 1] != ':' || len - (i + 2) >= cap)
        return false;
    memcpy(key, ch + i + 2, len - (i + 2));
    key[len - (i + 2)] = '\0';
    *user_id = u;
    return true;
}

/* A pmessage: ["pmessage", pattern, channel, payload]. */
static void deliver(const redisReply *r, keyevents_fn *on_key, void *arg)
{
    char key[256];
    int64_t user_id;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return;
    if (parse_channel(r->element[2]->str, r->element[2]->len, &user_id, key, sizeof key))
        on_key(user_id, key, arg);
}

int keyevents_listen(int timeout_ms, keyevents_fn *on_key, keyevents_resync_fn *on_resync,
                     void *arg)
{
    if (sub != NULL && redis_primary_moved(sub_gen))
        keyevents_close(); /* a failover: listen on the new primary */
    if (sub == NULL) {
        if (subscribe() != TD_OK)
            return TD_EUNAVAIL;
        on_resync(arg); /* whatever ended while nobody listened */
    }
    for (int heard = 0; heard < KEYEVENTS_BATCH; heard++) {
        void *reply = NULL;
        if (redisGetReplyFromReader(sub, &reply) != REDIS_OK)
            return fail("read a broken reply");
        if (reply != NULL) {
            deliver(reply, on_key, arg);
            freeReplyObject(reply);
            timeout_ms = 0; /* drain what is buffered, then go */
            continue;
        }
        struct pollfd pfd = {.fd = sub->fd, .events = POLLIN};
        int n = poll(&pfd, 1, timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail("cannot poll");
        if (n == 0)
            return TD_OK;
        if (redisBufferRead(sub) != REDIS_OK)
            return fail("lost its connection");
    }
    return TD_OK;
}
