/*
 * load_scen_kit.c - the parts every scenario is made of (load_scen_kit.h):
 * users, keys and txn_ids unique in the run, requests as ticketd's clients
 * send them, reading answers, batches, and buyers with order tokens.
 */
#include "load_scen_kit.h"

#include "load_sign.h"
#include "paysign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each scenario instance draws users from its own range so that scenarios
 * of one mixed run never share a user (and so never a session lock). */
#define SCEN_USER_RANGE 1000000000ULL

/* ---- requests ----------------------------------------------------------- */

uint64_t user_new(struct scen *s)
{
    return s->o->user_base + (uint64_t)s->index * SCEN_USER_RANGE + ++s->next_user;
}

void key_new(struct scen *s, char *out, size_t len)
{
    snprintf(out, len, "lt-%s-%d-%lu", s->env->run_id, s->index, ++s->key_seq);
}

void txn_new(struct scen *s, char *out, size_t len)
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
    r->client = user;
}

struct load_req *req_token(struct scen *s, uint64_t user)
{
    struct load_req *r = load_req_new(LOAD_TOKEN, "POST", "/api/v1/tokens");

    req_auth(s, r, user, false);
    load_req_header(r, "Content-Type: application/json");
    return r;
}

struct load_req *req_order(struct scen *s, uint64_t user, const char *key, const char *token,
                           uint64_t session, int quantity)
{
    struct load_req *r = load_req_new(LOAD_ORDER, "POST", "/api/v1/orders");
    json_t *body = json_pack("{s:I,s:i}", "session_id", (json_int_t)session, "quantity", quantity);

    req_auth(s, r, user, false);
    load_req_header(r, "Idempotency-Key: %s", key);
    if (token != NULL && token[0] != '\0')
        load_req_header(r, "X-Order-Token: %s", token);
    if (s->o->prefer_wait_s > 0)
        load_req_header(r, "Prefer: wait=%d", s->o->prefer_wait_s);
    load_req_json(r, body);
    json_decref(body);
    return r;
}

struct load_req *req_batch(struct scen *s, uint64_t user, const char *key, const char *token,
                           const json_t *body)
{
    struct load_req *r = load_req_new(LOAD_ORDER, "POST", "/api/v1/orders/batch");

    req_auth(s, r, user, false);
    load_req_header(r, "Idempotency-Key: %s", key);
    if (token != NULL && token[0] != '\0')
        load_req_header(r, "X-Order-Token: %s", token);
    if (s->o->prefer_wait_s > 0)
        load_req_header(r, "Prefer: wait=%d", s->o->prefer_wait_s);
    load_req_json(r, body);
    return r;
}

struct load_req *req_cancel(struct scen *s, uint64_t user, const char *order_no)
{
    struct load_req *r = load_req_new(LOAD_CANCEL, "POST", "/api/v1/orders/%s/cancel", order_no);

    req_auth(s, r, user, false);
    load_req_header(r, "Content-Type: application/json");
    return r;
}

struct load_req *req_callback(struct scen *s, const char *txn, const char *order_no,
                              long long amount, const char *status, enum sig_mode mode)
{
    struct load_req *r = load_req_new(LOAD_CALLBACK, "POST", "/api/v1/payments/callback");
    json_t *body = json_pack("{s:s,s:s,s:I,s:s}", "txn_id", txn, "order_no", order_no,
                             "amount_cents", (json_int_t)amount, "status", status);
    char *raw = json_dumps(body, JSON_COMPACT);
    long long ts = load_unix_now() - (mode == SIG_STALE ? 3600 : 0);
    char ts_text[24];
    char sig[PAYSIGN_HEX_LEN];

    snprintf(ts_text, sizeof(ts_text), "%lld", ts);
    if (raw == NULL || paysign(s->o->pay_secret, ts_text, raw, strlen(raw), sig) != 0) {
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
int session_create(struct scen *s, const char *what, long long stock, uint64_t *id)
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
int session_pick(struct scen *s, const char *what, long long stock, uint64_t *id)
{
    if (s->o->session_id != 0) {
        *id = s->o->session_id;
        return -2;
    }
    return session_create(s, what, stock, id);
}

const char *json_str(const struct load_req *r, const char *name)
{
    const char *v = r->json != NULL ? json_string_value(json_object_get(r->json, name)) : NULL;

    return v != NULL ? v : "";
}

long long json_int(const struct load_req *r, const char *name)
{
    json_t *v = r->json != NULL ? json_object_get(r->json, name) : NULL;

    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

bool answer_uncertain(const struct load_req *r)
{
    return r->status == 0 || r->status >= 500;
}

/* A last answer that only says "later": no answer at all, or a 503 with
 * Retry-After, once the client's retries were spent. Not forbidden; the
 * engine counts the request as never answered (a run error). */
bool answer_transient(const struct load_req *r)
{
    return r->status == 0 || (r->status == 503 && r->retry_after_s >= 0);
}

/* A problem code the run allows besides the scenario's own (--allow). */
bool opt_allows(const struct load_opts *o, const char *code)
{
    for (int i = 0; i < o->allow_count; i++)
        if (code[0] != '\0' && strcmp(o->allow[i], code) == 0)
            return true;
    return false;
}

bool is_code(const struct load_req *r, long status, const char *code)
{
    return r->status == status && strcmp(r->code, code) == 0;
}

/* "409 DUPLICATE_SUBMISSION @session-lock", "201 replayed @unique-index". */
const char *answer_text(const struct load_req *r, char *buf, size_t len)
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

void batch_add(struct batch *b, struct load_req *r, enum batch_mode mode)
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
void batch_run(struct scen *s, struct batch *b, load_done_fn done, void *arg)
{
    b->s = s;
    b->concurrency = s->concurrency;
    b->done = done;
    b->arg = arg;
    if (b->n > 0 && !scen_interrupted())
        load_engine_run(s->eng, s->concurrency, batch_next, batch_done, b);
    for (size_t i = b->pos; i < b->n; i++)
        load_req_free(b->reqs[i]);
    free(b->reqs);
    free(b->group);
    memset(b, 0, sizeof(*b));
}

/* ---- tokens, shared by the scenarios that buy ---------------------------- */

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
int tokens_fetch(struct scen *s, struct buyer *buyers, int n)
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

int buyers_order(struct scen *s, struct buyer *buyers, int n, uint64_t session, int sidx)
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
