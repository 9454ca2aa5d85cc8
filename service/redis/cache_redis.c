/* cache_redis.c - the cache port on Redis with hiredis, and the table of
 * its entries that the demo's naive variants may replace (cache_redis.h):
 * the keys and arguments of each step and the reading of its reply; the
 * Lua scripts the steps run are in cache_scripts.c. <hiredis.h> stays in
 * the Redis adapter (redis/) and the naive cache built over it
 * (naive/cache_naive.c): the domain sees only the port, cache.h. */
#include "cache_redis.h"
#include "cache_scripts.h"
#include "bloom.h"

#include "err.h"
#include "faults.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "redis_conn.h"
#include "util.h"

#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An end sent as it was asked for, with the entries' scripts. */
static int send_end(const struct cache_end *e);

int cache_init(const struct config *cfg)
{
    int rc = redis_init(cfg);
    if (rc != TD_OK)
        return rc;
    cache_scripts_prepare();
    return cache_missed_init(cfg, send_end);
}

void cache_thread_release(void)
{
    redis_thread_release();
}

void cache_cleanup(void)
{
    cache_missed_cleanup();
    redis_cleanup();
}

int cache_ping(void)
{
    redisReply *r = NULL;
    const char *argv[] = {"PING"};
    int rc = redis_command(1, argv, NULL, &r);
    freeReplyObject(r);
    return rc;
}

int cache_token_put(int64_t user_id, const char *token, int ttl_s)
{
    char key[256], uid[24], ttl[24];
    redisReply *r = NULL;
    cache_redis_token_key(key, sizeof key, user_id, token);
    snprintf(uid, sizeof uid, "%lld", (long long)user_id);
    snprintf(ttl, sizeof ttl, "%d", ttl_s);
    const char *argv[] = {"SET", key, uid, "EX", ttl};
    int rc = redis_command(5, argv, NULL, &r);
    if (rc == TD_OK && r->type != REDIS_REPLY_STATUS)
        rc = TD_EINTERNAL;
    freeReplyObject(r);
    return rc;
}

/* The port's answer for spend's verdict. */
static int token_verdict_of(long long v)
{
    return v == 1 || v == 2 ? TD_OK : v == 3 ? TD_ECONFLICT : v == 0 ? TD_ENOTFOUND : TD_EINTERNAL;
}

static int entry_token_take(int64_t user_id, const char *token, const char *idem_key)
{
    struct cache_redis_spend s;
    redisReply *r = NULL;
    cache_redis_spend_args(&s, user_id, token, idem_key);
    const char *keys[] = {s.key};
    const char *args[] = {s.uid, s.spent};
    int rc = redis_eval(&cache_lua_token_take, 1, keys, 2, args, &r);
    if (rc == TD_OK)
        rc = token_verdict_of(r->type == REDIS_REPLY_INTEGER ? r->integer : -1);
    if (rc == TD_OK && FAULT_POINT("redis.token_stall")) {
        /* Redis ran the script (the token is spent) but the reply is lost
         * to a stall: this request must now go on as if Redis were down. */
        redis_lose_reply("token reply lost (fault point redis.token_stall)");
        rc = TD_EUNAVAIL;
    }
    freeReplyObject(r);
    return rc;
}

#define BLOOM_BITS  "ticketd:bloom:{orders}"
#define BLOOM_STATE "ticketd:bloom:{orders}:state"

/* Positions as one argument, "p1 p2 ...": new, caller frees. One argument
 * whatever their number, so that a page of the filter's build fits in a
 * command as well as one key's bits. */
static char *positions_text(const uint64_t *pos, int n)
{
    size_t cap = (size_t)n * 21 + 1, len = 0;
    char *buf = xmalloc(cap);
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, i > 0 ? " %llu" : "%llu",
                                (unsigned long long)pos[i]);
    return buf;
}

static enum key_begin entry_key_begin(int64_t user_id, const char *key, const char *marker,
                                      int marker_ttl_ms, int64_t session_id, const char *owner,
                                      int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                                      const struct filter_note *note, bool *noted, char **existing)
{
    char ik[256], lk[128], mttl[24], lttl[24];
    struct cache_redis_spend sp = {0}; /* no token: empty arguments */
    char *bits = NULL;
    redisReply *r = NULL;
    *existing = NULL;
    *token_rc = TOKEN_UNCHECKED;
    *noted = false;
    cache_redis_idem_key(ik, sizeof ik, user_id, key);
    cache_redis_lock_key(lk, sizeof lk, user_id, session_id);
    snprintf(mttl, sizeof mttl, "%d", marker_ttl_ms);
    snprintf(lttl, sizeof lttl, "%d", lock_ttl_ms);
    snprintf(sp.key, sizeof sp.key, "%s", lk);
    if (tok != NULL)
        cache_redis_spend_args(&sp, user_id, tok->token, key);
    if (note != NULL && note->k > 0)
        bits = positions_text(note->pos, note->k);
    const char *keys[] = {ik, lk, sp.key, BLOOM_BITS};
    const char *args[] = {marker ? marker : "", mttl, owner ? owner : "", lttl, sp.uid, sp.spent,
                          bits ? bits : ""};
    enum key_begin kb = KEY_FAILED;
    if (redis_eval(&cache_lua_begin, 4, keys, 7, args, &r) != TD_OK)
        goto out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        log_error("redis: the key's script gave an answer of unknown shape");
        goto out;
    }
    switch (r->element[0]->integer) {
    case 0:
        if (r->elements != 3 || r->element[1]->type != REDIS_REPLY_INTEGER ||
            r->element[2]->type != REDIS_REPLY_INTEGER) {
            log_error("redis: the key's script gave an answer of unknown shape");
            goto out;
        }
        kb = KEY_BEGUN;
        if (tok != NULL)
            *token_rc = token_verdict_of(r->element[1]->integer);
        *noted = r->element[2]->integer == 1;
        break;
    case 1:
        if (r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING) {
            *existing = xstrndup(r->element[1]->str, r->element[1]->len);
            kb = KEY_HAS_RECORD;
        }
        break;
    case 2:
        kb = KEY_SESSION_LOCKED;
        break;
    }
    if (kb == KEY_BEGUN && tok != NULL && FAULT_POINT("redis.token_stall")) {
        /* Redis ran the script (the token is spent) but the reply is lost
         * to a stall: this request must now go on as if Redis were down. */
        redis_lose_reply("begin reply lost (fault point redis.token_stall)");
        *noted = false;
        kb = KEY_FAILED;
    }
out:
    freeReplyObject(r);
    free(bits);
    return kb;
}

int cache_lock_acquire(int64_t user_id, int64_t session_id, const char *owner, int ttl_ms)
{
    char k[128], ttl[24];
    redisReply *r = NULL;
    cache_redis_lock_key(k, sizeof k, user_id, session_id);
    snprintf(ttl, sizeof ttl, "%d", ttl_ms);
    const char *argv[] = {"SET", k, owner, "NX", "PX", ttl};
    int rc = redis_command(6, argv, NULL, &r);
    if (rc == TD_OK) {
        if (r->type == REDIS_REPLY_STATUS)
            rc = TD_OK;
        else if (r->type == REDIS_REPLY_NIL)
            rc = TD_ECONFLICT;
        else
            rc = TD_EINTERNAL;
    }
    freeReplyObject(r);
    return rc;
}

int cache_redis_end_with(struct redis_script *s, const struct cache_end *e)
{
    char ik[256], lk[128], ch[272], ttl[24], mttl[24], lttl[24];
    redisReply *r = NULL;
    cache_redis_idem_key(ik, sizeof ik, e->user_id, e->key);
    cache_redis_lock_key(lk, sizeof lk, e->user_id, e->session_id);
    cache_redis_wait_channel(ch, sizeof ch, e->user_id, e->key);
    const char *keys[] = {ik, lk, ch};
    const char *marker = e->marker ? e->marker : "", *owner = e->owner ? e->owner : "";
    int rc;
    if (e->complete) {
        /* What was not ours gets back a whole TTL (complete_lua). */
        snprintf(ttl, sizeof ttl, "%d", e->ttl_s);
        snprintf(mttl, sizeof mttl, "%d", redis_config()->inflight_ttl_ms);
        snprintf(lttl, sizeof lttl, "%d", redis_config()->lock_ttl_ms);
        const char *args[] = {marker, e->record, ttl, owner, mttl, lttl};
        rc = redis_eval(s, 3, keys, 6, args, &r);
    } else {
        const char *args[] = {marker, owner};
        rc = redis_eval(s, 3, keys, 2, args, &r);
    }
    freeReplyObject(r);
    return rc;
}

int cache_key_take_over(int64_t user_id, const char *key, const char *stale, const char *marker,
                        int marker_ttl_ms, int64_t session_id, const char *stale_owner,
                        const char *owner, int lock_ttl_ms)
{
    char ik[256], lk[128], mttl[24], lttl[24];
    redisReply *r = NULL;
    cache_redis_idem_key(ik, sizeof ik, user_id, key);
    cache_redis_lock_key(lk, sizeof lk, user_id, session_id);
    snprintf(mttl, sizeof mttl, "%d", marker_ttl_ms);
    snprintf(lttl, sizeof lttl, "%d", lock_ttl_ms);
    const char *keys[] = {ik, lk};
    const char *args[] = {stale, marker, mttl, stale_owner, owner ? owner : "", lttl};
    int rc = redis_eval(&cache_lua_take_over, 2, keys, 6, args, &r);
    if (rc == TD_OK) {
        long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        rc = v == 1 ? TD_OK : v == 0 ? TD_EDUP : v == 2 ? TD_ECONFLICT : TD_EINTERNAL;
    }
    freeReplyObject(r);
    return rc;
}

static void instance_key(char *out, size_t cap, const char *instance)
{
    snprintf(out, cap, "ticketd:instance:%s", instance);
}

int cache_instance_beat(const char *instance, int ttl_ms, bool *had_key)
{
    char k[64], ttl[24];
    redisReply *r = NULL;
    *had_key = false;
    instance_key(k, sizeof k, instance);
    snprintf(ttl, sizeof ttl, "%d", ttl_ms);
    const char *argv[] = {"SET", k, "1", "PX", ttl, "GET"};
    int rc = redis_command(6, argv, NULL, &r);
    if (rc == TD_OK)
        *had_key = r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return rc;
}

/* EXISTS or DEL of an instance key; the reply is the caller's to free. */
static int instance_command(const char *verb, const char *instance, redisReply **r)
{
    char k[64];
    instance_key(k, sizeof k, instance);
    const char *argv[] = {verb, k};
    return redis_command(2, argv, NULL, r);
}

int cache_instance_alive(const char *instance)
{
    redisReply *r = NULL;
    int rc = instance_command("EXISTS", instance, &r);
    if (rc == TD_OK)
        rc = r->type == REDIS_REPLY_INTEGER && r->integer == 0 ? TD_ENOTFOUND : TD_OK;
    freeReplyObject(r);
    return rc;
}

int cache_instance_gone(const char *instance)
{
    redisReply *r = NULL;
    int rc = instance_command("DEL", instance, &r);
    freeReplyObject(r);
    return rc;
}

static int entry_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted,
                             bool *maybe)
{
    const char *keys[] = {BLOOM_BITS, BLOOM_STATE};
    char prefix[64];
    redisReply *r = NULL;
    *trusted = false;
    *maybe = true;
    if (k < 1 || k > BLOOM_MAX_K)
        return TD_EINVAL;
    snprintf(prefix, sizeof prefix, "%s:", shape);
    char *text = positions_text(pos, k);
    const char *args[] = {prefix, text};
    int rc = redis_eval(&cache_lua_bloom_check, 2, keys, 2, args, &r);
    if (rc == TD_OK) {
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[0]->type == REDIS_REPLY_INTEGER &&
            r->element[1]->type == REDIS_REPLY_INTEGER) {
            *trusted = r->element[0]->integer == 1;
            *maybe = r->element[1]->integer == 1;
        } else {
            rc = TD_EINTERNAL;
        }
    }
    freeReplyObject(r);
    free(text);
    return rc;
}

int cache_bloom_add(const uint64_t *pos, int n)
{
    const char *keys[] = {BLOOM_BITS};
    redisReply *r = NULL;
    if (n < 1)
        return TD_OK;
    char *text = positions_text(pos, n);
    const char *args[] = {text};
    int rc = redis_eval(&cache_lua_bloom_add, 1, keys, 1, args, &r);
    freeReplyObject(r);
    free(text);
    return rc;
}

/* A script answering 1 (done) or 0 (refused: rc_refused). */
static int one_or(struct redis_script *s, int nkeys, const char **keys, int nargs,
                  const char **args, int rc_refused)
{
    redisReply *r = NULL;
    int rc = redis_eval(s, nkeys, keys, nargs, args, &r);
    if (rc == TD_OK)
        rc = r->type != REDIS_REPLY_INTEGER ? TD_EINTERNAL : r->integer == 1 ? TD_OK : rc_refused;
    freeReplyObject(r);
    return rc;
}

int cache_bloom_build_begin(const char *building, int ttl_ms)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%d", ttl_ms);
    const char *keys[] = {BLOOM_BITS, BLOOM_STATE};
    const char *args[] = {building, ttl};
    return one_or(&cache_lua_bloom_begin, 2, keys, 2, args, TD_EDUP);
}

int cache_bloom_build_progress(const char *building, int ttl_ms)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%d", ttl_ms);
    const char *keys[] = {BLOOM_STATE};
    const char *args[] = {building, ttl, ""};
    return one_or(&cache_lua_bloom_progress, 1, keys, 3, args, TD_ECONFLICT);
}

int cache_bloom_build_complete(const char *building, const char *done)
{
    const char *keys[] = {BLOOM_STATE};
    const char *args[] = {building, "0", done};
    return one_or(&cache_lua_bloom_progress, 1, keys, 3, args, TD_ECONFLICT);
}

int cache_bloom_untrust(void)
{
    redisReply *r = NULL;
    const char *argv[] = {"DEL", BLOOM_STATE};
    int rc = redis_command(2, argv, NULL, &r);
    freeReplyObject(r);
    return rc;
}

const struct cache_entries cache_redis_entries = {
    .token_take = entry_token_take,
    .key_begin = entry_key_begin,
    .key_complete = &cache_lua_complete,
    .key_release = &cache_lua_release,
    .bloom_check = entry_bloom_check,
};

/* Set once at boot, before any thread uses the cache; read only after. */
static const struct cache_entries *entries = &cache_redis_entries;

void cache_redis_use(const struct cache_entries *e)
{
    entries = e;
}

int cache_token_take(int64_t user_id, const char *token, const char *idem_key)
{
    return entries->token_take(user_id, token, idem_key);
}

enum key_begin cache_key_begin(int64_t user_id, const char *key, const char *marker,
                               int marker_ttl_ms, int64_t session_id, const char *owner,
                               int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                               const struct filter_note *note, bool *noted, char **existing)
{
    /* An earlier request of this user ended while Redis was unreachable:
     * its end goes first, so that its lock is not what refuses this one.
     * When it cannot go, neither does the begin: Redis answering the
     * begin an instant later (a link dialled again, the breaker's probe
     * just passed) would find that lock, and a client whose last order is
     * over would be told another one runs (409). Nothing was sent, so
     * nothing is held: the caller answers as without Redis. */
    if (!cache_missed_resend(user_id))
        return KEY_NOT_SENT;
    return entries->key_begin(user_id, key, marker, marker_ttl_ms, session_id, owner, lock_ttl_ms,
                              tok, token_rc, note, noted, existing);
}

static int send_end(const struct cache_end *e)
{
    /* The test build: an end that does not reach Redis, the first time
     * and each time it is sent again (as while its link is down). */
    if (FAULT_POINT("redis.end_unsent"))
        return TD_EUNAVAIL;
    return cache_redis_end_with(e->complete ? entries->key_complete : entries->key_release, e);
}

/* A key's end is waited for before the client is answered. It need not
 * be for the answer's sake (the database gave it), but a user's next
 * order must find the lock this one held given back: sent without
 * waiting, an end that met a stalled Redis could run after the same
 * user's next begin, which came on another loop's connection, and that
 * order was refused 409 for a lock its own finished request held
 * (docs/speed.md, "One batch at the server; a key's end still waited for").
 * An end Redis did not take (unreachable, or no reply in time: it may
 * have run, and running it again changes nothing) is kept and sent again
 * (cache_missed.c); only an end with something to give back. */
static int end_or_keep(const struct cache_end *e)
{
    int rc = send_end(e);
    if (rc == TD_EUNAVAIL && (e->marker != NULL || e->owner != NULL))
        cache_missed_keep(e);
    return rc;
}

int cache_key_complete(int64_t user_id, const char *key, const char *marker, const char *record,
                       int ttl_s, int64_t session_id, const char *owner)
{
    struct cache_end e = {.complete = true,
                          .user_id = user_id,
                          .key = key,
                          .marker = marker,
                          .record = record,
                          .ttl_s = ttl_s,
                          .session_id = session_id,
                          .owner = owner};
    return end_or_keep(&e);
}

int cache_key_release(int64_t user_id, const char *key, const char *marker, int64_t session_id,
                      const char *owner)
{
    struct cache_end e = {
        .user_id = user_id, .key = key, .marker = marker, .session_id = session_id, .owner = owner};
    return end_or_keep(&e);
}

int cache_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted, bool *maybe)
{
    return entries->bloom_check(shape, pos, k, trusted, maybe);
}
