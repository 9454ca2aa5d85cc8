/* events_mysql.c - the events' side of the store on MariaDB/MySQL: the
 * outbox relay transaction, the consumers' effect-plus-dedup transactions,
 * dead letters and points. Prepared statements only, named by the static
 * SQL text below. */
#include "store_events.h"

#include "db.h"
#include "err.h"
#include "event_payload.h"
#include "faults.h"
#include "log.h"
#include "store_mysql.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Oldest first; SKIP LOCKED lets several relays work side by side, each on
 * rows the others have not locked, instead of queueing behind them. */
static const char sql_outbox_claim[] =
    "SELECT id, event_type, biz_key, payload FROM outbox WHERE published_at IS NULL "
    "ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED";

static const char sql_outbox_mark[] =
    "UPDATE outbox SET published_at = ?, stream_id = ? WHERE id = ?";

/* A group has recorded a row when it holds the dedup row of the row's
 * business key, or gave up on it (an open dead letter). A re-driven letter
 * no longer counts by itself: its re-drive committed the dedup row in the
 * same transaction, and that row is what says the key is handled. */
#define RECORDED_BY(group)                                                                         \
    "(EXISTS (SELECT 1 FROM consume_records c WHERE c.consumer = '" group "' "                     \
    "AND c.biz_key = CONCAT('" group ":', o.biz_key)) "                                            \
    "OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.consumer = '" group "' "                      \
    "AND d.biz_key = CONCAT('" group ":', o.biz_key) AND d.replayed_at IS NULL))"

/* Settled: every group that consumes the row's type has recorded it. The
 * groups of each type are those of consume.c. */
#define SETTLED                                                                                    \
    "CASE WHEN o.event_type = '" EVENT_ORDER_PAID                                                  \
    "' THEN " RECORDED_BY(EVENTS_GROUP_POINTS) " AND " RECORDED_BY(                                \
        EVENTS_GROUP_TICKETING) " ELSE o.published_at IS NOT NULL END"

static const char sql_outbox_scan[] =
    "SELECT o.id, o.published_at IS NOT NULL, COALESCE(o.stream_id, ''), " SETTLED ", "
    "o.created_at < NOW(3) - INTERVAL ? SECOND, "
    "COALESCE(o.published_at < NOW(3) - INTERVAL ? SECOND, 0) "
    "FROM outbox o WHERE o.id >= ? ORDER BY o.id LIMIT ?";

static const char sql_outbox_requeue[] =
    "UPDATE outbox SET published_at = NULL, stream_id = NULL WHERE id = ? AND stream_id = ?";

static const char sql_outbox_stats[] =
    "SELECT (SELECT COUNT(*) FROM outbox WHERE published_at IS NULL), "
    "(SELECT COALESCE(MAX(id), 0) FROM outbox)";

static const char sql_consume_record[] =
    "INSERT INTO consume_records (consumer, biz_key) VALUES (?, ?)";

static const char sql_points_add[] =
    "INSERT INTO user_points (user_id, points, updated_at) VALUES (?, ?, ?) "
    "ON DUPLICATE KEY UPDATE points = points + VALUES(points), updated_at = VALUES(updated_at)";

static const char sql_points_ledger[] =
    "INSERT INTO points_ledger (order_no, user_id, points, created_at) VALUES (?, ?, ?, ?)";

static const char sql_points_get[] = "SELECT points FROM user_points WHERE user_id = ?";

static const char sql_order_lock[] =
    "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ? FOR UPDATE";

/* The unlocked read of the naive transition (store_naive.h), which the
 * state-cas lesson runs in its place. */
static const char sql_order_read[] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ?";

static const char sql_dead_letter[] =
    "INSERT INTO dead_letters (consumer, biz_key, outbox_id, stream_id, deliveries, reason) "
    "VALUES (?, ?, ?, ?, ?, ?)";

/* The consumer check keeps a re-drive from stamping another group's letter. */
static const char sql_letter_lock[] =
    "SELECT replayed_at IS NOT NULL FROM dead_letters WHERE id = ? AND consumer = ? FOR UPDATE";

static const char sql_letter_mark[] =
    "UPDATE dead_letters SET replayed_at = ?, replay_result = ? WHERE id = ?";

#define LETTER_COLS                                                                                \
    "id, consumer, biz_key, outbox_id, deliveries, reason, "                                       \
    "DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%sZ'), "                                              \
    "COALESCE(DATE_FORMAT(replayed_at, '%Y-%m-%dT%H:%i:%sZ'), ''), COALESCE(replay_result, '')"

static const char sql_letters_open[] = "SELECT " LETTER_COLS " FROM dead_letters "
                                       "WHERE replayed_at IS NULL AND id > ? "
                                       "AND (? = '' OR consumer = ?) ORDER BY id LIMIT ?";

static const char sql_letter_get[] = "SELECT " LETTER_COLS " FROM dead_letters WHERE id = ?";

static const char sql_outbox_get[] =
    "SELECT id, event_type, biz_key, payload FROM outbox WHERE id = ?";

struct mark {
    int64_t id;
    char stream_id[STREAM_ID_MAX + 1];
};

struct relay_ctx {
    struct outbox_event *ev;
    outbox_publish_fn publish;
    void *ctx;
    struct mark *marks;
    int n;
    int publish_rc;
};

/* Called with each locked row read into ev: publish it at once, so the
 * rows need not be kept, and remember what to mark. */
static int relay_each(void *p)
{
    struct relay_ctx *r = p;
    int rc = r->publish(r->ev, r->marks[r->n].stream_id, r->ctx);
    if (rc != TD_OK) {
        r->publish_rc = rc;
        return 1; /* stops db_rows */
    }
    r->marks[r->n].id = r->ev->id;
    r->n++;
    return 0;
}

/* The entries are in the stream, the rows not yet marked: a crash here
 * must cost a duplicate entry, never a lost event. */
static int mark_published(struct db_conn *c, const struct relay_ctx *r)
{
    char db_now[32], api_now[TIME_LEN + 1];
    if (r->n > 0 && FAULT_POINT("relay.after_xadd"))
        return TD_EINTERNAL;
    store_now(db_now, api_now);
    for (int i = 0; i < r->n; i++) {
        struct db_arg mark[] = {DB_S(db_now), DB_S(r->marks[i].stream_id), DB_I(r->marks[i].id)};
        int rc = db_exec(c, sql_outbox_mark, mark, 3, NULL, NULL);
        if (rc != TD_OK)
            return rc;
    }
    return TD_OK;
}

static int relay_in_tx(struct db_conn *c, struct relay_ctx *r, int limit)
{
    struct outbox_event *ev = r->ev;
    struct db_arg args[] = {DB_I(limit)};
    struct db_col cols[] = {DB_COL_I(&ev->id), DB_COL_S(ev->event_type), DB_COL_S(ev->biz_key),
                            DB_COL_S(ev->payload)};
    int rc = db_rows(c, sql_outbox_claim, args, 1, cols, 4, relay_each, r);
    if (rc == 1 || rc == TD_ENOTFOUND)
        rc = TD_OK; /* publish stopped the batch, or there was nothing to do */
    return rc == TD_OK ? mark_published(c, r) : rc;
}

int store_outbox_relay(struct outbox_event *ev, int limit, outbox_publish_fn publish, void *ctx,
                       int *published)
{
    struct db_conn *c;
    struct relay_ctx r = {.ev = ev, .publish = publish, .ctx = ctx, .publish_rc = TD_OK};
    *published = 0;
    int rc = db_tx_begin(&c);
    if (rc != TD_OK)
        return rc;
    r.marks = xcalloc((size_t)limit, sizeof *r.marks);
    rc = db_tx_end(c, relay_in_tx(c, &r, limit));
    if (rc == TD_OK) {
        *published = r.n;
        rc = r.publish_rc;
    }
    free(r.marks);
    return rc;
}

struct scan_ctx {
    struct outbox_state st;
    int64_t published, settled, old, quiet;
    int (*each)(const struct outbox_state *st, void *ctx);
    void *ctx;
};

static int scan_each(void *p)
{
    struct scan_ctx *s = p;
    s->st.published = s->published != 0;
    s->st.settled = s->settled != 0;
    s->st.old = s->old != 0;
    s->st.quiet = s->quiet != 0;
    return s->each(&s->st, s->ctx);
}

int store_outbox_scan(int64_t from_id, int limit, int min_age_s, int quiet_s,
                      int (*each)(const struct outbox_state *st, void *ctx), void *ctx)
{
    struct db_conn *c;
    struct scan_ctx s = {.each = each, .ctx = ctx};
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_I(min_age_s), DB_I(quiet_s), DB_I(from_id), DB_I(limit)};
    struct db_col cols[] = {DB_COL_I(&s.st.id),   DB_COL_I(&s.published), DB_COL_S(s.st.stream_id),
                            DB_COL_I(&s.settled), DB_COL_I(&s.old),       DB_COL_I(&s.quiet)};
    rc = db_rows(c, sql_outbox_scan, args, 4, cols, 6, scan_each, &s);
    return rc == TD_ENOTFOUND ? TD_OK : rc;
}

int store_outbox_requeue(int64_t id, const char *stream_id, bool *requeued)
{
    struct db_conn *c;
    uint64_t affected = 0;
    *requeued = false;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_I(id), DB_S(stream_id)};
    rc = db_exec(c, sql_outbox_requeue, args, 2, &affected, NULL);
    if (rc == TD_OK)
        *requeued = affected == 1;
    return rc;
}

int store_outbox_stats(int64_t *unpublished, int64_t *max_id)
{
    *unpublished = 0;
    *max_id = 0;
    struct db_col cols[] = {DB_COL_I(unpublished), DB_COL_I(max_id)};
    return db_read_row(sql_outbox_stats, NULL, 0, cols, 2);
}

/* Inserts the dedup row first: a duplicate stops at the primary key before
 * the effect touches anything, and two deliveries of one event racing each
 * other queue on that key's lock, so the second sees 1062. */
static int record_consumed(struct db_conn *c, const char *consumer, const char *dedup_key)
{
    if (dedup_key == NULL)
        return TD_OK;
    struct db_arg args[] = {DB_S(consumer), DB_S(dedup_key)};
    return db_exec(c, sql_consume_record, args, 2, NULL, NULL);
}

/* A re-drive's first step: lock the dead letter. TD_EDUP when it was
 * re-driven already, TD_EINVAL when there is no such letter of consumer. */
static int letter_lock(struct db_conn *c, const char *consumer, int64_t id)
{
    int64_t replayed = 0;
    struct db_arg args[] = {DB_I(id), DB_S(consumer)};
    struct db_col cols[] = {DB_COL_I(&replayed)};
    int rc = db_row(c, sql_letter_lock, args, 2, cols, 1);
    if (rc == TD_ENOTFOUND)
        return TD_EINVAL;
    if (rc == TD_OK && replayed)
        return TD_EDUP;
    return rc;
}

static int letter_mark(struct db_conn *c, int64_t id, const char *result)
{
    char db_now[32], api_now[TIME_LEN + 1];
    store_now(db_now, api_now);
    struct db_arg args[] = {DB_S(db_now), DB_S(result), DB_I(id)};
    return db_exec(c, sql_letter_mark, args, 3, NULL, NULL);
}

/* The consumer transaction's statements: [lock the dead letter,] the
 * dedup row, the effect, [stamp the letter]. *dup: the effect found
 * nothing to change, and what was written is to be committed. */
static int consume_in_tx(struct db_conn *c, const char *consumer, const char *dedup_key,
                         int64_t redrive_id, store_effect_fn effect, const void *ctx, bool *dup)
{
    int rc = redrive_id != 0 ? letter_lock(c, consumer, redrive_id) : TD_OK;
    if (rc != TD_OK)
        return rc;
    rc = record_consumed(c, consumer, dedup_key);
    /* The test build can fail the effect after the dedup row, as a crash,
     * a timeout or a constraint would (TICKETD_FAULT=consumer.effect:fail). */
    if (rc == TD_OK && FAULT_POINT("consumer.effect"))
        rc = TD_EINTERNAL;
    if (rc == TD_OK)
        rc = effect(c, ctx);
    else if (rc == TD_EDUP && redrive_id == 0)
        return rc; /* applied before: nothing to write */
    if (rc == TD_EDUP) {
        *dup = true;
        rc = TD_OK;
    }
    if (rc == TD_OK && redrive_id != 0)
        rc = letter_mark(c, redrive_id, *dup ? "already applied" : "applied");
    return rc;
}

/* One consumer transaction (store_events.h): the real consume step
 * (store_mysql.h), the dedup row and the effect committed together. */
static int store_events_consume(const char *consumer, const char *dedup_key, int64_t redrive_id,
                                store_effect_fn effect, const void *ctx)
{
    struct db_conn *c;
    bool dup = false;
    if (redrive_id != 0 && dedup_key == NULL)
        return TD_EINVAL;
    int rc = db_tx_begin(&c);
    if (rc != TD_OK)
        return rc;
    rc = db_tx_end(c, consume_in_tx(c, consumer, dedup_key, redrive_id, effect, ctx, &dup));
    return rc == TD_OK && dup ? TD_EDUP : rc;
}

struct points_credit {
    const char *order_no;
    int64_t user_id;
    int64_t points;
};

/* The ledger row is the business key that outlives the dedup row (the
 * real points_ledger step, store_mysql.h). */
static int store_events_points_ledger(struct db_conn *c, const char *order_no, int64_t user_id,
                                      int64_t points, const char *db_now)
{
    struct db_arg row[] = {DB_S(order_no), DB_I(user_id), DB_I(points), DB_S(db_now)};
    return db_exec(c, sql_points_ledger, row, 4, NULL, NULL);
}

const struct store_events_steps store_events_steps = {
    .consume = store_events_consume,
    .points_ledger = store_events_points_ledger,
};

/* Set once at boot, before any job consumes; read only after. */
static const struct store_events_steps *steps = &store_events_steps;

void store_events_use(const struct store_events_steps *s)
{
    steps = s;
}

int store_tx_consume(const char *consumer, const char *dedup_key, int64_t redrive_id,
                     store_effect_fn effect, const void *ctx)
{
    return steps->consume(consumer, dedup_key, redrive_id, effect, ctx);
}

int store_tx_points_ledger(struct db_conn *c, const char *order_no, int64_t user_id, int64_t points,
                           const char *db_now)
{
    return steps->points_ledger(c, order_no, user_id, points, db_now);
}

static int points_effect(struct db_conn *c, const void *ctx)
{
    const struct points_credit *pc = ctx;
    char db_now[32], api_now[TIME_LEN + 1];
    store_now(db_now, api_now);
    int rc = store_tx_points_ledger(c, pc->order_no, pc->user_id, pc->points, db_now);
    if (rc != TD_OK)
        return rc; /* TD_EDUP: credited before; the dedup row is still committed */
    struct db_arg add[] = {DB_I(pc->user_id), DB_I(pc->points), DB_S(db_now)};
    return db_exec(c, sql_points_add, add, 3, NULL, NULL);
}

int store_points_credit(const char *dedup_key, const char *order_no, int64_t user_id,
                        int64_t points, int64_t redrive_id)
{
    struct points_credit pc = {order_no, user_id, points};
    return store_tx_consume(EVENTS_GROUP_POINTS, dedup_key, redrive_id, points_effect, &pc);
}

static int ticket_effect(struct db_conn *c, const void *ctx)
{
    struct order o;
    struct db_arg args[] = {DB_S((const char *)ctx)};
    int rc = store_tx_read_for_move(c, sql_order_lock, sql_order_read, args, 1, &o);
    if (rc != TD_OK)
        return rc;
    /* Ticketed before this key was recorded (the dedup row was skipped, or
     * committed apart from the effect): already a no-op. */
    if (o.status == ORDER_TICKETED || o.status == ORDER_COMPLETED)
        return TD_EDUP;
    return store_tx_move(c, &o, EVENT_TICKET);
}

int store_ticket_issue(const char *dedup_key, const char *order_no, int64_t redrive_id)
{
    return store_tx_consume(EVENTS_GROUP_TICKETING, dedup_key, redrive_id, ticket_effect, order_no);
}

int store_dead_letter(const char *consumer, const char *dedup_key, int64_t outbox_id,
                      const char *stream_id, int64_t deliveries, const char *reason)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_S(consumer),  DB_S(dedup_key),  DB_I(outbox_id),
                            DB_S(stream_id), DB_I(deliveries), DB_S(reason)};
    return db_exec(c, sql_dead_letter, args, 6, NULL, NULL);
}

int store_user_points(int64_t user_id, int64_t *points)
{
    *points = 0;
    struct db_arg args[] = {DB_I(user_id)};
    struct db_col cols[] = {DB_COL_I(points)};
    int rc = db_read_row(sql_points_get, args, 1, cols, 1);
    return rc == TD_ENOTFOUND ? TD_OK : rc;
}

struct letters_ctx {
    struct dead_letter dl;
    int (*each)(const struct dead_letter *dl, void *ctx);
    void *ctx;
};

static int letters_each(void *p)
{
    struct letters_ctx *l = p;
    return l->each(&l->dl, l->ctx);
}

#define LETTER_DB_COLS(d)                                                                          \
    {                                                                                              \
        DB_COL_I(&(d)->id), DB_COL_S((d)->consumer), DB_COL_S((d)->biz_key),                       \
            DB_COL_I(&(d)->outbox_id), DB_COL_I(&(d)->deliveries), DB_COL_S((d)->reason),          \
            DB_COL_S((d)->created_at), DB_COL_S((d)->replayed_at), DB_COL_S((d)->replay_result)    \
    }

int store_dead_letters_open(const char *consumer, int64_t after_id, int limit,
                            int (*each)(const struct dead_letter *dl, void *ctx), void *ctx)
{
    struct db_conn *c;
    struct letters_ctx l = {.each = each, .ctx = ctx};
    const char *who = consumer != NULL ? consumer : "";
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_I(after_id), DB_S(who), DB_S(who), DB_I(limit)};
    struct db_col cols[] = LETTER_DB_COLS(&l.dl);
    rc = db_rows(c, sql_letters_open, args, 4, cols, 9, letters_each, &l);
    return rc == TD_ENOTFOUND ? TD_OK : rc;
}

int store_dead_letter_get(int64_t id, struct dead_letter *out)
{
    memset(out, 0, sizeof *out);
    struct db_arg args[] = {DB_I(id)};
    struct db_col cols[] = LETTER_DB_COLS(out);
    return db_read_row(sql_letter_get, args, 1, cols, 9);
}

int store_outbox_get(int64_t id, struct outbox_event *out)
{
    memset(out, 0, sizeof *out);
    struct db_arg args[] = {DB_I(id)};
    struct db_col cols[] = {DB_COL_I(&out->id), DB_COL_S(out->event_type), DB_COL_S(out->biz_key),
                            DB_COL_S(out->payload)};
    return db_read_row(sql_outbox_get, args, 1, cols, 4);
}
