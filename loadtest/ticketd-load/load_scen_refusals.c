/*
 * load_scen_refusals.c - refusal-storm: refusals that Redis decides, and
 * what ticketd's order-key filter makes of them.
 *
 * Before a refusal Redis decided (here: a token another key spent), ticketd
 * asks the database whether the key already has its order; the order-key
 * filter answers "certainly not" without the query when it can be trusted.
 * Each of --rounds users orders once under key K with its own token. Then
 * (after --midway, e.g. a Redis flush) each spends a fresh token under a
 * new key X, and presents that spent token twice more: under K, whose
 * order exists (the answer must be that order, 201; a 409 is a wrong
 * refusal, damage counted in answers), and under a key Y that has no order
 * (a true 409, whose database look-up is what the filter saves). The
 * look-ups are read from the instances' /metrics
 * (ticketd_refusal_db_lookups_total) around the Y refusals alone.
 */
#include "load_scen_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOKUPS_METRIC "ticketd_refusal_db_lookups_total "

struct refusal_ctx {
    struct scen *s;
    int sidx;
    long long replayed;  /* K answered with its order */
    long long wrong;     /* K refused though its order exists */
    long long refused;   /* Y refused, as it must be */
    long long bought;    /* Y answered with an order: the token was not refused */
    long long lookups;   /* summed over the instances, or -1 */
    const char *keys[2]; /* the key of each request kind, for the messages */
};

static void metrics_done(void *arg, struct load_req *r)
{
    struct refusal_ctx *c = arg;
    const char *line =
        r->status == 200 && r->resp != NULL ? strstr(r->resp, "\n" LOOKUPS_METRIC) : NULL;

    if (line == NULL || c->lookups < 0) {
        c->lookups = -1;
        return;
    }
    c->lookups += atoll(line + 1 + strlen(LOOKUPS_METRIC));
}

/* The refusals' database look-ups so far, over every instance; -1 when an
 * instance did not say. */
static long long lookups_now(struct scen *s, struct refusal_ctx *c)
{
    struct batch b = {0};

    c->lookups = 0;
    for (int t = 0; t < s->o->target_count; t++) {
        struct load_req *r = load_req_new(LOAD_CONTROL, "GET", "/metrics");

        r->target = t;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, metrics_done, c);
    return c->lookups;
}

static void refusal_done(void *arg, struct load_req *r)
{
    struct refusal_ctx *c = arg;
    bool has_order = r->tag2 == 0; /* K: its order exists */
    char text[160];

    if (answer_uncertain(r))
        verdict_session_uncertain(c->s->v, c->sidx);
    if (has_order && r->status == 201) {
        c->replayed++;
    } else if (has_order && is_code(r, 409, "ORDER_TOKEN_INVALID")) {
        c->wrong++;
        verdict_damage(c->s->v, DAMAGE_WRONG_REFUSAL, 1,
                       "refusal-storm: key %ld of the run has its order, and was told 409 "
                       "ORDER_TOKEN_INVALID",
                       r->tag);
    } else if (!has_order && is_code(r, 409, "ORDER_TOKEN_INVALID")) {
        c->refused++;
    } else if (!has_order && r->status == 201 && !r->replayed) {
        c->bought++;
        verdict_session_held(c->s->v, c->sidx, c->s->o->quantity);
    } else if (!answer_transient(r) && !opt_allows(c->s->o, r->code)) {
        verdict_anomaly(c->s->v, "refusal-storm: %s answered %s", has_order ? "K" : "Y",
                        answer_text(r, text, sizeof(text)));
    }
}

int scen_refusal_storm(struct scen *s)
{
    const struct load_opts *o = s->o;
    int rounds = o->rounds > 0 ? o->rounds : 200;
    struct refusal_ctx c = {.s = s};
    struct batch b = {0};
    uint64_t session;
    struct buyer *first = load_xcalloc((size_t)rounds, sizeof(*first));
    struct buyer *spent = load_xcalloc((size_t)rounds, sizeof(*spent));
    int rc = -1;

    c.sidx = session_create(s, "refusal-storm", 2LL * rounds * o->quantity + 10, &session);
    if (c.sidx < 0)
        goto out;
    for (int i = 0; i < rounds; i++)
        first[i].user = spent[i].user = user_new(s);
    tokens_fetch(s, first, rounds);
    int kept = buyers_order(s, first, rounds, session, c.sidx);

    if (o->midway != NULL) {
        int st = scenario_shell_run(o->midway);

        if (st != 0)
            verdict_fail(s->v, "--midway command exited %d: %s", st, o->midway);
        else
            verdict_note(s->v, "refusal-storm: after its orders: %s", o->midway);
    }
    /* Another key spends each user's fresh token: from now on the token
     * is refused to every other key of the user, by Redis. */
    tokens_fetch(s, spent, rounds);
    int spenders = buyers_order(s, spent, rounds, session, c.sidx);

    for (int i = 0; i < rounds; i++) {
        if (!first[i].ordered || !spent[i].ordered)
            continue;
        struct load_req *r =
            req_order(s, first[i].user, first[i].key, spent[i].token, session, o->quantity);

        r->tag = i;
        r->tag2 = 0;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, refusal_done, &c);

    long long before = lookups_now(s, &c);

    for (int i = 0; i < rounds; i++) {
        char key[72];

        if (!spent[i].ordered)
            continue;
        key_new(s, key, sizeof(key));
        struct load_req *r = req_order(s, first[i].user, key, spent[i].token, session, o->quantity);

        r->tag = i;
        r->tag2 = 1;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, refusal_done, &c);
    long long after = lookups_now(s, &c);
    long long lookups = before >= 0 && after >= 0 ? after - before : -1;

    verdict_figure(s->v, "refusal_storm.orders", kept + spenders);
    verdict_figure(s->v, "refusal_storm.replayed", c.replayed);
    verdict_figure(s->v, "refusal_storm.wrong_refusals", c.wrong);
    verdict_figure(s->v, "refusal_storm.refusals", c.refused);
    verdict_figure(s->v, "refusal_storm.refusal_db_lookups", lookups);
    verdict_note(s->v,
                 "refusal-storm: %d users; keys with an order presented a spent token: %lld "
                 "answered with the order, %lld wrongly refused; keys without one: %lld "
                 "refused at %lld database look-ups%s",
                 rounds, c.replayed, c.wrong, c.refused, lookups,
                 lookups < 0 ? " (an instance's /metrics did not say)" : "");
    if (c.bought > 0)
        verdict_anomaly(s->v, "refusal-storm: %lld spent tokens bought again under a new key",
                        c.bought);
    rc = 0;
out:
    free(first);
    free(spent);
    return rc;
}
