/* merge_batch.c - the text of a batch of new orders and the reading of its
 * answer (merge_batch.h). */
#include "merge_batch.h"

#include "err.h"
#include "faults.h"
#include "log.h"
#include "text.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole transaction: one statement, one reply. place_batch
 * (sql/015_place_batch.sql) begins the transaction, places the orders,
 * commits, and only then answers the outcomes, as its one result set. */
static const char sql_closed[] = "CALL place_batch(?)";
/* Left open for the caller's COMMIT (merge.killed_mid_batch): the
 * statements of the transaction one by one, the outcomes in a session
 * variable read by a statement of their own, so that each ';' of the text
 * is one result (db_batch_each). */
static const char sql_open[] = "START TRANSACTION; CALL place_orders(?); SELECT @placed_orders";

/* s as a JSON string: quotes, backslashes and control characters escaped;
 * every other byte as it is (the request id is UTF-8). */
static void put_json_string(struct text *t, const char *s)
{
    text_putn(t, "\"", 1);
    for (;;) {
        size_t plain = 0; /* the run of bytes that go as they are */
        while (s[plain] != '\0' && s[plain] != '"' && s[plain] != '\\' &&
               (unsigned char)s[plain] >= 0x20)
            plain++;
        text_putn(t, s, plain);
        s += plain;
        if (*s == '\0')
            break;
        if (*s == '"' || *s == '\\')
            text_put(t, "\\%c", *s);
        else
            text_put(t, "\\u%04x", (unsigned char)*s);
        s++;
    }
    text_putn(t, "\"", 1);
}

void merge_plan_init(struct merge_plan *p, struct merge_order **orders, int n, bool open)
{
    struct text t = {xmalloc(256), 0, 256};
    memset(p, 0, sizeof *p);
    p->orders = orders;
    p->n = n;
    text_put(&t, "[");
    for (int i = 0; i < n; i++) {
        struct merge_order *o = orders[i];
        const struct order_draft *d = o->d;
        o->rc = TD_EUNAVAIL;
        o->id = o->amount = 0;
        o->settled = false;
        text_put(&t, "%s{\"n\":", i == 0 ? "" : ",");
        put_json_string(&t, d->order_no);
        text_put(&t, ",\"u\":%lld,\"s\":%lld,\"r\":", (long long)d->user_id,
                 (long long)d->session_id);
        put_json_string(&t, d->request_id);
        text_put(&t, ",\"q\":%lld,\"c\":", (long long)d->quantity);
        put_json_string(&t, o->db_now);
        if (d->token_key != NULL) {
            text_put(&t, ",\"t\":");
            put_json_string(&t, d->token_key);
        }
        if (d->filter_missed)
            text_put(&t, ",\"m\":1");
        text_put(&t, "}");
    }
    text_put(&t, "]");
    p->json = t.s;
    p->arg = DB_S(p->json);
    p->sql = xstrdup(open ? sql_open : sql_closed);
    p->how = open ? DB_BATCH_OPEN : DB_BATCH_CALL;
    p->outcomes_at = open ? 2 : 0; /* the statement whose row holds the outcomes */
}

void merge_plan_free(struct merge_plan *p)
{
    free(p->sql);
    free(p->json);
    p->sql = p->json = NULL;
}

/* A decimal number of at most 18 digits at s (len bytes left); the
 * characters read, 0 when none. */
static size_t read_num(const char *s, size_t len, int64_t *out)
{
    size_t n = 0;
    int64_t v = 0;
    while (n < len && n < 18 && s[n] >= '0' && s[n] <= '9')
        v = v * 10 + (s[n++] - '0');
    if (n == 0 || (n < len && s[n] >= '0' && s[n] <= '9'))
        return 0;
    *out = v;
    return n;
}

size_t merge_outcome_parse(const char *s, size_t len, int *index, char *code, int64_t *id,
                           int64_t *amount)
{
    int64_t i = 0;
    size_t at = read_num(s, len, &i);
    if (at == 0 || i < 1 || i > MERGE_MAX_LIMIT || at + 3 > len || s[at] != ' ')
        return 0;
    *index = (int)i;
    *code = s[at + 1];
    at += 2;
    *id = *amount = 0;
    if (*code == 'P') {
        size_t k;
        if (s[at] != ' ' || (k = read_num(s + at + 1, len - at - 1, id)) == 0)
            return 0;
        at += 1 + k;
        if (at >= len || s[at] != ' ' || (k = read_num(s + at + 1, len - at - 1, amount)) == 0)
            return 0;
        at += 1 + k;
        if (*id <= 0)
            return 0;
    } else if (strchr("DRNSTLK", *code) == NULL || *code == '\0') {
        return 0;
    }
    if (at >= len || s[at] != ',')
        return 0;
    return at + 1;
}

/* What an outcome letter answers (store_order_create's codes). */
static int outcome_rc(char code)
{
    switch (code) {
    case 'P':
        return TD_OK;
    case 'D':
        return TD_EDUP; /* the caller finds and replays the key's order */
    case 'R':
        return TD_ERETRY; /* run again with a new order number */
    case 'N':
        return TD_ENOTFOUND;
    case 'S':
        return TD_ECONFLICT;
    case 'L':
        return MERGE_LOCKED; /* the caller notes the held row, and places it alone */
    case 'K':
        return MERGE_ALONE; /* alone, it meets the other transaction's outcome */
    default:
        return TD_ESPENT; /* 'T' */
    }
}

/* The outcomes, one per order: any that does not read, or names an order
 * twice or one the batch does not have, stops the reading there. */
static void take_outcomes(struct merge_plan *p, const char *s, size_t len)
{
    while (len > 0) {
        int i;
        char code;
        int64_t id, amount;
        size_t k = merge_outcome_parse(s, len, &i, &code, &id, &amount);
        if (k == 0 || i > p->n || p->orders[i - 1]->settled) {
            p->bad_rows++;
            log_error("mysql: a batch's outcome does not read: %.*s", (int)(len > 64 ? 64 : len),
                      s);
            return;
        }
        struct merge_order *o = p->orders[i - 1];
        o->rc = outcome_rc(code);
        o->id = id;
        o->amount = amount;
        o->settled = true;
        s += k;
        len -= k;
    }
}

int merge_plan_row(struct merge_plan *p, int at, const struct db_batch_row *row)
{
    if (at != p->outcomes_at || row->nfields != 1 || row->vals[0] == NULL) {
        p->bad_rows++;
        log_error("mysql: a batch answered a row it was not asked for (statement %d)", at);
        return TD_OK;
    }
    take_outcomes(p, row->vals[0], row->lens[0]);
    return TD_OK;
}

static bool same_key(const struct order_draft *a, const struct order_draft *b)
{
    return a->user_id == b->user_id && strcmp(a->request_id, b->request_id) == 0;
}

int merge_plan_done(struct merge_plan *p)
{
    int unsettled = 0;
    for (int i = 0; i < p->n; i++) {
        struct merge_order *o = p->orders[i];
        if (!o->settled) {
            o->rc = TD_EUNAVAIL;
            unsettled++;
            continue;
        }
        if (o->rc != TD_EDUP)
            continue;
        /* A copy refused by its own batch's earlier copy, which was then
         * not placed: no order exists under the key. */
        for (int j = 0; j < i; j++) {
            const struct merge_order *e = p->orders[j];
            if (same_key(e->d, o->d) && e->settled && e->rc != TD_OK && e->rc != TD_EDUP) {
                o->rc = MERGE_ALONE;
                break;
            }
        }
    }
    if (unsettled > 0)
        log_error("mysql: %d of %d orders of a committed batch had no outcome; answering "
                  "unavailable",
                  unsettled, p->n);
    return unsettled;
}

static int row_each(void *ctx, int at, const struct db_batch_row *row)
{
    /* The test build can lose the answer's row (fail), as if it did not
     * read: the batch's COMMIT runs all the same. */
    if (FAULT_POINT("merge.outcome_unread"))
        return TD_OK;
    return merge_plan_row(ctx, at, row);
}

int merge_batch_run(struct db_conn *c, struct merge_order **orders, int k)
{
    struct merge_plan p;
    /* The test build's crash between a batch's statements and its COMMIT:
     * the batch is sent without it, so the process can die holding the
     * transaction open at the server. */
    bool open = faults_armed("merge.killed_mid_batch");
    merge_plan_init(&p, orders, k, open);
    int rc = db_batch_each(c, p.sql, &p.arg, 1, p.how, row_each, &p);
    if (rc == TD_OK && open) {
        (void)FAULT_POINT("merge.killed_mid_batch");
        rc = db_tx_end(c, TD_OK);
    }
    if (rc == TD_OK)
        (void)merge_plan_done(&p);
    merge_plan_free(&p);
    return rc;
}
