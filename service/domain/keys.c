/* keys.c - the look-up of an Idempotency-Key (keys.h). */
#include "keys.h"

#include "app.h"
#include "cache.h"
#include "err.h"
#include "idem.h"
#include "store.h"
#include "store_idem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a cart keeps its batch key (cart.c): "batch/<key>" beside the
 * order keys in Redis, scope "batch" in idempotency_records. */
#define BATCH_PREFIX "batch/"
#define BATCH_SCOPE  "batch"

/* What Redis said of one kind. */
struct redis_view {
    bool answered; /* a completed record: the key has its answer */
    bool running;  /* a live copy's marker */
    int status;
    int64_t age_ms;
    char order_no[ORDER_NO_LEN + 1];
};

/* A marker's copy runs only while its process beats: a killed process's
 * marker stays until its TTL, and nothing will ever finish it. Redis
 * that cannot tell counts as alive (the marker stands, as for a retry). */
static bool owner_alive(struct app *app, const char *owner)
{
    char instance[IDEM_INSTANCE_LEN + 1];
    idem_owner_instance(owner, instance);
    return strcmp(instance, app->instance) == 0 || cache_instance_alive(instance) != TD_ENOTFOUND;
}

/* Reads one record. An unreadable one (or the demo's remembered failure,
 * which is no success) says nothing: the database decides. */
static void view_record(struct app *app, const struct idem_peek *p, bool order,
                        keys_order_no_fn order_no, struct redis_view *v)
{
    struct idem_record rec;
    memset(v, 0, sizeof *v);
    if (p->record == NULL || !idem_parse(p->record, p->len, &rec))
        return;
    if (rec.done) {
        /* An order's answer must name its order; else the database will. */
        v->answered = !order || order_no(rec.body, rec.body_len, v->order_no);
        v->status = rec.status;
        return;
    }
    v->running = owner_alive(app, rec.owner);
    /* The marker was set with the in-flight TTL and never renewed: what
     * has gone of it is the copy's age. */
    int64_t ttl = app->cfg->inflight_ttl_ms;
    v->age_ms = p->ttl_ms >= 0 && p->ttl_ms <= ttl ? ttl - p->ttl_ms : 0;
}

static int completed_order(struct key_status *out, const char *order_no)
{
    out->state = KEY_COMPLETED;
    out->kind = KEY_KIND_ORDER;
    out->status = 201;
    snprintf(out->order_no, sizeof out->order_no, "%s", order_no);
    return TD_OK;
}

static int in_progress(struct key_status *out, enum key_kind kind, int64_t age_ms)
{
    out->state = KEY_IN_PROGRESS;
    out->kind = kind;
    out->age_ms = age_ms;
    return TD_OK;
}

int keys_lookup(struct app *app, int64_t user_id, const char *key, keys_order_no_fn order_no,
                struct key_status *out)
{
    char batch_name[sizeof BATCH_PREFIX + IDEM_KEY_MAX];
    struct idem_peek peek[2];
    struct redis_view ov, bv;
    struct order o;
    struct idem_stored st;
    memset(out, 0, sizeof *out);
    memset(&st, 0, sizeof st);
    snprintf(batch_name, sizeof batch_name, BATCH_PREFIX "%s", key);

    int redis_rc = cache_idem_peek(user_id, key, batch_name, peek);
    view_record(app, &peek[0], true, order_no, &ov);
    view_record(app, &peek[1], false, order_no, &bv);
    free(peek[0].record);
    free(peek[1].record);

    /* The order first: Redis's answer, else the database's order. */
    if (ov.answered)
        return completed_order(out, ov.order_no);
    int rc = store_order_peek_request(user_id, key, &o);
    if (rc == TD_OK)
        return completed_order(out, o.order_no);
    if (rc != TD_ENOTFOUND)
        return rc;
    if (ov.running)
        return in_progress(out, KEY_KIND_ORDER, ov.age_ms);

    /* Then the batch: Redis keeps only a final answer, the database every
     * run's. */
    if (bv.answered) {
        out->state = KEY_COMPLETED;
        out->kind = KEY_KIND_BATCH;
        out->status = bv.status;
        out->complete = true;
        return TD_OK;
    }
    rc = store_idem_find(BATCH_SCOPE, user_id, key, &st);
    if (rc == TD_OK) {
        out->state = KEY_COMPLETED;
        out->kind = KEY_KIND_BATCH;
        out->status = st.status;
        out->complete = st.complete;
    }
    idem_stored_cleanup(&st);
    if (rc == TD_OK || rc != TD_ENOTFOUND)
        return rc;
    if (bv.running)
        return in_progress(out, KEY_KIND_BATCH, bv.age_ms);
    /* Nothing anywhere. Only Redis knows of a copy in flight: without it
     * "none" cannot be said. */
    return redis_rc == TD_OK ? TD_ENOTFOUND : TD_EUNAVAIL;
}
