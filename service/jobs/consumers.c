/* consumers.c - the stream consumers (consumers.h). */
#include "consumers.h"

#include "app.h"
#include "consume.h"
#include "defences.h"
#include "err.h"
#include "event_payload.h"
#include "faults.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "stream.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MS     500 /* after the stream or the database failed */
#define CONSUMER_COUNT 32  /* entries per read or claim */
#define CLAIM_ROUNDS   8   /* claims per claim cycle, at most */

/* Gives up on an entry: records it (so the relay does not queue it again),
 * copies it to the dead-letter stream for an operator, and acks it. */
static enum entry_outcome to_dead_letters(const struct consume_group *g,
                                          const struct stream_entry *en, int64_t deliveries,
                                          const char *reason)
{
    int64_t outbox_id = 0;
    char *key = consume_dedup_key(g, en->biz_key);
    if (en->outbox_id != NULL && !parse_i64(en->outbox_id, 0, INT64_MAX, &outbox_id))
        outbox_id = 0;
    enum entry_outcome oc = ENTRY_UNAVAIL;
    int rc = store_dead_letter(g->name, key, outbox_id, en->id, deliveries, reason);
    if (rc != TD_OK)
        oc = rc == TD_EUNAVAIL || rc == TD_ERETRY ? ENTRY_UNAVAIL : ENTRY_KEPT;
    else if (stream_bury(g->name, en, deliveries, reason) == TD_OK &&
             stream_ack(g->name, en->id) == TD_OK)
        oc = ENTRY_DONE;
    if (oc == ENTRY_DONE) {
        metrics_inc(M_EVENTS_DEAD_LETTERED);
        log_warn("events: %s gave up on entry %s (%s) after %lld deliveries: %s", g->name, en->id,
                 key, (long long)deliveries, reason);
    }
    free(key);
    return oc;
}

static enum entry_outcome ack(const struct consume_group *g, const char *id)
{
    return stream_ack(g->name, id) == TD_OK ? ENTRY_DONE : ENTRY_UNAVAIL;
}

char *consumers_key_by_business(const struct consume_group *g, const struct stream_entry *en)
{
    return consume_dedup_key(g, en->biz_key);
}

/* Applies an order.paid entry; acked only once its effect is committed. */
static enum entry_outcome apply(const struct app *app, const struct consume_group *g,
                                const struct stream_entry *en, const struct paid_event *pe,
                                int64_t deliveries)
{
    if (FAULT_POINT("consumer.before_effect"))
        return ENTRY_KEPT;
    char *key = app->dedup_key(g, en);
    /* With consumer-dedup switched off (the demo) the layer is skipped:
     * the effect is applied without its dedup row, so every redelivery
     * applies it again. */
    const char *dedup = (app->defences & DEFENCE_CONSUMER_DEDUP) ? key : NULL;
    int rc = consume_apply(g, pe, dedup, 0, app->cfg->tx_retries);
    enum entry_outcome oc = ENTRY_KEPT;
    if (rc == TD_OK) {
        metrics_inc(g->consumed);
    } else if (rc == TD_EDUP) {
        metrics_inc(g->duplicate);
        log_debug("events: %s already applied %s (entry %s)", g->name, key, en->id);
    } else if (consume_unfit_reason(rc) != NULL) {
        /* Left as it is, the order will not change by itself; an operator
         * fixes it and re-drives the letter (deadletters.c). */
        oc = to_dead_letters(g, en, deliveries, consume_unfit_reason(rc));
    } else if (rc == TD_EUNAVAIL || rc == TD_ERETRY) {
        oc = ENTRY_UNAVAIL;
    } /* else it stays pending; claimed again, dead-lettered if it keeps failing */
    free(key);
    if (rc != TD_OK && rc != TD_EDUP)
        return oc;
    /* Committed, not yet acked: a crash here is a redelivery that finds
     * the dedup row. */
    if (FAULT_POINT("consumer.after_effect"))
        return ENTRY_KEPT;
    return ack(g, en->id);
}

enum entry_outcome consumer_handle(const struct app *app, const struct consume_group *g,
                                   const struct stream_entry *en, int64_t deliveries)
{
    struct paid_event pe;
    const char *why;
    /* Trimmed before we got to it: nothing to apply. The relay's redrive
     * check notices the row is unsettled and publishes it again. */
    if (en->deleted)
        return ack(g, en->id);
    if (en->event_type == NULL || strcmp(en->event_type, EVENT_ORDER_PAID) != 0)
        return ack(g, en->id); /* not an event this group acts on */
    if (!event_paid_parse(en->biz_key, en->payload, en->payload_len, &pe, &why))
        return to_dead_letters(g, en, deliveries, why); /* no redelivery can fix it */
    return apply(app, g, en, &pe, deliveries);
}

/* ---- the job ---- */

struct consumer {
    struct app *app;
    const struct consume_group *g;
    const struct job_ctx *job; /* its stopper */
    char name[160];            /* host-pid-tag-group-n: unique per process and thread */
    bool group_ready;
    /* Own pending entries are read (from id "0" on) before new ones: at
     * start, and after any failure, since what was read but not acked
     * before it is still ours. */
    bool read_own;
    char own_cursor[STREAM_ID_MAX + 1];
    char claim_cursor[STREAM_ID_MAX + 1];
    int64_t claim_every_ms;
    int64_t next_claim_ms;
};

/* A claimed entry: dead-lettered once delivered too often. */
static int claimed(const struct stream_entry *en, void *p)
{
    struct consumer *cs = p;
    int64_t n;
    metrics_inc(M_EVENTS_RECLAIMED);
    int rc = stream_deliveries(cs->g->name, en->id, &n);
    if (rc != TD_OK || n == 0)
        return rc; /* n 0: acked meanwhile */
    enum entry_outcome oc;
    if (n > cs->app->cfg->max_deliveries)
        oc = to_dead_letters(cs->g, en, n, "too many deliveries");
    else
        oc = consumer_handle(cs->app, cs->g, en, n);
    return oc == ENTRY_UNAVAIL ? TD_EUNAVAIL : TD_OK;
}

/* Takes over entries pending longer than claim_idle_ms, from consumers
 * that died or hang, and from ourselves (an entry whose processing failed
 * waits here for its next try). */
static int claim_stale(struct consumer *cs)
{
    for (int round = 0; round < CLAIM_ROUNDS && !stopper_stopped(cs->job->stopper); round++) {
        int rc = stream_claim(cs->g->name, cs->name, cs->app->cfg->claim_idle_ms, CONSUMER_COUNT,
                              cs->claim_cursor, claimed, cs);
        if (rc != TD_OK)
            return rc;
        if (strcmp(cs->claim_cursor, "0-0") == 0)
            break;
    }
    return TD_OK;
}

static int read_one(const struct stream_entry *en, void *p)
{
    struct consumer *cs = p;
    if (stopper_stopped(cs->job->stopper))
        return 1;
    if (cs->read_own && strlen(en->id) <= STREAM_ID_MAX)
        memcpy(cs->own_cursor, en->id, strlen(en->id) + 1);
    if (consumer_handle(cs->app, cs->g, en, cs->read_own ? 0 : 1) == ENTRY_UNAVAIL)
        return TD_EUNAVAIL;
    return TD_OK;
}

/* Our own pending entries (no blocking), or new ones (blocking up to
 * consumer_block_ms, so a stop is seen promptly). */
static int read_batch(struct consumer *cs)
{
    size_t n = 0;
    int rc = stream_read(cs->g->name, cs->name, cs->read_own ? cs->own_cursor : NULL,
                         CONSUMER_COUNT, cs->app->cfg->consumer_block_ms, read_one, cs, &n);
    if (rc == TD_OK && cs->read_own && n == 0)
        cs->read_own = false;
    return rc;
}

/* Returns the back-off before the next turn. */
static int consumer_failed(struct consumer *cs, int rc)
{
    /* An error reply (not a timeout) is most likely NOGROUP: Redis was
     * restarted or flushed under us. Creating the group again is harmless
     * when that was not it. */
    if (rc == TD_EINTERNAL) {
        cs->group_ready = false;
        snprintf(cs->claim_cursor, sizeof cs->claim_cursor, "0-0");
    }
    cs->read_own = true;
    snprintf(cs->own_cursor, sizeof cs->own_cursor, "0");
    return BACKOFF_MS;
}

static bool group_ready(struct consumer *cs)
{
    bool created;
    if (cs->group_ready)
        return true;
    if (stream_group_ensure(cs->g->name, &created) != TD_OK)
        return false;
    if (created)
        log_info("events: created consumer group %s on %s", cs->g->name, STREAM_NAME);
    cs->group_ready = true;
    return true;
}

/* One turn: claim when due, then read. */
static int consumer_tick(struct job_ctx *c)
{
    struct consumer *cs = c->state;
    /* Reading our pending entries again counts as a delivery each time;
     * while the database is away that would only use up their tries. */
    if ((cs->read_own && store_ping() != TD_OK) || !group_ready(cs))
        return BACKOFF_MS;
    if (mono_ms() >= cs->next_claim_ms) {
        int rc = claim_stale(cs);
        cs->next_claim_ms = mono_ms() + cs->claim_every_ms;
        if (rc != TD_OK)
            return consumer_failed(cs, rc);
    }
    int rc = read_batch(cs);
    return rc != TD_OK ? consumer_failed(cs, rc) : 0;
}

/* One consumer per group of consume.h. */
static int consumer_instances(const struct app *app)
{
    (void)app;
    return (int)CONSUME_GROUPS;
}

static void consumer_open(struct job_ctx *c)
{
    struct consumer *cs = c->state;
    char process[96];
    cs->app = c->app;
    cs->job = c;
    cs->g = &consume_groups[c->index];
    process_name(process, sizeof process);
    snprintf(cs->name, sizeof cs->name, "%s-%s-%d", process, cs->g->name, c->index + 1);
    int claim_idle_ms = c->app->cfg->claim_idle_ms;
    cs->claim_every_ms = claim_idle_ms / 2 > 50 ? claim_idle_ms / 2 : 50;
    cs->read_own = true;
    snprintf(cs->own_cursor, sizeof cs->own_cursor, "0");
    snprintf(cs->claim_cursor, sizeof cs->claim_cursor, "0-0");
    log_info("events: consumer %s of %s started", cs->name, STREAM_NAME);
}

/* Leaves the group when nothing is pending. */
static void consumer_finish(struct job_ctx *c)
{
    struct consumer *cs = c->state;
    stream_leave(cs->g->name, cs->name);
}

const struct job consumers_job = {
    .name = "stream consumer",
    .needs = JOB_STORE | JOB_CACHE,
    .state_size = sizeof(struct consumer),
    .instances = consumer_instances,
    .open = consumer_open,
    .tick = consumer_tick,
    .finish = consumer_finish,
};
