/*
 * load_scen_events.c - mq-redelivery: paid orders whose order.paid events
 * the consumers may get more than once, judged by the points they credit.
 */
#include "load_scen_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mq-redelivery ---------------------------------------------------------- */

/*
 * Pays orders so that order.paid events flow through the outbox and the
 * stream, with the gateway's retries on top, then waits (bounded by
 * --settle) for the points and ticketing consumers: each user must end with
 * exactly 1 point per 100 cents of each paid order. Killing or pausing
 * consumers (ticketd worker) while this runs is what exercises redelivery.
 */
struct mq_ctx {
    struct scen *s;
    struct buyer *bs;
    int *applied;
    int *fresh;
    int *refunds;
};

static void mq_done(void *arg, struct load_req *r)
{
    struct mq_ctx *c = arg;
    char text[160];

    if (r->status == 200 && strcmp(r->code, "APPLIED") == 0) {
        c->applied[r->tag]++;
        if (!r->replayed)
            c->fresh[r->tag]++;
    } else if (r->status == 200 && strcmp(r->code, "DUPLICATE_PAYMENT") == 0) {
        c->refunds[r->tag]++;
    } else if (!answer_transient(r) && !opt_allows(c->s->o, r->code)) {
        /* The copies of one txn_id: APPLIED, then its replays. */
        verdict_anomaly(c->s->v, "mq-redelivery: a callback of order %s answered %s",
                        c->bs[r->tag].order_no, answer_text(r, text, sizeof(text)));
    }
}

int scen_mq_redelivery(struct scen *s)
{
    const struct load_opts *o = s->o;
    int n = o->orders > 0 ? o->orders : 100;
    int users = o->users > 0 ? o->users : (n + 2) / 3;
    int retries = o->retries > 0 ? o->retries : 3;
    struct mq_ctx c = {.s = s};
    struct batch b = {0};
    uint64_t *user_ids;
    uint64_t session = 0;
    long long paid = 0;
    int sidx;
    int ordered;

    if (users > n)
        users = n;
    if (retries > s->concurrency)
        s->concurrency = retries;
    sidx = session_pick(s, "mq-redelivery", (long long)n * o->quantity + 10, &session);
    if (sidx == -1)
        return -1;
    c.bs = load_xcalloc((size_t)n, sizeof(*c.bs));
    c.applied = load_xcalloc((size_t)n, sizeof(int));
    c.fresh = load_xcalloc((size_t)n, sizeof(int));
    c.refunds = load_xcalloc((size_t)n, sizeof(int));
    user_ids = load_xcalloc((size_t)users, sizeof(*user_ids));
    for (int u = 0; u < users; u++) {
        user_ids[u] = user_new(s);
        verdict_points_expect(s->v, user_ids[u], 0);
    }
    /* Several orders per user, so a user's points sum several events. */
    for (int i = 0; i < n; i++)
        c.bs[i].user = user_ids[i % users];
    tokens_fetch(s, c.bs, n);
    /* One user's orders would meet its own session lock if sent at once:
     * send them user by user, in turns. */
    ordered = 0;
    for (int turn = 0; turn * users < n; turn++) {
        int from = turn * users;
        int count = n - from < users ? n - from : users;

        ordered += buyers_order(s, c.bs + from, count, session, sidx);
    }
    for (int i = 0; i < n; i++) {
        char txn[48];

        if (!c.bs[i].ordered)
            continue;
        txn_new(s, txn, sizeof(txn));
        for (int k = 0; k < retries; k++) {
            struct load_req *r =
                req_callback(s, txn, c.bs[i].order_no, c.bs[i].amount, "SUCCESS", SIG_GOOD);

            r->tag = i;
            batch_add(&b, r, k == 0 ? BATCH_GROUP : BATCH_JOIN);
        }
    }
    batch_run(s, &b, mq_done, &c);
    for (int i = 0; i < n; i++) {
        if (c.applied[i] == 0)
            continue;
        paid++;
        verdict_points_expect(s->v, c.bs[i].user, c.bs[i].amount / 100);
        verdict_ticket_expect(s->v, c.bs[i].user, c.bs[i].order_no);
        if (c.fresh[i] > 1)
            verdict_damage(s->v, DAMAGE_DOUBLE_PAYMENT, c.fresh[i] - 1,
                           "mq-redelivery: order %s applied %d times without a replay",
                           c.bs[i].order_no, c.fresh[i]);
        if (c.refunds[i] > 0)
            verdict_damage(s->v, DAMAGE_REFUND_APPLIED, 1,
                           "mq-redelivery: the payment of order %s was also sent for refund",
                           c.bs[i].order_no);
    }
    verdict_figure(s->v, "mq_redelivery.orders", ordered);
    verdict_figure(s->v, "mq_redelivery.paid", paid);
    verdict_note(s->v,
                 "mq-redelivery: %d users, %d orders placed, %lld paid (x%d callbacks each); "
                 "points and ticketing checked after the load",
                 users, ordered, paid, retries);
    free(user_ids);
    free(c.refunds);
    free(c.fresh);
    free(c.applied);
    free(c.bs);
    return 0;
}
