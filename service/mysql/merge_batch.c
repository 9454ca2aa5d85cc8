/* merge_batch.c - the texts of a merged batch and the reading of their
 * answers (merge_batch.h). */
#include "merge_batch.h"

#include "err.h"
#include "text.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void arg(struct merge_plan *p, struct db_arg a)
{
    p->args[p->nargs++] = a;
}

/* A new text for the plan's next trip, with room for nargs arguments. */
static void begin_text(struct merge_plan *p, struct text *t, int nargs)
{
    free(p->sql);
    free(p->args);
    p->sql = NULL;
    p->args = xcalloc((size_t)nargs, sizeof *p->args);
    p->nargs = 0;
    *t = (struct text){xmalloc(1024), 0, 1024};
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The batch's distinct sessions, ascending: the order every batch locks
 * them in. */
static void plan_sessions(struct merge_plan *p)
{
    int64_t all[MERGE_MAX_LIMIT];
    for (int i = 0; i < p->n; i++)
        all[i] = p->orders[i]->d->session_id;
    qsort(all, (size_t)p->n, sizeof all[0], cmp_i64);
    p->nsessions = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->nsessions == 0 || p->sessions[p->nsessions - 1] != all[i])
            p->sessions[p->nsessions++] = all[i];
    }
    for (int s = 0; s < p->nsessions; s++) {
        p->stock[s] = -1; /* until its row says otherwise: no such session */
        p->price[s] = p->taken[s] = 0;
    }
    for (int i = 0; i < p->n; i++) {
        int64_t *at = bsearch(&p->orders[i]->d->session_id, p->sessions, (size_t)p->nsessions,
                              sizeof p->sessions[0], cmp_i64);
        p->orders[i]->slot = (int)(at - p->sessions);
    }
}

void merge_plan_lock(struct merge_plan *p, struct merge_order **orders, int n)
{
    struct text t;
    memset(p, 0, sizeof *p);
    p->orders = orders;
    p->n = n;
    p->phase = MERGE_LOCK;
    plan_sessions(p);
    for (int i = 0; i < n; i++) {
        orders[i]->rc = TD_EINTERNAL;
        orders[i]->id = orders[i]->amount = 0;
    }
    begin_text(p, &t, p->nsessions + 2 * n);
    text_put(&t, "START TRANSACTION; SELECT id, stock, price_cents FROM sessions WHERE id IN (");
    for (int s = 0; s < p->nsessions; s++) {
        text_put(&t, s == 0 ? "?" : ", ?");
        arg(p, DB_I(p->sessions[s]));
    }
    text_put(&t, ") ORDER BY id FOR UPDATE; SELECT user_id, request_id FROM orders WHERE "
                 "(user_id, request_id) IN (");
    for (int i = 0; i < n; i++) {
        text_put(&t, i == 0 ? "(?, ?)" : ", (?, ?)");
        arg(p, DB_I(orders[i]->d->user_id));
        arg(p, DB_S(orders[i]->d->request_id));
    }
    text_put(&t, ")");
    p->sql = t.s;
}

static bool same_key(const struct order_draft *a, const struct order_draft *b)
{
    return a->user_id == b->user_id && strcmp(a->request_id, b->request_id) == 0;
}

/* The outcome of order i, first come, first served: a key with an order
 * (in the table, or earlier in this batch) is a duplicate; then its
 * session must exist and have its seats. */
static void decide(struct merge_plan *p, int i)
{
    struct merge_order *o = p->orders[i];
    int s = o->slot;
    if (o->rc == TD_EDUP)
        return; /* found by the first trip */
    for (int j = 0; j < i; j++) {
        if (same_key(p->orders[j]->d, o->d)) {
            o->rc = TD_EDUP; /* its copy goes first; the caller replays that one */
            return;
        }
    }
    if (p->stock[s] < 0) {
        o->rc = TD_ENOTFOUND;
    } else if (p->stock[s] - p->taken[s] < o->d->quantity) {
        o->rc = TD_ECONFLICT;
    } else {
        p->taken[s] += o->d->quantity;
        o->amount = p->price[s] * o->d->quantity;
        o->id = -1; /* placed, awaiting its row */
        p->placed++;
    }
}

/* The orders placed, one row each, in one INSERT. */
static void put_inserts(struct merge_plan *p, struct text *t)
{
    bool first = true;
    text_put(t, "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, "
                "amount_cents, status, version, created_at, updated_at) VALUES ");
    for (int i = 0; i < p->n; i++) {
        const struct merge_order *o = p->orders[i];
        if (o->id != -1)
            continue;
        text_put(t, first ? "(?, ?, ?, ?, ?, ?, 'PENDING_PAYMENT', 1, ?, ?)"
                          : ", (?, ?, ?, ?, ?, ?, 'PENDING_PAYMENT', 1, ?, ?)");
        arg(p, DB_S(o->d->order_no));
        arg(p, DB_I(o->d->user_id));
        arg(p, DB_I(o->d->session_id));
        arg(p, DB_S(o->d->request_id));
        arg(p, DB_I(o->d->quantity));
        arg(p, DB_I(o->amount));
        arg(p, DB_S(o->db_now));
        arg(p, DB_S(o->db_now));
        first = false;
    }
    text_put(t, " RETURNING id, order_no, amount_cents; ");
}

/* The tokens the placed orders spend, in one INSERT that names each
 * order by its number; nothing when none spends one. */
static void put_tokens(struct merge_plan *p, struct text *t)
{
    int k = 0;
    for (int i = 0; i < p->n; i++)
        k += p->orders[i]->id == -1 && p->orders[i]->d->token_key != NULL;
    if (k == 0)
        return;
    text_put(
        t, "INSERT INTO order_tokens (order_id, token_hash, created_at) SELECT id, CASE order_no");
    for (int i = 0; i < p->n; i++) {
        const struct order_draft *d = p->orders[i]->d;
        if (p->orders[i]->id == -1 && d->token_key != NULL) {
            text_put(t, " WHEN ? THEN ?");
            arg(p, DB_S(d->order_no));
            arg(p, DB_S(d->token_key));
        }
    }
    text_put(t, " END, created_at FROM orders WHERE order_no IN (");
    bool first = true;
    for (int i = 0; i < p->n; i++) {
        const struct order_draft *d = p->orders[i]->d;
        if (p->orders[i]->id == -1 && d->token_key != NULL) {
            text_put(t, first ? "?" : ", ?");
            arg(p, DB_S(d->order_no));
            first = false;
        }
    }
    text_put(t, "); ");
}

/* Session s's stock drops by the seats of the batch's orders in it, as
 * the table holds them: on Galera a transaction aborted by a replicated
 * write can leave the statements after the abort running on their own,
 * and a decrement by a number would then outlive the orders it was
 * for. Counted from the rows, it takes nothing when they are gone. */
static void put_stock_update(struct merge_plan *p, struct text *t, int s)
{
    bool first = true;
    text_put(t, "UPDATE sessions SET stock = stock - (SELECT COALESCE(SUM(quantity), 0) FROM "
                "orders WHERE order_no IN (");
    for (int i = 0; i < p->n; i++) {
        const struct merge_order *o = p->orders[i];
        if (o->id == -1 && o->slot == s) {
            text_put(t, first ? "?" : ", ?");
            arg(p, DB_S(o->d->order_no));
            first = false;
        }
    }
    text_put(t, ")), version = version + 1 WHERE id = ?; ");
    arg(p, DB_I(p->sessions[s]));
}

int merge_plan_write(struct merge_plan *p, bool open)
{
    struct text t;
    p->phase = MERGE_WRITE;
    p->open = open;
    p->placed = 0;
    for (int i = 0; i < p->n; i++)
        decide(p, i);
    /* 8 per order inserted, 3 per token, 1 per order and 1 per session
     * in the stock updates. */
    begin_text(p, &t, 12 * p->n + p->nsessions + 1);
    if (p->placed > 0) {
        put_inserts(p, &t);
        put_tokens(p, &t);
        for (int s = 0; s < p->nsessions; s++) {
            if (p->taken[s] > 0)
                put_stock_update(p, &t, s);
        }
    }
    /* With nothing placed the trip is a COMMIT alone (or, open, a
     * statement that changes nothing). */
    text_put(&t, open ? "DO 0" : "COMMIT");
    p->sql = t.s;
    return p->placed;
}

void merge_plan_free(struct merge_plan *p)
{
    free(p->sql);
    free(p->args);
    p->sql = NULL;
    p->args = NULL;
}

static bool parse_long(const char *s, unsigned long len, int64_t *out)
{
    char buf[24];
    if (s == NULL || len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return parse_i64(buf, INT64_MIN, INT64_MAX, out);
}

static bool field_is(const struct db_batch_row *row, int f, const char *s)
{
    return row->vals[f] != NULL && strlen(s) == row->lens[f] &&
           memcmp(s, row->vals[f], row->lens[f]) == 0;
}

/* A locked session: its seats and price. */
static int take_session_row(struct merge_plan *p, const struct db_batch_row *row)
{
    int64_t id, stock, price;
    if (row->nfields != 3 || !parse_long(row->vals[0], row->lens[0], &id) ||
        !parse_long(row->vals[1], row->lens[1], &stock) ||
        !parse_long(row->vals[2], row->lens[2], &price) || stock < 0)
        return TD_EINTERNAL;
    int64_t *at = bsearch(&id, p->sessions, (size_t)p->nsessions, sizeof p->sessions[0], cmp_i64);
    if (at == NULL)
        return TD_EINTERNAL; /* a session the batch did not ask for */
    p->stock[at - p->sessions] = stock;
    p->price[at - p->sessions] = price;
    return TD_OK;
}

/* A key of the batch that has its order already: every order under it is
 * a duplicate. */
static int take_existing_row(struct merge_plan *p, const struct db_batch_row *row)
{
    int64_t user;
    bool any = false;
    if (row->nfields != 2 || !parse_long(row->vals[0], row->lens[0], &user))
        return TD_EINTERNAL;
    for (int i = 0; i < p->n; i++) {
        const struct order_draft *d = p->orders[i]->d;
        if (d->user_id == user && field_is(row, 1, d->request_id)) {
            p->orders[i]->rc = TD_EDUP;
            any = true;
        }
    }
    return any ? TD_OK : TD_EINTERNAL;
}

/* An inserted order's row: its id, by its number. */
static int take_order_row(struct merge_plan *p, const struct db_batch_row *row)
{
    int64_t id, amount;
    if (row->nfields != 3 || !parse_long(row->vals[0], row->lens[0], &id) ||
        !parse_long(row->vals[2], row->lens[2], &amount) || id <= 0)
        return TD_EINTERNAL;
    for (int i = 0; i < p->n; i++) {
        struct merge_order *o = p->orders[i];
        if (!field_is(row, 1, o->d->order_no))
            continue;
        if (o->id != -1 || o->amount != amount)
            return TD_EINTERNAL; /* not an order this batch placed, or not as priced */
        o->rc = TD_OK;
        o->id = id;
        return TD_OK;
    }
    return TD_EINTERNAL;
}

int merge_plan_row(struct merge_plan *p, int at, const struct db_batch_row *row)
{
    if (p->phase == MERGE_LOCK && at == 1)
        return take_session_row(p, row);
    if (p->phase == MERGE_LOCK && at == 2)
        return take_existing_row(p, row);
    if (p->phase == MERGE_WRITE && at == 0 && p->placed > 0)
        return take_order_row(p, row);
    return TD_EINTERNAL; /* a statement that answers no rows */
}
