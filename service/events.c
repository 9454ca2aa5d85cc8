/* events.c - the outbox relay and the stream consumers (events.h).
 *
 * The relay thread moves outbox rows to the Redis stream ticketd:events
 * (XADD, then the row is marked published, in the transaction that locked
 * it), and checks now and then that every published row whose consumers
 * have not recorded it still has its entry in the stream: Redis may lose
 * entries (restarted without persistence, flushed, trimmed), the database
 * never does, so such rows are queued again.
 *
 * One consumer thread per group (points, ticketing) reads with XREADGROUP,
 * applies its effect and its dedup row in one transaction (consume.h, the
 * code a dead letter's re-drive runs too), then XACKs.
 * Delivery is at least once; the dedup row, keyed by the business key
 * ("points:<order_no>"), makes the effect happen once. Entries another
 * consumer left pending too long are taken over with XAUTOCLAIM; entries
 * delivered more than max_deliveries times, or that cannot apply, go to
 * ticketd:events:dead and dead_letters, from where `ticketd dead-letters
 * replay` re-drives them (deadletters.h).
 *
 * A crash anywhere costs a redelivery, never a lost or doubled effect:
 *   after XADD, before the mark     the row is published again (duplicate entry)
 *   before the effect's commit      the entry stays pending and is reclaimed
 *   after the commit, before XACK   the redelivery finds the dedup row (1062)
 */
#include "events.h"

#include "app.h"
#include "cache.h"
#include "config.h"
#include "consume.h"
#include "defenses.h"
#include "err.h"
#include "event_payload.h"
#include "faults.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "store.h"
#include "store_events.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STREAM      "ticketd:events"
#define DEAD_STREAM "ticketd:events:dead"
/* Approximate trimming keeps Redis's memory bounded. An entry trimmed
 * before every group has recorded it is noticed by the redrive check and
 * published again, so trimming can delay an event but not lose it. */
#define STREAM_MAXLEN "100000"

#define RELAY_IDLE_MS     50   /* poll interval when the outbox is empty */
#define BACKOFF_MS        500  /* after Redis or the database failed */
#define HOUSEKEEPING_MS   1000 /* gauges and the redrive check */
#define CONSUMER_COUNT    32   /* entries per XREADGROUP / XAUTOCLAIM */
#define CLAIM_ROUNDS      8    /* XAUTOCLAIM calls per claim cycle, at most */
#define REDRIVE_SCAN_ROWS 500  /* outbox rows per scan query */
#define REDRIVE_SCANS     4    /* scan queries per redrive check */
/* The redrive check remembers the id below which every row is settled, to
 * start there next time. It moves only over rows this old: a transaction
 * may commit a lower outbox id after a higher one, and a row the check
 * never saw must not end up below the mark. */
#define REDRIVE_MIN_AGE_S 30
/* A row published this recently is not checked yet: its consumers are
 * most likely at it, and asking Redis about every event in flight would
 * only add round trips. */
#define REDRIVE_QUIET_S 2

struct relay;
struct consumer;

struct events {
    struct app *app;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled by events_stop, on the monotonic clock */
    bool stop;
    struct relay *relay;
    struct consumer *consumers; /* one per group */
    pthread_t threads[8];
    int nthreads;
};

/* ---- stopping and sleeping ---- */

static bool stopping(struct events *e)
{
    pthread_mutex_lock(&e->mu);
    bool s = e->stop;
    pthread_mutex_unlock(&e->mu);
    return s;
}

/* Sleeps ms, or less when events_stop is called meanwhile. */
static void nap(struct events *e, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->mu);
    while (!e->stop && pthread_cond_timedwait(&e->cv, &e->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&e->mu);
}

/* ---- Redis replies ---- */

static const redisReply *elem(const redisReply *r, size_t i)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return NULL;
    return r->element[i];
}

static bool is_str(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/* One stream entry, borrowed from its reply. */
struct entry {
    const char *id;
    bool deleted; /* still pending, but its data was trimmed away */
    const char *outbox_id;
    const char *event_type;
    const char *biz_key;
    const char *payload;
    size_t payload_len;
};

static bool entry_parse(const redisReply *r, struct entry *en)
{
    memset(en, 0, sizeof *en);
    const redisReply *id = elem(r, 0), *fields = elem(r, 1);
    if (!is_str(id))
        return false;
    en->id = id->str;
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY) {
        en->deleted = true;
        return true;
    }
    for (size_t i = 0; i + 1 < fields->elements; i += 2) {
        const redisReply *k = fields->element[i], *v = fields->element[i + 1];
        if (!is_str(k) || !is_str(v))
            continue;
        if (strcmp(k->str, "outbox_id") == 0) {
            en->outbox_id = v->str;
        } else if (strcmp(k->str, "event_type") == 0) {
            en->event_type = v->str;
        } else if (strcmp(k->str, "biz_key") == 0) {
            en->biz_key = v->str;
        } else if (strcmp(k->str, "payload") == 0) {
            en->payload = v->str;
            en->payload_len = v->len;
        }
    }
    return true;
}

/* ---- the relay ---- */

struct relay {
    struct events *e;
    struct outbox_event *ev; /* scratch row, large */
    int64_t settled_below;   /* every outbox row with a lower id is settled */
    int64_t scan_from;       /* where the next redrive scan starts */
    int64_t next_housekeeping_ms;
};

static int publish_xadd(const struct outbox_event *ev, char *stream_id, void *ctx)
{
    char id[24];
    redisReply *r = NULL;
    (void)ctx;
    snprintf(id, sizeof id, "%lld", (long long)ev->id);
    const char *argv[] = {"XADD",    STREAM,      "MAXLEN",  "~",          STREAM_MAXLEN,
                          "*",       "outbox_id", id,        "event_type", ev->event_type,
                          "biz_key", ev->biz_key, "payload", ev->payload};
    int rc = redis_command(14, argv, NULL, &r);
    if (rc == TD_OK) {
        if (is_str(r) && r->len <= STREAM_ID_MAX) {
            memcpy(stream_id, r->str, r->len + 1);
        } else {
            log_error("events: XADD answered something that is not an entry id");
            rc = TD_EINTERNAL;
        }
    }
    freeReplyObject(r);
    return rc;
}

/* Does the stream still hold this entry? */
static int entry_exists(const char *id, bool *exists)
{
    redisReply *r = NULL;
    *exists = false;
    const char *argv[] = {"XRANGE", STREAM, id, id, "COUNT", "1"};
    int rc = redis_command(6, argv, NULL, &r);
    if (rc == TD_OK)
        *exists = r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    freeReplyObject(r);
    return rc;
}

struct lost {
    int64_t id;
    char stream_id[STREAM_ID_MAX + 1];
};

struct redrive {
    struct relay *rl;
    bool prefix; /* every row so far was settled (and old) */
    int rows;
    int64_t last_id;
    struct lost *cand; /* published, unsettled: is the entry still there? */
    int ncand;
};

static int redrive_each(const struct outbox_state *st, void *p)
{
    struct redrive *rd = p;
    rd->rows++;
    rd->last_id = st->id;
    if (rd->prefix && st->settled && st->old) {
        rd->rl->settled_below = st->id + 1;
        return 0;
    }
    rd->prefix = false;
    if (st->published && st->quiet && !st->settled && st->stream_id[0] != '\0') {
        rd->cand[rd->ncand].id = st->id;
        memcpy(rd->cand[rd->ncand].stream_id, st->stream_id, sizeof rd->cand[0].stream_id);
        rd->ncand++;
    }
    return 0;
}

/* Queues again the candidates whose entry the stream no longer holds.
 * Returns how many, or a negative error. */
static int redrive_lost(const struct redrive *rd)
{
    int requeued = 0;
    for (int i = 0; i < rd->ncand; i++) {
        bool exists, again;
        int rc = entry_exists(rd->cand[i].stream_id, &exists);
        if (rc == TD_OK && !exists)
            rc = store_outbox_requeue(rd->cand[i].id, rd->cand[i].stream_id, &again);
        if (rc != TD_OK)
            return rc;
        if (!exists && again)
            requeued++;
    }
    return requeued;
}

/* Finds published rows that some group has not recorded and whose stream
 * entry is gone, and queues them again. Scans a bounded number of rows
 * per call, resuming where it stopped, so a long backlog costs each call
 * the same. */
static void redrive_check(struct relay *rl, int64_t max_id)
{
    if (max_id + 1 < rl->settled_below) {
        /* The outbox was emptied (tests, or a purge with a reset counter). */
        rl->settled_below = 0;
        rl->scan_from = 0;
    }
    int64_t from = rl->scan_from > rl->settled_below ? rl->scan_from : rl->settled_below;
    struct redrive rd = {.rl = rl, .prefix = from == rl->settled_below};
    int requeued = 0;
    rd.cand = xcalloc(REDRIVE_SCAN_ROWS, sizeof *rd.cand);
    for (int i = 0; i < REDRIVE_SCANS; i++) {
        rd.rows = 0;
        rd.ncand = 0;
        int rc = store_outbox_scan(from, REDRIVE_SCAN_ROWS, REDRIVE_MIN_AGE_S, REDRIVE_QUIET_S,
                                   redrive_each, &rd);
        if (rc == TD_OK)
            rc = redrive_lost(&rd);
        if (rc < 0)
            break; /* try again next time, from the same place */
        requeued += rc;
        if (rd.rows < REDRIVE_SCAN_ROWS) {
            from = rl->settled_below; /* reached the end: start over next time */
            break;
        }
        from = rd.last_id + 1;
    }
    rl->scan_from = from;
    free(rd.cand);
    if (requeued > 0)
        log_warn("events: %d published events were missing from %s and are queued again", requeued,
                 STREAM);
}

/* The entries no group has acknowledged yet: pending plus not yet read,
 * for the slowest group. */
static void stream_gauge(void)
{
    redisReply *r = NULL;
    /* XINFO on a stream that does not exist yet (a fresh or flushed Redis)
     * is an error reply; look before asking. */
    const char *exists[] = {"EXISTS", STREAM};
    if (redis_command(2, exists, NULL, &r) != TD_OK)
        return;
    bool present = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    r = NULL;
    if (!present) {
        metrics_set(M_STREAM_LAG, 0);
        return;
    }
    const char *argv[] = {"XINFO", "GROUPS", STREAM};
    if (redis_command(3, argv, NULL, &r) != TD_OK)
        return;
    long long worst = 0;
    for (size_t g = 0; r->type == REDIS_REPLY_ARRAY && g < r->elements; g++) {
        const redisReply *kv = r->element[g];
        long long sum = 0;
        for (size_t i = 0; kv->type == REDIS_REPLY_ARRAY && i + 1 < kv->elements; i += 2) {
            const redisReply *k = kv->element[i], *v = kv->element[i + 1];
            if (is_str(k) && v->type == REDIS_REPLY_INTEGER &&
                (strcmp(k->str, "pending") == 0 || strcmp(k->str, "lag") == 0))
                sum += v->integer;
        }
        if (sum > worst)
            worst = sum;
    }
    metrics_set(M_STREAM_LAG, worst);
    freeReplyObject(r);
}

static void relay_housekeeping(struct relay *rl)
{
    int64_t unpublished, max_id;
    if (store_outbox_stats(&unpublished, &max_id) != TD_OK)
        return;
    metrics_set(M_OUTBOX_BACKLOG, unpublished);
    stream_gauge();
    redrive_check(rl, max_id);
}

static void *relay_main(void *arg)
{
    struct relay *rl = arg;
    struct events *e = rl->e;
    const struct config *cfg = e->app->cfg;
    rl->ev = xmalloc(sizeof *rl->ev);
    while (!stopping(e)) {
        int published = 0;
        int rc = store_outbox_relay(rl->ev, cfg->relay_batch, publish_xadd, NULL, &published);
        if (published > 0)
            metrics_add(M_EVENTS_PUBLISHED, published);
        if (mono_ms() >= rl->next_housekeeping_ms) {
            relay_housekeeping(rl);
            rl->next_housekeeping_ms = mono_ms() + HOUSEKEEPING_MS;
        }
        if (rc != TD_OK)
            nap(e, BACKOFF_MS); /* Redis or the database is away; rows wait in the outbox */
        else if (published < cfg->relay_batch)
            nap(e, RELAY_IDLE_MS);
    }
    free(rl->ev);
    store_thread_release();
    cache_thread_release();
    return NULL;
}

/* ---- the consumers ---- */

/* Creates the group at the start of the stream (and the stream), unless it
 * exists: one round trip, and no BUSYGROUP error to tell from real ones.
 * Starting at 0, not $, means a group re-created after Redis lost it reads
 * whatever the relay has added since. */
static struct redis_script group_create = {
    "local r = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')\n"
    "if type(r) == 'table' and r.err then\n"
    "  if string.find(r.err, 'BUSYGROUP', 1, true) == 1 then return 0 end\n"
    "  return r\n"
    "end\n"
    "return 1\n",
    ""};

struct consumer {
    struct events *e;
    const struct consume_group *g;
    char name[160]; /* host-pid-group-thread: unique per process and thread */
    bool group_ready;
    /* Own pending entries are read (id "0" onwards) before new ones: at
     * start, and after any failure, since what was read but not acked
     * before it is still ours. */
    bool read_own;
    char own_cursor[STREAM_ID_MAX + 1];
    char claim_cursor[STREAM_ID_MAX + 1];
    int64_t next_claim_ms;
};

enum outcome {
    ENTRY_DONE,   /* acknowledged */
    ENTRY_KEPT,   /* left pending: it will be claimed again later */
    ENTRY_UNAVAIL /* Redis or the database is away: stop and back off */
};

static int ensure_group(struct consumer *cs)
{
    redisReply *r = NULL;
    const char *keys[] = {STREAM};
    const char *args[] = {cs->g->name};
    int rc = redis_eval(&group_create, 1, keys, 1, args, &r);
    if (rc == TD_OK && r->type == REDIS_REPLY_INTEGER && r->integer == 1)
        log_info("events: created consumer group %s on %s", cs->g->name, STREAM);
    freeReplyObject(r);
    return rc;
}

static enum outcome ack(struct consumer *cs, const char *id)
{
    redisReply *r = NULL;
    const char *argv[] = {"XACK", STREAM, cs->g->name, id};
    int rc = redis_command(4, argv, NULL, &r);
    freeReplyObject(r);
    return rc == TD_OK ? ENTRY_DONE : ENTRY_UNAVAIL;
}

/* Gives up on an entry: records it (so the relay does not queue it again),
 * copies it to the dead-letter stream for an operator, and acks it. */
static enum outcome dead_letter(struct consumer *cs, const struct entry *en, int64_t deliveries,
                                const char *reason)
{
    char n[24];
    redisReply *r = NULL;
    enum outcome oc = ENTRY_UNAVAIL;
    int64_t outbox_id = 0;
    char *key = consume_dedup_key(cs->g, en->biz_key);
    if (en->outbox_id != NULL && !parse_i64(en->outbox_id, 0, INT64_MAX, &outbox_id))
        outbox_id = 0;
    int rc = store_dead_letter(cs->g->name, key, outbox_id, en->id, deliveries, reason);
    if (rc != TD_OK) {
        oc = rc == TD_EUNAVAIL || rc == TD_ERETRY ? ENTRY_UNAVAIL : ENTRY_KEPT;
        goto out;
    }
    snprintf(n, sizeof n, "%lld", (long long)deliveries);
    const char *argv[24] = {"XADD",       DEAD_STREAM, "MAXLEN",    "~",        STREAM_MAXLEN,
                            "*",          "group",     cs->g->name, "entry_id", en->id,
                            "deliveries", n,           "reason",    reason};
    int argc = 14;
    if (en->outbox_id != NULL) {
        argv[argc++] = "outbox_id";
        argv[argc++] = en->outbox_id;
    }
    if (en->event_type != NULL) {
        argv[argc++] = "event_type";
        argv[argc++] = en->event_type;
    }
    if (en->biz_key != NULL) {
        argv[argc++] = "biz_key";
        argv[argc++] = en->biz_key;
    }
    if (en->payload != NULL) {
        argv[argc++] = "payload";
        argv[argc++] = en->payload;
    }
    if (redis_command(argc, argv, NULL, &r) != TD_OK)
        goto out;
    oc = ack(cs, en->id);
    if (oc == ENTRY_DONE) {
        metrics_inc(M_EVENTS_DEAD_LETTERED);
        log_warn("events: %s gave up on entry %s (%s) after %lld deliveries: %s", cs->g->name,
                 en->id, key, (long long)deliveries, reason);
    }
out:
    freeReplyObject(r);
    free(key);
    return oc;
}

/* Applies one entry and acks it. deliveries: how often Redis has handed it
 * out (for the dead letter; 0 when not known). */
static enum outcome consume(struct consumer *cs, const struct entry *en, int64_t deliveries)
{
    const struct config *cfg = cs->e->app->cfg;
    struct paid_event pe;
    const char *why;
    char *key = NULL;
    enum outcome oc = ENTRY_KEPT;
    int rc = TD_ERETRY;

    if (en->deleted) {
        /* Trimmed before we got to it: nothing to apply. The relay's
         * redrive check notices the row is unsettled and publishes it again. */
        oc = ack(cs, en->id);
        goto out;
    }
    if (en->event_type == NULL || strcmp(en->event_type, EVENT_ORDER_PAID) != 0) {
        oc = ack(cs, en->id); /* not an event this group acts on */
        goto out;
    }
    if (!event_paid_parse(en->biz_key, en->payload, en->payload_len, &pe, &why)) {
        oc = dead_letter(cs, en, deliveries, why); /* no redelivery can fix it */
        goto out;
    }
    if (FAULT_POINT("consumer.before_effect"))
        goto out;

    /* DEMO ONLY: with consumer-dedup-business-key switched off the dedup row
     * names the stream entry, not the order: a copy of the event under
     * another entry id (the relay republishing after a crash, a re-drive)
     * is a new entry, and its effect is applied again. */
    key = consume_dedup_key(
        cs->g, (cs->e->app->defenses & DEFENSE_CONSUMER_DEDUP_BUSINESS_KEY) ? en->biz_key : en->id);
    /* DEMO ONLY: with the consumer-dedup defence switched off the effect is
     * applied without its dedup row, so every redelivery applies it again. */
    const char *dedup = (cs->e->app->defenses & DEFENSE_CONSUMER_DEDUP) ? key : NULL;
    rc = consume_apply(cs->g, &pe, dedup, 0, cfg->tx_retries);
    switch (rc) {
    case TD_OK:
        metrics_inc(cs->g->consumed);
        break;
    case TD_EDUP:
        metrics_inc(cs->g->duplicate);
        log_debug("events: %s already applied %s (entry %s)", cs->g->name, key, en->id);
        break;
    case TD_ENOTFOUND:
    case TD_ECONFLICT:
        /* Left as it is, the order will not change by itself; an operator
         * fixes it and re-drives the letter (deadletters.c). */
        oc = dead_letter(cs, en, deliveries, consume_unfit_reason(rc));
        goto out;
    case TD_EUNAVAIL:
    case TD_ERETRY:
        oc = ENTRY_UNAVAIL;
        goto out;
    default:
        goto out; /* stays pending; claimed again, dead-lettered if it keeps failing */
    }

    /* Committed, not yet acked: a crash here is a redelivery that finds the
     * dedup row. */
    if (FAULT_POINT("consumer.after_effect"))
        goto out;
    oc = ack(cs, en->id);
out:
    free(key);
    return oc;
}

/* How many times the group has delivered entry id; 0 when it is no longer
 * pending (acked meanwhile). */
static int delivery_count(struct consumer *cs, const char *id, int64_t *count)
{
    redisReply *r = NULL;
    *count = 0;
    const char *argv[] = {"XPENDING", STREAM, cs->g->name, id, id, "1"};
    int rc = redis_command(6, argv, NULL, &r);
    const redisReply *n = elem(elem(r, 0), 3);
    if (rc == TD_OK && n != NULL && n->type == REDIS_REPLY_INTEGER)
        *count = n->integer;
    freeReplyObject(r);
    return rc;
}

/* Takes over entries pending longer than claim_idle_ms, from consumers
 * that died or hang, and from ourselves (an entry whose processing failed
 * waits here for its next try). */
static int claim_stale(struct consumer *cs)
{
    const struct config *cfg = cs->e->app->cfg;
    char idle[16], count[16];
    snprintf(idle, sizeof idle, "%d", cfg->claim_idle_ms);
    snprintf(count, sizeof count, "%d", CONSUMER_COUNT);
    for (int round = 0; round < CLAIM_ROUNDS && !stopping(cs->e); round++) {
        redisReply *r = NULL;
        const char *argv[] = {"XAUTOCLAIM", STREAM,           cs->g->name, cs->name,
                              idle,         cs->claim_cursor, "COUNT",     count};
        int rc = redis_command(8, argv, NULL, &r);
        if (rc != TD_OK)
            return rc;
        const redisReply *next = elem(r, 0), *entries = elem(r, 1);
        for (size_t i = 0; entries != NULL && i < entries->elements; i++) {
            struct entry en;
            int64_t n;
            if (!entry_parse(entries->element[i], &en))
                continue;
            metrics_inc(M_EVENTS_RECLAIMED);
            rc = delivery_count(cs, en.id, &n);
            if (rc != TD_OK)
                break;
            if (n == 0)
                continue;
            enum outcome oc;
            if (n > cfg->max_deliveries)
                oc = dead_letter(cs, &en, n, "too many deliveries");
            else
                oc = consume(cs, &en, n);
            if (oc == ENTRY_UNAVAIL) {
                rc = TD_EUNAVAIL;
                break;
            }
        }
        bool done = !is_str(next) || strcmp(next->str, "0-0") == 0 || next->len > STREAM_ID_MAX;
        snprintf(cs->claim_cursor, sizeof cs->claim_cursor, "%s", done ? "0-0" : next->str);
        freeReplyObject(r);
        if (rc != TD_OK)
            return rc;
        if (done)
            break;
    }
    return TD_OK;
}

/* One XREADGROUP: our own pending entries (no blocking), or new ones
 * (blocking up to consumer_block_ms, so events_stop is seen promptly). */
static int read_batch(struct consumer *cs)
{
    const struct config *cfg = cs->e->app->cfg;
    char count[16], block[16];
    redisReply *r = NULL;
    snprintf(count, sizeof count, "%d", CONSUMER_COUNT);
    snprintf(block, sizeof block, "%d", cfg->consumer_block_ms);
    int rc;
    if (cs->read_own) {
        const char *argv[] = {"XREADGROUP", "GROUP",   cs->g->name, cs->name,      "COUNT",
                              count,        "STREAMS", STREAM,      cs->own_cursor};
        rc = redis_command(9, argv, NULL, &r);
    } else {
        const char *argv[] = {"XREADGROUP", "GROUP", cs->g->name, cs->name, "COUNT", count,
                              "BLOCK",      block,   "STREAMS",   STREAM,   ">"};
        rc = redis_command_blocking(11, argv, NULL, cfg->consumer_block_ms, &r);
    }
    if (rc != TD_OK)
        goto out;
    /* [[stream, [entry, ...]]], or nil when BLOCK timed out. */
    const redisReply *entries = elem(elem(r, 0), 1);
    size_t n = entries != NULL ? entries->elements : 0;
    if (cs->read_own && n == 0)
        cs->read_own = false;
    for (size_t i = 0; i < n && !stopping(cs->e); i++) {
        struct entry en;
        if (!entry_parse(entries->element[i], &en))
            continue;
        if (cs->read_own && strlen(en.id) <= STREAM_ID_MAX)
            memcpy(cs->own_cursor, en.id, strlen(en.id) + 1);
        if (consume(cs, &en, cs->read_own ? 0 : 1) == ENTRY_UNAVAIL) {
            rc = TD_EUNAVAIL;
            break;
        }
    }
out:
    freeReplyObject(r);
    return rc;
}

static void consumer_failed(struct consumer *cs, int rc)
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
    nap(cs->e, BACKOFF_MS);
}

/* On a clean stop, a consumer with nothing pending leaves the group, so
 * restarts do not pile up names. One with pending entries stays: deleting
 * it would delete them from the group, and another consumer claims them. */
static void consumer_leave(struct consumer *cs)
{
    redisReply *r = NULL;
    const char *argv[] = {"XPENDING", STREAM, cs->g->name, "-", "+", "1", cs->name};
    if (redis_command(7, argv, NULL, &r) == TD_OK && r->type == REDIS_REPLY_ARRAY &&
        r->elements == 0) {
        redisReply *d = NULL;
        const char *del[] = {"XGROUP", "DELCONSUMER", STREAM, cs->g->name, cs->name};
        redis_command(5, del, NULL, &d);
        freeReplyObject(d);
    }
    freeReplyObject(r);
}

static void *consumer_main(void *arg)
{
    struct consumer *cs = arg;
    struct events *e = cs->e;
    const struct config *cfg = e->app->cfg;
    int64_t claim_every = cfg->claim_idle_ms / 2 > 50 ? cfg->claim_idle_ms / 2 : 50;
    cs->read_own = true;
    snprintf(cs->own_cursor, sizeof cs->own_cursor, "0");
    snprintf(cs->claim_cursor, sizeof cs->claim_cursor, "0-0");
    while (!stopping(e)) {
        int rc;
        if (cs->read_own && store_ping() != TD_OK) {
            /* Reading our pending entries again counts as a delivery each
             * time; while the database is away that would only use up
             * their tries. */
            nap(e, BACKOFF_MS);
            continue;
        }
        if (!cs->group_ready) {
            rc = ensure_group(cs);
            if (rc != TD_OK) {
                nap(e, BACKOFF_MS);
                continue;
            }
            cs->group_ready = true;
        }
        if (mono_ms() >= cs->next_claim_ms) {
            rc = claim_stale(cs);
            cs->next_claim_ms = mono_ms() + claim_every;
            if (rc != TD_OK) {
                consumer_failed(cs, rc);
                continue;
            }
        }
        rc = read_batch(cs);
        if (rc != TD_OK)
            consumer_failed(cs, rc);
    }
    consumer_leave(cs);
    store_thread_release();
    cache_thread_release();
    return NULL;
}

/* ---- start and stop ---- */

void events_stop(struct events *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->nthreads; i++)
        pthread_join(e->threads[i], NULL);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->relay);
    free(e->consumers);
    free(e);
}

static bool start_thread(struct events *e, void *(*fn)(void *), void *arg, const char *what)
{
    if (pthread_create(&e->threads[e->nthreads], NULL, fn, arg) != 0) {
        log_error("events: cannot start the %s thread", what);
        return false;
    }
    e->nthreads++;
    return true;
}

struct events *events_start(struct app *app)
{
    char host[64];
    pthread_condattr_t ca;
    struct events *e = xcalloc(1, sizeof *e);
    e->app = app;
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    redis_script_prepare(&group_create);
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';

    e->relay = xcalloc(1, sizeof *e->relay);
    e->relay->e = e;
    if (!start_thread(e, relay_main, e->relay, "outbox relay"))
        goto fail;
    e->consumers = xcalloc(CONSUME_GROUPS, sizeof *e->consumers);
    for (size_t i = 0; i < CONSUME_GROUPS; i++) {
        struct consumer *cs = &e->consumers[i];
        cs->e = e;
        cs->g = &consume_groups[i];
        snprintf(cs->name, sizeof cs->name, "%s-%d-%s-%zu", host, (int)getpid(), cs->g->name,
                 i + 1);
        if (!start_thread(e, consumer_main, cs, cs->g->name))
            goto fail;
    }
    log_info("events: relay to %s and consumers %s, %s started (%s-%d-*)", STREAM,
             consume_groups[0].name, consume_groups[1].name, host, (int)getpid());
    return e;
fail:
    events_stop(e);
    return NULL;
}
