#include "router.h"

#include <stdbool.h>
#include <string.h>

struct route {
    enum route_id id;
    const char *method;
    const char *pattern;
};

/* Order does not matter for correctness: a path matches a pattern or not,
 * and no two patterns of one method overlap (/api/v1/orders/batch is POST
 * only, /api/v1/orders/{order_no} GET only, and no order number is
 * "batch"). */
static const struct route routes[] = {
    {ROUTE_LIVEZ, "GET", "/livez"},
    {ROUTE_HEALTHZ, "GET", "/healthz"},
    {ROUTE_READYZ, "GET", "/readyz"},
    {ROUTE_METRICS, "GET", "/metrics"},
    {ROUTE_TOKENS_CREATE, "POST", "/api/v1/tokens"},
    {ROUTE_ORDERS_CREATE, "POST", "/api/v1/orders"},
    {ROUTE_ORDERS_BATCH, "POST", "/api/v1/orders/batch"},
    {ROUTE_ORDERS_LIST, "GET", "/api/v1/orders"},
    {ROUTE_ORDER_GET, "GET", "/api/v1/orders/{order_no}"},
    {ROUTE_ORDER_CANCEL, "POST", "/api/v1/orders/{order_no}/cancel"},
    {ROUTE_ORDER_COMPLETE, "POST", "/api/v1/orders/{order_no}/complete"},
    {ROUTE_PAYMENT_CALLBACK, "POST", "/api/v1/payments/callback"},
    {ROUTE_SESSIONS_CREATE, "POST", "/api/v1/sessions"},
    {ROUTE_SESSION_GET, "GET", "/api/v1/sessions/{id}"},
    {ROUTE_ME, "GET", "/api/v1/me"},
    {ROUTE_ADMIN_AUDIT, "GET", "/api/v1/admin/audit"},
};

#define N_ROUTES (sizeof routes / sizeof routes[0])

/* Walks pattern and path segment by segment, capturing {params}. */
static bool match_path(const char *pattern, const char *path, struct route_match *m)
{
    const char *p = pattern;
    const char *s = path;
    m->nparams = 0;
    while (*p != '\0') {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            size_t n = strcspn(s, "/");
            if (close == NULL || n == 0 || n > ROUTER_PARAM_MAX || m->nparams == ROUTER_MAX_PARAMS)
                return false;
            memcpy(m->params[m->nparams], s, n);
            m->params[m->nparams][n] = '\0';
            m->nparams++;
            p = close + 1;
            s += n;
            continue;
        }
        if (*p != *s)
            return false;
        p++;
        s++;
    }
    return *s == '\0';
}

int router_match(const char *method, const char *path, struct route_match *m)
{
    memset(m, 0, sizeof *m);
    const char *want = strcmp(method, "HEAD") == 0 ? "GET" : method;
    bool path_known = false;
    bool allow_get = false, allow_post = false;
    struct route_match tmp;
    for (size_t i = 0; i < N_ROUTES; i++) {
        memset(&tmp, 0, sizeof tmp);
        if (!match_path(routes[i].pattern, path, &tmp))
            continue;
        path_known = true;
        if (strcmp(routes[i].method, want) == 0) {
            *m = tmp;
            return (int)routes[i].id;
        }
        if (strcmp(routes[i].method, "GET") == 0)
            allow_get = true;
        else
            allow_post = true;
    }
    if (!path_known)
        return ROUTE_NOT_FOUND;
    if (allow_get && allow_post)
        strcpy(m->allow, "GET, HEAD, POST");
    else if (allow_get)
        strcpy(m->allow, "GET, HEAD");
    else
        strcpy(m->allow, "POST");
    return ROUTE_METHOD_NOT_ALLOWED;
}

const char *router_pattern(int route)
{
    for (size_t i = 0; i < N_ROUTES; i++) {
        if ((int)routes[i].id == route)
            return routes[i].pattern;
    }
    return route == ROUTE_METHOD_NOT_ALLOWED ? "(method not allowed)" : "(unmatched)";
}
