/* fake_store.c - the database port (store.h) answered from the knobs of
 * fakes.h instead of MySQL. Every function of store.h is here, so any
 * domain module links against it. */
#include "fakes.h"
#include "store.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

struct fake_store fake_store;
void (*fake_store_idle_hook)(void);

void fake_store_reset(void)
{
    memset(&fake_store, 0, sizeof fake_store);
    fake_store_idle_hook = NULL;
    fake_store.price_cents = 1000;
    fake_store.find_rc = TD_ENOTFOUND;
    fake_store.get_rc = TD_ENOTFOUND;
}

int store_init(const struct config *cfg)
{
    (void)cfg;
    fake_call("store_init");
    return TD_OK;
}

void store_thread_release(void)
{
    fake_call("store_thread_release");
}

void store_fiber_idle(void)
{
    fake_call("store_fiber_idle");
    if (fake_store_idle_hook != NULL)
        fake_store_idle_hook();
}

void store_cleanup(void)
{
    fake_call("store_cleanup");
}

int store_ping(void)
{
    fake_call("store_ping");
    return fake_store.ping_rc;
}

int store_session_create(const char *title, int64_t price_cents, int64_t stock, struct session *out)
{
    memset(out, 0, sizeof *out);
    fake_call("session_create");
    if (fake_store.session_rc != TD_OK)
        return fake_store.session_rc;
    out->id = 1;
    snprintf(out->title, sizeof out->title, "%s", title);
    out->price_cents = price_cents;
    out->capacity = stock;
    out->stock = stock;
    return TD_OK;
}

int store_session_get(int64_t id, struct session *out)
{
    memset(out, 0, sizeof *out);
    fake_call("session_get");
    if (fake_store.session_rc != TD_OK)
        return fake_store.session_rc;
    *out = fake_store.session;
    out->id = id;
    return TD_OK;
}

int store_order_create(const struct order_draft *d, struct order *out)
{
    memset(out, 0, sizeof *out);
    fake_call("order_create");
    int i = fake_store.create_calls++;
    if (i < FAKE_TRIES)
        snprintf(fake_store.order_nos[i], sizeof fake_store.order_nos[i], "%s", d->order_no);
    fake_store.draft.user_id = d->user_id;
    fake_store.draft.session_id = d->session_id;
    fake_store.draft.quantity = d->quantity;
    snprintf(fake_store.draft.request_id, sizeof fake_store.draft.request_id, "%s", d->request_id);
    fake_store.draft.token_key.null = d->token_key == NULL;
    snprintf(fake_store.draft.token_key.s, sizeof fake_store.draft.token_key.s, "%s",
             d->token_key != NULL ? d->token_key : "");

    int rc = TD_OK;
    if (fake_store.ncreate_rc > 0)
        rc = fake_store.create_rc[i < fake_store.ncreate_rc ? i : fake_store.ncreate_rc - 1];
    if (rc != TD_OK)
        return rc;
    out->id = 1000 + i;
    snprintf(out->order_no, sizeof out->order_no, "%s", d->order_no);
    out->user_id = d->user_id;
    out->session_id = d->session_id;
    snprintf(out->request_id, sizeof out->request_id, "%s", d->request_id);
    out->quantity = d->quantity;
    out->amount_cents = d->quantity * fake_store.price_cents;
    out->status = ORDER_PENDING_PAYMENT;
    out->version = 1;
    snprintf(out->created_at, sizeof out->created_at, "2026-12-01T08:00:00Z");
    snprintf(out->updated_at, sizeof out->updated_at, "2026-12-01T08:00:00Z");
    return TD_OK;
}

int store_order_find_request(int64_t user_id, const char *request_id, struct order *out)
{
    memset(out, 0, sizeof *out);
    fake_call("order_find_request");
    fake_store.find_calls++;
    fake_store.find.user_id = user_id;
    snprintf(fake_store.find.request_id, sizeof fake_store.find.request_id, "%s", request_id);
    if (fake_store.find_calls <= fake_store.find_conflicts)
        return TD_ERETRY;
    if (fake_store.find_rc == TD_OK)
        *out = fake_store.found;
    return fake_store.find_rc;
}

int store_order_get(const char *order_no, int64_t user_id, struct order *out)
{
    (void)order_no;
    (void)user_id;
    memset(out, 0, sizeof *out);
    fake_call("order_get");
    if (fake_store.get_rc == TD_OK)
        *out = fake_store.found;
    return fake_store.get_rc;
}

int store_order_list(int64_t user_id, int64_t before_id, int limit, struct order *out, int *n)
{
    (void)user_id;
    (void)before_id;
    (void)limit;
    (void)out;
    *n = 0;
    fake_call("order_list");
    return TD_OK;
}
