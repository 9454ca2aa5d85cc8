/* order_naive.c - the demo's naive steps of the order flow
 * (order_naive.h), over the domain's key protocol and response cache. */
#include "order_naive.h"

#include "app.h"
#include "idem.h"
#include "inflight_key.h"
#include "response_cache.h"

#include <stdlib.h>

void order_naive_remember_failure(struct app *app, const struct order_request *rq,
                                  struct inflight_key *k, const struct order_render *render,
                                  const struct order_result *res)
{
    bool kept = res->outcome == ORDER_SOLD_OUT || res->outcome == ORDER_UNAVAILABLE;
    if (!kept || k->marker == NULL) {
        inflight_key_release(k);
        return;
    }
    int status = 0;
    size_t len = 0;
    char *body = render->failure(res->outcome, &status, &len);
    inflight_key_complete(k, status, body, len);
    response_cache_keep(app, rq->user_id, rq->key, k->fp, status, body, len);
    free(body);
}

const char *order_naive_no_token_record(const struct app *app, const char *token, char *key)
{
    (void)app, (void)token, (void)key;
    return NULL;
}

const char *order_naive_fresh_item_key(struct app *app, const char *key, char *fresh)
{
    (void)key;
    idem_new_owner(app->instance, fresh);
    return fresh;
}
