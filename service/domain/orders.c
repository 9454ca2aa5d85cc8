#include "orders.h"

#include "app.h"
#include "bloom.h"
#include "cache.h"
#include "defenses.h"
#include "err.h"
#include "faults.h"
#include "idem.h"
#include "log.h"
#include "metrics.h"
#include "ordertoken.h"
#include "respcache.h"
#include "store.h"
#include "txretry.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What this request has taken in Redis, to give back on failure. */
struct claims {
    bool redis_ok; /* false once Redis failed: skip the rest of it */
    char *marker;  /* our in-flight marker, if we set one */
    char owner[IDEM_OWNER_LEN + 1];
    bool locked;  /* we hold the user+session lock */
    int token_rc; /* the token's verdict from the key's script, or TOKEN_UNCHECKED */
};

void orders_new_number(char *out)
{
    /* YYMMDD, then 14 random digits: sortable by day at a glance, and
     * unguessable enough that order numbers leak nothing. */
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char day[16];
    snprintf(day, sizeof day, "%02u%02u%02u", (unsigned)(tm.tm_year % 100) % 100,
             (unsigned)(tm.tm_mon + 1) % 100, (unsigned)tm.tm_mday % 100);
    memcpy(out, day, 6);
    uint64_t v = rand_below(UINT64_C(100000000000000)); /* 10^14: the 14 digits */
    for (int i = ORDER_NO_LEN - 1; i >= 6; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
    out[ORDER_NO_LEN] = '\0';
}

void order_result_cleanup(struct order_result *res)
{
    free(res->body);
    memset(res, 0, sizeof *res);
}

const char *order_layer_name(enum order_layer layer)
{
    switch (layer) {
    case LAYER_NONE:
        return NULL;
    case LAYER_RESPONSE_CACHE:
        return defense_name(DEFENSE_RESPONSE_CACHE);
    case LAYER_INFLIGHT_KEY:
        return defense_name(DEFENSE_INFLIGHT_KEY);
    case LAYER_SESSION_LOCK:
        return defense_name(DEFENSE_SESSION_LOCK);
    case LAYER_TOKEN:
        return defense_name(DEFENSE_TOKEN);
    case LAYER_UNIQUE_INDEX:
        return defense_name(DEFENSE_UNIQUE_INDEX);
    case LAYER_CHECK_THEN_INSERT:
        return "check-then-insert";
    }
    return NULL;
}

static void answer(struct order_result *res, enum order_outcome oc, enum order_layer layer)
{
    res->outcome = oc;
    res->layer = layer;
}

/* A replay of the bytes a record kept (the in-process cache, Redis). */
static void replay_bytes(struct order_result *res, int status, char *body, size_t len)
{
    answer(res, ORDER_REPLAYED, LAYER_RESPONSE_CACHE);
    res->status = status;
    res->body = body;
    res->body_len = len;
}

/* The answer made from the order itself: a new one, or one the database
 * found under the key. */
static void answer_with_order(struct order_result *res, enum order_outcome oc,
                              enum order_layer layer, const struct order *o,
                              const struct order_render *render)
{
    answer(res, oc, layer);
    res->body = render->order(o, &res->status, &res->body_len);
    snprintf(res->order_no, sizeof res->order_no, "%s", o->order_no);
}

/* Redis failed at some step. Under policy strict that ends the request;
 * under degrade the remaining Redis defences are skipped and the database
 * decides alone. Returns true when the request may go on. */
static bool redis_failed(struct app *app, struct claims *cl, struct order_result *res)
{
    cl->redis_ok = false;
    if (app->cfg->redis_policy == REDIS_POLICY_STRICT) {
        answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
        return false;
    }
    return true;
}

/* Layer 3 alone, when the key defences are switched off (or answered
 * nothing). */
static bool take_lock(struct app *app, const struct order_request *rq, struct claims *cl,
                      struct order_result *res)
{
    if (!(app->defenses & DEFENSE_SESSION_LOCK) || !cl->redis_ok)
        return true;
    int rc = cache_lock_acquire(rq->user_id, rq->session_id, cl->owner, app->cfg->lock_ttl_ms);
    if (rc == TD_OK) {
        cl->locked = true;
        return true;
    }
    if (rc == TD_ECONFLICT) {
        metrics_inc(M_DUP_SESSION_LOCK);
        answer(res, ORDER_DUPLICATE_SUBMISSION, LAYER_SESSION_LOCK);
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
    bool want_lock = (app->defenses & DEFENSE_SESSION_LOCK) != 0;
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
        answer(res, ORDER_DUPLICATE_SUBMISSION, LAYER_SESSION_LOCK);
    }
    return false;
}

/* Layer 1, in process: keeps an answer for the key's retries, as long as
 * Redis keeps its record (TICKETD_IDEM_TTL_S). */
static void keep_in_process(struct app *app, const struct order_request *rq, const char *fp,
                            int status, const char *body, size_t len)
{
    if (!(app->defenses & DEFENSE_RESPONSE_CACHE))
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
    if (!(app->defenses & DEFENSE_RESPONSE_CACHE) ||
        !respcache_get(app->respcache, rq->user_id, rq->key, mono_ms(), &hit))
        return false;
    if (strcmp(hit.fingerprint, fp) != 0) {
        free(hit.body);
        metrics_inc(M_DUP_KEY_REUSED);
        answer(res, ORDER_KEY_REUSED, LAYER_RESPONSE_CACHE);
        return true;
    }
    metrics_inc(M_DUP_RESPONSE_CACHE);
    replay_bytes(res, hit.status, hit.body, hit.body_len);
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
    unsigned on = app->defenses;
    bool want_lock = (on & DEFENSE_SESSION_LOCK) != 0;
    char *marker = (on & DEFENSE_INFLIGHT_KEY) ? idem_marker(fp, cl->owner) : NULL;
    struct token_spend tok = {rq->token, app->cfg->token_ttl_s};
    bool with_token = rq->token != NULL && (on & DEFENSE_TOKEN);
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
    unsigned on = app->defenses;
    struct idem_record rec;
    if (!idem_parse(existing, strlen(existing), &rec)) {
        log_warn("malformed idempotency record for user %lld; ignoring it", (long long)rq->user_id);
        return RECORD_IGNORED;
    }
    if (rec.done && (on & DEFENSE_RESPONSE_CACHE)) {
        if (strcmp(rec.fingerprint, fp) != 0) {
            metrics_inc(M_DUP_KEY_REUSED);
            answer(res, ORDER_KEY_REUSED, LAYER_RESPONSE_CACHE);
            return RECORD_ANSWERED;
        }
        metrics_inc(M_DUP_RESPONSE_CACHE);
        keep_in_process(app, rq, fp, rec.status, rec.body, rec.body_len);
        replay_bytes(res, rec.status, xstrndup(rec.body, rec.body_len), rec.body_len);
        return RECORD_ANSWERED;
    }
    if (rec.done || !(on & DEFENSE_INFLIGHT_KEY))
        return RECORD_IGNORED;
    if (strcmp(rec.fingerprint, fp) != 0) {
        metrics_inc(M_DUP_KEY_REUSED);
        answer(res, ORDER_KEY_REUSED, LAYER_INFLIGHT_KEY);
        return RECORD_ANSWERED;
    }
    if (take_over_dead(app, rq, fp, existing, rec.owner, cl, res))
        return RECORD_TAKEN_OVER;
    if (res->outcome != ORDER_DUPLICATE_SUBMISSION) {
        metrics_inc(M_DUP_INFLIGHT_KEY);
        answer(res, ORDER_IN_PROGRESS, LAYER_INFLIGHT_KEY);
    }
    return RECORD_ANSWERED;
}

/* Layers 1 to 3. Returns true when the request should go on. */
static bool check_key(struct app *app, const struct order_request *rq, const char *fp,
                      struct claims *cl, struct order_result *res)
{
    if (replay_local(app, rq, fp, res))
        return false;
    if (!(app->defenses & (DEFENSE_RESPONSE_CACHE | DEFENSE_INFLIGHT_KEY)))
        return take_lock(app, rq, cl, res);

    char *existing = NULL;
    enum record_verdict verdict;
    switch (begin_in_redis(app, rq, fp, cl, &existing)) {
    case KEY_BEGUN:
        return true;
    case KEY_SESSION_LOCKED:
        metrics_inc(M_DUP_SESSION_LOCK);
        answer(res, ORDER_DUPLICATE_SUBMISSION, LAYER_SESSION_LOCK);
        return false;
    case KEY_FAILED:
        return redis_failed(app, cl, res);
    case KEY_HAS_RECORD:
        break;
    }
    verdict = answer_from_record(app, rq, fp, existing, cl, res);
    free(existing);
    if (verdict == RECORD_TAKEN_OVER)
        return true;
    /* A record that a switched-off layer would have answered (the demo):
     * the request goes on, and takes the lock on its own. */
    return verdict == RECORD_IGNORED && take_lock(app, rq, cl, res);
}

bool orders_spend_token(struct app *app, int64_t user_id, const char *key, const char *token,
                        int token_rc, bool *redis_ok, struct order_result *res)
{
    /* Tokens live only in Redis: without it (policy degrade; strict has
     * ended the request already) there is nothing to check, and the unique
     * index still holds the line. */
    if (!(app->defenses & DEFENSE_TOKEN) || token == NULL || !*redis_ok)
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
         * its key, another key the unique key of the token (write_order). */
        metrics_inc(M_TOKEN_FORGOTTEN);
        return true;
    }
    if (rc == TD_ENOTFOUND || rc == TD_ECONFLICT) {
        metrics_inc(M_DUP_TOKEN);
        answer(res, ORDER_TOKEN_INVALID, LAYER_TOKEN);
        return false;
    }
    *redis_ok = false;
    if (app->cfg->redis_policy == REDIS_POLICY_STRICT) {
        answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
        return false;
    }
    return true;
}

/* Layer 4. A token is spent by the first key that passes here; that key's
 * retries pass again (the same intent), any other key is refused. */
static bool spend_token(struct app *app, const struct order_request *rq, struct claims *cl,
                        struct order_result *res)
{
    return orders_spend_token(app, rq->user_id, rq->key, rq->token, cl->token_rc, &cl->redis_ok,
                              res);
}

/* Looks for the order this user already placed under this key and makes
 * it the answer: replayed when the payload matches, 422 when the key was
 * used for another one. The layer named is the one that found the copy (in
 * the demo without the index, the look-up before the insert; the answer
 * says so, and nobody credits an index that is not there). Returns true
 * when an order was found and replayed; false with res untouched when
 * there is none, or with res set to the refusal or the failure. */
static bool replay_from_database(struct app *app, const struct order_request *rq,
                                 const struct order_render *render, struct order_result *res)
{
    struct order o;
    enum order_layer layer =
        (app->defenses & DEFENSE_UNIQUE_INDEX) ? LAYER_UNIQUE_INDEX : LAYER_CHECK_THEN_INSERT;
    int rc = store_order_find_request(rq->user_id, rq->key, &o);
    if (rc == TD_ENOTFOUND)
        return false;
    if (rc != TD_OK) {
        answer(res, rc == TD_EUNAVAIL ? ORDER_UNAVAILABLE : ORDER_FAILED, LAYER_NONE);
        return false;
    }
    if (o.session_id != rq->session_id || o.quantity != rq->quantity) {
        metrics_inc(M_DUP_KEY_REUSED);
        answer(res, ORDER_KEY_REUSED, layer);
        return false;
    }
    metrics_inc(M_DUP_UNIQUE_INDEX);
    answer_with_order(res, ORDER_REPLAYED, layer, &o, render);
    return true;
}

/* One attempt of the order transaction, with a fresh order number each
 * time (a colliding random number comes back as TD_ERETRY too). */
struct attempt {
    struct order_draft *draft;
    char *order_no;
    struct order *out;
};

static int attempt_create(void *p)
{
    struct attempt *a = p;
    orders_new_number(a->order_no);
    return store_order_create(a->draft, a->out);
}

/* The token this order spends, for the database to record with it, so
 * that a token that bought an order stays spent when Redis forgets it.
 * The database's record is a layer of its own, behind the atomic spend:
 * the demo skips it with the token switched off, and with token-atomic
 * off, whose naive GET-then-spend (cache_naive.h) shows what Redis alone
 * lets through. Returns key, filled, or NULL when nothing is recorded. */
static const char *token_to_record(const struct app *app, const struct order_request *rq, char *key)
{
    unsigned whole = DEFENSE_TOKEN | DEFENSE_TOKEN_ATOMIC;
    const char *token = rq->token != NULL ? rq->token : rq->spent_token;
    if (token == NULL || (app->defenses & whole) != whole)
        return NULL;
    ordertoken_key(token, key);
    return key;
}

/* Layers 5 and 6: the database transaction, retried after deadlocks.
 * filter_missed: the order-key filter was not told of this key, and the
 * order records that it was not (store.h). */
static void write_order(struct app *app, const struct order_request *rq, bool filter_missed,
                        const struct order_render *render, struct order_result *res)
{
    char order_no[ORDER_NO_LEN + 1], token_key[ORDERTOKEN_KEY_LEN + 1];
    struct order o;
    struct order_draft d = {
        .order_no = order_no,
        .user_id = rq->user_id,
        .session_id = rq->session_id,
        .request_id = rq->key,
        .quantity = rq->quantity,
        .token_key = token_to_record(app, rq, token_key),
        .filter_missed = filter_missed,
    };
    struct attempt at = {&d, order_no, &o};
    int rc = txretry_run(app->cfg->tx_retries, attempt_create, &at);
    switch (rc) {
    case TD_OK:
        metrics_inc(M_ORDERS_CREATED);
        answer_with_order(res, ORDER_CREATED, LAYER_NONE, &o, render);
        return;
    case TD_EDUP:
        answer(res, ORDER_FAILED, LAYER_NONE);
        break;
    case TD_ESPENT:
        /* Another key's order spent the token, and Redis forgot it: the
         * unique key of the token refused this one, rolled back. */
        answer(res, ORDER_TOKEN_INVALID, LAYER_UNIQUE_INDEX);
        break;
    case TD_ECONFLICT:
        metrics_inc(M_STOCK_CONFLICTS);
        answer(res, ORDER_SOLD_OUT, LAYER_NONE);
        return;
    case TD_ENOTFOUND:
        answer(res, ORDER_SESSION_NOT_FOUND, LAYER_NONE);
        return;
    case TD_EUNAVAIL:
    case TD_ERETRY:
        answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
        return;
    default:
        answer(res, ORDER_FAILED, LAYER_NONE);
        return;
    }

    /* The unique index refused a second order for this key: the first one
     * exists, committed. Answer with it, as the original request did (a
     * row the index saw and the look-up cannot stays a failure). A refused
     * token is looked up too, as every refusal is: in the demo without the
     * index on the key, a copy of this request can meet its own token. */
    if (!replay_from_database(app, rq, render, res) && res->outcome == ORDER_TOKEN_INVALID)
        metrics_inc(M_DUP_UNIQUE_INDEX);
}

/* DEMO ONLY (forget-failures switched off): a failure is stored under the
 * key like a success, as the articles warn against, so every retry of the
 * key is told the same failure until the record expires, long after the
 * dependency is back or seats were returned. Returns true when it was. */
static bool remember_failure(struct app *app, const struct order_request *rq, const char *fp,
                             const struct claims *cl, const struct order_render *render,
                             const struct order_result *res)
{
    if ((app->defenses & DEFENSE_FORGET_FAILURES) || cl->marker == NULL)
        return false;
    if (res->outcome != ORDER_SOLD_OUT && res->outcome != ORDER_UNAVAILABLE)
        return false;
    int status = 0;
    size_t len = 0;
    char *body = render->failure(res->outcome, &status, &len);
    char *done = idem_done(fp, status, body, len);
    cache_order_complete(rq->user_id, rq->key, cl->marker, done, app->cfg->idem_ttl_s,
                         rq->session_id, cl->locked ? cl->owner : NULL);
    keep_in_process(app, rq, fp, status, body, len);
    free(done);
    free(body);
    return true;
}

/* The order-key filter (bloom.h), asked before the refusal's database
 * look-up: may this user have an order under this key? Its "certainly
 * not" is only as good as what it has seen, so it is taken only from a
 * filter that is complete (built from the orders table since Redis last
 * lost its records, bloom_job.h) and only while this process has told it
 * of every order it recorded. A "maybe", true or false, costs the query
 * it would have cost without a filter: never a wrong answer. Returns
 * false when the look-up can be skipped. */
static bool may_have_order(struct app *app, const struct order_request *rq)
{
    uint64_t pos[BLOOM_MAX_K];
    bool trusted = false, maybe = true;
    if (!(app->defenses & DEFENSE_BLOOM) || app->bloom.m == 0)
        return true;
    bloom_positions(app->bloom, rq->user_id, rq->key, pos);
    /* (The demo's naive cache, bloom-liveness off, calls any filter
     * trusted: cache_naive.h.) */
    if (cache_bloom_check(app->bloom_shape, pos, app->bloom.k, &trusted, &maybe) != TD_OK)
        return true;
    if (maybe) {
        metrics_inc(M_BLOOM_MAYBE);
        return true;
    }
    if (!trusted || atomic_load(&app->bloom_missed)) {
        metrics_inc(M_BLOOM_UNTRUSTED);
        return true;
    }
    metrics_inc(M_BLOOM_SAVED);
    return false;
}

/* The key has, or may have in a moment, an order: the filter must know
 * it. Told before the order's transaction, not after its COMMIT: a copy
 * refused between the COMMIT and a later add would be believed ("no
 * order") though the order exists, and a process dying there would leave
 * the key out for good. A transaction that then fails leaves a false
 * positive, which costs one query. When the filter cannot be told, it
 * stops being trusted: here at once (app->bloom_missed), and everywhere
 * else through the row the order writes (order_key_filter_misses), which
 * outlives this process. Returns false when it could not be told. */
static bool bloom_note(struct app *app, const struct order_request *rq)
{
    uint64_t pos[BLOOM_MAX_K];
    if (!(app->defenses & DEFENSE_BLOOM) || app->bloom.m == 0)
        return true;
    bloom_positions(app->bloom, rq->user_id, rq->key, pos);
    if (cache_bloom_add(pos, app->bloom.k) == TD_OK)
        return true;
    atomic_store(&app->bloom_missed, true);
    return false;
}

/* A marker names a request of this key past Redis: it may be writing the
 * order now, or may have written it without Redis (its answer lost to a
 * stall, the filter never told). The filter can only know what it was
 * told, so for such a key the database is always asked. */
static bool in_flight_elsewhere(const struct order_result *res)
{
    return res->outcome == ORDER_IN_PROGRESS;
}

/* The refusals that only Redis vouches for. */
static bool refused_by_redis(enum order_outcome oc)
{
    return oc == ORDER_IN_PROGRESS || oc == ORDER_DUPLICATE_SUBMISSION || oc == ORDER_TOKEN_INVALID;
}

void orders_create(struct app *app, const struct order_request *rq,
                   const struct order_render *render, struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    struct claims cl = {.redis_ok = true, .token_rc = TOKEN_UNCHECKED};
    bool from_db = false; /* the database gave the answer: worth remembering */
    memset(res, 0, sizeof *res);
    idem_fingerprint_order(rq->session_id, rq->quantity, fp);
    idem_new_owner(app->instance, cl.owner);

    if (!check_key(app, rq, fp, &cl, res) || !spend_token(app, rq, &cl, res)) {
        /* Redis forgets: it may have been flushed or restarted, a record
         * may have expired, or the instance that placed the order may have
         * died between its COMMIT and storing the answer. Before a client
         * is told its request failed, the database is asked whether this
         * key already has its order; a client told "no" for an order that
         * exists would buy again. */
        if (refused_by_redis(res->outcome) &&
            (in_flight_elsewhere(res) || may_have_order(app, rq))) {
            metrics_inc(M_REFUSAL_DB_LOOKUPS);
            from_db = replay_from_database(app, rq, render, res);
        }
        goto out;
    }
    if (!cl.redis_ok)
        metrics_inc(M_REDIS_DEGRADED);
    (void)FAULT_POINT("order.after_redis"); /* delay: a downstream slower than the TTLs */
    bool told = bloom_note(app, rq);
    write_order(app, rq, !told, render, res);
    from_db = res->outcome == ORDER_CREATED || res->outcome == ORDER_REPLAYED;
    if (res->outcome == ORDER_CREATED)
        (void)FAULT_POINT("order.after_commit"); /* crash: committed, nothing stored or sent */

out:
    if (from_db && res->outcome != ORDER_CREATED)
        (void)bloom_note(app, rq); /* found in the database: maybe older than the filter */
    if (from_db) {
        /* Remember the completed response for the key's retries (a replay
         * from a cache layer is remembered already). Tried even after a
         * Redis failure: the breaker refuses it at no cost while Redis is
         * down, and it helps as soon as Redis is back. With the in-flight
         * key switched off there is no marker to replace: the record is
         * stored if the key has none. */
        unsigned on = app->defenses;
        bool no_marker = (on & DEFENSE_RESPONSE_CACHE) && !(on & DEFENSE_INFLIGHT_KEY);
        if (cl.marker != NULL || cl.locked || no_marker) {
            char *done = idem_done(fp, res->status, res->body, res->body_len);
            cache_order_complete(rq->user_id, rq->key, cl.marker, done, app->cfg->idem_ttl_s,
                                 rq->session_id, cl.locked ? cl.owner : NULL);
            free(done);
        }
        keep_in_process(app, rq, fp, res->status, res->body, res->body_len);
    } else if (remember_failure(app, rq, fp, &cl, render, res)) {
        /* the naive version: nothing given back */
    } else if (res->outcome != ORDER_REPLAYED && (cl.marker != NULL || cl.locked)) {
        /* Only a success is remembered: give the key back for a retry. */
        cache_order_release(rq->user_id, rq->key, cl.marker, rq->session_id,
                            cl.locked ? cl.owner : NULL);
    }
    free(cl.marker);
}
