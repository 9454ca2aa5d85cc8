/* api.c - the dispatcher (api.h): a request's route, its access and media
 * type checks, then its handler (routes.def). The handlers' shared helpers
 * are reply.c's, so that the dispatcher calls the handlers and the
 * handlers call the helpers, never back. */
#include "api.h"

#include "api_internal.h"
#include "app.h"
#include "auth.h"
#include "err.h"
#include "util.h"

#include <string.h>
#include <strings.h>

/* routes.def's handler and quick step; router.c has the rest of each row. */
struct handler {
    api_handler_fn fn;  /* the route's work: on a fiber, unless it runs INLINE */
    api_quick_fn quick; /* what of it needs no I/O, run first; may answer */
};

static const struct handler handlers[ROUTE_COUNT] = {
#define ROUTE(id, method, pattern, handler, quick, runs, access, body, label)                      \
    [ROUTE_##id] = {handler, quick},
#include "routes.def"
#undef ROUTE
};

/* application/json, any case, parameters (charset) allowed. */
static bool is_json_media_type(const char *ct)
{
    if (ct == NULL)
        return false;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    if (strncasecmp(ct, "application/json", n) != 0)
        return false;
    char next = ct[n];
    return next == '\0' || next == ';' || next == ' ';
}

enum api_step api_begin(struct req *r, struct resp *w)
{
    r->route = router_match(r->method, r->path, &r->match);
    if (r->route == ROUTE_NOT_FOUND) {
        resp_problem(w, PROBLEM_NOT_FOUND, NULL, "no resource at %s", r->path);
        return API_ANSWERED;
    }
    if (r->route == ROUTE_METHOD_NOT_ALLOWED) {
        resp_problem(w, PROBLEM_METHOD_NOT_ALLOWED, NULL, "%s is not allowed here; use %s",
                     r->method, r->match.allow);
        resp_header_add(w, "Allow", r->match.allow);
        return API_ANSWERED;
    }
    const struct route_info *ri = router_route(r->route);
    const struct handler *h = &handlers[r->route];
    if (ri->access != ROUTE_ACCESS_PUBLIC) {
        const struct config *cfg = r->app->cfg;
        if (auth_verify(req_header(r, "Authorization"), cfg->jwt_secret, wall_s(), &r->who) !=
            TD_OK) {
            resp_problem(w, PROBLEM_UNAUTHENTICATED, NULL, "a valid bearer token is required");
            resp_header_add(w, "WWW-Authenticate", "Bearer realm=\"ticketd\"");
            return API_ANSWERED;
        }
        if (ri->access == ROUTE_ACCESS_ADMIN && !r->who.admin) {
            resp_problem(w, PROBLEM_FORBIDDEN, NULL, "this route is for administrators");
            return API_ANSWERED;
        }
    }
    if ((ri->body == ROUTE_BODY_REQUIRED || (ri->body == ROUTE_BODY_OPTIONAL && r->body_len > 0)) &&
        !is_json_media_type(req_header(r, "Content-Type"))) {
        resp_problem(w, PROBLEM_UNSUPPORTED_MEDIA_TYPE, NULL,
                     "the body must be sent as Content-Type: application/json");
        return API_ANSWERED;
    }
    /* Every body's nesting is bounded here, before any handler: the
     * payment callback parses its body after its signature, others after
     * their headers, and none should first have to say something else. */
    if (ri->body != ROUTE_BODY_NONE && r->body_len > 0 && !api_body_shallow(r, w))
        return API_ANSWERED;
    if (ri->runs == ROUTE_RUNS_INLINE) {
        h->fn(r, w);
        return API_ANSWERED;
    }
    return h->quick != NULL ? h->quick(r, w) : API_ON_FIBER;
}

void api_finish(struct req *r, struct resp *w)
{
    handlers[r->route].fn(r, w);
}

void api_dispatch(struct req *r, struct resp *w)
{
    if (api_begin(r, w) == API_ON_FIBER)
        api_finish(r, w);
}
