/* response_cache.c - the response cache in this process
 * (response_cache.h): the first place a retry is answered, before any
 * I/O. What Redis keeps under the key is the key protocol's to replay
 * (inflight_key.c), since one script reads the record and sets the
 * marker. */
#include "response_cache.h"

#include "app.h"
#include "defences.h"
#include "metrics.h"
#include "order_answer.h"
#include "respcache.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

bool response_cache_on(const struct app *app)
{
    /* Stays a switch: the lesson is a retry run again without it. */
    return (app->defences & DEFENCE_RESPONSE_CACHE) != 0;
}

void response_cache_keep(struct app *app, int64_t user_id, const char *key, const char *fp,
                         int status, const char *body, size_t len)
{
    if (!response_cache_on(app))
        return;
    int64_t now = mono_ms();
    respcache_put(app->respcache, user_id, key, fp, status, body, len, now,
                  now + (int64_t)app->cfg->idem_ttl_s * 1000);
}

bool response_cache_replay(struct app *app, int64_t user_id, const char *key, const char *fp,
                           struct order_result *res)
{
    struct cached_response hit;
    if (!response_cache_on(app) || !respcache_get(app->respcache, user_id, key, mono_ms(), &hit))
        return false;
    if (strcmp(hit.fingerprint, fp) != 0) {
        free(hit.body);
        metrics_inc(M_DUP_KEY_REUSED);
        orders_answer(res, ORDER_KEY_REUSED, LAYER_RESPONSE_CACHE);
        return true;
    }
    metrics_inc(M_DUP_RESPONSE_CACHE);
    orders_replay_bytes(res, hit.status, hit.body, hit.body_len);
    return true;
}
