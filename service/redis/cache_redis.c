/* cache_redis.c - the cache port on Redis with hiredis, and the table of
 * its entries that the demo's naive variants may replace (cache_redis.h).
 * With the naive cache (cache_naive.c) and events' stream code, the only
 * files that include <hiredis.h>. */
#include "cache_redis.h"
#include "bloom.h"

#include "err.h"
#include "faults.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "util.h"

#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GET == user, then spend: checking and spending in one atomic step, so
 * two requests with one token can never both pass. A token is spent *by an
 * Idempotency-Key*: the value becomes "<user>|<key>", so the retries of
 * that key (the same intent, e.g. after a 503) may present it again, and
 * every other key is refused. spend(token key, user, "<user>|<key>", ttl s)
 * returns 1 (spent now), 2 (spent before by this key), 3 (spent by another
 * key, or someone else's) or 0 (unknown to Redis). Shared by both scripts
 * that spend a token. */
#define SPEND_LUA                                                                                  \
    "local function spend(k, user, spent, ttl)\n"                                                  \
    "  local v = redis.call('GET', k)\n"                                                           \
    "  if v == user then\n"                                                                        \
    "    redis.call('SET', k, spent, 'EX', ttl)\n"                                                 \
    "    return 1\n"                                                                               \
    "  end\n"                                                                                      \
    "  if v == spent then return 2 end\n"                                                          \
    "  if v then return 3 end\n"                                                                   \
    "  return 0\n"                                                                                 \
    "end\n"

/* The token alone. KEYS: token. ARGV: user, "<user>|<key>", ttl s. */
static const char token_take_lua[] = SPEND_LUA "return spend(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n";

/* The key's record, then the lock, then the token (cache_order_begin):
 * every Redis defence before the database in one round trip. SET ... NX
 * GET answers the old value when there was one (and sets nothing).
 * KEYS: idem, lock, token (the lock again when there is no token).
 * ARGV: marker ('' = only look), marker ttl ms, owner ('' = no lock), lock
 * ttl ms, user ('' = no token), "<user>|<key>", token ttl s.
 * Returns {1, record}, {2} (locked by another request), {0} (no token) or
 * {0, spend's verdict}: marker and lock are then held whatever the token
 * said, and the caller gives them back on a refusal. */
static const char begin_lua[] =
    SPEND_LUA "local rec\n"
              "if ARGV[1] ~= '' then\n"
              "  rec = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')\n"
              "else\n"
              "  rec = redis.call('GET', KEYS[1])\n"
              "end\n"
              "if rec then return {1, rec} end\n"
              "if ARGV[3] ~= '' then\n"
              "  if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[4]) then\n"
              "    if ARGV[1] ~= '' then redis.call('DEL', KEYS[1]) end\n"
              "    return {2}\n"
              "  end\n"
              "end\n"
              "if ARGV[5] ~= '' then return {0, spend(KEYS[3], ARGV[5], ARGV[6], ARGV[7])} end\n"
              "return {0}\n";

/* Success: our marker becomes the completed record; our lock is released.
 * A marker that expired and was taken by another request is not ours to
 * overwrite. KEYS: idem, lock. ARGV: marker, record, ttl_s, owner. */
static const char complete_lua[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if (ARGV[1] ~= '' and cur == ARGV[1]) or (ARGV[1] == '' and not cur) then\n"
    "  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])\n"
    "end\n"
    "if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) == ARGV[4] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "end\n"
    "return 1\n";

/* Failure: compare-and-delete of marker and lock. KEYS: idem, lock.
 * ARGV: marker, owner ('' for one not taken). */
static const char release_lua[] =
    "if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "end\n"
    "if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) == ARGV[2] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "end\n"
    "return 1\n";

/* A dead request's marker becomes ours, with its lock (free, or still the
 * dead request's). KEYS: idem, lock. ARGV: stale marker, our marker,
 * marker ttl ms, stale owner, our owner ('' = no lock), lock ttl ms.
 * Returns 1 (ours), 0 (the record changed) or 2 (the lock is another's). */
static const char take_over_lua[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
                                    "if ARGV[5] ~= '' then\n"
                                    "  local l = redis.call('GET', KEYS[2])\n"
                                    "  if l and l ~= ARGV[4] then return 2 end\n"
                                    "  redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])\n"
                                    "end\n"
                                    "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
                                    "return 1\n";

/* The Bloom filter (cache.h). KEYS: bits, state. ARGV[1]: "m:k:", then
 * the positions. Returns {trusted, maybe}. */
static const char bloom_check_lua[] =
    "local st = redis.call('GET', KEYS[2])\n"
    "local t = 0\n"
    "if st and string.sub(st, 1, #ARGV[1]) == ARGV[1] and string.sub(st, -2) == ':1' then t = 1 "
    "end\n"
    "for i = 2, #ARGV do\n"
    "  if redis.call('GETBIT', KEYS[1], ARGV[i]) == 0 then return {t, 0} end\n"
    "end\n"
    "return {t, 1}\n";

static const char bloom_add_lua[] = "for i = 1, #ARGV do redis.call('SETBIT', KEYS[1], ARGV[i], 1) "
                                    "end\n"
                                    "return 1\n";

/* KEYS: bits, state. ARGV: building state, ttl ms. */
static const char bloom_begin_lua[] = "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end\n"
                                      "redis.call('DEL', KEYS[1])\n"
                                      "redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n"
                                      "return 1\n";

/* KEYS: state. ARGV: building state, ttl ms, complete state ('': renew). */
static const char bloom_progress_lua[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "if ARGV[3] == '' then redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "else redis.call('SET', KEYS[1], ARGV[3]) end\n"
    "return 1\n";

static struct redis_script bloom_check = {bloom_check_lua, ""};
static struct redis_script bloom_add = {bloom_add_lua, ""};
static struct redis_script bloom_begin = {bloom_begin_lua, ""};
static struct redis_script bloom_progress = {bloom_progress_lua, ""};
static struct redis_script begin = {begin_lua, ""};
static struct redis_script take_over = {take_over_lua, ""};
static struct redis_script token_take = {token_take_lua, ""};
static struct redis_script complete = {complete_lua, ""};
static struct redis_script release = {release_lua, ""};

int cache_init(const struct config *cfg)
{
    int rc = redis_init(cfg);
    if (rc != TD_OK)
        return rc;
    redis_script_prepare(&bloom_check);
    redis_script_prepare(&bloom_add);
    redis_script_prepare(&bloom_begin);
    redis_script_prepare(&bloom_progress);
    redis_script_prepare(&begin);
    redis_script_prepare(&take_over);
    redis_script_prepare(&token_take);
    redis_script_prepare(&complete);
    redis_script_prepare(&release);
    return TD_OK;
}

void cache_thread_release(void)
{
    redis_thread_release();
}

void cache_cleanup(void)
{
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
static int token_verdict(long long v)
{
    return v == 1 || v == 2 ? TD_OK : v == 3 ? TD_ECONFLICT : v == 0 ? TD_ENOTFOUND : TD_EINTERNAL;
}

static int entry_token_take(int64_t user_id, const char *token, const char *idem_key, int ttl_s)
{
    char key[256], uid[24], spent[24 + 1 + 128], ttl[24];
    redisReply *r = NULL;
    cache_redis_token_key(key, sizeof key, user_id, token);
    snprintf(uid, sizeof uid, "%lld", (long long)user_id);
    snprintf(spent, sizeof spent, "%lld|%s", (long long)user_id, idem_key);
    snprintf(ttl, sizeof ttl, "%d", ttl_s);
    const char *keys[] = {key};
    const char *args[] = {uid, spent, ttl};
    int rc = redis_eval(&token_take, 1, keys, 3, args, &r);
    if (rc == TD_OK) {
        long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        rc = v == 1 || v == 2 ? TD_OK
             : v == 3         ? TD_ECONFLICT
             : v == 0         ? TD_ENOTFOUND
                              : TD_EINTERNAL;
    }
    if (rc == TD_OK && FAULT_POINT("redis.token_stall")) {
        /* Redis ran the script (the token is spent) but the reply is lost
         * to a stall: this request must now go on as if Redis were down. */
        redis_lose_reply("token reply lost (fault point redis.token_stall)");
        rc = TD_EUNAVAIL;
    }
    freeReplyObject(r);
    return rc;
}

static enum key_begin entry_order_begin(int64_t user_id, const char *key, const char *marker,
                                        int marker_ttl_ms, int64_t session_id, const char *owner,
                                        int lock_ttl_ms, const struct token_spend *tok,
                                        int *token_rc, char **existing)
{
    char ik[256], lk[128], tk[256], uid[24], spent[24 + 1 + 128], mttl[24], lttl[24], tttl[24];
    redisReply *r = NULL;
    *existing = NULL;
    *token_rc = TOKEN_UNCHECKED;
    cache_redis_idem_key(ik, sizeof ik, user_id, key);
    cache_redis_lock_key(lk, sizeof lk, user_id, session_id);
    snprintf(mttl, sizeof mttl, "%d", marker_ttl_ms);
    snprintf(lttl, sizeof lttl, "%d", lock_ttl_ms);
    uid[0] = spent[0] = tttl[0] = '\0';
    snprintf(tk, sizeof tk, "%s", lk);
    if (tok != NULL) {
        cache_redis_token_key(tk, sizeof tk, user_id, tok->token);
        snprintf(uid, sizeof uid, "%lld", (long long)user_id);
        snprintf(spent, sizeof spent, "%lld|%s", (long long)user_id, key);
        snprintf(tttl, sizeof tttl, "%d", tok->ttl_s);
    }
    const char *keys[] = {ik, lk, tk};
    const char *args[] = {marker ? marker : "", mttl, owner ? owner : "", lttl, uid, spent, tttl};
    enum key_begin kb = KEY_FAILED;
    if (redis_eval(&begin, 3, keys, 7, args, &r) != TD_OK)
        goto out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        log_error("redis: the key's script gave an answer of unknown shape");
        goto out;
    }
    switch (r->element[0]->integer) {
    case 0:
        kb = KEY_BEGUN;
        if (tok != NULL && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
            *token_rc = token_verdict(r->element[1]->integer);
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
        kb = KEY_FAILED;
    }
out:
    freeReplyObject(r);
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

static int entry_order_complete(int64_t user_id, const char *key, const char *marker,
                                const char *record, int ttl_s, int64_t session_id,
                                const char *owner)
{
    char ik[256], lk[128], ttl[24];
    redisReply *r = NULL;
    cache_redis_idem_key(ik, sizeof ik, user_id, key);
    cache_redis_lock_key(lk, sizeof lk, user_id, session_id);
    snprintf(ttl, sizeof ttl, "%d", ttl_s);
    const char *keys[] = {ik, lk};
    const char *args[] = {marker ? marker : "", record, ttl, owner ? owner : ""};
    int rc = redis_eval(&complete, 2, keys, 4, args, &r);
    freeReplyObject(r);
    return rc;
}

static int entry_order_release(int64_t user_id, const char *key, const char *marker,
                               int64_t session_id, const char *owner)
{
    char ik[256], lk[128];
    redisReply *r = NULL;
    cache_redis_idem_key(ik, sizeof ik, user_id, key);
    cache_redis_lock_key(lk, sizeof lk, user_id, session_id);
    const char *keys[] = {ik, lk};
    const char *args[] = {marker ? marker : "", owner ? owner : ""};
    int rc = redis_eval(&release, 2, keys, 2, args, &r);
    freeReplyObject(r);
    return rc;
}

int cache_order_take_over(int64_t user_id, const char *key, const char *stale, const char *marker,
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
    int rc = redis_eval(&take_over, 2, keys, 6, args, &r);
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

#define BLOOM_BITS  "ticketd:bloom:{orders}"
#define BLOOM_STATE "ticketd:bloom:{orders}:state"

/* Positions as decimal strings, in one allocation: args[i] points into it. */
static char *positions_text(const uint64_t *pos, int n, const char **args)
{
    char *buf = xmalloc((size_t)n * 21);
    for (int i = 0; i < n; i++) {
        snprintf(buf + (size_t)i * 21, 21, "%llu", (unsigned long long)pos[i]);
        args[i] = buf + (size_t)i * 21;
    }
    return buf;
}

static int entry_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted,
                             bool *maybe)
{
    const char *keys[] = {BLOOM_BITS, BLOOM_STATE};
    const char *args[1 + BLOOM_MAX_K];
    char prefix[64];
    redisReply *r = NULL;
    *trusted = false;
    *maybe = true;
    if (k < 1 || k > BLOOM_MAX_K)
        return TD_EINVAL;
    snprintf(prefix, sizeof prefix, "%s:", shape);
    args[0] = prefix;
    char *text = positions_text(pos, k, args + 1);
    int rc = redis_eval(&bloom_check, 2, keys, 1 + k, args, &r);
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
    const char **args = xcalloc((size_t)n, sizeof *args);
    char *text = positions_text(pos, n, args);
    redisReply *r = NULL;
    int rc = redis_eval(&bloom_add, 1, keys, n, args, &r);
    freeReplyObject(r);
    free(text);
    free(args);
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
    return one_or(&bloom_begin, 2, keys, 2, args, TD_EDUP);
}

int cache_bloom_build_progress(const char *building, int ttl_ms)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%d", ttl_ms);
    const char *keys[] = {BLOOM_STATE};
    const char *args[] = {building, ttl, ""};
    return one_or(&bloom_progress, 1, keys, 3, args, TD_ECONFLICT);
}

int cache_bloom_build_complete(const char *building, const char *done)
{
    const char *keys[] = {BLOOM_STATE};
    const char *args[] = {building, "0", done};
    return one_or(&bloom_progress, 1, keys, 3, args, TD_ECONFLICT);
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
    .order_begin = entry_order_begin,
    .order_complete = entry_order_complete,
    .order_release = entry_order_release,
    .bloom_check = entry_bloom_check,
};

/* Written once at boot, before any thread uses the cache; read only after. */
static struct cache_entries chosen;
static const struct cache_entries *entries = &cache_redis_entries;

void cache_redis_use(const struct cache_entries *e)
{
    chosen = *e;
    entries = &chosen;
}

int cache_token_take(int64_t user_id, const char *token, const char *idem_key, int ttl_s)
{
    return entries->token_take(user_id, token, idem_key, ttl_s);
}

enum key_begin cache_order_begin(int64_t user_id, const char *key, const char *marker,
                                 int marker_ttl_ms, int64_t session_id, const char *owner,
                                 int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                                 char **existing)
{
    return entries->order_begin(user_id, key, marker, marker_ttl_ms, session_id, owner, lock_ttl_ms,
                                tok, token_rc, existing);
}

int cache_order_complete(int64_t user_id, const char *key, const char *marker, const char *record,
                         int ttl_s, int64_t session_id, const char *owner)
{
    return entries->order_complete(user_id, key, marker, record, ttl_s, session_id, owner);
}

int cache_order_release(int64_t user_id, const char *key, const char *marker, int64_t session_id,
                        const char *owner)
{
    return entries->order_release(user_id, key, marker, session_id, owner);
}

int cache_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted, bool *maybe)
{
    return entries->bloom_check(shape, pos, k, trusted, maybe);
}
