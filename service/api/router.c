/* router.c - a method and path matched against routes.def (router.h): the
 * route, or 404 versus 405 with Allow. Apart and pure, so that it links and
 * is tested without any handler. */
#include "router.h"

#include <string.h>

/* routes.def's columns as this file reads them: everything but the handler
 * and the quick step, which only api.c names. */
static const struct route_info routes[ROUTE_COUNT] = {
#define ROUTE(id, method, pattern, handler, quick, runs, access, body, label)                      \
    [ROUTE_##id] = {method, pattern, ROUTE_RUNS_##runs, ROUTE_ACCESS_##access, ROUTE_BODY_##body,  \
                    label},
#include "routes.def"
#undef ROUTE
};

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
    for (int i = 0; i < ROUTE_COUNT; i++) {
        memset(&tmp, 0, sizeof tmp);
        if (!match_path(routes[i].pattern, path, &tmp))
            continue;
        path_known = true;
        if (strcmp(routes[i].method, want) == 0) {
            *m = tmp;
            return i;
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

const struct route_info *router_route(int route)
{
    return route >= 0 && route < ROUTE_COUNT ? &routes[route] : NULL;
}

const char *router_pattern(int route)
{
    if (route >= 0 && route < ROUTE_COUNT)
        return routes[route].pattern;
    return route == ROUTE_METHOD_NOT_ALLOWED ? "(method not allowed)" : "(unmatched)";
}

const char *router_label(int route)
{
    if (route >= 0 && route < ROUTE_COUNT)
        return routes[route].label;
    return route == ROUTE_METHOD_NOT_ALLOWED ? "(method not allowed)" : "(unmatched)";
}
