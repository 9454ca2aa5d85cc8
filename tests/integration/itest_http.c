/* The HTTP layer and identity against the real binary, Redis and MariaDB:
 * operations routes, 404/405, request ids, bearer tokens, sessions, order
 * tokens, body limits and framing on raw sockets, keep-alive and metrics.
 * Every refused request is also checked to have written nothing. */
#include "harness.h"

#include "auth.h"
#include "digest.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* The limit the server is started with, so the edges below do not depend
 * on the default. */
#define MAX_BODY 16384

static struct th_server srv;

static int setup(void **state)
{
    (void)state;
    const char *env[] = {"TICKETD_MAX_BODY=16384", NULL};
    th_fresh_start(&srv, th_next_port(10, 10), env);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_stop_clean(&srv);
    return 0;
}

/* ---- helpers ---- */

static void expect_header(const struct th_resp *r, const char *name, const char *want)
{
    char v[512];
    if (th_header(r, name, v, sizeof v) == NULL)
        fail_msg("no %s header on %ld %s", name, r->status, r->body);
    if (strcmp(v, want) != 0)
        fail_msg("%s: expected \"%s\", got \"%s\"", name, want, v);
}

/* A status and problem code, the problem media type and a request id. */

static void expect_field(const struct th_resp *r, const char *field)
{
    th_expect_problem(r, 400, "VALIDATION_FAILED");
    json_t *j = th_json(r);
    const char *f = json_string_value(json_object_get(j, "field"));
    if (f == NULL || strcmp(f, field) != 0)
        fail_msg("expected field %s, got %s", field, r->body);
    json_decref(j);
}

static void expect_unauthenticated(const struct th_resp *r, const char *what)
{
    char v[128];
    if (r->status != 401 || strcmp(th_code(r), "UNAUTHENTICATED") != 0)
        fail_msg("%s: expected 401 UNAUTHENTICATED, got %ld %s", what, r->status, r->body);
    expect_header(r, "Content-Type", "application/problem+json");
    if (th_header(r, "WWW-Authenticate", v, sizeof v) == NULL || strncmp(v, "Bearer", 6) != 0)
        fail_msg("%s: no WWW-Authenticate: Bearer challenge", what);
}

static int64_t sessions_in_db(void)
{
    return th_db_int("SELECT COUNT(*) FROM sessions");
}

/* The body of a valid session creation. */
#define GOOD_SESSION "{\"title\":\"Night show\",\"price_cents\":1500,\"stock\":40}"

/* ---- hand-made JWTs ---- */

static void b64url(const void *in, size_t n, char *out)
{
    b64url_encode(in, n, out);
}

/* Replaces every "EXP" in payload with exp, so one table row can carry a
 * payload whose expiry is computed at run time. */
static void with_exp(const char *payload, long long exp, char *out, size_t cap)
{
    char num[32];
    size_t o = 0;
    snprintf(num, sizeof num, "%lld", exp);
    for (const char *p = payload; *p != '\0' && o + 32 < cap;) {
        if (strncmp(p, "EXP", 3) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%s", num);
            p += 3;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

enum sig_kind { SIG_HS256, SIG_HS512, SIG_EMPTY, SIG_WRONG_KEY };

/* A compact JWT from its header and payload JSON, signed as kind says. */
static void make_jwt(const char *header, const char *payload, enum sig_kind kind, char *out,
                     size_t cap)
{
    char h[512], p[1024], sig[128];
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    assert_true(b64url_len(strlen(header)) < sizeof h);
    assert_true(b64url_len(strlen(payload)) < sizeof p);
    b64url(header, strlen(header), h);
    b64url(payload, strlen(payload), p);
    char *signing = xasprintf("%s.%s", h, p);
    sig[0] = '\0';
    if (kind != SIG_EMPTY) {
        const char *key =
            kind == SIG_WRONG_KEY ? "another-secret-of-enough-length-0123456789" : TH_JWT_SECRET;
        const EVP_MD *md = kind == SIG_HS512 ? EVP_sha512() : EVP_sha256();
        assert_non_null(HMAC(md, key, (int)strlen(key), (const unsigned char *)signing,
                             strlen(signing), mac, &mac_len));
        b64url(mac, mac_len, sig);
    }
    snprintf(out, cap, "%s.%s", signing, sig);
    free(signing);
}

/* ---- raw sockets ---- */

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    assert_true(fd >= 0);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
    return fd;
}

/* True once buf holds one whole response (headers and Content-Length
 * bytes of body); *end is where it ends. */
static bool response_complete(const char *buf, size_t len, size_t *end)
{
    const char *hend = strstr(buf, "\r\n\r\n");
    if (hend == NULL)
        return false;
    size_t head = (size_t)(hend - buf) + 4;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    size_t body = cl != NULL && cl < hend ? (size_t)atol(cl + 17) : 0;
    if (len < head + body)
        return false;
    *end = head + body;
    return true;
}

struct raw_result {
    int status;
    bool closed;    /* the server closed the connection */
    size_t sent;    /* bytes of the request it took */
    double seconds; /* until the response was complete */
    char text[4096];
};

/* Sends bytes on a new connection while reading what comes back, so a
 * server that answers early and stops reading cannot deadlock us. Returns
 * after one complete response and, when wait_close, once the server has
 * closed (or timeout_ms passed). */
static void raw_exchange(const char *bytes, size_t len, bool wait_close, int timeout_ms,
                         struct raw_result *out)
{
    memset(out, 0, sizeof *out);
    int fd = raw_connect(srv.port);
    size_t got = 0, end = 0;
    bool complete = false;
    double t0 = th_now_s(), deadline = t0 + timeout_ms / 1000.0;
    while (th_now_s() < deadline) {
        struct pollfd p = {fd, POLLIN | (out->sent < len ? POLLOUT : 0), 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        if ((p.revents & POLLOUT) != 0 && out->sent < len) {
            ssize_t w = send(fd, bytes + out->sent, len - out->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                out->sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                len = out->sent; /* the server stopped taking it */
        }
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            char tmp[4096];
            ssize_t n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                out->closed = true;
                break;
            }
            if (n > 0) {
                size_t keep = (size_t)n;
                if (got + keep >= sizeof out->text)
                    keep = sizeof out->text - 1 - got;
                memcpy(out->text + got, tmp, keep);
                got += keep;
                out->text[got] = '\0';
            }
        }
        if (!complete && response_complete(out->text, got, &end)) {
            complete = true;
            out->seconds = th_now_s() - t0;
            if (!wait_close)
                break;
        }
    }
    close(fd);
    if (!complete)
        out->seconds = th_now_s() - t0;
    if (sscanf(out->text, "HTTP/1.%*d %d", &out->status) != 1)
        out->status = 0;
}

/* Reads one complete response from fd into buf; returns its status (0 on
 * timeout or close). */
static int read_response(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t got = 0, end = 0;
    int status = 0;
    double deadline = th_now_s() + timeout_ms / 1000.0;
    buf[0] = '\0';
    while (th_now_s() < deadline && got + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        if (response_complete(buf, got, &end))
            break;
    }
    if (!response_complete(buf, got, &end) || sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}

/* The problem code inside a raw response, or "". */
static const char *raw_code(const char *text)
{
    static char code[64];
    code[0] = '\0';
    const char *body = strstr(text, "\r\n\r\n");
    if (body == NULL)
        return code;
    json_t *j = json_loads(body + 4, 0, NULL);
    const char *c = json_string_value(json_object_get(j, "code"));
    if (c != NULL)
        snprintf(code, sizeof code, "%s", c);
    json_decref(j);
    return code;
}

static void expect_alive(void)
{
    struct th_resp r = th_call(&srv, "GET", "/livez", NULL, NULL);
    if (r.status != 200)
        fail_msg("the server no longer answers /livez: %ld", r.status);
    th_resp_free(&r);
}

/* ---- operations routes, 404 and 405 ---- */

static void test_health_routes(void **state)
{
    static const char *const paths[] = {"/livez", "/healthz"};
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        struct th_resp r = th_call(&srv, "GET", paths[i], NULL, NULL);
        assert_int_equal(r.status, 200);
        expect_header(&r, "Content-Type", "application/json");
        json_t *j = th_json(&r);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
        assert_int_equal(json_object_size(j), 1);
        json_decref(j);
        th_resp_free(&r);
    }

    struct th_resp r = th_call(&srv, "GET", "/readyz", NULL, NULL);
    assert_int_equal(r.status, 200);
    expect_header(&r, "Content-Type", "application/json");
    json_t *j = th_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ready");
    assert_string_equal(json_string_value(json_object_get(j, "mysql")), "up");
    assert_string_equal(json_string_value(json_object_get(j, "redis")), "up");
    json_decref(j);
    th_resp_free(&r);

    /* HEAD answers like GET, headers only. */
    char v[64];
    r = th_call(&srv, "HEAD", "/livez", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    expect_header(&r, "Content-Type", "application/json");
    assert_non_null(th_header(&r, "X-Request-Id", v, sizeof v));
    th_resp_free(&r);
    int64_t s = th_session(&srv, 5, 100);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/sessions/%lld", (long long)s);
    r = th_call(&srv, "HEAD", path, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    th_resp_free(&r);
}

static void test_not_found_and_method_not_allowed(void **state)
{
    static const char *const missing[] = {
        "/",       "/nope",          "/livez/",         "/api/v1/session/1", "/api/v1/sessions/1/x",
        "/API/v1", "/api/v2/tokens", "/api/v1/tokens/", "/api/v1/orders/x/y"};
    static const struct {
        const char *method, *path, *allow;
    } wrong[] = {
        {"DELETE", "/api/v1/sessions/1", "GET, HEAD"},
        {"POST", "/api/v1/sessions/1", "GET, HEAD"},
        {"GET", "/api/v1/sessions", "POST"},
        {"PUT", "/api/v1/orders", "GET, HEAD, POST"},
        {"GET", "/api/v1/tokens", "POST"},
        {"HEAD", "/api/v1/tokens", "POST"},
        {"POST", "/livez", "GET, HEAD"},
        {"PATCH", "/readyz", "GET, HEAD"},
        {"DELETE", "/metrics", "GET, HEAD"},
        {"GET", "/api/v1/payments/callback", "POST"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        struct th_resp r = th_call(&srv, "GET", missing[i], NULL, NULL);
        if (r.status != 404 || strcmp(th_code(&r), "NOT_FOUND") != 0)
            fail_msg("GET %s: expected 404 NOT_FOUND, got %ld %s", missing[i], r.status, r.body);
        th_expect_problem(&r, 404, "NOT_FOUND");
        th_resp_free(&r);
    }
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        struct th_resp r = th_call(&srv, wrong[i].method, wrong[i].path, NULL, NULL);
        if (r.status != 405)
            fail_msg("%s %s: expected 405, got %ld", wrong[i].method, wrong[i].path, r.status);
        if (strcmp(wrong[i].method, "HEAD") != 0)
            th_expect_problem(&r, 405, "METHOD_NOT_ALLOWED");
        expect_header(&r, "Allow", wrong[i].allow);
        th_resp_free(&r);
    }
    /* The route is resolved before identity: 405 even without a token. */
    struct th_resp r = th_call(&srv, "DELETE", "/api/v1/orders/ABC", NULL, NULL);
    th_expect_problem(&r, 405, "METHOD_NOT_ALLOWED");
    expect_header(&r, "Allow", "GET, HEAD");
    th_resp_free(&r);
}

/* An encoded NUL must not cut the path short: /livez%00x is not /livez,
 * and a proxy that judges paths by their ending (say, caching "*.css")
 * must not be handed an admin answer under another name. */
static void test_encoded_nul_in_path(void **state)
{
    static const char *const paths[] = {"/livez%00x", "/api/v1/sessions%00/1",
                                        "/api/v1/admin/audit%00.css"};
    (void)state;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *admin[] = {th_auth_header(1, true), NULL};
        struct th_resp r = th_call(&srv, "GET", paths[i], admin, NULL);
        if (r.status != 404 || strcmp(th_code(&r), "NOT_FOUND") != 0)
            fail_msg("GET %s: expected 404 NOT_FOUND, got %ld %.120s", paths[i], r.status, r.body);
        th_resp_free(&r);
    }
}

/* ---- request ids ---- */

static bool is_generated_id(const char *v)
{
    size_t n = strlen(v);
    if (n < 16 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static void test_request_id(void **state)
{
    char v[512], hdr[400], first[128];
    (void)state;

    /* A sane one is echoed, on success and on errors alike. */
    const char *sane[] = {"X-Request-Id: req-42_A.b:c", NULL};
    struct th_resp r = th_call(&srv, "GET", "/livez", sane, NULL);
    expect_header(&r, "X-Request-Id", "req-42_A.b:c");
    th_resp_free(&r);
    r = th_call(&srv, "GET", "/nope", sane, NULL);
    expect_header(&r, "X-Request-Id", "req-42_A.b:c");
    th_resp_free(&r);
    r = th_call(&srv, "POST", "/api/v1/sessions", sane, GOOD_SESSION);
    th_expect_problem(&r, 401, "UNAUTHENTICATED");
    expect_header(&r, "X-Request-Id", "req-42_A.b:c");
    th_resp_free(&r);

    /* 64 characters is the longest echoed. */
    char id64[65];
    memset(id64, 'a', 64);
    id64[64] = '\0';
    snprintf(hdr, sizeof hdr, "X-Request-Id: %s", id64);
    const char *longest[] = {hdr, NULL};
    r = th_call(&srv, "GET", "/livez", longest, NULL);
    expect_header(&r, "X-Request-Id", id64);
    th_resp_free(&r);

    /* None sent: a new one each time. */
    th_request_ids(false);
    r = th_call(&srv, "GET", "/livez", NULL, NULL);
    assert_non_null(th_header(&r, "X-Request-Id", first, sizeof first));
    assert_true(is_generated_id(first));
    th_resp_free(&r);
    r = th_call(&srv, "GET", "/livez", NULL, NULL);
    assert_non_null(th_header(&r, "X-Request-Id", v, sizeof v));
    assert_true(is_generated_id(v));
    assert_string_not_equal(v, first);
    th_resp_free(&r);

    /* Junk is replaced, never echoed. */
    char id200[201];
    memset(id200, 'b', 200);
    id200[200] = '\0';
    char junk200[260];
    snprintf(junk200, sizeof junk200, "X-Request-Id: %s", id200);
    const char *const junk[] = {"X-Request-Id: has spaces in it", junk200,
                                "X-Request-Id: semi;colon", "X-Request-Id: <script>",
                                "X-Request-Id: quote\"d"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        const char *h[] = {junk[i], NULL};
        r = th_call(&srv, "GET", "/livez", h, NULL);
        assert_int_equal(r.status, 200);
        assert_non_null(th_header(&r, "X-Request-Id", v, sizeof v));
        if (!is_generated_id(v))
            fail_msg("request id from \"%s\" came back as \"%s\"", junk[i], v);
        th_resp_free(&r);
    }
    th_request_ids(true);
}

/* ---- identity ---- */

static void test_bearer_tokens(void **state)
{
    char jwt[2048], hdr[2200], payload[512];
    long long now = (long long)time(NULL);
    static const char *const hs256 = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    static const struct {
        const char *name;
        const char *header;
        const char *payload;
        enum sig_kind sig;
    } bad[] = {
        {"alg none", "{\"alg\":\"none\",\"typ\":\"JWT\"}",
         "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":EXP}", SIG_EMPTY},
        {"alg none, signed anyway", "{\"alg\":\"none\",\"typ\":\"JWT\"}",
         "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"HS256 without signature", NULL, "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":EXP}",
         SIG_EMPTY},
        {"HS512 with the right key", "{\"alg\":\"HS512\",\"typ\":\"JWT\"}",
         "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS512},
        {"wrong key", NULL, "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":EXP}", SIG_WRONG_KEY},
        {"sub not numeric", NULL, "{\"sub\":\"abc\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"sub 0", NULL, "{\"sub\":\"0\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"sub 2^53", NULL, "{\"sub\":\"9007199254740992\",\"role\":\"admin\",\"exp\":EXP}",
         SIG_HS256},
        {"sub 2^64", NULL, "{\"sub\":\"18446744073709551616\",\"role\":\"admin\",\"exp\":EXP}",
         SIG_HS256},
        {"sub negative", NULL, "{\"sub\":\"-1\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"sub leading zero", NULL, "{\"sub\":\"01\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"sub empty", NULL, "{\"sub\":\"\",\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"sub a number, not a string", NULL, "{\"sub\":1,\"role\":\"admin\",\"exp\":EXP}",
         SIG_HS256},
        {"no sub", NULL, "{\"role\":\"admin\",\"exp\":EXP}", SIG_HS256},
        {"no exp", NULL, "{\"sub\":\"1\",\"role\":\"admin\"}", SIG_HS256},
        {"exp a string", NULL, "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":\"EXP\"}", SIG_HS256},
        {"not yet valid", NULL, "{\"sub\":\"1\",\"role\":\"admin\",\"exp\":EXP,\"nbf\":9999999999}",
         SIG_HS256},
        {"payload not JSON", NULL, "not json at all", SIG_HS256},
    };
    (void)state;

    /* The hand-made token is right when its claims are: the refusals below
     * are about the claims, not the way the token was built. */
    with_exp("{\"sub\":\"9007199254740991\",\"role\":\"admin\",\"exp\":EXP}", now + 600, payload,
             sizeof payload);
    make_jwt(hs256, payload, SIG_HS256, jwt, sizeof jwt);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
    const char *good[] = {hdr, NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", good, GOOD_SESSION);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    /* The scheme name is case-insensitive. */
    snprintf(hdr, sizeof hdr, "Authorization: bearer %s", jwt);
    r = th_call(&srv, "POST", "/api/v1/sessions", good, GOOD_SESSION);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    assert_int_equal(sessions_in_db(), 2);

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        with_exp(bad[i].payload, now + 600, payload, sizeof payload);
        make_jwt(bad[i].header != NULL ? bad[i].header : hs256, payload, bad[i].sig, jwt,
                 sizeof jwt);
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
        const char *h[] = {hdr, NULL};
        r = th_call(&srv, "POST", "/api/v1/sessions", h, GOOD_SESSION);
        expect_unauthenticated(&r, bad[i].name);
        th_resp_free(&r);
    }

    /* Tokens signed by ticketd's own code, expired or with another key. */
    char *expired = auth_issue(TH_JWT_SECRET, 1, true, now - 7200, 3600);
    char *foreign = auth_issue("another-secret-of-enough-length-0123456789", 1, true, now, 3600);
    assert_non_null(expired);
    assert_non_null(foreign);
    char exp_hdr[1200], foreign_hdr[1200];
    snprintf(exp_hdr, sizeof exp_hdr, "Authorization: Bearer %s", expired);
    snprintf(foreign_hdr, sizeof foreign_hdr, "Authorization: Bearer %s", foreign);
    free(expired);
    free(foreign);

    /* Malformed headers of every kind. */
    char huge[6000] = "Authorization: Bearer ";
    memset(huge + strlen(huge), 'a', 5000);
    const char *const shapes[] = {
        NULL, /* no Authorization at all */
        "Authorization: Bearer",
        "Authorization: Bearer ",
        "Authorization: Bearer not-a-jwt",
        "Authorization: Bearer a.b.c",
        "Authorization: Bearer ...",
        "Authorization: Basic dXNlcjpwYXNz",
        "Authorization: Token abc",
        exp_hdr,
        foreign_hdr,
        huge,
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const char *h[] = {shapes[i], NULL};
        r = th_call(&srv, "POST", "/api/v1/sessions", h, GOOD_SESSION);
        char what[64];
        snprintf(what, sizeof what, "Authorization shape %zu", i);
        expect_unauthenticated(&r, what);
        th_resp_free(&r);
    }

    /* A good token without the admin role: known, but not allowed. */
    const char *user[] = {th_auth_header(2, false), NULL};
    r = th_call(&srv, "POST", "/api/v1/sessions", user, GOOD_SESSION);
    th_expect_problem(&r, 403, "FORBIDDEN");
    th_resp_free(&r);
    /* A role that is not exactly "admin" is no role. */
    with_exp("{\"sub\":\"3\",\"role\":\"Admin\",\"exp\":EXP}", now + 600, payload, sizeof payload);
    make_jwt(hs256, payload, SIG_HS256, jwt, sizeof jwt);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
    const char *odd_role[] = {hdr, NULL};
    r = th_call(&srv, "POST", "/api/v1/sessions", odd_role, GOOD_SESSION);
    th_expect_problem(&r, 403, "FORBIDDEN");
    th_resp_free(&r);

    /* Identity comes before the body: a bad body with no token is 401. */
    r = th_call(&srv, "POST", "/api/v1/sessions", NULL, "not json");
    expect_unauthenticated(&r, "bad body, no token");
    th_resp_free(&r);

    /* Nothing refused reached the database. */
    assert_int_equal(sessions_in_db(), 2);
}

/* ---- sessions ---- */

static void test_session_create_and_get(void **state)
{
    char v[128], path[128];
    (void)state;
    const char *admin[] = {th_auth_header(1, true), NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", admin, GOOD_SESSION);
    assert_int_equal(r.status, 201);
    expect_header(&r, "Content-Type", "application/json");
    json_t *j = th_json(&r);
    int64_t id = json_integer_value(json_object_get(j, "id"));
    assert_true(id > 0);
    assert_string_equal(json_string_value(json_object_get(j, "title")), "Night show");
    assert_int_equal(json_integer_value(json_object_get(j, "price_cents")), 1500);
    assert_int_equal(json_integer_value(json_object_get(j, "capacity")), 40);
    assert_int_equal(json_integer_value(json_object_get(j, "stock")), 40);
    assert_true(json_is_integer(json_object_get(j, "version")));
    snprintf(path, sizeof path, "/api/v1/sessions/%lld", (long long)id);
    assert_non_null(th_header(&r, "Location", v, sizeof v));
    assert_string_equal(v, path);

    /* The row holds what the answer said. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM sessions WHERE id = %lld AND title = "
                               "'Night show' AND price_cents = 1500 AND capacity = 40 AND "
                               "stock = 40",
                               (long long)id),
                     1);

    /* Read it back at its Location: the same resource. */
    struct th_resp g = th_call(&srv, "GET", path, NULL, NULL);
    assert_int_equal(g.status, 200);
    json_t *gj = th_json(&g);
    assert_true(json_equal(j, gj));
    json_decref(gj);
    th_resp_free(&g);
    json_decref(j);
    th_resp_free(&r);

    /* 200 characters is the longest title, counted in characters. */
    char title[200 * 2 + 1], body[600];
    for (int i = 0; i < 200; i++)
        memcpy(title + 2 * i, "\xc3\xa9", 2); /* e acute, two bytes */
    title[400] = '\0';
    snprintf(body, sizeof body, "{\"title\":\"%s\",\"price_cents\":0,\"stock\":0}", title);
    r = th_call(&srv, "POST", "/api/v1/sessions", admin, body);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    assert_int_equal(th_db_int("SELECT CHAR_LENGTH(title) FROM sessions ORDER BY id DESC LIMIT 1"),
                     200);

    /* Ids that are not a session. */
    static const char *const unknown[] = {"999999",          "abc", "0", "-1", "01", "1.0",
                                          "9007199254740992"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        snprintf(path, sizeof path, "/api/v1/sessions/%s", unknown[i]);
        g = th_call(&srv, "GET", path, NULL, NULL);
        if (g.status != 404)
            fail_msg("GET %s: expected 404, got %ld %s", path, g.status, g.body);
        th_expect_problem(&g, 404, "SESSION_NOT_FOUND");
        th_resp_free(&g);
    }
    assert_int_equal(sessions_in_db(), 2);
}

static void test_session_bad_bodies(void **state)
{
    char title201[260], long_title[300];
    (void)state;
    memset(title201, 'x', 201);
    title201[201] = '\0';
    snprintf(long_title, sizeof long_title, "{\"title\":\"%s\",\"price_cents\":1,\"stock\":1}",
             title201);
    static const char *const not_json[] = {
        "",
        "not json",
        "{\"title\":\"a\",\"price_cents\":1,\"stock\":1",
        "[{\"title\":\"a\",\"price_cents\":1,\"stock\":1}]",
        "\"a string\"",
        "42",
        "null",
        "{\"title\":\"a\",\"price_cents\":1,\"stock\":1,\"stock\":2}",
        "{\"title\":\"a\",\"price_cents\":1,\"stock\":1} trailing",
        "{\"title\":\"\xff\xfe\",\"price_cents\":1,\"stock\":1}",
        "{\"title\":\"a\\u0000b\",\"price_cents\":1,\"stock\":1}",
    };
    const struct {
        const char *body;
        const char *field;
    } invalid[] = {
        {"{\"price_cents\":1,\"stock\":1}", "title"},
        {"{\"title\":\"\",\"price_cents\":1,\"stock\":1}", "title"},
        {"{\"title\":7,\"price_cents\":1,\"stock\":1}", "title"},
        {"{\"title\":null,\"price_cents\":1,\"stock\":1}", "title"},
        {long_title, "title"},
        {"{\"title\":\"a\",\"stock\":1}", "price_cents"},
        {"{\"title\":\"a\",\"price_cents\":2.0,\"stock\":1}", "price_cents"},
        {"{\"title\":\"a\",\"price_cents\":1e3,\"stock\":1}", "price_cents"},
        {"{\"title\":\"a\",\"price_cents\":\"100\",\"stock\":1}", "price_cents"},
        {"{\"title\":\"a\",\"price_cents\":-1,\"stock\":1}", "price_cents"},
        {"{\"title\":\"a\",\"price_cents\":1}", "stock"},
        {"{\"title\":\"a\",\"price_cents\":1,\"stock\":-1}", "stock"},
        {"{\"title\":\"a\",\"price_cents\":1,\"stock\":true}", "stock"},
        {"{\"title\":\"a\",\"price_cents\":1,\"stock\":9223372036854775807}", "stock"},
    };
    const char *admin[] = {th_auth_header(1, true), NULL};
    for (size_t i = 0; i < sizeof not_json / sizeof not_json[0]; i++) {
        struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", admin, not_json[i]);
        if (r.status != 400 || strcmp(th_code(&r), "INVALID_JSON") != 0)
            fail_msg("body <%s>: expected 400 INVALID_JSON, got %ld %s", not_json[i], r.status,
                     r.body);
        th_expect_problem(&r, 400, "INVALID_JSON");
        th_resp_free(&r);
    }
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", admin, invalid[i].body);
        if (r.status != 400)
            fail_msg("body <%.60s>: expected 400, got %ld %s", invalid[i].body, r.status, r.body);
        expect_field(&r, invalid[i].field);
        th_resp_free(&r);
    }

    /* Only JSON is taken. */
    static const char *const types[] = {"Content-Type: text/plain",
                                        "Content-Type: application/x-www-form-urlencoded",
                                        "Content-Type: application/jsonx", "Content-Type:"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const char *h[] = {th_auth_header(1, true), types[i], NULL};
        struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", h, GOOD_SESSION);
        if (r.status != 415)
            fail_msg("%s: expected 415, got %ld %s", types[i], r.status, r.body);
        th_expect_problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
        th_resp_free(&r);
    }
    assert_int_equal(sessions_in_db(), 0);

    /* ... in any case, with parameters. */
    const char *charset[] = {th_auth_header(1, true),
                             "Content-Type: Application/JSON; charset=utf-8", NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", charset, GOOD_SESSION);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    assert_int_equal(sessions_in_db(), 1);
}

/* ---- order tokens ---- */

static void test_order_tokens(void **state)
{
    char tokens[2][96];
    (void)state;
    for (int i = 0; i < 2; i++) {
        const char *h[] = {th_auth_header(42, false), NULL};
        struct th_resp r = th_call(&srv, "POST", "/api/v1/tokens", h, NULL);
        assert_int_equal(r.status, 201);
        expect_header(&r, "Content-Type", "application/json");
        json_t *j = th_json(&r);
        const char *tok = json_string_value(json_object_get(j, "token"));
        assert_non_null(tok);
        assert_int_equal(json_integer_value(json_object_get(j, "expires_in")), 600);
        /* >= 128 bits: at least 22 base64url characters, then the
         * signature's dots, digits and base64url; safe in a header. */
        assert_true(strlen(tok) >= 22 && strlen(tok) < 90);
        assert_true(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789-_") >= 22);
        assert_int_equal(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                     "0123456789-_."),
                         strlen(tok));
        snprintf(tokens[i], sizeof tokens[i], "%s", tok);
        json_decref(j);
        th_resp_free(&r);

        /* Stored only in Redis, bound to its user, with the TTL. */
        assert_int_equal(th_redis_int("GET token:{42}:%s", tokens[i]), 42);
        long long ttl = th_redis_int("TTL token:{42}:%s", tokens[i]);
        if (ttl < 590 || ttl > 600)
            fail_msg("token TTL %lld, expected about 600", ttl);
    }
    assert_string_not_equal(tokens[0], tokens[1]);
    assert_int_equal(th_redis_int("EXISTS token:{43}:%s", tokens[0]), 0);

    /* An empty JSON object is as good as no body. */
    const char *h[] = {th_auth_header(7, false), NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/tokens", h, "{}");
    assert_int_equal(r.status, 201);
    th_resp_free(&r);

    /* Tokens are for users: none without identity. */
    r = th_call(&srv, "POST", "/api/v1/tokens", NULL, NULL);
    expect_unauthenticated(&r, "token without identity");
    th_resp_free(&r);
    assert_int_equal(th_redis_int("EVAL %s 0", "return #redis.call('KEYS', 'token:*')"), 3);
}

/* The body of POST /tokens is optional, but one that is sent must be a
 * JSON object, as everywhere else. */
static void test_token_body_is_json(void **state)
{
    static const char *const bodies[] = {"{", "[]", "not json", "{\"a\":1,\"a\":2}"};
    (void)state;
    const char *h[] = {th_auth_header(7, false), NULL};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct th_resp r = th_call(&srv, "POST", "/api/v1/tokens", h, bodies[i]);
        if (r.status != 400 || strcmp(th_code(&r), "INVALID_JSON") != 0)
            fail_msg("POST /tokens with <%s>: expected 400 INVALID_JSON, got %ld %s", bodies[i],
                     r.status, r.body);
        th_resp_free(&r);
    }
    const char *text[] = {th_auth_header(7, false), "Content-Type: text/plain", NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/tokens", text, "{}");
    th_expect_problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    th_resp_free(&r);
    assert_int_equal(th_redis_int("EVAL %s 0", "return #redis.call('KEYS', 'token:*')"), 0);
}

/* ---- body limits and framing ---- */

/* The head of an admin's session creation; framing is its Content-Length
 * or Transfer-Encoding line. Caller frees. */
static char *session_request(const char *framing)
{
    return xasprintf("POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                     "Content-Type: application/json\r\n%s\r\n\r\n",
                     th_auth_header(1, true), framing);
}

/* head followed by body, as one new buffer. */
static char *concat(const char *head, const char *body, size_t body_len, size_t *len)
{
    size_t hl = strlen(head);
    char *out = xmalloc(hl + body_len);
    memcpy(out, head, hl);
    memcpy(out + hl, body, body_len);
    *len = hl + body_len;
    return out;
}

/* A valid session body padded with blanks to exactly n bytes. */
static char *padded_session(size_t n)
{
    static const char head[] = "{\"title\":\"Edge\",\"price_cents\":100,\"stock\":5";
    size_t hl = strlen(head);
    assert_true(n > hl + 1);
    char *b = xmalloc(n + 1);
    memcpy(b, head, hl);
    memset(b + hl, ' ', n - hl - 1);
    b[n - 1] = '}';
    b[n] = '\0';
    return b;
}

/* body as chunks of chunk bytes, the last chunk and the end. */
static char *chunked(const char *body, size_t len, size_t chunk, size_t *out_len)
{
    size_t cap = len + (len / chunk + 2) * 16 + 8, o = 0;
    char *out = xmalloc(cap);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        o += (size_t)snprintf(out + o, cap - o, "%zx\r\n", n);
        memcpy(out + o, body + off, n);
        o += n;
        memcpy(out + o, "\r\n", 2);
        o += 2;
    }
    o += (size_t)snprintf(out + o, cap - o, "0\r\n\r\n");
    *out_len = o;
    return out;
}

static void test_body_limit(void **state)
{
    struct raw_result rr;
    (void)state;

    /* An announced oversized body is refused from its headers alone: no
     * byte of it is sent, and the answer still comes, with the close. */
    char *head = session_request("Content-Length: 1048576");
    raw_exchange(head, strlen(head), true, 3000, &rr);
    free(head);
    if (rr.status != 413 || strcmp(raw_code(rr.text), "PAYLOAD_TOO_LARGE") != 0)
        fail_msg("announced 1 MiB: %s", rr.text);
    assert_non_null(strcasestr(rr.text, "\r\nContent-Type: application/problem+json"));
    assert_non_null(strcasestr(rr.text, "\r\nX-Request-Id: "));
    assert_non_null(strcasestr(rr.text, "\r\nConnection: close"));
    assert_true(rr.closed);
    assert_true(rr.seconds < 2.0);

    /* A client that asks before sending (Expect: 100-continue) is told no
     * instead of being invited to send. */
    head = session_request("Expect: 100-continue\r\nContent-Length: 1048576");
    raw_exchange(head, strlen(head), true, 3000, &rr);
    free(head);
    if (rr.status != 413 || strstr(rr.text, "100 Continue") != NULL)
        fail_msg("announced 1 MiB with Expect: %s", rr.text);

    /* One byte over, through curl. */
    char *over = padded_session(MAX_BODY + 1);
    const char *admin[] = {th_auth_header(1, true), NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/sessions", admin, over);
    th_expect_problem(&r, 413, "PAYLOAD_TOO_LARGE");
    th_resp_free(&r);
    free(over);

    /* 1 MiB really sent: refused, and the server stays healthy. */
    size_t big = 1048576, len, clen;
    char *body = xmalloc(big);
    memset(body, 'x', big);
    head = session_request("Content-Length: 1048576");
    char *req = concat(head, body, big, &len);
    free(head);
    raw_exchange(req, len, true, 10000, &rr);
    free(req);
    if (rr.status != 413 || strcmp(raw_code(rr.text), "PAYLOAD_TOO_LARGE") != 0)
        fail_msg("1 MiB sent: %s", rr.text);
    expect_alive();

    /* A chunked body is refused from its head (501: chunked bodies are not
     * supported), before libmicrohttpd decodes a chunk of it. */
    char *chunks = chunked(body, big, 8192, &clen);
    free(body);
    head = session_request("Transfer-Encoding: chunked");
    req = concat(head, chunks, clen, &len);
    free(chunks);
    raw_exchange(req, len, true, 10000, &rr);
    free(req);
    if (rr.status != 501 || strcmp(raw_code(rr.text), "NOT_IMPLEMENTED") != 0)
        fail_msg("chunked 1 MiB: %s", rr.text);
    assert_non_null(strcasestr(rr.text, "\r\nConnection: close"));
    expect_alive();

    /* Clients that give up halfway through a body, announced or chunked:
     * their requests' state is freed (the sanitizer build checks at exit)
     * and the server carries on. */
    for (int i = 0; i < 4; i++) {
        char *partial =
            session_request(i % 2 == 0 ? "Content-Length: 10000" : "Transfer-Encoding: chunked");
        int fd = raw_connect(srv.port);
        assert_int_equal(send(fd, partial, strlen(partial), MSG_NOSIGNAL),
                         (ssize_t)strlen(partial));
        static const char part[] = "400\r\n{\"title\":\"Aborted\",";
        assert_int_equal(send(fd, part, strlen(part), MSG_NOSIGNAL), (ssize_t)strlen(part));
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        close(fd);
        free(partial);
    }
    expect_alive();

    /* Exactly at the limit is past the size check: created by length; by
     * chunks it is refused like any chunked body. */
    char *edge = padded_session(MAX_BODY);
    r = th_call(&srv, "POST", "/api/v1/sessions", admin, edge);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
    chunks = chunked(edge, MAX_BODY, 1000, &clen);
    free(edge);
    req = concat(head, chunks, clen, &len);
    free(chunks);
    free(head);
    raw_exchange(req, len, false, 5000, &rr);
    free(req);
    if (rr.status != 501)
        fail_msg("chunked body at the limit: %s", rr.text);

    /* Only the body at the limit sent with its length was stored. */
    assert_int_equal(sessions_in_db(), 1);
    expect_alive();
}

static void test_framing(void **state)
{
    struct raw_result rr;
    (void)state;
    static const char *const smuggles[] = {
        /* a length and chunked */
        "Content-Length: 46\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2e\r\n{\"title\":\"Smuggled\",\"price_cents\":1,\"stock\":1}\r\n0\r\n\r\n",
        /* chunked first, then a length */
        "Transfer-Encoding: chunked\r\nContent-Length: 46\r\n\r\n"
        "2e\r\n{\"title\":\"Smuggled\",\"price_cents\":1,\"stock\":1}\r\n0\r\n\r\n",
        /* two lengths that differ */
        "Content-Length: 46\r\nContent-Length: 10\r\n\r\n"
        "{\"title\":\"Smuggled\",\"price_cents\":1,\"stock\":1}",
        /* a length that is not a number: libmicrohttpd refuses it itself,
         * before ticketd sees the request, with a page of its own */
        "Content-Length: 4x\r\n\r\n{\"title\":\"Smuggled\",\"price_cents\":1,\"stock\":1}",
    };
    for (size_t i = 0; i < sizeof smuggles / sizeof smuggles[0]; i++) {
        char *req = xasprintf("POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                              "Content-Type: application/json\r\n%s",
                              th_auth_header(1, true), smuggles[i]);
        raw_exchange(req, strlen(req), false, 3000, &rr);
        free(req);
        if (rr.status != 400)
            fail_msg("framing case %zu: expected 400, got %s", i, rr.text);
        bool ours = i < 3;
        if (ours && (strcmp(raw_code(rr.text), "BAD_REQUEST") != 0 ||
                     strcasestr(rr.text, "\r\nContent-Type: application/problem+json") == NULL ||
                     strcasestr(rr.text, "\r\nConnection: close") == NULL))
            fail_msg("framing case %zu: not a closing problem: %s", i, rr.text);
    }
    /* The same length twice agrees with itself: accepted. */
    char *req = xasprintf("POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                          "Content-Type: application/json\r\nContent-Length: 46\r\n"
                          "Content-Length: 46\r\n\r\n"
                          "{\"title\":\"Repeated\",\"price_cents\":1,\"stock\":1}",
                          th_auth_header(1, true));
    raw_exchange(req, strlen(req), false, 3000, &rr);
    free(req);
    assert_int_equal(rr.status, 201);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM sessions WHERE title = 'Smuggled'"), 0);
    assert_int_equal(sessions_in_db(), 1);
    expect_alive();
}

static void test_keep_alive(void **state)
{
    char buf[8192];
    (void)state;
    static const char get[] = "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    int fd = raw_connect(srv.port);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(send(fd, get, strlen(get), MSG_NOSIGNAL), (ssize_t)strlen(get));
        int st = read_response(fd, buf, sizeof buf, 3000);
        if (st != 200)
            fail_msg("request %d on one connection: %s", i + 1, buf);
        if (strcasestr(buf, "\r\nConnection: close") != NULL)
            fail_msg("a GET closed the connection: %s", buf);
    }
    /* A POST with a body, and an error, keep it open as well. */
    char *post = xasprintf("POST /api/v1/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                           "Content-Length: 0\r\n\r\n",
                           th_auth_header(5, false));
    assert_int_equal(send(fd, post, strlen(post), MSG_NOSIGNAL), (ssize_t)strlen(post));
    free(post);
    assert_int_equal(read_response(fd, buf, sizeof buf, 3000), 201);
    static const char missing[] = "GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    assert_int_equal(send(fd, missing, strlen(missing), MSG_NOSIGNAL), (ssize_t)strlen(missing));
    assert_int_equal(read_response(fd, buf, sizeof buf, 3000), 404);
    /* Two pipelined requests in one write: two answers, in order. */
    char two[256];
    snprintf(two, sizeof two, "%sGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", get);
    assert_int_equal(send(fd, two, strlen(two), MSG_NOSIGNAL), (ssize_t)strlen(two));
    size_t got = 0;
    double deadline = th_now_s() + 3;
    while (th_now_s() < deadline && got + 1 < sizeof buf) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        const char *second = strstr(buf + 1, "HTTP/1.1 ");
        size_t end;
        if (second != NULL && response_complete(second, got - (size_t)(second - buf), &end))
            break;
    }
    const char *second = strstr(buf + 1, "HTTP/1.1 200");
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0 || second == NULL)
        fail_msg("pipelined requests: %s", buf);
    close(fd);
}

/* ---- metrics ---- */

/* The value of one exact series line in a metrics text, or -1. */
static long long series(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)) != NULL; p += n) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return atoll(p + n + 1);
    }
    return -1;
}

static void test_metrics(void **state)
{
    char ct[128];
    (void)state;
    struct th_resp m = th_call(&srv, "GET", "/metrics", NULL, NULL);
    assert_int_equal(m.status, 200);
    assert_non_null(th_header(&m, "Content-Type", ct, sizeof ct));
    assert_int_equal(strncmp(ct, "text/plain", 10), 0);
    long long livez_before =
        series(m.body, "ticketd_http_requests_total{route=\"/livez\",status=\"200\"}");
    th_resp_free(&m);

    for (int i = 0; i < 5; i++) {
        struct th_resp r = th_call(&srv, "GET", "/livez", NULL, NULL);
        th_resp_free(&r);
    }
    struct th_resp r = th_call(&srv, "GET", "/nope", NULL, NULL);
    th_resp_free(&r);
    r = th_call(&srv, "DELETE", "/livez", NULL, NULL);
    th_resp_free(&r);
    r = th_call(&srv, "POST", "/api/v1/sessions", NULL, GOOD_SESSION);
    th_resp_free(&r);
    int64_t s = th_session(&srv, 3, 100);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/sessions/%lld", (long long)s);
    r = th_call(&srv, "GET", path, NULL, NULL);
    th_resp_free(&r);
    r = th_call(&srv, "GET", "/api/v1/sessions/424242", NULL, NULL);
    th_resp_free(&r);

    m = th_call(&srv, "GET", "/metrics", NULL, NULL);
    assert_int_equal(m.status, 200);
    const char *t = m.body;
    long long livez_after =
        series(t, "ticketd_http_requests_total{route=\"/livez\",status=\"200\"}");
    if (livez_after - (livez_before < 0 ? 0 : livez_before) != 5)
        fail_msg("/livez 200 went from %lld to %lld after 5 requests", livez_before, livez_after);
    static const char *const present[] = {
        "ticketd_http_requests_total{route=\"(unmatched)\",status=\"404\"}",
        "ticketd_http_requests_total{route=\"(method not allowed)\",status=\"405\"}",
        "ticketd_http_requests_total{route=\"/api/v1/sessions\",status=\"401\"}",
        "ticketd_http_requests_total{route=\"/api/v1/sessions\",status=\"201\"}",
        "ticketd_http_requests_total{route=\"/api/v1/sessions/{id}\",status=\"200\"}",
        "ticketd_http_requests_total{route=\"/api/v1/sessions/{id}\",status=\"404\"}",
        "ticketd_http_request_duration_seconds_bucket{route=\"/livez\",le=\"+Inf\"}",
        "ticketd_http_request_duration_seconds_count{route=\"/livez\"}",
        "ticketd_dependency_errors_total{dependency=\"redis\"}",
        "ticketd_dependency_errors_total{dependency=\"mysql\"}",
    };
    for (size_t i = 0; i < sizeof present / sizeof present[0]; i++) {
        if (series(t, present[i]) < 0)
            fail_msg("no series %s in:\n%s", present[i], t);
    }
    assert_true(series(t, "ticketd_http_requests_total{route=\"/api/v1/sessions/{id}\","
                          "status=\"404\"}") >= 1);
    assert_non_null(strstr(t, "# TYPE ticketd_http_requests_total counter\n"));
    assert_non_null(strstr(t, "# TYPE ticketd_http_request_duration_seconds histogram\n"));
    assert_non_null(strstr(t, "# TYPE ticketd_dependency_errors_total counter\n"));
    assert_non_null(strstr(t, "ticketd_http_request_duration_seconds_sum{route=\"/livez\"} "));
    /* Buckets are cumulative and end at the count. */
    long long inf =
        series(t, "ticketd_http_request_duration_seconds_bucket{route=\"/livez\",le=\"+Inf\"}");
    long long count = series(t, "ticketd_http_request_duration_seconds_count{route=\"/livez\"}");
    long long small =
        series(t, "ticketd_http_request_duration_seconds_bucket{route=\"/livez\",le=\"0.001\"}");
    assert_int_equal(inf, count);
    assert_true(small >= 0 && small <= inf);
    assert_true(inf >= livez_after);
    th_resp_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_health_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found_and_method_not_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoded_nul_in_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bearer_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_create_and_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_bad_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_order_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_body_is_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_framing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
    };
    return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
