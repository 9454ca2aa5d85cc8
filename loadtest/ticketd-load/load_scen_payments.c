/*
 * load_scen_payments.c - gateway-retry: a payment gateway that repeats its
 * callbacks, races cancels and changes its mind.
 */
#include "load_scen_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- gateway-retry ---------------------------------------------------------- */

/*
 * A payment gateway that repeats itself. Orders are created, then each gets
 * one of these stories:
 *   retry     one txn_id sent several times at once, and once more later;
 *   second    a second txn_id for the same order, at once or after the first;
 *   late      the order is cancelled first, then the payment arrives;
 *   race      cancel and payment sent at the same moment;
 *   failed    a FAILED payment, then a SUCCESS with a new txn_id;
 *   mismatch  a wrong amount, then the right one with a new txn_id.
 * Each txn_id must have one outcome however often it is sent, and no order
 * may be paid twice, or paid and cancelled.
 */
enum pay_story {
    STORY_RETRY,
    STORY_SECOND_AT_ONCE,
    STORY_SECOND_LATER,
    STORY_LATE,
    STORY_RACE,
    STORY_FAILED,
    STORY_MISMATCH,
    STORY_COUNT,
};

static const char *const story_names[STORY_COUNT] = {
    "retry", "second-at-once", "second-later", "late", "race", "failed", "mismatch",
};

struct pay_txn {
    char id[48];
    char first[40]; /* outcome of the first answer */
    int answers;
    int fresh;         /* answers without "replayed" */
    int applied;       /* answers with outcome APPLIED */
    int fresh_applied; /* APPLIED without "replayed": the txn was applied then */
    int refunds;       /* DUPLICATE_PAYMENT or LATE_PAYMENT: sent for refund */
    bool mixed;        /* answers disagreed */
    bool retried;      /* a copy was sent again: its first answer may be lost */
};

struct pay_order {
    struct buyer *b;
    enum pay_story story;
    struct pay_txn txn[2];
    bool cancelled; /* a cancel answered 200 */
    bool cancel_rejected;
    int cancel_answers;
};

struct pay_ctx {
    struct scen *s;
    struct pay_order *orders;
    int count;
    int sidx;
    long long probes_ok;
    long long probes;
};

static void pay_done(void *arg, struct load_req *r)
{
    struct pay_ctx *c = arg;
    struct pay_order *p = &c->orders[r->tag];
    char text[160];

    if (r->kind == LOAD_CANCEL) {
        p->cancel_answers++;
        if (r->status == 200) {
            if (!p->cancelled)
                verdict_session_held(c->s->v, c->sidx, -c->s->o->quantity);
            p->cancelled = true;
        } else if (r->status == 409 && strcmp(r->code, "INVALID_TRANSITION") == 0) {
            p->cancel_rejected = true;
        } else if (answer_uncertain(r)) {
            verdict_session_uncertain(c->s->v, c->sidx);
            if (!answer_transient(r))
                verdict_anomaly(c->s->v, "%s: cancel of order %s answered %s",
                                story_names[p->story], p->b->order_no,
                                answer_text(r, text, sizeof(text)));
        } else if (!opt_allows(c->s->o, r->code)) {
            verdict_anomaly(c->s->v, "%s: cancel of order %s answered %s", story_names[p->story],
                            p->b->order_no, answer_text(r, text, sizeof(text)));
        }
        return;
    }
    {
        struct pay_txn *t = &p->txn[r->tag2];

        if (r->attempts > 1)
            t->retried = true;
        if (r->status != 200 || r->code[0] == '\0') {
            /* A signed callback is answered 200 with its outcome; "later"
             * only when the service is down. */
            if (!answer_transient(r) && !opt_allows(c->s->o, r->code))
                verdict_anomaly(c->s->v, "%s: callback of txn %s answered %s",
                                story_names[p->story], t->id, answer_text(r, text, sizeof(text)));
            return;
        }
        t->answers++;
        if (!r->replayed)
            t->fresh++;
        if (strcmp(r->code, "APPLIED") == 0) {
            t->applied++;
            if (!r->replayed)
                t->fresh_applied++;
        } else if (strcmp(r->code, "DUPLICATE_PAYMENT") == 0 ||
                   strcmp(r->code, "LATE_PAYMENT") == 0) {
            t->refunds++;
        }
        if (t->first[0] == '\0')
            snprintf(t->first, sizeof(t->first), "%s", r->code);
        else if (strcmp(t->first, r->code) != 0)
            t->mixed = true;
    }
}

static void probe_done(void *arg, struct load_req *r)
{
    struct pay_ctx *c = arg;
    const char *want = r->tag2 == SIG_BAD ? "SIGNATURE_INVALID" : "TIMESTAMP_OUT_OF_TOLERANCE";

    c->probes++;
    if (r->status == 401 && strcmp(r->code, want) == 0)
        c->probes_ok++;
    else
        verdict_anomaly(c->s->v, "gateway-retry: %s callback answered %ld %s, expected 401 %s",
                        r->tag2 == SIG_BAD ? "badly signed" : "stale", r->status, r->code, want);
}

/* Adds copies of one callback; the first joins the batch as mode says,
 * the others join its group. */
static void pay_add(struct pay_ctx *c, struct batch *b, int i, int t, const char *status,
                    long long amount, int copies, enum batch_mode mode)
{
    struct pay_order *p = &c->orders[i];

    for (int k = 0; k < copies; k++) {
        struct load_req *r =
            req_callback(c->s, p->txn[t].id, p->b->order_no, amount, status, SIG_GOOD);

        r->tag = i;
        r->tag2 = t;
        batch_add(b, r, k == 0 ? mode : BATCH_JOIN);
    }
}

/* What each story must end with; anything else is an anomaly, and the
 * damage cases are counted apart. */
static void pay_judge(struct pay_ctx *c)
{
    long long applied_orders = 0;
    int stories[STORY_COUNT] = {0};

    for (int i = 0; i < c->count; i++) {
        struct pay_order *p = &c->orders[i];
        int applied_txns = 0;
        const char *want[2] = {NULL, NULL};

        if (p->b == NULL)
            continue;
        stories[p->story]++;
        for (int t = 0; t < 2; t++) {
            struct pay_txn *x = &p->txn[t];

            if (x->id[0] == '\0' || x->answers == 0)
                continue;
            if (x->applied > 0)
                applied_txns++;
            if (x->mixed)
                verdict_anomaly(c->s->v, "%s: txn %s answered different outcomes (first %s)",
                                story_names[p->story], x->id, x->first);
            /* The gateway took this money once: if the txn paid the order
             * and was also answered as a duplicate or late payment, the
             * refund that answer queued gives it back while the order
             * stays paid. */
            if (x->applied > 0 && x->refunds > 0)
                verdict_damage(c->s->v, DAMAGE_REFUND_APPLIED, 1,
                               "txn %s paid order %s and was also sent for refund (%d answers)",
                               x->id, p->b->order_no, x->refunds);
            if (x->fresh_applied > 1)
                verdict_damage(c->s->v, DAMAGE_DOUBLE_PAYMENT, x->fresh_applied - 1,
                               "txn %s was applied %d times without a replay", x->id,
                               x->fresh_applied);
            else if (x->fresh > 1 || (x->fresh == 0 && !x->retried))
                /* None fresh is fine when the fresh answer was lost and a
                 * retry got its replay. */
                verdict_anomaly(c->s->v, "%s: txn %s got %d answers without \"replayed\"",
                                story_names[p->story], x->id, x->fresh);
        }
        if (applied_txns > 1)
            verdict_damage(c->s->v, DAMAGE_DOUBLE_PAYMENT, applied_txns - 1,
                           "order %s was paid by %d txn_ids", p->b->order_no, applied_txns);
        if (applied_txns > 0 && p->cancelled)
            verdict_damage(c->s->v, DAMAGE_PAID_CANCELLED, 1,
                           "order %s: cancel answered 200 and payment %s", p->b->order_no,
                           p->txn[0].applied ? p->txn[0].id : p->txn[1].id);
        if (applied_txns > 0) {
            applied_orders++;
            verdict_points_expect(c->s->v, p->b->user, p->b->amount / 100);
            verdict_ticket_expect(c->s->v, p->b->user, p->b->order_no);
        } else {
            verdict_points_expect(c->s->v, p->b->user, 0);
        }
        switch (p->story) {
        case STORY_RETRY:
            want[0] = "APPLIED";
            break;
        case STORY_SECOND_LATER:
            want[0] = "APPLIED";
            want[1] = "DUPLICATE_PAYMENT";
            break;
        case STORY_LATE:
            want[0] = p->cancelled ? "LATE_PAYMENT" : NULL;
            break;
        case STORY_FAILED:
            want[0] = "PAYMENT_FAILED";
            want[1] = "APPLIED";
            break;
        case STORY_MISMATCH:
            want[0] = "AMOUNT_MISMATCH";
            want[1] = "APPLIED";
            break;
        case STORY_SECOND_AT_ONCE:
            /* Either may win; the other must be the duplicate. */
            if (applied_txns == 1 && p->txn[0].answers > 0 && p->txn[1].answers > 0 &&
                strcmp(p->txn[0].applied ? p->txn[1].first : p->txn[0].first,
                       "DUPLICATE_PAYMENT") != 0)
                verdict_anomaly(c->s->v, "second-at-once: order %s: the losing txn got %s",
                                p->b->order_no,
                                p->txn[0].applied ? p->txn[1].first : p->txn[0].first);
            break;
        case STORY_RACE:
            if (applied_txns == 0 && p->txn[0].answers > 0 &&
                !(p->cancelled && strcmp(p->txn[0].first, "LATE_PAYMENT") == 0))
                verdict_anomaly(c->s->v, "race: order %s: cancel %s, payment %s", p->b->order_no,
                                p->cancelled ? "won" : "lost", p->txn[0].first);
            break;
        case STORY_COUNT:
            break;
        }
        for (int t = 0; t < 2; t++)
            if (want[t] != NULL && p->txn[t].answers > 0 && strcmp(p->txn[t].first, want[t]) != 0)
                verdict_anomaly(c->s->v, "%s: order %s txn %s answered %s, expected %s",
                                story_names[p->story], p->b->order_no, p->txn[t].id,
                                p->txn[t].first, want[t]);
        if (p->story == STORY_LATE && p->cancel_answers > 0 && !p->cancelled)
            verdict_anomaly(c->s->v, "late: cancel of pending order %s was refused",
                            p->b->order_no);
    }
    verdict_figure(c->s->v, "gateway_retry.orders", c->count);
    verdict_figure(c->s->v, "gateway_retry.paid", applied_orders);
    verdict_note(c->s->v,
                 "gateway-retry: %d orders (retry %d, second txn %d+%d, late %d, race %d, "
                 "failed %d, mismatch %d), %lld paid, signature probes %lld/%lld rejected",
                 c->count, stories[STORY_RETRY], stories[STORY_SECOND_AT_ONCE],
                 stories[STORY_SECOND_LATER], stories[STORY_LATE], stories[STORY_RACE],
                 stories[STORY_FAILED], stories[STORY_MISMATCH], applied_orders, c->probes_ok,
                 c->probes);
}

int scen_gateway_retry(struct scen *s)
{
    const struct load_opts *o = s->o;
    int n = o->orders > 0 ? o->orders : 100;
    int retries = o->retries > 0 ? o->retries : 3;
    struct pay_ctx c = {.s = s};
    struct buyer *bs;
    struct batch b = {0};
    uint64_t session = 0;

    if (retries * 2 > s->concurrency)
        s->concurrency = retries * 2;
    c.sidx = session_pick(s, "gateway-retry", (long long)n * o->quantity + 10, &session);
    if (c.sidx == -1)
        return -1;
    bs = load_xcalloc((size_t)n, sizeof(*bs));
    c.orders = load_xcalloc((size_t)n, sizeof(*c.orders));
    c.count = n;
    for (int i = 0; i < n; i++)
        bs[i].user = user_new(s);
    tokens_fetch(s, bs, n);
    buyers_order(s, bs, n, session, c.sidx);

    for (int i = 0; i < n; i++) {
        struct pay_order *p = &c.orders[i];

        if (!bs[i].ordered)
            continue;
        p->b = &bs[i];
        /* Four in ten plain retries, the rest spread over the other stories. */
        p->story = (i % 10) < 4 ? STORY_RETRY : (enum pay_story)(1 + (i % 10 - 4) % 6);
        txn_new(s, p->txn[0].id, sizeof(p->txn[0].id));
        if (p->story != STORY_RETRY && p->story != STORY_LATE && p->story != STORY_RACE)
            txn_new(s, p->txn[1].id, sizeof(p->txn[1].id));
    }

    /* Step 1: the cancels that come before a late payment. */
    for (int i = 0; i < n; i++)
        if (c.orders[i].b != NULL && c.orders[i].story == STORY_LATE) {
            struct load_req *r = req_cancel(s, bs[i].user, bs[i].order_no);

            r->tag = i;
            batch_add(&b, r, BATCH_SOLO);
        }
    batch_run(s, &b, pay_done, &c);

    /* Step 2: the first wave of callbacks, each order's copies together. */
    for (int i = 0; i < n; i++) {
        struct pay_order *p = &c.orders[i];
        long long amount = p->b != NULL ? p->b->amount : 0;

        if (p->b == NULL)
            continue;
        switch (p->story) {
        case STORY_RETRY:
        case STORY_SECOND_LATER:
        case STORY_LATE:
            pay_add(&c, &b, i, 0, "SUCCESS", amount, retries, BATCH_GROUP);
            break;
        case STORY_SECOND_AT_ONCE:
            pay_add(&c, &b, i, 0, "SUCCESS", amount, retries, BATCH_GROUP);
            pay_add(&c, &b, i, 1, "SUCCESS", amount, retries, BATCH_JOIN);
            break;
        case STORY_RACE: {
            struct load_req *r = req_cancel(s, p->b->user, p->b->order_no);

            r->tag = i;
            batch_add(&b, r, BATCH_GROUP);
            pay_add(&c, &b, i, 0, "SUCCESS", amount, retries, BATCH_JOIN);
            break;
        }
        case STORY_FAILED:
            pay_add(&c, &b, i, 0, "FAILED", amount, retries, BATCH_GROUP);
            break;
        case STORY_MISMATCH:
            pay_add(&c, &b, i, 0, "SUCCESS", amount + 1, retries, BATCH_GROUP);
            break;
        case STORY_COUNT:
            break;
        }
    }
    batch_run(s, &b, pay_done, &c);

    /* Step 3: what the gateway sends later: one more retry of the first
     * txn, and the second txn of the stories that have one. */
    for (int i = 0; i < n; i++) {
        struct pay_order *p = &c.orders[i];

        if (p->b == NULL)
            continue;
        pay_add(&c, &b, i, 0, p->story == STORY_FAILED ? "FAILED" : "SUCCESS",
                p->story == STORY_MISMATCH ? p->b->amount + 1 : p->b->amount, 1, BATCH_SOLO);
        if (p->story == STORY_SECOND_LATER || p->story == STORY_FAILED ||
            p->story == STORY_MISMATCH)
            pay_add(&c, &b, i, 1, "SUCCESS", p->b->amount, retries, BATCH_GROUP);
    }
    batch_run(s, &b, pay_done, &c);

    /* Two probes the gateway's signature check must refuse. */
    for (int m = SIG_BAD; m <= SIG_STALE && n > 0 && c.orders[0].b != NULL; m++) {
        char txn[48];
        struct load_req *r;

        txn_new(s, txn, sizeof(txn));
        r = req_callback(s, txn, bs[0].order_no, bs[0].amount, "SUCCESS", (enum sig_mode)m);
        r->tag2 = m;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, probe_done, &c);

    pay_judge(&c);
    free(c.orders);
    free(bs);
    return 0;
}
