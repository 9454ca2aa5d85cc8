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
    for (int i = 0; i < p->n; i++) {
        int64_t *at = bsearch(&p->orders[i]->d->session_id, p->sessions, (size_t)p->nsessions,
                              sizeof p->sessions[0], cmp_i64);
        p->orders[i]->slot = (int)(at - p->sessions);
    }
}

/* One order: its insert, only while its session has the seats, then its
 * code and the seats it took, then the token it spends. The code asks the
 * unique key's question first, as the one-at-a-time transaction does by
 * inserting before the stock: a copy of an order that exists is answered
 * with that order even when the session has sold out since. */
static void plan_order(struct merge_plan *p, struct text *t, int i, int *at)
{
    const struct merge_order *o = p->orders[i];
    const struct order_draft *d = o->d;
    int s = o->slot;
    text_put(t,
             "INSERT IGNORE INTO orders (order_no, user_id, session_id, request_id, quantity, "
             "amount_cents, status, version, created_at, updated_at) "
             "SELECT ?, ?, id, ?, ?, price_cents * ?, 'PENDING_PAYMENT', 1, ?, ? FROM sessions "
             "WHERE id = ? AND @td_s%d >= ?; ",
             s);
    arg(p, DB_S(d->order_no));
    arg(p, DB_I(d->user_id));
    arg(p, DB_S(d->request_id));
    arg(p, DB_I(d->quantity));
    arg(p, DB_I(d->quantity));
    arg(p, DB_S(o->db_now));
    arg(p, DB_S(o->db_now));
    arg(p, DB_I(d->session_id));
    arg(p, DB_I(d->quantity));
    /* ROW_COUNT() is the insert's in both assignments; the code reads the
     * seats as they were when the insert did not take any. */
    text_put(t,
             "SET @td_s%d = @td_s%d - IF(ROW_COUNT() > 0, ?, 0), @td_r%d = IF(ROW_COUNT() > 0, %d, "
             "IF(EXISTS (SELECT 1 FROM orders WHERE user_id = ? AND request_id = ?), %d, "
             "IF(@td_s%d IS NULL, %d, IF(@td_s%d < ?, %d, %d)))); ",
             s, s, i, MERGE_CREATED, MERGE_DUPLICATE, s, MERGE_NO_SESSION, s, MERGE_SOLD_OUT,
             MERGE_NOT_INSERTED);
    arg(p, DB_I(d->quantity));
    arg(p, DB_I(d->user_id));
    arg(p, DB_S(d->request_id));
    arg(p, DB_I(d->quantity));
    *at += 2;
    if (d->token_key != NULL) {
        /* Named by its own new order number: an order not inserted spends
         * nothing. A token another order spent fails here with 1062 and
         * stops the batch: store_merge.c then places each order alone. */
        text_put(t, "INSERT INTO order_tokens (order_id, token_hash, created_at) "
                    "SELECT id, ?, ? FROM orders WHERE order_no = ?; ");
        arg(p, DB_S(d->token_key));
        arg(p, DB_S(o->db_now));
        arg(p, DB_S(d->order_no));
        ++*at;
    }
}

/* The numbers of the batch's orders, as "?, ?, ..." with their arguments. */
static void put_numbers(struct merge_plan *p, struct text *t, int session)
{
    bool first = true;
    for (int i = 0; i < p->n; i++) {
        if (session >= 0 && p->orders[i]->slot != session)
            continue;
        text_put(t, first ? "?" : ", ?");
        arg(p, DB_S(p->orders[i]->d->order_no));
        first = false;
    }
}

void merge_plan_build(struct merge_plan *p, struct merge_order **orders, int n, bool open)
{
    struct text t = {xmalloc(1024), 0, 1024};
    int at = 0;
    memset(p, 0, sizeof *p);
    p->orders = orders;
    p->n = n;
    p->open = open;
    /* The most they take: 16 per order (its statements), 2 per order
     * (its number in its session's UPDATE and in the final SELECT), 2 per
     * session (at most one per order). */
    p->args = xcalloc((size_t)(20 * n + 8), sizeof *p->args);
    plan_sessions(p);
    for (int i = 0; i < n; i++) {
        orders[i]->rc = TD_EINTERNAL;
        orders[i]->id = orders[i]->amount = 0;
    }
    text_put(&t, "START TRANSACTION; ");
    at++;
    for (int s = 0; s < p->nsessions; s++) {
        /* MAX: one row even for a session that does not exist, so the
         * variable is always set (to NULL then), never left from an
         * earlier batch on this connection. */
        text_put(&t, "SELECT MAX(stock) INTO @td_s%d FROM sessions WHERE id = ? FOR UPDATE; ", s);
        arg(p, DB_I(p->sessions[s]));
        at++;
    }
    for (int i = 0; i < n; i++)
        plan_order(p, &t, i, &at);
    for (int s = 0; s < p->nsessions; s++) {
        text_put(&t, "UPDATE sessions SET stock = stock - (SELECT COALESCE(SUM(quantity), 0) FROM "
                     "orders WHERE order_no IN (");
        put_numbers(p, &t, s);
        text_put(&t, ")), version = version + 1 WHERE id = ? AND @td_s%d IS NOT NULL; ", s);
        arg(p, DB_I(p->sessions[s]));
        at++;
    }
    text_put(&t, "SELECT ");
    for (int i = 0; i < n; i++)
        text_put(&t, i == 0 ? "@td_r%d" : ", @td_r%d", i);
    text_put(&t, "; ");
    p->at_codes = at++;
    text_put(&t, "SELECT id, order_no, amount_cents FROM orders WHERE order_no IN (");
    put_numbers(p, &t, -1);
    text_put(&t, open ? ")" : "); COMMIT");
    p->at_rows = at++;
    p->sql = t.s;
}

void merge_plan_free(struct merge_plan *p)
{
    free(p->sql);
    free(p->args);
    p->sql = NULL;
    p->args = NULL;
}

int merge_code_rc(long code)
{
    switch (code) {
    case MERGE_CREATED:
        return TD_OK;
    case MERGE_DUPLICATE:
        return TD_EDUP;
    case MERGE_NO_SESSION:
        return TD_ENOTFOUND;
    case MERGE_SOLD_OUT:
        return TD_ECONFLICT;
    case MERGE_NOT_INSERTED:
        return TD_ERETRY;
    }
    return TD_EINTERNAL;
}

static bool parse_long(const char *s, unsigned long len, int64_t *out)
{
    char buf[24];
    if (s == NULL || len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return parse_i64(buf, 0, INT64_MAX, out);
}

/* The codes: one column per order. A created order keeps TD_EINTERNAL
 * until its row is read too, so one without a row fails rather than be
 * answered without its id. */
static int take_codes(struct merge_plan *p, const struct db_batch_row *row)
{
    if (row->nfields != p->n)
        return TD_EINTERNAL;
    for (int i = 0; i < p->n; i++) {
        int64_t code;
        if (!parse_long(row->vals[i], row->vals[i] ? row->lens[i] : 0, &code))
            return TD_EINTERNAL;
        int rc = merge_code_rc((long)code);
        if (rc == TD_EINTERNAL)
            return rc;
        p->orders[i]->rc = rc == TD_OK ? TD_EINTERNAL : rc;
        if (rc == TD_OK)
            p->orders[i]->id = -1; /* awaiting its row */
    }
    return TD_OK;
}

static int take_order_row(struct merge_plan *p, const struct db_batch_row *row)
{
    int64_t id, amount;
    if (row->nfields != 3 || !parse_long(row->vals[0], row->lens[0], &id) ||
        !parse_long(row->vals[2], row->lens[2], &amount) || row->vals[1] == NULL)
        return TD_EINTERNAL;
    for (int i = 0; i < p->n; i++) {
        struct merge_order *o = p->orders[i];
        const char *no = o->d->order_no;
        if (strlen(no) != row->lens[1] || memcmp(no, row->vals[1], row->lens[1]) != 0)
            continue;
        if (o->id != -1)
            return TD_EINTERNAL; /* a row for an order its code did not create */
        o->rc = TD_OK;
        o->id = id;
        o->amount = amount;
        return TD_OK;
    }
    return TD_EINTERNAL;
}

int merge_plan_row(struct merge_plan *p, int at, const struct db_batch_row *row)
{
    if (at == p->at_codes)
        return take_codes(p, row);
    if (at == p->at_rows)
        return take_order_row(p, row);
    return TD_EINTERNAL; /* SELECT ... INTO answers no rows */
}
