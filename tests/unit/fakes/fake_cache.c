/* fake_cache.c - the Redis port (cache.h) answered from the knobs of
 * fakes.h instead of Redis. Every function of cache.h is here. */
#include "cache.h"
#include "fakes.h"

#include "err.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

struct fake_cache fake_cache;

void fake_cache_reset(void)
{
    memset(&fake_cache, 0, sizeof fake_cache);
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static void copy_opt(struct fake_str *dst, const char *src)
{
    dst->null = src == NULL;
    copy(dst->s, sizeof dst->s, src != NULL ? src : "");
}

int cache_init(const struct config *cfg)
{
    (void)cfg;
    fake_call("cache_init");
    return TD_OK;
}

void cache_thread_release(void)
{
    fake_call("cache_thread_release");
}

void cache_cleanup(void)
{
    fake_call("cache_cleanup");
}

int cache_ping(void)
{
    fake_call("cache_ping");
    return fake_cache.ping_rc;
}

int cache_token_put(int64_t user_id, const char *token, int ttl_s)
{
    (void)ttl_s;
    fake_call("token_put");
    fake_cache.token_put.calls++;
    fake_cache.token_put.user_id = user_id;
    copy(fake_cache.token_put.token, sizeof fake_cache.token_put.token, token);
    return fake_cache.token_put_rc;
}

int cache_token_take(int64_t user_id, const char *token, const char *idem_key)
{
    copy(fake_cache.token_take.key, sizeof fake_cache.token_take.key, idem_key);
    fake_call("token_take");
    fake_cache.token_take.calls++;
    fake_cache.token_take.user_id = user_id;
    copy(fake_cache.token_take.token, sizeof fake_cache.token_take.token, token);
    return fake_cache.token_rc;
}

/* The script's outcome for what one of its steps answered, given in the
 * codes the rows use for every port: TD_EDUP a record, TD_ECONFLICT a
 * lock held by another, anything else but TD_OK a Redis failure. */
static enum key_begin key_begin_of(int rc)
{
    switch (rc) {
    case TD_OK:
        return KEY_BEGUN;
    case TD_EDUP:
        return KEY_HAS_RECORD;
    case TD_ECONFLICT:
        return KEY_SESSION_LOCKED;
    default:
        return KEY_FAILED;
    }
}

/* The script's last step: the order-key filter's bits, set when the
 * request goes on (counted as an add made in the script). */
static enum key_begin begun_noting(const struct filter_note *note, bool *noted)
{
    if (note != NULL && note->k > 0) {
        fake_cache.bloom_adds++;
        fake_cache.bloom_adds_in_begin++;
        *noted = true;
    }
    return KEY_BEGUN;
}

/* One call does what the script does: the key step answers idem_begin_rc
 * (TD_EDUP hands back `existing`); only when it passes and a lock is asked
 * for, the lock step answers lock_rc; then the token step, then the
 * filter's bits when the token passed (or none was asked). The steps are
 * recorded as if they were separate calls, under one "order_begin" in the
 * call log. */
enum key_begin cache_key_begin(int64_t user_id, const char *key, const char *marker,
                               int marker_ttl_ms, int64_t session_id, const char *owner,
                               int lock_ttl_ms, const struct token_spend *tok, int *token_rc,
                               const struct filter_note *note, bool *noted, char **existing)
{
    *existing = NULL;
    *token_rc = TOKEN_UNCHECKED;
    *noted = false;
    fake_call("order_begin");
    fake_cache.idem_begin.calls++;
    fake_cache.idem_begin.user_id = user_id;
    copy(fake_cache.idem_begin.key, sizeof fake_cache.idem_begin.key, key);
    copy(fake_cache.idem_begin.marker, sizeof fake_cache.idem_begin.marker,
         marker != NULL ? marker : "");
    fake_cache.idem_begin.ttl_ms = marker_ttl_ms;
    if (fake_cache.begin_not_sent)
        return KEY_NOT_SENT;
    if (fake_cache.idem_begin_rc == TD_EDUP)
        *existing = xstrdup(fake_cache.existing);
    if (fake_cache.idem_begin_rc != TD_OK)
        return key_begin_of(fake_cache.idem_begin_rc);
    if (owner != NULL) {
        fake_cache.lock.calls++;
        fake_cache.lock.user_id = user_id;
        fake_cache.lock.session_id = session_id;
        copy(fake_cache.lock.owner, sizeof fake_cache.lock.owner, owner);
        fake_cache.lock.ttl_ms = lock_ttl_ms;
        if (fake_cache.lock_rc != TD_OK)
            return key_begin_of(fake_cache.lock_rc);
    }
    if (tok == NULL)
        return begun_noting(note, noted);
    /* The token step of the script: token_rc is its verdict, or, for a
     * Redis failure (TD_EUNAVAIL, TD_EINTERNAL), the whole script's. */
    fake_cache.token_take.calls++;
    fake_cache.token_take.in_begin = true;
    fake_cache.token_take.user_id = user_id;
    copy(fake_cache.token_take.token, sizeof fake_cache.token_take.token, tok->token);
    copy(fake_cache.token_take.key, sizeof fake_cache.token_take.key, key);
    int t = fake_cache.token_rc;
    if (t != TD_OK && t != TD_ENOTFOUND && t != TD_ECONFLICT)
        return KEY_FAILED;
    *token_rc = t;
    return t == TD_OK ? begun_noting(note, noted) : KEY_BEGUN;
}

int cache_lock_acquire(int64_t user_id, int64_t session_id, const char *owner, int ttl_ms)
{
    fake_call("lock_acquire");
    fake_cache.lock.calls++;
    fake_cache.lock.user_id = user_id;
    fake_cache.lock.session_id = session_id;
    copy(fake_cache.lock.owner, sizeof fake_cache.lock.owner, owner);
    fake_cache.lock.ttl_ms = ttl_ms;
    return fake_cache.lock_rc;
}

int cache_key_complete(int64_t user_id, const char *key, const char *marker, const char *record,
                       int ttl_s, int64_t session_id, const char *owner)
{
    fake_call("order_complete");
    fake_cache.complete.calls++;
    fake_cache.complete.user_id = user_id;
    copy(fake_cache.complete.key, sizeof fake_cache.complete.key, key);
    copy_opt(&fake_cache.complete.marker, marker);
    copy(fake_cache.complete.record, sizeof fake_cache.complete.record, record);
    fake_cache.complete.ttl_s = ttl_s;
    fake_cache.complete.session_id = session_id;
    copy_opt(&fake_cache.complete.owner, owner);
    return fake_cache.complete_rc;
}

int cache_key_release(int64_t user_id, const char *key, const char *marker, int64_t session_id,
                      const char *owner)
{
    fake_call("order_release");
    fake_cache.release.calls++;
    fake_cache.release.user_id = user_id;
    copy(fake_cache.release.key, sizeof fake_cache.release.key, key);
    copy_opt(&fake_cache.release.marker, marker);
    fake_cache.release.session_id = session_id;
    copy_opt(&fake_cache.release.owner, owner);
    return fake_cache.release_rc;
}

int cache_key_take_over(int64_t user_id, const char *key, const char *stale, const char *marker,
                        int marker_ttl_ms, int64_t session_id, const char *stale_owner,
                        const char *owner, int lock_ttl_ms)
{
    (void)user_id;
    (void)key;
    (void)marker_ttl_ms;
    (void)session_id;
    (void)lock_ttl_ms;
    fake_call("order_take_over");
    fake_cache.take_over.calls++;
    copy(fake_cache.take_over.stale, sizeof fake_cache.take_over.stale, stale);
    copy(fake_cache.take_over.marker, sizeof fake_cache.take_over.marker, marker);
    copy(fake_cache.take_over.stale_owner, sizeof fake_cache.take_over.stale_owner, stale_owner);
    copy_opt(&fake_cache.take_over.owner, owner);
    return fake_cache.take_over_rc;
}

int cache_instance_beat(const char *instance, int ttl_ms, bool *had_key)
{
    (void)instance;
    (void)ttl_ms;
    *had_key = true;
    fake_call("instance_beat");
    return TD_OK;
}

int cache_instance_alive(const char *instance)
{
    fake_call("instance_alive");
    copy(fake_cache.alive_asked, sizeof fake_cache.alive_asked, instance);
    return fake_cache.alive_rc;
}

int cache_instance_gone(const char *instance)
{
    (void)instance;
    fake_call("instance_gone");
    return TD_OK;
}

/* The filter's calls are counted, not listed in fake_calls: the call
 * sequences the order tests expect stay those of the defences. */
int cache_bloom_check(const char *shape, const uint64_t *pos, int k, bool *trusted, bool *maybe)
{
    (void)shape, (void)pos, (void)k;
    fake_cache.bloom_checks++;
    *trusted = fake_cache.bloom_trusted;
    *maybe = fake_cache.bloom_maybe;
    return fake_cache.bloom_rc;
}

int cache_bloom_add(const uint64_t *pos, int n)
{
    (void)pos, (void)n;
    fake_cache.bloom_adds++;
    return TD_OK;
}

int cache_bloom_build_begin(const char *building, int ttl_ms)
{
    (void)building, (void)ttl_ms;
    return TD_EDUP;
}

int cache_bloom_build_progress(const char *building, int ttl_ms)
{
    (void)building, (void)ttl_ms;
    return TD_OK;
}

int cache_bloom_build_complete(const char *building, const char *complete)
{
    (void)building, (void)complete;
    return TD_OK;
}

int cache_bloom_untrust(void)
{
    return TD_OK;
}
