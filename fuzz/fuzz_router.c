/* fuzz_router.c - the route table (router_match) under any method and
 * path.
 *
 * Input: "<method>\n<path>". Invariants: the answer is a route id, 404 or
 * 405; a route's parameters are 1..ROUTER_PARAM_MAX characters without
 * '/', and putting them back into the route's pattern gives the path
 * again, byte for byte; only GET, HEAD and POST ever match, and HEAD
 * answers as GET; a 405 names an Allow list of the methods the path does
 * take; a 404 path takes none; nothing is left in the match on a miss. */
#include "fuzz.h"

#include "router.h"

#include <stdbool.h>

/* The largest input worth trying, a little past the limits the parser
 * enforces (fuzz.mk reads it for -max_len). */
#define FUZZ_MAX_LEN 256

static void check_clear_params(const struct route_match *m)
{
    CHECK(m->nparams == 0);
    for (int i = 0; i < ROUTER_MAX_PARAMS; i++)
        CHECK(m->params[i][0] == '\0');
}

/* Rebuilds the path from the route's pattern and the captured params. */
static void check_rebuilds(int route, const struct route_match *m, const char *path)
{
    const char *pattern = router_pattern(route);
    char out[512 + ROUTER_MAX_PARAMS * ROUTER_PARAM_MAX];
    size_t o = 0;
    int used = 0;
    CHECK(m->nparams >= 0 && m->nparams <= ROUTER_MAX_PARAMS);
    for (const char *p = pattern; *p != '\0';) {
        if (*p == '{') {
            CHECK(used < m->nparams);
            const char *param = m->params[used++];
            size_t n = strnlen(param, ROUTER_PARAM_MAX + 1);
            CHECK(n >= 1 && n <= ROUTER_PARAM_MAX && strchr(param, '/') == NULL);
            memcpy(out + o, param, n);
            o += n;
            p = strchr(p, '}');
            CHECK(p != NULL);
            p++;
            continue;
        }
        CHECK(o < sizeof out);
        out[o++] = *p++;
    }
    out[o] = '\0';
    CHECK(used == m->nparams);
    CHECK(strcmp(out, path) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_input in = {data, size};
    char *method = fz_field(&in, '\n');
    char *path = fz_strndup(in.p, in.n);
    struct route_match m, get, post;
    memset(&m, 0x5a, sizeof m);

    int r = router_match(method, path, &m);
    CHECK(r == ROUTE_NOT_FOUND || r == ROUTE_METHOD_NOT_ALLOWED || (r >= 0 && r < ROUTE_COUNT));
    int rg = router_match("GET", path, &get);
    int rp = router_match("POST", path, &post);
    if (r >= 0) {
        CHECK(strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
              strcmp(method, "POST") == 0);
        CHECK(m.allow[0] == '\0');
        check_rebuilds(r, &m, path);
        CHECK(r == (strcmp(method, "POST") == 0 ? rp : rg));
        struct route_match head;
        if (strcmp(method, "GET") == 0)
            CHECK(router_match("HEAD", path, &head) == r);
    } else if (r == ROUTE_METHOD_NOT_ALLOWED) {
        check_clear_params(&m);
        CHECK(rg >= 0 || rp >= 0);
        const char *want = rg >= 0 && rp >= 0 ? "GET, HEAD, POST" : rg >= 0 ? "GET, HEAD" : "POST";
        CHECK(strcmp(m.allow, want) == 0);
        CHECK(!(rg >= 0 && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)));
        CHECK(!(rp >= 0 && strcmp(method, "POST") == 0));
    } else {
        check_clear_params(&m);
        CHECK(m.allow[0] == '\0');
        CHECK(rg == ROUTE_NOT_FOUND && rp == ROUTE_NOT_FOUND);
    }
    if (rg >= 0)
        check_rebuilds(rg, &get, path);
    if (rp >= 0)
        check_rebuilds(rp, &post, path);
    CHECK(strcmp(router_pattern(r), "") != 0);

    free(path);
    free(method);
    return 0;
}
