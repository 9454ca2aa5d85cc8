/*
 * load_scen_orders.c - the same order sent again: retry-storm (copies of one
 * request under one key), double-click (new keys, one session) and
 * flash-sale (more buyers than seats).
 */
#include "load_scen_kit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- retry-storm ----------------------------------------------------------- */

/*
 * One client, one key, one token, and N copies of the same POST at once (a
 * client library retrying on timeout while the first attempt still runs).
 * Exactly one order may come out of each key; every copy must either be
 * that order (replayed) or a "still in progress" rejection; a last retry
 * after the storm must get the order back even though its token is spent.
 */
struct storm_key {
    struct buyer b;
    char order_no[32];
    int created;        /* 201 not replayed */
    int replayed;       /* 201 replayed, same order */
    int different;      /* distinct order_nos besides the first: duplicates */
    char (*others)[32]; /* those order_nos, so that a replay of one counts once */
    int rejected;
    /* Refusals meant for another key (DUPLICATE_SUBMISSION, ORDER_TOKEN_
     * INVALID): forbidden once the key has its order, judged at the end. */
    int refused;
    char refused_as[96];
    bool retried_ok;
};

struct storm_ctx {
    struct scen *s;
    struct storm_key *keys;
    int sidx;
    long long orders;
    long long followups_ok;
    long long followups;
    long long in_progress;    /* copies told 409 REQUEST_IN_PROGRESS */
    uint64_t replayed_max_us; /* the slowest replayed copy: with Prefer, its wait */
};

static void storm_answer(struct storm_ctx *c, struct storm_key *k, struct load_req *r)
{
    const char *no;
    char text[160];

    if (r->status != 201 && r->replayed) {
        /* A failure stored under the key and replayed: the retry can never
         * succeed, whatever became of the cause (forget-failures off). */
        k->rejected++;
        verdict_damage(c->s->v, DAMAGE_FAILURE_REPLAYED, 1,
                       "retry-storm: a retry of key %s was answered a replayed failure (%s)",
                       k->b.key, answer_text(r, text, sizeof(text)));
        return;
    }
    if (r->status != 201) {
        k->rejected++;
        if (answer_uncertain(r))
            verdict_session_uncertain(c->s->v, c->sidx);
        if (is_code(r, 409, "REQUEST_IN_PROGRESS"))
            c->in_progress++;
        if (answer_transient(r) || is_code(r, 409, "REQUEST_IN_PROGRESS") ||
            opt_allows(c->s->o, r->code))
            return;
        if (is_code(r, 409, "DUPLICATE_SUBMISSION") || is_code(r, 409, "ORDER_TOKEN_INVALID")) {
            if (k->refused++ == 0)
                answer_text(r, k->refused_as, sizeof(k->refused_as));
            return;
        }
        verdict_anomaly(c->s->v, "retry-storm: a copy of key %s answered %s", k->b.key,
                        answer_text(r, text, sizeof(text)));
        return;
    }
    no = json_str(r, "order_no");
    if (k->order_no[0] == '\0') {
        snprintf(k->order_no, sizeof(k->order_no), "%s", no);
        c->orders++;
        verdict_session_held(c->s->v, c->sidx, c->s->o->quantity);
    } else if (strcmp(k->order_no, no) != 0) {
        bool seen = false;

        for (int i = 0; i < k->different && !seen; i++)
            seen = strcmp(k->others[i], no) == 0;
        if (!seen) {
            char(*grown)[32] = realloc(k->others, (size_t)(k->different + 1) * sizeof(*grown));

            if (grown == NULL) {
                fprintf(stderr, "ticketd-load: out of memory\n");
                abort();
            }
            k->others = grown;
            snprintf(k->others[k->different++], sizeof(k->others[0]), "%s", no);
            verdict_session_held(c->s->v, c->sidx, c->s->o->quantity);
            verdict_damage(c->s->v, DAMAGE_DUPLICATE_ORDER, 1,
                           "retry-storm: key %s gave order %s and also %s", k->b.key, k->order_no,
                           no);
        }
    }
    if (r->replayed) {
        k->replayed++;
        if (r->latency_us > c->replayed_max_us)
            c->replayed_max_us = r->latency_us;
    } else {
        k->created++;
    }
}

static void storm_done(void *arg, struct load_req *r)
{
    struct storm_ctx *c = arg;
    struct storm_key *k = &c->keys[r->tag];

    storm_answer(c, k, r);
    if (k->created > 1 && k->different == 0 && r->status == 201 && !r->replayed)
        verdict_anomaly(c->s->v,
                        "retry-storm: key %s: the same order answered twice as new (no "
                        "Idempotent-Replayed)",
                        k->b.key);
}

static void storm_followup_done(void *arg, struct load_req *r)
{
    struct storm_ctx *c = arg;
    struct storm_key *k = &c->keys[r->tag];
    bool had = k->order_no[0] != '\0';
    bool same = r->status == 201 && strcmp(json_str(r, "order_no"), k->order_no) == 0;
    const char *why = "";

    char text[160];

    c->followups++;
    storm_answer(c, k, r);
    if (!had)
        return;
    if (same && r->replayed) {
        c->followups_ok++;
        return;
    }
    /* Another order is counted as a duplicate already, and an answer that
     * only says "later" as a request never answered. */
    if ((r->status == 201 && !same) || load_answer_uncertain(r))
        return;
    if (r->status == 201)
        why = " without Idempotent-Replayed";
    else if (!opt_allows(c->s->o, r->code))
        return; /* storm_answer counted it, or the key's refusals will be */
    verdict_anomaly(c->s->v,
                    "retry-storm: the retry of completed key %s answered %s%s, expected its "
                    "order replayed",
                    k->b.key, answer_text(r, text, sizeof(text)), why);
}

/* Keys whose tokens are fetched together, just before their copies leave
 * (a client gets its token when it opens the form): a fault that makes
 * Redis forget tokens costs at most this many keys theirs. */
#define STORM_CHUNK 64

int scen_retry_storm(struct scen *s)
{
    const struct load_opts *o = s->o;
    int rounds = o->rounds > 0 ? o->rounds : 50;
    int copies = o->copies > 0 ? o->copies : 8;
    struct storm_ctx c = {.s = s};
    struct batch b = {0};
    uint64_t session = 0;
    int with_token = 0;
    int refused_keys = 0, refused_no_order = 0;

    if (copies > s->concurrency)
        s->concurrency = copies;
    c.sidx = session_pick(s, "retry-storm",
                          o->stock > 0 ? o->stock : (long long)rounds * o->quantity + 10, &session);
    if (c.sidx == -1)
        return -1;
    c.keys = load_xcalloc((size_t)rounds, sizeof(*c.keys));
    for (int i = 0; i < rounds; i++) {
        c.keys[i].b.user = user_new(s);
        key_new(s, c.keys[i].b.key, sizeof(c.keys[i].b.key));
    }
    for (int from = 0; from < rounds && load_engine_budget_left(s->eng) > 0; from += STORM_CHUNK) {
        int n = rounds - from < STORM_CHUNK ? rounds - from : STORM_CHUNK;
        struct buyer bs[STORM_CHUNK];

        /* Each key's token is taken from a buyer array of its own. */
        for (int i = 0; i < n; i++)
            bs[i] = c.keys[from + i].b;
        with_token += tokens_fetch(s, bs, n);
        for (int i = 0; i < n; i++)
            c.keys[from + i].b = bs[i];
        for (int i = from; i < from + n; i++) {
            if (!c.keys[i].b.token_ok)
                continue;
            for (int j = 0; j < copies; j++) {
                struct load_req *r = req_order(s, c.keys[i].b.user, c.keys[i].b.key,
                                               c.keys[i].b.token, session, o->quantity);

                r->tag = i;
                /* --spread: a client that sends its copy again on its own
                 * timer while the first is still under way. */
                if (o->spread_s > 0 && copies > 1) {
                    r->delay_s = o->spread_s * j / (copies - 1);
                    /* ... through a load balancer: each copy to the next
                     * instance, whatever else is in flight (round robin
                     * over the run would send all of a key's copies to one
                     * instance when the keys in flight are even). */
                    r->target = (i + j) % o->target_count;
                    r->first_choice = true;
                }
                batch_add(&b, r, j == 0 ? BATCH_GROUP : BATCH_JOIN);
            }
        }
        batch_run(s, &b, storm_done, &c);
    }
    /* --late: the retries come after the keys' records expired (a client
     * back from a long timeout, a replay from a log). */
    if (o->late_s > 0) {
        struct timespec ts = {(time_t)o->late_s,
                              (long)((o->late_s - (double)(time_t)o->late_s) * 1e9)};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        verdict_note(s->v, "retry-storm: the retries after the storm left %.1f s after it",
                     o->late_s);
    }
    /* One more retry per key, after the storm: the client that timed out
     * and tries again with the same key and the spent token. It wants the
     * outcome: told "in progress", it waits and asks again. */
    for (int i = 0; i < rounds; i++) {
        struct load_req *r;

        if (!c.keys[i].b.token_ok ||
            (c.keys[i].created + c.keys[i].replayed + c.keys[i].rejected) == 0)
            continue;
        r = req_order(s, c.keys[i].b.user, c.keys[i].b.key, c.keys[i].b.token, session,
                      o->quantity);
        r->tag = i;
        r->retry_in_progress = true;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, storm_followup_done, &c);
    {
        int no_order = 0;

        for (int i = 0; i < rounds; i++) {
            struct storm_key *k = &c.keys[i];

            if (k->b.token_ok && k->order_no[0] == '\0')
                no_order++;
            if (k->refused == 0)
                continue;
            /* Told "refused" while the key has its order: the client would
             * take the order for failed. Without an order, the refusal is
             * true (e.g. Redis forgot the token before the key spent it). */
            if (k->order_no[0] != '\0') {
                refused_keys++;
                verdict_anomalies(s->v, k->refused,
                                  "retry-storm: key %s has order %s, yet %d of its requests were "
                                  "refused (first: %s)",
                                  k->b.key, k->order_no, k->refused, k->refused_as);
            } else {
                refused_no_order++;
            }
        }
        verdict_figure(s->v, "retry_storm.keys", with_token);
        verdict_figure(s->v, "retry_storm.keys_without_order", no_order);
        verdict_figure(s->v, "retry_storm.retries_replayed", c.followups_ok);
        verdict_figure(s->v, "retry_storm.retries", c.followups);
        verdict_figure(s->v, "retry_storm.keys_refused_with_order", refused_keys);
        verdict_figure(s->v, "retry_storm.keys_refused_without_order", refused_no_order);
        verdict_figure(s->v, "retry_storm.in_progress", c.in_progress);
        verdict_figure(s->v, "retry_storm.replayed_max_ms", (long long)(c.replayed_max_us / 1000));
        if (o->prefer_wait_s > 0)
            verdict_note(s->v,
                         "retry-storm: Prefer: wait=%d; %lld copies told REQUEST_IN_PROGRESS, "
                         "the slowest replay answered after %llu ms",
                         o->prefer_wait_s, c.in_progress,
                         (unsigned long long)(c.replayed_max_us / 1000));
        verdict_note(s->v,
                     "retry-storm: %d keys x %d copies (%d with a token): %lld orders, %d keys "
                     "without an order, %lld/%lld retries after the storm replayed",
                     rounds, copies, with_token, c.orders, no_order, c.followups_ok, c.followups);
        if (o->spread_s > 0)
            verdict_note(s->v, "retry-storm: the copies of each key left over %.0f ms",
                         o->spread_s * 1000.0);
        if (refused_no_order > 0)
            verdict_note(s->v,
                         "retry-storm: %d keys were refused and have no order (a true refusal: "
                         "e.g. their token was lost before they spent it)",
                         refused_no_order);
    }
    for (int i = 0; i < rounds; i++)
        free(c.keys[i].others);
    free(c.keys);
    return 0;
}

/* ---- double-click ---------------------------------------------------------- */

/*
 * The impatient user: the same user and session, a new Idempotency-Key per
 * click and a token per click, clicks fired at once. The session lock
 * should let one click through while another is in flight; a click that
 * arrives after the first completed legitimately makes a second order (a
 * lock cannot stop a retry after release), so two orders from one burst are
 * reported, not counted as damage.
 */
struct click_ctx {
    struct scen *s;
    int sidx;
    int *orders;          /* per burst */
    uint64_t *fastest_us; /* per burst: the quickest order created */
    uint64_t *slowest_us; /* per burst: the slowest order created */
    long long created;
    /* per click (burst * clicks + click): when it left and was answered,
     * and whether it made an order; for --lock-ttl */
    double *sent;
    double *answered;
    bool *made;
};

static void click_done(void *arg, struct load_req *r)
{
    struct click_ctx *c = arg;
    char text[160];

    /* A retry's replay is the order its own earlier attempt made. */
    if (r->status == 201 && (!r->replayed || r->attempts > 1)) {
        c->sent[r->tag2] = r->first_start;
        c->answered[r->tag2] = r->t_end;
        c->made[r->tag2] = true;
        c->orders[r->tag]++;
        c->created++;
        if (c->fastest_us[r->tag] == 0 || r->latency_us < c->fastest_us[r->tag])
            c->fastest_us[r->tag] = r->latency_us;
        if (r->latency_us > c->slowest_us[r->tag])
            c->slowest_us[r->tag] = r->latency_us;
        verdict_session_held(c->s->v, c->sidx, c->s->o->quantity);
    } else if (r->status == 201) {
        verdict_anomaly(c->s->v, "double-click: a fresh key was answered as a replay (%s)",
                        answer_text(r, text, sizeof(text)));
    } else if (answer_uncertain(r) || (r->attempts > 1 && is_code(r, 409, "REQUEST_IN_PROGRESS"))) {
        verdict_session_uncertain(c->s->v, c->sidx);
        if (!answer_transient(r) && !is_code(r, 409, "REQUEST_IN_PROGRESS"))
            verdict_anomaly(c->s->v, "double-click: a click answered %s",
                            answer_text(r, text, sizeof(text)));
    } else if (!is_code(r, 409, "DUPLICATE_SUBMISSION") &&
               !(c->s->o->shared_token && is_code(r, 409, "ORDER_TOKEN_INVALID")) &&
               !opt_allows(c->s->o, r->code)) {
        /* The lock turns a click away; with one token per burst the token
         * may too. Each click's own token is never invalid. */
        verdict_anomaly(c->s->v, "double-click: a click answered %s",
                        answer_text(r, text, sizeof(text)));
    }
}

int scen_double_click(struct scen *s)
{
    const struct load_opts *o = s->o;
    int bursts = o->rounds > 0 ? o->rounds : 50;
    int clicks = o->burst > 0 ? o->burst : 2;
    int n = bursts * clicks;
    struct click_ctx c = {.s = s};
    struct buyer *bs;
    struct batch b = {0};
    uint64_t session = 0;
    int one = 0, none = 0, more = 0;
    double fast_ms = 0, slow_ms = 0;

    /* One burst at a time unless asked otherwise: with many bursts queued
     * on a busy server, the clicks of one burst are served one after the
     * other and no longer meet the lock, which tests nothing. */
    if (!o->concurrency_set || clicks > s->concurrency)
        s->concurrency = clicks;
    c.sidx = session_pick(s, "double-click",
                          o->stock > 0 ? o->stock : (long long)n * o->quantity + 10, &session);
    if (c.sidx == -1)
        return -1;
    bs = load_xcalloc((size_t)n, sizeof(*bs));
    c.orders = load_xcalloc((size_t)bursts, sizeof(int));
    c.fastest_us = load_xcalloc((size_t)bursts, sizeof(uint64_t));
    c.slowest_us = load_xcalloc((size_t)bursts, sizeof(uint64_t));
    c.sent = load_xcalloc((size_t)n, sizeof(double));
    c.answered = load_xcalloc((size_t)n, sizeof(double));
    c.made = load_xcalloc((size_t)n, sizeof(bool));
    for (int i = 0; i < bursts; i++) {
        uint64_t user = user_new(s);

        for (int j = 0; j < clicks; j++)
            bs[i * clicks + j].user = user;
    }
    if (o->shared_token) {
        /* One page, one token: every click of the burst sends it. */
        struct buyer *heads = load_xcalloc((size_t)bursts, sizeof(*heads));

        for (int i = 0; i < bursts; i++)
            heads[i].user = bs[i * clicks].user;
        tokens_fetch(s, heads, bursts);
        for (int i = 0; i < n; i++) {
            bs[i].token_ok = heads[i / clicks].token_ok;
            memcpy(bs[i].token, heads[i / clicks].token, sizeof(bs[i].token));
        }
        free(heads);
    } else {
        tokens_fetch(s, bs, n);
    }
    for (int i = 0; i < bursts; i++) {
        for (int j = 0; j < clicks; j++) {
            struct buyer *x = &bs[i * clicks + j];
            struct load_req *r;

            key_new(s, x->key, sizeof(x->key));
            r = req_order(s, x->user, x->key, x->token_ok ? x->token : NULL, session, o->quantity);
            r->tag = i;
            r->tag2 = i * clicks + j;
            /* --gaps: a user clicking again after a while, not at once. */
            for (int g = 0; g < j && o->gap_count > 0; g++)
                r->delay_s += o->gaps_ms[g < o->gap_count ? g : o->gap_count - 1] / 1000.0;
            batch_add(&b, r, j == 0 ? BATCH_GROUP : BATCH_JOIN);
        }
    }
    batch_run(s, &b, click_done, &c);
    /* --lock-ttl: a click that made an order while another click of its
     * burst, which made one too, had left less than the lock's TTL before
     * and was still in flight. That click held the session lock (its order
     * says so) and the lock had not expired (a margin of 100 ms for the
     * time between leaving and taking it): the lock should have turned the
     * later click away. Something freed a lock it did not own. */
    for (int i = 0; i < bursts && o->lock_ttl_s > 0; i++) {
        for (int j = 0; j < clicks; j++) {
            int cj = i * clicks + j;

            for (int k = 0; k < clicks && c.made[cj]; k++) {
                int ck = i * clicks + k;

                if (k == j || !c.made[ck] || c.sent[ck] >= c.sent[cj] ||
                    c.sent[cj] - c.sent[ck] > o->lock_ttl_s - 0.1 || c.answered[ck] <= c.sent[cj])
                    continue;
                verdict_damage(s->v, DAMAGE_LOCK_BYPASSED, 1,
                               "double-click: click %d of user %llu made an order %.0f ms after "
                               "click %d took the lock (TTL %.0f ms), while that one was in flight",
                               j + 1, (unsigned long long)bs[cj].user,
                               (c.sent[cj] - c.sent[ck]) * 1000.0, k + 1, o->lock_ttl_s * 1000.0);
                break;
            }
        }
    }
    for (int i = 0; i < bursts; i++) {
        if (c.orders[i] == 0)
            none++;
        else if (c.orders[i] == 1)
            one++;
        else {
            more++;
            fast_ms += (double)c.fastest_us[i] / 1000.0;
            slow_ms += (double)c.slowest_us[i] / 1000.0;
            /* With one token for the burst, a second order is damage
             * whatever the timing: a token buys one order. */
            if (o->shared_token)
                verdict_damage(s->v, DAMAGE_TOKEN_REUSED, c.orders[i] - 1,
                               "double-click: one order token bought %d orders (user %llu)",
                               c.orders[i], (unsigned long long)bs[i * clicks].user);
        }
    }
    verdict_figure(s->v, "double_click.bursts", bursts);
    verdict_figure(s->v, "double_click.bursts_one_order", one);
    verdict_figure(s->v, "double_click.bursts_several_orders", more);
    verdict_figure(s->v, "double_click.bursts_no_order", none);
    verdict_note(s->v,
                 "double-click: %d bursts of %d clicks%s: %d made one order, %d made more than "
                 "one, %d made none",
                 bursts, clicks, o->shared_token ? " (one token per burst)" : "", one, more, none);
    /* Clicks that left together but were served one after the other (the
     * later one taking about twice as long) never overlapped at the server:
     * the lock had been released, so the second order is allowed. */
    if (more > 0 && !o->shared_token)
        verdict_note(s->v,
                     "double-click: where a burst made more than one order, its quickest order "
                     "took %.2f ms and its slowest %.2f ms on average (about twice as long: the "
                     "server served the clicks one after the other)",
                     fast_ms / more, slow_ms / more);
    free(c.slowest_us);
    free(c.sent);
    free(c.answered);
    free(c.made);
    free(c.fastest_us);
    free(c.orders);
    free(bs);
    return 0;
}

/* ---- flash-sale ------------------------------------------------------------ */

/*
 * Many buyers, few seats: every buyer has a token first, then all orders
 * are released together. No more orders than seats may succeed, and every
 * seat should be sold while buyers are turned away. With --copies N each
 * buyer sends its one order N times (the same key, token and body, as an
 * impatient buyer clicks again): the copies are answered with the order, a
 * refusal of the copy in flight, or SOLD_OUT, and never buy a second seat.
 */
struct sale_ctx {
    struct scen *s;
    int sidx;
    bool copies; /* buyers send copies: replays and in-flight refusals are fine */
    long long created;
    long long sold_out;
    long long other;
    /* When each answer came (monotonic seconds), for the sale's pace. */
    double *ends;
    size_t nends, cap;
    double sold_at; /* the answer of the last order created */
};

static void sale_done(void *arg, struct load_req *r)
{
    struct sale_ctx *c = arg;
    char text[160];

    if (c->nends < c->cap)
        c->ends[c->nends++] = r->t_end;
    /* A retry's replay is the order its own earlier attempt made. */
    if (r->status == 201 && (!r->replayed || r->attempts > 1)) {
        c->created++;
        if (r->t_end > c->sold_at)
            c->sold_at = r->t_end;
        verdict_session_held(c->s->v, c->sidx, c->s->o->quantity);
    } else if (r->status == 409 && strcmp(r->code, "SOLD_OUT") == 0) {
        c->sold_out++;
    } else if (c->copies && (r->status == 201 || is_code(r, 409, "REQUEST_IN_PROGRESS") ||
                             is_code(r, 409, "DUPLICATE_SUBMISSION"))) {
        /* a copy: its buyer's order replayed, or refused while in flight */
    } else {
        c->other++;
        if (answer_uncertain(r) || is_code(r, 409, "REQUEST_IN_PROGRESS"))
            verdict_session_uncertain(c->s->v, c->sidx);
        /* A buyer with a fresh key and a token of its own is sold a seat
         * or told SOLD_OUT; "later" only when the service is down. */
        if (!answer_transient(r) && !(r->attempts > 1 && is_code(r, 409, "REQUEST_IN_PROGRESS")) &&
            !opt_allows(c->s->o, r->code))
            verdict_anomaly(c->s->v, "flash-sale: a buyer answered %s",
                            answer_text(r, text, sizeof(text)));
    }
}

/* The sale's pace, as figures: milliseconds until the last seat was
 * sold, orders per second until then, answers per second after. */
static void sale_pace(struct scen *s, const struct sale_ctx *c, double t0)
{
    double last = t0;
    long long after = 0;
    for (size_t i = 0; i < c->nends; i++) {
        if (c->ends[i] > last)
            last = c->ends[i];
        if (c->created > 0 && c->ends[i] > c->sold_at)
            after++;
    }
    if (c->created == 0)
        return;
    double until = c->sold_at - t0, rest = last - c->sold_at;
    verdict_figure(s->v, "flash_sale.requests", (long long)c->nends);
    verdict_figure(s->v, "flash_sale.sold_out_ms", (long long)(until * 1000));
    if (until > 0)
        verdict_figure(s->v, "flash_sale.orders_per_s", (long long)(c->created / until));
    verdict_figure(s->v, "flash_sale.answers_after", after);
    if (rest > 0)
        verdict_figure(s->v, "flash_sale.answers_per_s_after", (long long)(after / rest));
}

int scen_flash_sale(struct scen *s)
{
    const struct load_opts *o = s->o;
    int sales = o->rounds > 0 ? o->rounds : 1;
    int users = o->users > 0 ? o->users : 200;
    int seats = o->seats > 0 ? o->seats : 10;
    int copies = o->copies > 0 ? o->copies : 1;

    for (int round = 0; round < sales && load_engine_budget_left(s->eng) > 0; round++) {
        struct sale_ctx c = {.s = s, .copies = copies > 1};
        struct buyer *bs = load_xcalloc((size_t)users, sizeof(*bs));
        struct batch b = {0};
        uint64_t session = 0;
        long long stock = (long long)seats * o->quantity;
        int ready;

        c.sidx = session_create(s, "flash-sale", stock, &session);
        if (c.sidx < 0) {
            free(bs);
            return -1;
        }
        for (int i = 0; i < users; i++)
            bs[i].user = user_new(s);
        ready = tokens_fetch(s, bs, users);
        for (int i = 0; i < users; i++)
            key_new(s, bs[i].key, sizeof(bs[i].key));
        /* Every buyer's first click, then every buyer's second, ... */
        for (int k = 0; k < copies; k++) {
            for (int i = 0; i < users; i++) {
                if (!bs[i].token_ok)
                    continue;
                batch_add(&b,
                          req_order(s, bs[i].user, bs[i].key, bs[i].token, session, o->quantity),
                          BATCH_SOLO);
            }
        }
        c.cap = b.n;
        c.ends = load_xcalloc(c.cap > 0 ? c.cap : 1, sizeof(*c.ends));
        double t0 = load_now();
        batch_run(s, &b, sale_done, &c);
        sale_pace(s, &c, t0);
        free(c.ends);
        verdict_figure(s->v, "flash_sale.seats", seats);
        verdict_figure(s->v, "flash_sale.session", (long long)session);
        verdict_figure(s->v, "flash_sale.orders", c.created);
        verdict_figure(s->v, "flash_sale.sold_out", c.sold_out);
        verdict_note(s->v,
                     "flash-sale %d: %d seats, %d buyers with a token: %lld orders, %lld sold "
                     "out, %lld other answers",
                     round + 1, seats, ready, c.created, c.sold_out, c.other);
        if (c.created < seats && c.sold_out > 0 && c.other == 0)
            verdict_anomalies(s->v, c.sold_out < seats - c.created ? c.sold_out : seats - c.created,
                              "flash-sale %d: SOLD_OUT answered with %lld of %d seats unsold",
                              round + 1, seats - c.created, seats);
        free(bs);
    }
    return 0;
}
