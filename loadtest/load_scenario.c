#include "load_scenario.h"

#include "load_sign.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Each scenario instance draws users from its own range so that scenarios
 * of one mixed run never share a user (and so never a session lock). */
#define SCEN_USER_RANGE 1000000000ULL

static atomic_bool interrupted;

void scenario_interrupt(void)
{
    atomic_store(&interrupted, true);
}

/* One running scenario: its engine, its share of the bounds, its users. */
struct scen {
    const struct scen_env *env;
    const struct load_opts *o;
    struct verdict *v;
    struct load_engine *eng;
    int index;
    int concurrency;
    long long budget;
    uint64_t next_user;
    unsigned long key_seq;
    unsigned long txn_seq;
};

/* ---- requests ----------------------------------------------------------- */

static uint64_t user_new(struct scen *s)
{
    return s->o->user_base + (uint64_t)s->index * SCEN_USER_RANGE + ++s->next_user;
}

static void key_new(struct scen *s, char *out, size_t len)
{
    snprintf(out, len, "lt-%s-%d-%lu", s->env->run_id, s->index, ++s->key_seq);
}

static void txn_new(struct scen *s, char *out, size_t len)
{
    snprintf(out, len, "txn-%s-%d-%lu", s->env->run_id, s->index, ++s->txn_seq);
}

static void req_auth(struct scen *s, struct load_req *r, uint64_t user, bool admin)
{
    char jwt[SIGN_JWT_MAX];

    if (sign_jwt(s->o->jwt_secret, user, admin, s->o->token_ttl_s, jwt, sizeof(jwt)) != 0) {
        fprintf(stderr, "ticketd-load: cannot mint a JWT (is the JWT secret set?)\n");
        exit(1);
    }
    load_req_header(r, "Authorization: Bearer %s", jwt);
}

static struct load_req *req_token(struct scen *s, uint64_t user)
{
    struct load_req *r = load_req_new(LOAD_TOKEN, "POST", "/api/v1/tokens");

    req_auth(s, r, user, false);
    load_req_header(r, "Content-Type: application/json");
    return r;
}

static struct load_req *req_order(struct scen *s, uint64_t user, const char *key, const char *token,
                                  uint64_t session, int quantity)
{
    struct load_req *r = load_req_new(LOAD_ORDER, "POST", "/api/v1/orders");
    json_t *body = json_pack("{s:I,s:i}", "session_id", (json_int_t)session, "quantity", quantity);

    req_auth(s, r, user, false);
    load_req_header(r, "Idempotency-Key: %s", key);
    if (token != NULL && token[0] != '\0')
        load_req_header(r, "X-Order-Token: %s", token);
    load_req_json(r, body);
    json_decref(body);
    return r;
}

static struct load_req *req_cancel(struct scen *s, uint64_t user, const char *order_no)
{
    struct load_req *r = load_req_new(LOAD_CANCEL, "POST", "/api/v1/orders/%s/cancel", order_no);

    req_auth(s, r, user, false);
    load_req_header(r, "Content-Type: application/json");
    return r;
}

enum sig_mode { SIG_GOOD, SIG_BAD, SIG_STALE };

static struct load_req *req_callback(struct scen *s, const char *txn, const char *order_no,
                                     long long amount, const char *status, enum sig_mode mode)
{
    struct load_req *r = load_req_new(LOAD_CALLBACK, "POST", "/api/v1/payments/callback");
    json_t *body = json_pack("{s:s,s:s,s:I,s:s}", "txn_id", txn, "order_no", order_no,
                             "amount_cents", (json_int_t)amount, "status", status);
    char *raw = json_dumps(body, JSON_COMPACT);
    long long ts = load_unix_now() - (mode == SIG_STALE ? 3600 : 0);
    char sig[SIGN_HEX_LEN];

    if (raw == NULL || sign_payment(s->o->pay_secret, ts, raw, strlen(raw), sig) != 0) {
        fprintf(stderr, "ticketd-load: cannot sign a callback\n");
        exit(1);
    }
    if (mode == SIG_BAD)
        sig[0] = sig[0] == '0' ? '1' : '0';
    load_req_raw(r, raw, strlen(raw));
    load_req_header(r, "X-Pay-Timestamp: %lld", ts);
    load_req_header(r, "X-Pay-Signature: %s", sig);
    free(raw);
    json_decref(body);
    return r;
}

/* Creates a session through the admin API and registers it with the
 * ledger. Returns the ledger index, or -1. */
static int session_create(struct scen *s, const char *what, long long stock, uint64_t *id)
{
    struct load_req *r = load_req_new(LOAD_CONTROL, "POST", "/api/v1/sessions");
    char title[128];
    json_t *body;
    json_t *jid;
    int idx = -1;

    snprintf(title, sizeof(title), "ticketd-load %s %s", s->env->run_id, what);
    body = json_pack("{s:s,s:I,s:I}", "title", title, "price_cents", (json_int_t)s->o->price,
                     "stock", (json_int_t)stock);
    req_auth(s, r, s->o->admin_user, true);
    load_req_json(r, body);
    json_decref(body);
    load_engine_call(s->eng, r);
    jid = r->json != NULL ? json_object_get(r->json, "id") : NULL;
    if (r->status != 201 || !json_is_integer(jid)) {
        verdict_fail(s->v, "%s: POST /api/v1/sessions answered %ld %s%s", what, r->status, r->code,
                     r->status == 0 ? r->error : "");
        goto out;
    }
    *id = (uint64_t)json_integer_value(jid);
    idx = verdict_session_add(s->v, *id, stock);
out:
    load_req_free(r);
    return idx;
}

/* The session a scenario orders on: --session if given (not accounted,
 * others may use it), else a fresh one. Returns the ledger index or -2 for
 * an unaccounted session, -1 on failure. */
static int session_pick(struct scen *s, const char *what, long long stock, uint64_t *id)
{
    if (s->o->session_id != 0) {
        *id = s->o->session_id;
        return -2;
    }
    return session_create(s, what, stock, id);
}

static const char *json_str(const struct load_req *r, const char *name)
{
    const char *v = r->json != NULL ? json_string_value(json_object_get(r->json, name)) : NULL;

    return v != NULL ? v : "";
}

static long long json_int(const struct load_req *r, const char *name)
{
    json_t *v = r->json != NULL ? json_object_get(r->json, name) : NULL;

    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static bool answer_uncertain(const struct load_req *r)
{
    return r->status == 0 || r->status >= 500;
}

/* A last answer that only says "later": no answer at all, or a 503 with
 * Retry-After, once the client's retries were spent. Not forbidden; the
 * engine counts the request as never answered (a run error). */
static bool answer_transient(const struct load_req *r)
{
    return r->status == 0 || (r->status == 503 && r->retry_after_s >= 0);
}

/* A problem code the run allows besides the scenario's own (--allow). */
static bool opt_allows(const struct load_opts *o, const char *code)
{
    for (int i = 0; i < o->allow_count; i++)
        if (code[0] != '\0' && strcmp(o->allow[i], code) == 0)
            return true;
    return false;
}

static bool is_code(const struct load_req *r, long status, const char *code)
{
    return r->status == status && strcmp(r->code, code) == 0;
}

/* "409 DUPLICATE_SUBMISSION @session-lock", "201 replayed @unique-index". */
static const char *answer_text(const struct load_req *r, char *buf, size_t len)
{
    if (r->status == 0)
        snprintf(buf, len, "no answer (%.100s)", r->error);
    else
        snprintf(buf, len, "%ld%s%s%s%s%s%s", r->status, r->code[0] ? " " : "", r->code,
                 r->replayed ? " replayed" : "", r->layer[0] ? " @" : "", r->layer,
                 r->status == 503 && r->retry_after_s < 0 ? " without Retry-After" : "");
    return buf;
}

/* ---- batches -------------------------------------------------------------- */

/*
 * A list of requests started in order. A group (the copies of one key, the
 * clicks of one burst) starts only when the whole group fits in the free
 * slots, so that its members leave together.
 */
struct batch {
    struct load_req **reqs;
    int *group; /* at a group's first request: its size; else 0 */
    size_t n;
    size_t cap;
    size_t pos;
    size_t last_group;
    int concurrency;
    struct scen *s;
    load_done_fn done;
    void *arg;
};

/* How a request joins a batch: alone, as the first of a new group, or as
 * one more member of the group started last. */
enum batch_mode { BATCH_SOLO, BATCH_GROUP, BATCH_JOIN };

static void batch_add(struct batch *b, struct load_req *r, enum batch_mode mode)
{
    if (b->n == b->cap) {
        size_t cap = b->cap == 0 ? 64 : b->cap * 2;
        struct load_req **nr = realloc(b->reqs, cap * sizeof(*nr));
        int *ng = realloc(b->group, cap * sizeof(*ng));

        if (nr == NULL || ng == NULL) {
            fprintf(stderr, "ticketd-load: out of memory\n");
            abort();
        }
        b->reqs = nr;
        b->group = ng;
        b->cap = cap;
    }
    if (mode == BATCH_JOIN && b->n > 0) {
        b->group[b->n] = 0;
        b->group[b->last_group]++;
    } else {
        b->group[b->n] = 1;
        b->last_group = b->n;
    }
    b->reqs[b->n++] = r;
}

static struct load_req *batch_next(void *arg, int free_slots)
{
    struct batch *b = arg;
    int g;

    if (b->pos == b->n)
        return NULL;
    g = b->group[b->pos];
    /* A group waits for room, unless it could never fit. */
    if (g > 1 && g > free_slots && free_slots < b->concurrency)
        return NULL;
    /* Nor is a group cut by the budget: all copies or none. */
    if (g > 1 && load_engine_budget_left(b->s->eng) < g)
        return NULL;
    return b->reqs[b->pos++];
}

static void batch_done(void *arg, struct load_req *r)
{
    struct batch *b = arg;

    b->done(b->arg, r);
}

/* Runs the batch with the scenario's concurrency and frees it; requests
 * the bounds left unsent are freed without an answer. */
static void batch_run(struct scen *s, struct batch *b, load_done_fn done, void *arg)
{
    b->s = s;
    b->concurrency = s->concurrency;
    b->done = done;
    b->arg = arg;
    if (b->n > 0 && !atomic_load(&interrupted))
        load_engine_run(s->eng, s->concurrency, batch_next, batch_done, b);
    for (size_t i = b->pos; i < b->n; i++)
        load_req_free(b->reqs[i]);
    free(b->reqs);
    free(b->group);
    memset(b, 0, sizeof(*b));
}

/* ---- tokens, shared by the scenarios that buy ---------------------------- */

struct buyer {
    uint64_t user;
    char key[72];
    char token[160];
    bool token_ok;
    char order_no[32];
    long long amount;
    bool ordered;
};

static void tokens_done(void *arg, struct load_req *r)
{
    struct buyer *b = &((struct buyer *)arg)[r->tag];
    const char *t = json_str(r, "token");

    if (r->status == 201 && t[0] != '\0') {
        snprintf(b->token, sizeof(b->token), "%s", t);
        b->token_ok = true;
    }
}

/* Gets one order token per buyer (or marks them all ready with --no-token).
 * Returns how many buyers have a token. */
static int tokens_fetch(struct scen *s, struct buyer *buyers, int n)
{
    struct batch b = {0};
    int ok = 0;

    for (int i = 0; i < n; i++) {
        if (s->o->no_token) {
            buyers[i].token_ok = true;
            continue;
        }
        struct load_req *r = req_token(s, buyers[i].user);

        r->tag = i;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, tokens_done, buyers);
    for (int i = 0; i < n; i++)
        ok += buyers[i].token_ok;
    if (ok < n && !s->o->no_token)
        verdict_note(s->v, "%s: %d of %d token requests failed", s->o->scenario, n - ok, n);
    return ok;
}

/* Orders for buyers, one each (used where the order itself is not the
 * point: gateway-retry and mq-redelivery). */
struct buy_ctx {
    struct scen *s;
    struct buyer *buyers;
    int sidx;
    int quantity;
    int created;
};

static void buy_done(void *arg, struct load_req *r)
{
    struct buy_ctx *c = arg;
    struct buyer *b = &c->buyers[r->tag];

    if (r->status == 201 && !r->replayed) {
        snprintf(b->order_no, sizeof(b->order_no), "%s", json_str(r, "order_no"));
        b->amount = json_int(r, "amount_cents");
        b->ordered = b->order_no[0] != '\0';
        c->created++;
        verdict_session_held(c->s->v, c->sidx, c->quantity);
    } else if (answer_uncertain(r)) {
        verdict_session_uncertain(c->s->v, c->sidx);
    }
}

static int buyers_order(struct scen *s, struct buyer *buyers, int n, uint64_t session, int sidx)
{
    struct buy_ctx c = {.s = s, .buyers = buyers, .sidx = sidx, .quantity = s->o->quantity};
    struct batch b = {0};

    for (int i = 0; i < n; i++) {
        struct load_req *r;

        if (!buyers[i].token_ok)
            continue;
        key_new(s, buyers[i].key, sizeof(buyers[i].key));
        r = req_order(s, buyers[i].user, buyers[i].key, buyers[i].token, session, s->o->quantity);
        r->tag = i;
        batch_add(&b, r, BATCH_SOLO);
    }
    batch_run(s, &b, buy_done, &c);
    return c.created;
}

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
    if (r->replayed)
        k->replayed++;
    else
        k->created++;
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

static int scen_retry_storm(struct scen *s)
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
                if (o->spread_s > 0 && copies > 1)
                    r->delay_s = o->spread_s * j / (copies - 1);
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

static int scen_double_click(struct scen *s)
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
 * seat should be sold while buyers are turned away.
 */
struct sale_ctx {
    struct scen *s;
    int sidx;
    long long created;
    long long sold_out;
    long long other;
};

static void sale_done(void *arg, struct load_req *r)
{
    struct sale_ctx *c = arg;
    char text[160];

    /* A retry's replay is the order its own earlier attempt made. */
    if (r->status == 201 && (!r->replayed || r->attempts > 1)) {
        c->created++;
        verdict_session_held(c->s->v, c->sidx, c->s->o->quantity);
    } else if (r->status == 409 && strcmp(r->code, "SOLD_OUT") == 0) {
        c->sold_out++;
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

static int scen_flash_sale(struct scen *s)
{
    const struct load_opts *o = s->o;
    int sales = o->rounds > 0 ? o->rounds : 1;
    int users = o->users > 0 ? o->users : 200;
    int seats = o->seats > 0 ? o->seats : 10;

    for (int round = 0; round < sales && load_engine_budget_left(s->eng) > 0; round++) {
        struct sale_ctx c = {.s = s};
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
        for (int i = 0; i < users; i++) {
            struct load_req *r;

            if (!bs[i].token_ok)
                continue;
            key_new(s, bs[i].key, sizeof(bs[i].key));
            r = req_order(s, bs[i].user, bs[i].key, bs[i].token, session, o->quantity);
            batch_add(&b, r, BATCH_SOLO);
        }
        batch_run(s, &b, sale_done, &c);
        verdict_figure(s->v, "flash_sale.seats", seats);
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

static int scen_gateway_retry(struct scen *s)
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

static int scen_mq_redelivery(struct scen *s)
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
    if (atomic_load(&interrupted))
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

static int scen_new_orders(struct scen *s)
{
    return scen_flow(s, false);
}

static int scen_hot_session(struct scen *s)
{
    return scen_flow(s, true);
}

/* ---- running them ------------------------------------------------------------ */

typedef int (*scen_fn)(struct scen *s);

struct scen_def {
    const char *name;
    scen_fn run;
};

static int scen_mixed(struct scen *s);

static const struct scen_def scen_defs[] = {
    {"retry-storm", scen_retry_storm},     {"double-click", scen_double_click},
    {"flash-sale", scen_flash_sale},       {"gateway-retry", scen_gateway_retry},
    {"mq-redelivery", scen_mq_redelivery}, {"new-orders", scen_new_orders},
    {"hot-session", scen_hot_session},     {"mixed", scen_mixed},
};

#define SCEN_DEF_COUNT (sizeof(scen_defs) / sizeof(scen_defs[0]))

bool scenario_known(const char *name)
{
    for (size_t i = 0; i < SCEN_DEF_COUNT; i++)
        if (strcmp(scen_defs[i].name, name) == 0)
            return true;
    return false;
}

const char *scenario_names(void)
{
    return "retry-storm, double-click, flash-sale, gateway-retry, mq-redelivery, new-orders, "
           "hot-session, mixed";
}

static struct load_engine *engine_for(const struct scen_env *env, long long budget)
{
    const struct load_opts *o = env->opts;
    struct load_engine_config cfg = {
        .targets = o->targets,
        .target_count = o->target_count,
        .timeout_ms = o->timeout_ms,
        .max_requests = budget,
        .deadline = env->deadline,
        .series_t0 = env->t0,
        .series_tick_s = o->series_interval_s,
        .retries = o->client_retries,
        .retry_window_s = o->retry_window_s,
        .verbose = o->verbose,
        .orders_out = o->orders_out,
    };

    return load_engine_new(&cfg);
}

/* The engines of a run, so that SIGINT (via the flag) and the merge can
 * reach them. */
struct mixed_part {
    struct scen s;
    const struct scen_def *def;
    pthread_t thread;
    bool started;
    int rc;
};

static void *mixed_thread(void *arg)
{
    struct mixed_part *p = arg;

    p->rc = p->def->run(&p->s);
    return NULL;
}

/* A blend: every other scenario at once, each in its own thread with its
 * own engine, a share of the concurrency and of the request budget. */
static int scen_mixed(struct scen *s)
{
    static const char *const parts[] = {"retry-storm",   "double-click",  "flash-sale",
                                        "gateway-retry", "mq-redelivery", "new-orders"};
    enum { PARTS = sizeof(parts) / sizeof(parts[0]) };
    struct mixed_part p[PARTS];
    int conc = s->concurrency / PARTS > 2 ? s->concurrency / PARTS : 2;
    long long budget = s->budget > 0 ? (s->budget + PARTS - 1) / PARTS : 0;
    int rc = 0;

    memset(p, 0, sizeof(p));
    for (int i = 0; i < PARTS; i++) {
        for (size_t d = 0; d < SCEN_DEF_COUNT; d++)
            if (strcmp(scen_defs[d].name, parts[i]) == 0)
                p[i].def = &scen_defs[d];
        p[i].s = *s;
        p[i].s.index = s->index + 1 + i;
        p[i].s.next_user = 0;
        p[i].s.key_seq = 0;
        p[i].s.txn_seq = 0;
        p[i].s.concurrency = conc;
        p[i].s.budget = budget;
        p[i].s.eng = engine_for(s->env, budget);
        if (p[i].s.eng == NULL) {
            verdict_fail(s->v, "mixed: cannot start an engine");
            rc = -1;
        }
    }
    for (int i = 0; i < PARTS && rc == 0; i++) {
        p[i].started = pthread_create(&p[i].thread, NULL, mixed_thread, &p[i]) == 0;
        if (!p[i].started)
            verdict_fail(s->v, "mixed: cannot start a thread");
    }
    for (int i = 0; i < PARTS; i++) {
        if (p[i].started) {
            pthread_join(p[i].thread, NULL);
            load_engine_stats_add(s->eng, load_engine_stats(p[i].s.eng));
        }
        load_engine_free(p[i].s.eng);
    }
    return rc;
}

int scenario_run(const struct scen_env *env, struct load_stats *total)
{
    const struct scen_def *def = NULL;
    struct scen s;
    int rc;

    for (size_t i = 0; i < SCEN_DEF_COUNT; i++)
        if (strcmp(scen_defs[i].name, env->opts->scenario) == 0)
            def = &scen_defs[i];
    if (def == NULL)
        return -1;
    memset(&s, 0, sizeof(s));
    s.env = env;
    s.o = env->opts;
    s.v = env->verdict;
    s.concurrency = env->opts->concurrency;
    s.budget = env->opts->requests;
    s.eng = engine_for(env, s.budget);
    if (s.eng == NULL)
        return -1;
    rc = def->run(&s);
    load_stats_merge(total, load_engine_stats(s.eng));
    load_engine_free(s.eng);
    return rc;
}
