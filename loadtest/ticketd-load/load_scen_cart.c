/*
 * load_scen_cart.c - cart-storm: carts (POST /api/v1/orders/batch) sent
 * many times at once, two carts of one user sharing an item, and items on
 * a session that sells out.
 *
 * Each user has two carts under their own batch keys: A = {a, shared, x}
 * and B = {shared, b, y}, where a, b and shared are on a session with seats
 * enough and x, y on a scarce one. Every cart is sent --copies times at
 * once (A's and B's copies together), then once more after the storm (the
 * client that timed out and retries its cart). With a key per item, each
 * item key of a user is at most one order, whatever cart or copy bought
 * it: a cart whose scarce item sold out is answered complete: false, and
 * its retry names the same orders for the items it bought. With item-keys
 * switched off (one key for the whole cart), the retry of a partly failed
 * cart buys its bought items again, and the shared item is bought by both
 * carts: counted as cart items bought twice (unit: orders).
 */
#include "load_scen_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ITEM_A, ITEM_SHARED, ITEM_B, ITEM_X, ITEM_Y, USER_ITEMS };

static const int cart_items[2][3] = {{ITEM_A, ITEM_SHARED, ITEM_X}, {ITEM_SHARED, ITEM_B, ITEM_Y}};

/* One item key of a user, and every order that the answers named for it. */
struct cart_item {
    char key[72];
    int sidx;
    uint64_t session;
    char orders[8][32]; /* distinct order numbers seen; more than one: damage */
    int norders;
    bool sold_out; /* last answered SOLD_OUT */
};

struct cart_user {
    uint64_t user;
    struct cart_item items[USER_ITEMS];
    struct buyer carts[2]; /* the batch key and token of cart A and cart B */
    bool complete[2];
};

struct cart_ctx {
    struct scen *s;
    struct cart_user *users;
    long long bought;    /* distinct orders named */
    long long twice;     /* orders beyond one per item key */
    long long sold_out;  /* item answers SOLD_OUT */
    long long carts_ok;  /* 200 answers */
    long long in_flight; /* 409 REQUEST_IN_PROGRESS */
};

static struct load_req *req_cart(struct scen *s, const struct cart_user *u, int cart)
{
    const struct buyer *b = &u->carts[cart];
    json_t *items = json_array();

    for (int i = 0; i < 3; i++) {
        const struct cart_item *it = &u->items[cart_items[cart][i]];

        json_array_append_new(items,
                              json_pack("{s:s,s:I,s:i}", "key", it->key, "session_id",
                                        (json_int_t)it->session, "quantity", s->o->quantity));
    }
    json_t *body = json_pack("{s:o}", "items", items);
    struct load_req *r = req_batch(s, u->user, b->key, b->token, body);

    json_decref(body);
    return r;
}

/* An item's answer in a cart's answer: an order is counted once per item
 * key; a second order for one key is damage. */
static void item_answer(struct cart_ctx *c, struct cart_user *u, struct cart_item *it, json_t *e)
{
    long status = (long)json_integer_value(json_object_get(e, "status"));
    const char *no = json_string_value(json_object_get(json_object_get(e, "order"), "order_no"));
    const char *code = json_string_value(json_object_get(json_object_get(e, "problem"), "code"));

    it->sold_out = code != NULL && strcmp(code, "SOLD_OUT") == 0;
    c->sold_out += it->sold_out;
    if (status >= 500)
        verdict_session_uncertain(c->s->v, it->sidx);
    if (status != 201 || no == NULL)
        return;
    for (int i = 0; i < it->norders; i++)
        if (strcmp(it->orders[i], no) == 0)
            return;
    if (it->norders < 8)
        snprintf(it->orders[it->norders++], sizeof(it->orders[0]), "%s", no);
    c->bought++;
    verdict_session_held(c->s->v, it->sidx, c->s->o->quantity);
    if (it->norders > 1) {
        c->twice++;
        verdict_damage(c->s->v, DAMAGE_CART_ITEM_TWICE, 1,
                       "cart-storm: user %llu's item %s was bought as %s and again as %s",
                       (unsigned long long)u->user, it->key, it->orders[0], no);
    }
}

static void cart_done(void *arg, struct load_req *r)
{
    struct cart_ctx *c = arg;
    struct cart_user *u = &c->users[r->tag];
    int cart = (int)r->tag2;
    char text[160];

    if (r->status == 409 && is_code(r, 409, "REQUEST_IN_PROGRESS")) {
        c->in_flight++;
        return;
    }
    if (r->status != 200) {
        for (int i = 0; i < 3; i++)
            if (answer_uncertain(r))
                verdict_session_uncertain(c->s->v, u->items[cart_items[cart][i]].sidx);
        if (!answer_transient(r) && !opt_allows(c->s->o, r->code))
            verdict_anomaly(c->s->v, "cart-storm: cart %s answered %s", u->carts[cart].key,
                            answer_text(r, text, sizeof(text)));
        return;
    }
    json_t *items = r->json != NULL ? json_object_get(r->json, "items") : NULL;

    if (json_array_size(items) != 3) {
        verdict_anomaly(c->s->v, "cart-storm: cart %s answered 200 without its 3 items",
                        u->carts[cart].key);
        return;
    }
    c->carts_ok++;
    u->complete[cart] = json_is_true(json_object_get(r->json, "complete"));
    for (int i = 0; i < 3; i++)
        item_answer(c, u, &u->items[cart_items[cart][i]], json_array_get(items, (size_t)i));
}

/* The users, their item keys and their carts' batch keys and tokens. */
static int cart_users(struct scen *s, struct cart_ctx *c, int rounds, uint64_t sessions[2],
                      const int sidx[2])
{
    int with_tokens = 0;

    for (int i = 0; i < rounds; i++) {
        struct cart_user *u = &c->users[i];
        struct buyer bs[2] = {{0}, {0}};

        u->user = user_new(s);
        for (int k = 0; k < USER_ITEMS; k++) {
            int scarce = k == ITEM_X || k == ITEM_Y;

            key_new(s, u->items[k].key, sizeof(u->items[k].key));
            u->items[k].session = sessions[scarce];
            u->items[k].sidx = sidx[scarce];
        }
        for (int k = 0; k < 2; k++) {
            bs[k].user = u->user;
            key_new(s, bs[k].key, sizeof(bs[k].key));
        }
        if (tokens_fetch(s, bs, 2) == 2)
            with_tokens++;
        u->carts[0] = bs[0];
        u->carts[1] = bs[1];
    }
    return with_tokens;
}

int scen_cart_storm(struct scen *s)
{
    const struct load_opts *o = s->o;
    int rounds = o->rounds > 0 ? o->rounds : 40;
    int copies = o->copies > 0 ? o->copies : 4;
    struct cart_ctx c = {.s = s};
    struct batch b = {0};
    uint64_t sessions[2];
    int sidx[2], complete = 0;

    if (2 * copies > s->concurrency)
        s->concurrency = 2 * copies;
    /* Seats enough for every plain item bought three times over (the
     * damage must show as orders, not as sold out), and seats for a quarter
     * of the scarce items. */
    sidx[0] =
        session_create(s, "cart-storm", (long long)rounds * 9 * o->quantity + 10, &sessions[0]);
    sidx[1] =
        session_create(s, "cart-storm scarce", (long long)(rounds / 2) * o->quantity, &sessions[1]);
    if (sidx[0] < 0 || sidx[1] < 0)
        return -1;
    c.users = load_xcalloc((size_t)rounds, sizeof(*c.users));
    int with_tokens = cart_users(s, &c, rounds, sessions, sidx);

    for (int i = 0; i < rounds; i++) {
        for (int cart = 0; cart < 2; cart++) {
            for (int j = 0; j < copies; j++) {
                struct load_req *r = req_cart(s, &c.users[i], cart);

                r->tag = i;
                r->tag2 = cart;
                batch_add(&b, r, cart == 0 && j == 0 ? BATCH_GROUP : BATCH_JOIN);
            }
        }
    }
    batch_run(s, &b, cart_done, &c);
    /* The retry of every cart, after the storm: it wants the outcome. */
    for (int i = 0; i < rounds; i++) {
        for (int cart = 0; cart < 2; cart++) {
            struct load_req *r = req_cart(s, &c.users[i], cart);

            r->tag = i;
            r->tag2 = cart;
            r->retry_in_progress = true;
            batch_add(&b, r, BATCH_SOLO);
        }
    }
    batch_run(s, &b, cart_done, &c);
    for (int i = 0; i < rounds; i++)
        complete += c.users[i].complete[0] + c.users[i].complete[1];
    verdict_figure(s->v, "cart_storm.carts", 2LL * rounds);
    verdict_figure(s->v, "cart_storm.carts_complete", complete);
    verdict_figure(s->v, "cart_storm.orders", c.bought);
    verdict_figure(s->v, "cart_storm.items_bought_twice", c.twice);
    verdict_figure(s->v, "cart_storm.item_answers_sold_out", c.sold_out);
    verdict_figure(s->v, "cart_storm.copies_in_flight", c.in_flight);
    verdict_note(s->v,
                 "cart-storm: %d users x 2 carts of 3 items (one shared), %d copies each (%d "
                 "users with tokens): %lld orders, %lld items bought twice, %d carts complete "
                 "after the retry, %lld copies told in progress",
                 rounds, copies, with_tokens, c.bought, c.twice, complete, c.in_flight);
    free(c.users);
    return 0;
}
