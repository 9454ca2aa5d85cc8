/* inflight_key.c - the Idempotency-Key protocol (inflight_key.h), the one
 * copy of it: begin, the wait for a copy in flight, the take-over of a
 * dead one, the answer from a record, complete and release. Orders, carts
 * and any later resource differ only in the key's name, the fingerprint
 * and what they ask the script to take besides the marker; everything
 * here is the same for all of them, so it is written once. */
#include "inflight_key.h"

#include "app.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "keywait.h"
#include "log.h"
#include "metrics.h"
#include "response_cache.h"
#include "session_lock.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

void inflight_key_init(struct inflight_key *k, struct app *app, int64_t user_id, const char *name,
                       const char *fp)
{
    memset(k, 0, sizeof *k);
    k->app = app;
    k->user_id = user_id;
    k->name = name;
    k->fp = fp;
    k->redis_ok = true;
    k->token_rc = TOKEN_UNCHECKED;
    idem_new_owner(app->instance, k->owner);
}

void inflight_key_answer_cleanup(struct inflight_key_answer *ans)
{
    free(ans->body);
    memset(ans, 0, sizeof *ans);
}

void inflight_key_cleanup(struct inflight_key *k)
{
    free(k->marker);
    k->marker = NULL;
}

/* Stays a switch, as the response cache's does (response_cache_on): each
 * is a lesson of its own, a copy let in without the marker, a retry run
 * again without the record's replay. */
static bool inflight_marker_on(const struct app *app)
{
    return (app->defences & DEFENCE_INFLIGHT_KEY) != 0;
}

/* Both key layers off: the key is not looked at at all. */
static bool key_layers_on(const struct app *app)
{
    return inflight_marker_on(app) || response_cache_on(app);
}

/* With no marker to replace (the in-flight key off), a completed answer
 * is still kept for the response cache: stored if the key has none. */
static bool record_without_marker(const struct app *app)
{
    return response_cache_on(app) && !inflight_marker_on(app);
}

bool inflight_key_holds(const struct inflight_key *k)
{
    return !k->ended && (k->marker != NULL || k->locked);
}

/* The lock's owner to name in a script: ours when the resource asked for
 * the lock (and the lesson has it on), else none. */
static const char *lock_owner(const struct inflight_key *k)
{
    return k->session_id != 0 && session_lock_on(k->app) ? k->owner : NULL;
}

/* Redis failed at some step. Under policy strict that ends the request;
 * under degrade the remaining Redis defences are skipped and the database
 * decides alone. */
static enum inflight_key_end redis_failed(struct inflight_key *k)
{
    k->redis_ok = false;
    return k->app->cfg->redis_policy == REDIS_POLICY_STRICT ? INFLIGHT_UNAVAILABLE : INFLIGHT_RUN;
}

/* The session lock on its own, when no script took it: the key layers are
 * switched off, or a record they would have answered was let through. */
static enum inflight_key_end lock_alone(struct inflight_key *k, struct inflight_key_answer *ans)
{
    if (lock_owner(k) == NULL || !k->redis_ok)
        return INFLIGHT_RUN;
    int rc = session_lock_take(k->app, k->user_id, k->session_id, k->owner);
    if (rc == TD_OK) {
        k->locked = true;
        return INFLIGHT_RUN;
    }
    if (rc == TD_ECONFLICT) {
        ans->layer = LAYER_SESSION_LOCK;
        return INFLIGHT_LOCKED;
    }
    return redis_failed(k);
}

/* One look at the key, one round trip: its record (handed back in
 * *existing), else our marker, then the lock, then the token, then the
 * order-key filter's bits. */
static enum key_begin begin_once(struct inflight_key *k, char **existing)
{
    const struct config *cfg = k->app->cfg;
    const char *owner = lock_owner(k);
    /* The in-flight key off (the demo): the script only looks. */
    char *marker = inflight_marker_on(k->app) ? idem_marker(k->fp, k->owner) : NULL;
    struct token_spend tok = {k->token};
    enum key_begin kb = cache_key_begin(
        k->user_id, k->name, marker, cfg->inflight_ttl_ms, k->session_id, owner, cfg->lock_ttl_ms,
        k->token != NULL ? &tok : NULL, &k->token_rc, k->note, &k->noted, existing);
    if (kb == KEY_BEGUN || kb == KEY_FAILED) {
        /* After a failure the script may have run: what might be ours is
         * handed back at the end (compare-and-delete: never another's). */
        k->marker = marker;
        k->locked = owner != NULL;
        return kb;
    }
    free(marker); /* a record stood, or the script took our marker back */
    return kb;
}

/* The key's marker says a copy is in flight. Its owner names the process
 * that set it; if that process no longer beats (killed, crashed: see
 * liveness.h), nobody will complete or release the marker, and waiting for
 * its TTL helps no one. The retry takes it over (and the dead request's
 * lock) and goes on: whatever the dead request had written, the database
 * answers with it (the unique index). A process that is merely slow keeps
 * beating. Returns true when the marker (and lock) are ours; false, with
 * *locked set when the session turned out held by another key. */
static bool take_over_dead(struct inflight_key *k, const char *stale, const char *stale_owner,
                           bool *locked)
{
    char instance[IDEM_INSTANCE_LEN + 1];
    const struct config *cfg = k->app->cfg;
    *locked = false;
    idem_owner_instance(stale_owner, instance);
    if (strcmp(instance, k->app->instance) == 0 || cache_instance_alive(instance) != TD_ENOTFOUND)
        return false; /* ours, alive, or Redis cannot tell: the marker stands */
    const char *owner = lock_owner(k);
    char *marker = idem_marker(k->fp, k->owner);
    int rc = cache_key_take_over(k->user_id, k->name, stale, marker, cfg->inflight_ttl_ms,
                                 k->session_id, stale_owner, owner, cfg->lock_ttl_ms);
    if (rc == TD_OK) {
        metrics_inc(M_INFLIGHT_TAKEOVERS);
        log_info("user %lld: took over the marker of a request whose process %s is gone",
                 (long long)k->user_id, instance);
        k->marker = marker;
        k->locked = owner != NULL;
        return true;
    }
    free(marker);
    *locked = rc == TD_ECONFLICT;
    return false;
}

/* What a record found under the key says: a completed one is replayed
 * (the response cache) unless it was made for another payload; a marker
 * means a copy is in flight (the in-flight key), unless its process is
 * dead. A record a switched-off layer would have answered, or one that
 * cannot be read, lets the request go on (INFLIGHT_RUN, nothing held). */
static enum inflight_key_end answer_from_record(struct inflight_key *k, const char *existing,
                                                struct inflight_key_answer *ans)
{
    struct idem_record rec;
    bool locked;
    if (!idem_parse(existing, strlen(existing), &rec)) {
        log_warn("malformed idempotency record for user %lld; ignoring it", (long long)k->user_id);
        return INFLIGHT_RUN;
    }
    if (rec.done ? !response_cache_on(k->app) : !inflight_marker_on(k->app))
        return INFLIGHT_RUN;
    ans->layer = rec.done ? LAYER_RESPONSE_CACHE : LAYER_INFLIGHT_KEY;
    if (strcmp(rec.fingerprint, k->fp) != 0) {
        metrics_inc(M_DUP_KEY_REUSED);
        return INFLIGHT_REUSED;
    }
    if (rec.done) {
        metrics_inc(M_DUP_RESPONSE_CACHE);
        ans->status = rec.status;
        ans->body = xstrndup(rec.body, rec.body_len);
        ans->body_len = rec.body_len;
        return INFLIGHT_REPLAY;
    }
    if (take_over_dead(k, existing, rec.owner, &locked))
        return INFLIGHT_RUN;
    if (locked) {
        ans->layer = LAYER_SESSION_LOCK;
        return INFLIGHT_LOCKED;
    }
    return INFLIGHT_BUSY; /* counted once waiting is over */
}

/* One begin and what it found; *existing is the record seen, if any. */
static enum inflight_key_end look_once(struct inflight_key *k, char **existing, bool *from_record,
                                       struct inflight_key_answer *ans)
{
    *from_record = false;
    switch (begin_once(k, existing)) {
    case KEY_BEGUN:
        return INFLIGHT_RUN;
    case KEY_SESSION_LOCKED:
        ans->layer = LAYER_SESSION_LOCK;
        return INFLIGHT_LOCKED;
    case KEY_FAILED:
    case KEY_NOT_SENT:
        return redis_failed(k);
    case KEY_HAS_RECORD:
        break;
    }
    *from_record = true;
    return answer_from_record(k, *existing, ans);
}

/* How a wait ended, for keywait's metrics. */
static enum keywait_end wait_end(enum inflight_key_end end, bool from_record)
{
    if (end == INFLIGHT_BUSY)
        return KEYWAIT_RAN_OUT;
    return from_record && end != INFLIGHT_RUN ? KEYWAIT_ANSWERED : KEYWAIT_RAN;
}

enum inflight_key_end inflight_key_begin(struct inflight_key *k, struct inflight_key_answer *ans)
{
    struct keywait kw;
    memset(ans, 0, sizeof *ans);
    if (!key_layers_on(k->app))
        return lock_alone(k, ans);
    keywait_start(&kw, k->app, k->wait_s);
    for (;;) {
        char *existing = NULL;
        bool from_record;
        enum inflight_key_end end = look_once(k, &existing, &from_record, ans);
        /* A copy in flight: with Prefer: wait, wait for it and look again. */
        bool busy = end == INFLIGHT_BUSY;
        bool again = busy && keywait_for(&kw, k->user_id, k->name, existing);
        free(existing);
        if (again) {
            memset(ans, 0, sizeof *ans);
            continue;
        }
        if (busy)
            metrics_inc(M_DUP_INFLIGHT_KEY);
        if (end == INFLIGHT_LOCKED)
            metrics_inc(M_DUP_SESSION_LOCK);
        keywait_finish(&kw, wait_end(end, from_record));
        /* A record let through (the demo, or unreadable): nothing was
         * taken, so the lock is taken on its own. */
        if (end == INFLIGHT_RUN && from_record && k->marker == NULL)
            return lock_alone(k, ans);
        return end;
    }
}

void inflight_key_complete(struct inflight_key *k, int status, const char *body, size_t len)
{
    if (k->ended || (!inflight_key_holds(k) && !record_without_marker(k->app)))
        return;
    char *done = idem_done(k->fp, status, body, len);
    cache_key_complete(k->user_id, k->name, k->marker, done, k->app->cfg->idem_ttl_s, k->session_id,
                       k->locked ? k->owner : NULL);
    free(done);
    k->ended = true;
}

void inflight_key_release(struct inflight_key *k)
{
    if (!inflight_key_holds(k))
        return;
    cache_key_release(k->user_id, k->name, k->marker, k->session_id, k->locked ? k->owner : NULL);
    k->ended = true;
}
