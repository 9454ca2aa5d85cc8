/*
 * load_scen_bench.c - new-orders and hot-session: open-ended distinct orders
 * for the benchmarks (over many sessions, or all on one).
 */
#include "load_scen_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- new-orders and hot-session (benchmarks) ------------------------------ */

/*
 * Open-ended load of distinct new orders (new user, new key each) until the
 * budget or the deadline: over many sessions (new-orders) or all on one
 * (hot-session). With tokens, each order is preceded by its token request.
 */
struct flow_ready {
    uint64_t user;
    char token[160];
};

struct flow_ctx {
    struct scen *s;
    uint64_t *sessions;
    int *sidx;
    int session_count;
    unsigned long next;
    /* Tokens received and not yet used, oldest first (ring). */
    struct flow_ready *ready;
    int ready_head;
    int ready_count;
    int ready_cap;
    int tokens_inflight;
};

static struct load_req *flow_order(struct flow_ctx *c, uint64_t user, const char *token)
{
    char key[72];
    unsigned long i = c->next++;
    int k = (int)(i % (unsigned long)c->session_count);
    struct load_req *r;

    key_new(c->s, key, sizeof(key));
    r = req_order(c->s, user, key, token, c->sessions[k], c->s->o->quantity);
    r->tag = k;
    return r;
}

static struct load_req *flow_next(void *arg, int free_slots)
{
    struct flow_ctx *c = arg;
    struct load_req *r;
    uint64_t user;

    (void)free_slots;
    if (scen_interrupted())
        return NULL;
    if (c->s->o->no_token)
        return flow_order(c, user_new(c->s), NULL);
    if (c->ready_count > 0) {
        struct flow_ready *x = &c->ready[c->ready_head];

        c->ready_head = (c->ready_head + 1) % c->ready_cap;
        c->ready_count--;
        return flow_order(c, x->user, x->token);
    }
    /* Never ask for more tokens than the ring can hold. */
    if (c->tokens_inflight + c->ready_count >= c->ready_cap)
        return NULL;
    user = user_new(c->s);
    r = req_token(c->s, user);
    /* Remember whose token this is: ids stay below 2^53. */
    r->tag2 = (long)user;
    c->tokens_inflight++;
    return r;
}

static void flow_done(void *arg, struct load_req *r)
{
    struct flow_ctx *c = arg;

    if (r->kind == LOAD_TOKEN) {
        const char *t = json_str(r, "token");
        uint64_t user = (uint64_t)r->tag2;

        c->tokens_inflight--;
        if (r->status != 201 || t[0] == '\0')
            return;
        {
            int slot = (c->ready_head + c->ready_count) % c->ready_cap;

            c->ready[slot].user = user;
            snprintf(c->ready[slot].token, sizeof(c->ready[slot].token), "%s", t);
            c->ready_count++;
        }
        return;
    }
    if (r->status == 201 && (!r->replayed || r->attempts > 1)) {
        verdict_session_held(c->s->v, c->sidx[r->tag], c->s->o->quantity);
    } else if (answer_uncertain(r) || (r->attempts > 1 && is_code(r, 409, "REQUEST_IN_PROGRESS"))) {
        verdict_session_uncertain(c->s->v, c->sidx[r->tag]);
    } else if (!is_code(r, 409, "SOLD_OUT") && !opt_allows(c->s->o, r->code)) {
        char text[160];

        /* A new user and a new key each: an order, or sold out. */
        verdict_anomaly(c->s->v, "%s: an order answered %s", c->s->o->scenario,
                        answer_text(r, text, sizeof(text)));
    }
}

static int scen_flow(struct scen *s, bool hot)
{
    const struct load_opts *o = s->o;
    struct flow_ctx c = {.s = s};
    int k = hot ? 1 : (o->sessions > 0 ? o->sessions : 100);
    long long stock = o->stock > 0 ? o->stock : 1000000;
    int rc = -1;

    if (o->session_id != 0)
        k = 1;
    c.sessions = load_xcalloc((size_t)k, sizeof(*c.sessions));
    c.sidx = load_xcalloc((size_t)k, sizeof(*c.sidx));
    c.session_count = k;
    for (int i = 0; i < k; i++) {
        c.sidx[i] = session_pick(s, hot ? "hot-session" : "new-orders", stock, &c.sessions[i]);
        if (c.sidx[i] == -1)
            goto out;
    }
    c.ready_cap = s->concurrency * 2;
    c.ready = load_xcalloc((size_t)c.ready_cap, sizeof(*c.ready));
    load_engine_run(s->eng, s->concurrency, flow_next, flow_done, &c);
    verdict_note(s->v, "%s: %lu orders sent over %d session%s%s",
                 hot ? "hot-session" : "new-orders", c.next, k, k == 1 ? "" : "s",
                 o->no_token ? " (no order tokens)" : "");
    rc = 0;
out:
    free(c.ready);
    free(c.sidx);
    free(c.sessions);
    return rc;
}

int scen_new_orders(struct scen *s)
{
    return scen_flow(s, false);
}

int scen_hot_session(struct scen *s)
{
    return scen_flow(s, true);
}
