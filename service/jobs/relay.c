/* relay.c - the outbox relay (relay.h). */
#include "relay.h"

#include "app.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "stream.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define RELAY_IDLE_MS     50   /* poll interval when the outbox is empty */
#define BACKOFF_MS        500  /* after the stream or the database failed */
#define HOUSEKEEPING_MS   1000 /* gauges and the redrive check */
#define REDRIVE_SCAN_ROWS 500  /* outbox rows per scan query */
#define REDRIVE_SCANS     4    /* scan queries per redrive check */
/* The mark below which every row is settled moves only over rows this
 * old: a transaction may commit a lower outbox id after a higher one, and
 * a row the check never saw must not end up below the mark. */
#define REDRIVE_MIN_AGE_S 30
/* A row published this recently is not checked yet: its consumers are
 * most likely at it, and asking the stream about every event in flight
 * would only add round trips. */
#define REDRIVE_QUIET_S 2

static int publish(const struct outbox_event *ev, char *stream_id, void *ctx)
{
    (void)ctx;
    return stream_append(ev, stream_id);
}

int relay_publish(struct outbox_event *scratch, int batch, int *published)
{
    int rc = store_outbox_relay(scratch, batch, publish, NULL, published);
    if (*published > 0)
        metrics_add(M_EVENTS_PUBLISHED, *published);
    return rc;
}

/* ---- the redrive check ---- */

struct lost {
    int64_t id;
    char stream_id[STREAM_ID_MAX + 1];
};

struct scan {
    struct redrive_mark *m;
    bool prefix; /* every row so far was settled (and old) */
    int rows;
    int64_t last_id;
    struct lost *cand; /* published, unsettled: is the entry still there? */
    int ncand;
};

static int scan_row(const struct outbox_state *st, void *p)
{
    struct scan *sc = p;
    sc->rows++;
    sc->last_id = st->id;
    if (sc->prefix && st->settled && st->old) {
        sc->m->settled_below = st->id + 1;
        return 0;
    }
    sc->prefix = false;
    if (st->published && st->quiet && !st->settled && st->stream_id[0] != '\0') {
        sc->cand[sc->ncand].id = st->id;
        memcpy(sc->cand[sc->ncand].stream_id, st->stream_id, sizeof sc->cand[0].stream_id);
        sc->ncand++;
    }
    return 0;
}

/* Queues again the candidates whose entry the stream no longer holds.
 * Returns how many, or a negative error. */
static int requeue_lost(const struct scan *sc)
{
    int requeued = 0;
    for (int i = 0; i < sc->ncand; i++) {
        bool exists, again;
        int rc = stream_has(sc->cand[i].stream_id, &exists);
        if (rc == TD_OK && !exists)
            rc = store_outbox_requeue(sc->cand[i].id, sc->cand[i].stream_id, &again);
        if (rc != TD_OK)
            return rc;
        if (!exists && again)
            requeued++;
    }
    return requeued;
}

int relay_redrive(struct redrive_mark *m, int64_t max_id)
{
    if (max_id + 1 < m->settled_below) {
        /* The outbox was emptied (tests, or a purge with a reset counter). */
        m->settled_below = 0;
        m->scan_from = 0;
    }
    int64_t from = m->scan_from > m->settled_below ? m->scan_from : m->settled_below;
    struct scan sc = {.m = m, .prefix = from == m->settled_below};
    int requeued = 0;
    sc.cand = xcalloc(REDRIVE_SCAN_ROWS, sizeof *sc.cand);
    for (int i = 0; i < REDRIVE_SCANS; i++) {
        sc.rows = 0;
        sc.ncand = 0;
        int rc = store_outbox_scan(from, REDRIVE_SCAN_ROWS, REDRIVE_MIN_AGE_S, REDRIVE_QUIET_S,
                                   scan_row, &sc);
        if (rc == TD_OK)
            rc = requeue_lost(&sc);
        if (rc < 0)
            break; /* try again next time, from the same place */
        requeued += rc;
        if (sc.rows < REDRIVE_SCAN_ROWS) {
            from = m->settled_below; /* reached the end: start over next time */
            break;
        }
        from = sc.last_id + 1;
    }
    m->scan_from = from;
    free(sc.cand);
    return requeued;
}

/* ---- the job ---- */

struct relay {
    struct outbox_event ev; /* the row buffer */
    struct redrive_mark mark;
    int64_t next_housekeeping_ms;
};

static void housekeeping(struct relay *rl)
{
    int64_t unpublished, max_id, lag;
    if (store_outbox_stats(&unpublished, &max_id) != TD_OK)
        return;
    metrics_set(M_OUTBOX_BACKLOG, unpublished);
    if (stream_lag(&lag) == TD_OK)
        metrics_set(M_STREAM_LAG, lag);
    int requeued = relay_redrive(&rl->mark, max_id);
    if (requeued > 0)
        log_warn("events: %d published events were missing from %s and are queued again", requeued,
                 STREAM_NAME);
}

static int relay_tick(struct job_ctx *c)
{
    struct relay *rl = c->state;
    int batch = c->app->cfg->relay_batch, published = 0;
    int rc = relay_publish(&rl->ev, batch, &published);
    if (mono_ms() >= rl->next_housekeeping_ms) {
        housekeeping(rl);
        rl->next_housekeeping_ms = mono_ms() + HOUSEKEEPING_MS;
    }
    if (rc != TD_OK)
        return BACKOFF_MS; /* rows wait in the outbox */
    return published < batch ? RELAY_IDLE_MS : 0;
}

static void relay_open(struct job_ctx *c)
{
    (void)c;
    log_info("events: relay to %s started", STREAM_NAME);
}

const struct job relay_job = {
    .name = "outbox relay",
    .needs = JOB_STORE | JOB_CACHE,
    .state_size = sizeof(struct relay),
    .open = relay_open,
    .tick = relay_tick,
};
