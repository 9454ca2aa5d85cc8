/* orders_redis.c - the layers of orders_create that Redis (and this
 * process) hold, 1 to 4: the response cache, the in-flight key and its
 * take-over, the session lock, the one-time token. Apart from the
 * database's layers (orders_db.c) because all of this only accelerates:
 * each step may fail with Redis, and under policy degrade the request
 * goes on without it. */
#include "orders.h"

#include "app.h"
#include "idem.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "keywait.h"
#include "log.h"
#include "metrics.h"
#include "orders_internal.h"
#include "ordertoken.h"
#include "respcache.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Redis failed at some step. Under policy strict that ends the request;
 * under degrade the remaining Redis defences are skipped and the database
 * decides alone. Returns true when the request may go on. */
static bool redis_failed(struct app *app, struct claims *cl, struct order_result *res)
{
    cl->redis_ok = false;
    if (app->cfg->redis_policy == REDIS_POLICY_STRICT) {
        orders_answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
        return false;
    }
    return true;
}

/* Layer 3 alone, when the key defences are switched off (or answered
 * nothing). */
static bool take_lock(struct app *app, const struct order_request *rq, struct claims *cl,
                      struct order_result *res)
{
    if (!(app->defences & DEFENCE_SESSION_LOCK) || !cl->redis_ok)
        return true;
    int rc = cache_lock_acquire(rq->user_id, rq->session_id, cl->owner, app->cfg->lock_ttl_ms);
    if (rc == TD_OK) {
        cl->locked = true;
        return true;
    }
    if (rc == TD_ECONFLICT) {
        metrics_inc(M_DUP_SESSION_LOCK);
        orders_answer(res, ORDER_DUPLICATE_SUBMISSION, LAYER_SESSION_LOCK);
        return false;
    }
    return redis_failed(app, cl, res);
}

/* The key's marker says a copy is in flight. Its owner names the process
 * that set it; if that process no longer beats (killed, crashed: see
 * liveness.h), nobody will finish or release the marker, and waiting for
 * its TTL helps no one. The retry takes it over (and the dead request's
 * lock) and goes on: if the dead request had committed, the unique index
 * answers with its order. A process that is merely slow keeps beating, and
 * should it still commit after all, the unique index catches the copy.
 * Returns true when the marker (and lock) are ours; false otherwise, with
 * res set only when the session turned out locked by another key. */
static bool take_over_dead(struct app *app, const struct order_request *rq, const char *fp,
                           const char *stale, const char *stale_owner, struct claims *cl,
                           struct order_result *res)
{
    char instance[IDEM_INSTANCE_LEN + 1];
    idem_owner_instance(stale_owner, instance);
    if (strcmp(instance, app->instance) == 0 || cache_instance_alive(instance) != TD_ENOTFOUND)
        return false; /* ours, alive, or Redis cannot tell: the marker stands */
    bool want_lock = (app->defences & DEFENCE_SESSION_LOCK) != 0;
    char *marker = idem_marker(fp, cl->owner);
    int rc = cache_order_take_over(rq->user_id, rq->key, stale, marker, app->cfg->inflight_ttl_ms,
                                   rq->session_id, stale_owner, want_lock ? cl->owner : NULL,
                                   app->cfg->lock_ttl_ms);
    if (rc == TD_OK) {
        metrics_inc(M_INFLIGHT_TAKEOVERS);
        log_info("user %lld: took over the marker of a request whose process %s is gone",
                 (long long)rq->user_id, instance);
        cl->marker = marker;
        cl->locked = want_lock;
        return true;
    }
    free(marker);
    if (rc == TD_ECONFLICT) {
        metrics_inc(M_DUP_SESSION_LOCK);
        orders_answer(res, ORDER_DUPLICATE_SUBMISSION, LAYER_SESSION_LOCK);
    }
    return false;
}

/* Layer 1, in process: keeps an answer for the key's retries, as long as
 * Redis keeps its record (TICKETD_IDEM_TTL_S). */
void orders_keep_in_process(struct app *app, const struct order_request *rq, const char *fp,
                            int status, const char *body, size_t len)
{
    if (!(app->defences & DEFENCE_RESPONSE_CACHE))
        return;
    int64_t now = mono_ms();
    respcache_put(app->respcache, rq->user_id, rq->key, fp, status, body, len, now,
                  now + (int64_t)app->cfg->idem_ttl_s * 1000);
}

/* Layer 1, in process: a key this process answered. */
static bool replay_local(struct app *app, const struct order_request *rq, const char *fp,
                         struct order_result *res)
{
    struct cached_response hit;
    if (!(app->defences & DEFENCE_RESPONSE_CACHE) ||
        !respcache_get(app->respcache, rq->user_id, rq->key, mono_ms(), &hit))
        return false;
    if (strcmp(hit.fingerprint, fp) != 0) {
        free(hit.body);
        metrics_inc(M_DUP_KEY_REUSED);
        orders_answer(res, ORDER_KEY_REUSED, LAYER_RESPONSE_CACHE);
        return true;
    }
    metrics_inc(M_DUP_RESPONSE_CACHE);
    orders_replay_bytes(res, hit.status, hit.body, hit.body_len);
    return true;
}

bool orders_replay_local(struct app *app, const struct order_request *rq, struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    memset(res, 0, sizeof *res);
    idem_fingerprint_order(rq->session_id, rq->quantity, fp);
    return replay_local(app, rq, fp, res);
}

/* Layers 1-3 (and the token, layer 4) in Redis, one round trip: the key's
 * record (a completed response, or the marker of a copy in flight), else
 * our marker, then the session lock, then the token. The claims this
 * takes are noted in cl; a record found is handed back in *existing. */
static enum key_begin begin_in_redis(struct app *app, const struct order_request *rq,
                                     const char *fp, struct claims *cl, char **existing)
{
    unsigned on = app->defences;
    bool want_lock = (on & DEFENCE_SESSION_LOCK) != 0;
    char *marker = (on & DEFENCE_INFLIGHT_KEY) ? idem_marker(fp, cl->owner) : NULL;
    struct token_spend tok = {rq->token, app->cfg->token_ttl_s};
    bool with_token = rq->token != NULL && (on & DEFENCE_TOKEN);
    enum key_begin kb =
        cache_order_begin(rq->user_id, rq->key, marker, app->cfg->inflight_ttl_ms, rq->session_id,
                          want_lock ? cl->owner : NULL, app->cfg->lock_ttl_ms,
                          with_token ? &tok : NULL, &cl->token_rc, existing);
    if (kb == KEY_BEGUN || kb == KEY_FAILED) {
        /* After a failure the script may have run: what might be ours is
         * handed back at the end (compare-and-delete: never another's). */
        cl->marker = marker;
        cl->locked = want_lock;
        return kb;
    }
    free(marker); /* a record stood, or the script took our marker back */
    return kb;
}

/* What a record found under the key decided. */
enum record_verdict {
    RECORD_ANSWERED,   /* res holds the answer: a replay or a refusal */
    RECORD_TAKEN_OVER, /* a dead process's marker (and lock) are ours now */
    RECORD_IGNORED,    /* a layer that would answer is switched off (the demo) */
};

/* A completed record is replayed (layer 1) unless its payload differs; a
 * marker means a copy is in flight (layer 2), unless its process is dead. */
static enum record_verdict answer_from_record(struct app *app, const struct order_request *rq,
                                              const char *fp, const char *existing,
                                              struct claims *cl, struct order_result *res)
{
    unsigned on = app->defences;
    struct idem_record rec;
    if (!idem_parse(existing, strlen(existing), &rec)) {
        log_warn("malformed idempotency record for user %lld; ignoring it", (long long)rq->user_id);
        return RECORD_IGNORED;
    }
    if (rec.done && (on & DEFENCE_RESPONSE_CACHE)) {
        if (strcmp(rec.fingerprint, fp) != 0) {
            metrics_inc(M_DUP_KEY_REUSED);
            orders_answer(res, ORDER_KEY_REUSED, LAYER_RESPONSE_CACHE);
            return RECORD_ANSWERED;
        }
        metrics_inc(M_DUP_RESPONSE_CACHE);
        orders_keep_in_process(app, rq, fp, rec.status, rec.body, rec.body_len);
        orders_replay_bytes(res, rec.status, xstrndup(rec.body, rec.body_len), rec.body_len);
        return RECORD_ANSWERED;
    }
    if (rec.done || !(on & DEFENCE_INFLIGHT_KEY))
        return RECORD_IGNORED;
    if (strcmp(rec.fingerprint, fp) != 0) {
        metrics_inc(M_DUP_KEY_REUSED);
        orders_answer(res, ORDER_KEY_REUSED, LAYER_INFLIGHT_KEY);
        return RECORD_ANSWERED;
    }
    if (take_over_dead(app, rq, fp, existing, rec.owner, cl, res))
        return RECORD_TAKEN_OVER;
    if (res->outcome != ORDER_DUPLICATE_SUBMISSION) /* counted once waiting is over */
        orders_answer(res, ORDER_IN_PROGRESS, LAYER_INFLIGHT_KEY);
    return RECORD_ANSWERED;
}

/* Layers 1 to 3. Returns true when the request should go on. */
bool orders_check_key(struct app *app, const struct order_request *rq, const char *fp,
                      struct claims *cl, struct order_result *res)
{
    if (replay_local(app, rq, fp, res))
        return false;
    if (!(app->defences & (DEFENCE_RESPONSE_CACHE | DEFENCE_INFLIGHT_KEY)))
        return take_lock(app, rq, cl, res);

    struct keywait kw;
    keywait_start(&kw, app, rq->wait_s);
    for (;;) {
        char *existing = NULL;
        switch (begin_in_redis(app, rq, fp, cl, &existing)) {
        case KEY_BEGUN:
            keywait_finish(&kw, KEYWAIT_RAN);
            return true;
        case KEY_SESSION_LOCKED:
            metrics_inc(M_DUP_SESSION_LOCK);
            orders_answer(res, ORDER_DUPLICATE_SUBMISSION, LAYER_SESSION_LOCK);
            keywait_finish(&kw, KEYWAIT_RAN);
            return false;
        case KEY_FAILED:
            keywait_finish(&kw, KEYWAIT_RAN);
            return redis_failed(app, cl, res);
        case KEY_HAS_RECORD:
            break;
        }
        enum record_verdict verdict = answer_from_record(app, rq, fp, existing, cl, res);
        /* A copy in flight: with Prefer: wait, wait for it and look again. */
        bool in_flight = verdict == RECORD_ANSWERED && res->outcome == ORDER_IN_PROGRESS;
        bool again = in_flight && keywait_for(&kw, rq->user_id, rq->key, existing);
        free(existing);
        if (again) {
            memset(res, 0, sizeof *res);
            continue;
        }
        if (in_flight)
            metrics_inc(M_DUP_INFLIGHT_KEY);
        keywait_finish(&kw, in_flight                    ? KEYWAIT_RAN_OUT
                            : verdict == RECORD_ANSWERED ? KEYWAIT_ANSWERED
                                                         : KEYWAIT_RAN);
        if (verdict == RECORD_TAKEN_OVER)
            return true;
        /* A record that a switched-off layer would have answered (the demo):
         * the request goes on, and takes the lock on its own. */
        return verdict == RECORD_IGNORED && take_lock(app, rq, cl, res);
    }
}

bool orders_spend_token(struct app *app, int64_t user_id, const char *key, const char *token,
                        int token_rc, bool *redis_ok, struct order_result *res)
{
    /* Tokens live only in Redis: without it (policy degrade; strict has
     * ended the request already) there is nothing to check, and the unique
     * index still holds the line. */
    if (!(app->defences & DEFENCE_TOKEN) || token == NULL || !*redis_ok)
        return true;
    int rc = token_rc;
    if (rc == TOKEN_UNCHECKED) /* not in the key's script: on its own */
        rc = cache_token_take(user_id, token, key, app->cfg->token_ttl_s);
    if (rc == TD_OK)
        return true;
    if (rc == TD_ENOTFOUND &&
        ordertoken_check(app->cfg->jwt_secret, user_id, wall_s(), token) == ORDERTOKEN_GENUINE) {
        /* Issued by us to this user and not expired, yet unknown to Redis:
         * Redis lost it (flushed, restarted, a failover that lost the last
         * writes). It cannot say whether the token was spent, so, as
         * whenever Redis cannot vouch, the request goes on and the database
         * decides: a copy of this very request meets the unique index of
         * its key, another key the unique key of the token (orders_write_order). */
        metrics_inc(M_TOKEN_FORGOTTEN);
        return true;
    }
    if (rc == TD_ENOTFOUND || rc == TD_ECONFLICT) {
        metrics_inc(M_DUP_TOKEN);
        orders_answer(res, ORDER_TOKEN_INVALID, LAYER_TOKEN);
        return false;
    }
    *redis_ok = false;
    if (app->cfg->redis_policy == REDIS_POLICY_STRICT) {
        orders_answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
        return false;
    }
    return true;
}

/* Layer 4. A token is spent by the first key that passes here; that key's
 * retries pass again (the same intent), any other key is refused. */
bool orders_take_token(struct app *app, const struct order_request *rq, struct claims *cl,
                       struct order_result *res)
{
    return orders_spend_token(app, rq->user_id, rq->key, rq->token, cl->token_rc, &cl->redis_ok,
                              res);
}
