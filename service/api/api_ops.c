/* api_ops.c - liveness, readiness and metrics: what orchestrators and
 * Prometheus ask. */
#include "api_internal.h"
#include "app.h"
#include "cache.h"
#include "err.h"
#include "metrics.h"
#include "store.h"

#include <stdlib.h>

void api_livez(struct req *r, struct resp *w)
{
    (void)r;
    resp_json(w, 200, json_pack("{s:s}", "status", "ok"));
}

/* Ready means MySQL answers: it decides every guarantee. Redis only
 * accelerates, so its state is reported but does not gate readiness. */
void api_readyz(struct req *r, struct resp *w)
{
    bool draining = atomic_load(&r->app->draining);
    bool mysql_up = store_ping() == TD_OK;
    bool redis_up = cache_ping() == TD_OK;
    const char *status = draining ? "draining" : mysql_up ? "ready" : "not_ready";
    int code = !draining && mysql_up ? 200 : 503;
    resp_json(w, code,
              json_pack("{s:s,s:s,s:s}", "status", status, "mysql", mysql_up ? "up" : "down",
                        "redis", redis_up ? "up" : "down"));
    if (code == 503)
        resp_header_add(w, "Retry-After", "1");
}

void api_metrics(struct req *r, struct resp *w)
{
    size_t len;
    (void)r;
    char *text = metrics_render(&len);
    resp_raw(w, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}
