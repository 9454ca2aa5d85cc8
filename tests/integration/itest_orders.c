/* Order creation against the real binary, Redis and MariaDB: exactly one
 * order per intent under concurrent replays, across instances, and with
 * Redis gone. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static struct th_server srv;

static int setup(void **state)
{
    (void)state;
    th_fresh_start(&srv, th_port(0), NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_stop_clean(&srv);
    return 0;
}

static void test_create_replay_get_list(void **state)
{
    char tok[96], v[128], url[160];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    th_order_token(&srv, 42, tok);

    struct th_resp r = th_order(&srv, 42, "key-1", tok, s, 2);
    assert_int_equal(r.status, 201);
    json_t *o = th_json(&r);
    const char *no = json_string_value(json_object_get(o, "order_no"));
    assert_non_null(no);
    assert_int_equal(json_integer_value(json_object_get(o, "user_id")), 42);
    assert_int_equal(json_integer_value(json_object_get(o, "quantity")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "amount_cents")), 2000);
    assert_int_equal(json_integer_value(json_object_get(o, "version")), 1);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "PENDING_PAYMENT");
    snprintf(url, sizeof url, "/api/v1/orders/%s", no);
    assert_non_null(th_header(&r, "Location", v, sizeof v));
    assert_string_equal(v, url);
    assert_null(th_header(&r, "Idempotent-Replayed", v, sizeof v));
    assert_int_equal(th_stock_of(s), 8);

    /* The retry, with the token already spent, gets the same answer. */
    struct th_resp again = th_order(&srv, 42, "key-1", tok, s, 2);
    assert_int_equal(again.status, 201);
    assert_string_equal(again.body, r.body);
    assert_non_null(th_header(&again, "Idempotent-Replayed", v, sizeof v));
    assert_string_equal(v, "true");
    th_expect_layer(&again, "response-cache");
    assert_int_equal(th_orders_of(s), 1);
    assert_int_equal(th_stock_of(s), 8);

    /* Read it back as its owner; another user learns nothing. */
    snprintf(url, sizeof url, "%s/api/v1/orders/%s", srv.url, no);
    const char *mine[] = {th_auth_header(42, false), NULL};
    struct th_resp g = th_request("GET", url, mine, NULL);
    assert_int_equal(g.status, 200);
    json_t *go = th_json(&g);
    assert_string_equal(json_string_value(json_object_get(go, "order_no")), no);
    const char *theirs[] = {th_auth_header(43, false), NULL};
    struct th_resp g2 = th_request("GET", url, theirs, NULL);
    th_expect_problem(&g2, 404, "ORDER_NOT_FOUND");

    /* The list: newest first, paged by an opaque cursor. */
    char tok2[96];
    th_order_token(&srv, 42, tok2);
    struct th_resp r2 = th_order(&srv, 42, "key-2", tok2, s, 1);
    assert_int_equal(r2.status, 201);
    snprintf(url, sizeof url, "%s/api/v1/orders?limit=1", srv.url);
    struct th_resp l = th_request("GET", url, mine, NULL);
    assert_int_equal(l.status, 200);
    json_t *lj = th_json(&l);
    assert_int_equal(json_array_size(json_object_get(lj, "orders")), 1);
    json_t *first = json_array_get(json_object_get(lj, "orders"), 0);
    assert_int_equal(json_integer_value(json_object_get(first, "quantity")), 1);
    const char *cursor = json_string_value(json_object_get(lj, "next_cursor"));
    assert_non_null(cursor);
    snprintf(url, sizeof url, "%s/api/v1/orders?limit=1&cursor=%s", srv.url, cursor);
    struct th_resp l2 = th_request("GET", url, mine, NULL);
    json_t *lj2 = th_json(&l2);
    json_t *second = json_array_get(json_object_get(lj2, "orders"), 0);
    assert_string_equal(json_string_value(json_object_get(second, "order_no")), no);
    assert_true(json_is_null(json_object_get(lj2, "next_cursor")));
    snprintf(url, sizeof url, "%s/api/v1/orders?limit=0", srv.url);
    struct th_resp bad = th_request("GET", url, mine, NULL);
    th_expect_problem(&bad, 400, "VALIDATION_FAILED");

    json_decref(o);
    json_decref(go);
    json_decref(lj);
    json_decref(lj2);
    th_resp_free(&r);
    th_resp_free(&again);
    th_resp_free(&g);
    th_resp_free(&g2);
    th_resp_free(&r2);
    th_resp_free(&l);
    th_resp_free(&l2);
    th_resp_free(&bad);
}

/* ---- storms ---- */

#define MAX_STORM 400

struct storm {
    const struct th_server *servers;
    int nservers;
    int64_t user;
    int64_t session;
    int64_t quantity;
    char key[64];
    char token[96];
    /* results */
    pthread_mutex_t mu;
    int created, replayed, in_progress, dup_submission, token_invalid, unavailable, other;
    char first_body[1024];
    bool bodies_differ;
    char unexpected[512];
};

static void storm_one(int i, void *ctx)
{
    struct storm *st = ctx;
    char v[64];
    const struct th_server *s = &st->servers[i % st->nservers];
    struct th_resp r = th_order(s, st->user, st->key, st->token, st->session, st->quantity);
    bool replay = th_header(&r, "Idempotent-Replayed", v, sizeof v) != NULL;
    const char *code = th_code(&r);
    pthread_mutex_lock(&st->mu);
    if (r.status == 201) {
        if (replay)
            st->replayed++;
        else
            st->created++;
        if (st->first_body[0] == '\0')
            snprintf(st->first_body, sizeof st->first_body, "%s", r.body);
        else if (strcmp(st->first_body, r.body) != 0)
            st->bodies_differ = true;
    } else if (r.status == 409 && strcmp(code, "REQUEST_IN_PROGRESS") == 0) {
        st->in_progress++;
    } else if (r.status == 409 && strcmp(code, "DUPLICATE_SUBMISSION") == 0) {
        st->dup_submission++;
    } else if (r.status == 409 && strcmp(code, "ORDER_TOKEN_INVALID") == 0) {
        st->token_invalid++;
    } else if (r.status == 503 && strcmp(code, "DEPENDENCY_UNAVAILABLE") == 0) {
        st->unavailable++;
    } else {
        st->other++;
        snprintf(st->unexpected, sizeof st->unexpected, "%ld %s", r.status, r.body);
    }
    pthread_mutex_unlock(&st->mu);
    th_resp_free(&r);
}

static void storm_init(struct storm *st, const struct th_server *servers, int n, int64_t user,
                       int64_t session, const char *key)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    st->servers = servers;
    st->nservers = n;
    st->user = user;
    st->session = session;
    st->quantity = 2;
    snprintf(st->key, sizeof st->key, "%s", key);
    th_order_token(&servers[0], user, st->token);
}

static void storm_report(const struct storm *st)
{
    print_message("storm %s: created %d, replayed %d, in progress %d, duplicate %d, token %d, "
                  "unavailable %d, other %d\n",
                  st->key, st->created, st->replayed, st->in_progress, st->dup_submission,
                  st->token_invalid, st->unavailable, st->other);
    if (st->other != 0)
        fail_msg("unexpected answer: %s", st->unexpected);
}

static void test_storm_one_instance(void **state)
{
    struct storm st;
    (void)state;
    int64_t s = th_session(&srv, 100, 500);
    storm_init(&st, &srv, 1, 7, s, "storm-1");
    th_parallel(200, storm_one, &st);
    storm_report(&st);
    assert_int_equal(st.created, 1);
    assert_false(st.bodies_differ);
    assert_int_equal(th_orders_of(s), 1);
    assert_int_equal(th_stock_of(s), 98);
    /* Every answer was the order or a 409 of the contract. */
    assert_int_equal(
        st.created + st.replayed + st.in_progress + st.dup_submission + st.token_invalid, 200);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM order_history"), 1);
}

static void test_storm_three_instances(void **state)
{
    struct th_server more[3];
    struct storm st;
    (void)state;
    more[0] = srv;
    th_start(&more[1], th_port(1), NULL);
    th_start(&more[2], th_port(2), NULL);
    int64_t s = th_session(&srv, 100, 500);
    for (int round = 0; round < 3; round++) {
        char key[32];
        snprintf(key, sizeof key, "multi-%d", round);
        storm_init(&st, more, 3, 100 + round, s, key);
        th_parallel(150, storm_one, &st);
        storm_report(&st);
        assert_int_equal(st.created, 1);
        assert_false(st.bodies_differ);
    }
    assert_int_equal(th_orders_of(s), 3);
    assert_int_equal(th_stock_of(s), 94);
    assert_int_equal(th_stop(&more[1]), 0);
    assert_int_equal(th_stop(&more[2]), 0);
}

/* The same storm with two of the three instances reaching Redis and
 * MariaDB through their Unix sockets (the sockets the private servers of
 * scripts/services.sh listen on) and one through TCP: the transport
 * changes nothing of what the defences decide. The socket instances are
 * given ports nothing listens on, so what they do went through the
 * sockets; Redis confirms it. */
static void test_storm_over_unix_sockets(void **state)
{
    (void)state;
    char dir[4096], redis_host[4200], mysql_socket[4200];
    if (realpath(getenv("TICKETD_TEST_STATE") ? getenv("TICKETD_TEST_STATE") : ".state/test",
                 dir) == NULL)
        fail_msg("no test state folder");
    snprintf(redis_host, sizeof redis_host, "TICKETD_REDIS_HOST=%s/redis/redis.sock", dir);
    snprintf(mysql_socket, sizeof mysql_socket, "TICKETD_MYSQL_SOCKET=%s/mysql/mysqld.sock", dir);
    /* Ports nothing listens on: only the sockets can be what works. */
    const char *const env[] = {redis_host, mysql_socket, "TICKETD_REDIS_PORT=1",
                               "TICKETD_MYSQL_PORT=1", NULL};
    struct th_server more[3];
    more[0] = srv;
    th_start(&more[1], th_port(1), env);
    th_start(&more[2], th_port(2), env);
    int64_t s = th_session(&srv, 100, 500);
    struct storm st;
    storm_init(&st, more, 3, 300, s, "unix-1");
    th_parallel(150, storm_one, &st);
    storm_report(&st);
    assert_int_equal(st.created, 1);
    assert_false(st.bodies_differ);
    assert_int_equal(st.unavailable + st.other, 0);
    assert_int_equal(th_orders_of(s), 1);
    assert_int_equal(th_stock_of(s), 98);
    /* Each socket instance also makes an order of its own: copies of the
     * storm may all have been replayed without the database. */
    for (int i = 1; i <= 2; i++) {
        char token[96], key[32];
        snprintf(key, sizeof key, "unix-own-%d", i);
        th_order_token(&more[i], 300 + i, token);
        struct th_resp r = th_order(&more[i], 300 + i, key, token, s, 1);
        assert_int_equal(r.status, 201);
        th_resp_free(&r);
    }
    assert_int_equal(th_orders_of(s), 3);

    /* Redis lists a Unix socket client with the socket's path as address. */
    char *clients = th_redis_text("CLIENT LIST");
    assert_non_null(clients);
    if (strstr(clients, "/redis/redis.sock") == NULL)
        fail_msg("no Redis client over the Unix socket:\n%s", clients);
    free(clients);
    assert_int_equal(th_stop(&more[1]), 0);
    assert_int_equal(th_stop(&more[2]), 0);
}

/* Redis and MariaDB named by host name: a loop's connections dial the
 * numeric addresses the resolvers looked up off the loops (resolver.h),
 * never the names, which Connector/C and hiredis would look up inside
 * their connects, on the loop. The test builds abort on a name looked up
 * on a loop thread (resolver.c's getaddrinfo), so this instance would end
 * at its first order's connect. "LOCALHOST" is a name /etc/hosts has (it
 * is looked up without regard to case) that Connector/C, unlike
 * "localhost", does not take to mean its own socket. */
static void test_host_names_looked_up_off_the_loops(void **state)
{
    (void)state;
    const char *const env[] = {"TICKETD_MYSQL_HOST=LOCALHOST", "TICKETD_REDIS_HOST=LOCALHOST",
                               NULL};
    struct th_server named;
    th_start(&named, th_port(1), env);
    int64_t s = th_session(&srv, 100, 500);
    for (int i = 0; i < 4; i++) {
        char token[96], key[32];
        snprintf(key, sizeof key, "named-%d", i);
        th_order_token(&named, 400 + i, token);
        struct th_resp r = th_order(&named, 400 + i, key, token, s, 1);
        if (r.status != 201)
            fail_msg("order %d through the named hosts: %ld %s", i, r.status, r.body);
        th_resp_free(&r);
    }
    assert_int_equal(th_orders_of(s), 4);
    assert_false(th_log_contains(&named, "would block the loop thread"));
    assert_int_equal(th_stop(&named), 0);
}

/* ---- the flash sale ---- */

struct rush {
    int64_t session;
    char (*tokens)[96];
    pthread_mutex_t mu;
    int created, sold_out, other;
    char unexpected[256];
};

static void rush_one(int i, void *ctx)
{
    struct rush *ru = ctx;
    char key[32];
    snprintf(key, sizeof key, "rush-%d", i);
    struct th_resp r = th_order(&srv, 1000 + i, key, ru->tokens[i], ru->session, 1);
    pthread_mutex_lock(&ru->mu);
    if (r.status == 201)
        ru->created++;
    else if (r.status == 409 && strcmp(th_code(&r), "SOLD_OUT") == 0)
        ru->sold_out++;
    else {
        ru->other++;
        snprintf(ru->unexpected, sizeof ru->unexpected, "%ld %s", r.status, r.body);
    }
    pthread_mutex_unlock(&ru->mu);
    th_resp_free(&r);
}

static void test_stock_rush(void **state)
{
    struct rush ru = {0};
    (void)state;
    pthread_mutex_init(&ru.mu, NULL);
    ru.session = th_session(&srv, 50, 1000);
    ru.tokens = calloc(300, sizeof *ru.tokens);
    for (int i = 0; i < 300; i++)
        th_order_token(&srv, 1000 + i, ru.tokens[i]);
    th_parallel(300, rush_one, &ru);
    print_message("rush: created %d, sold out %d, other %d %s\n", ru.created, ru.sold_out, ru.other,
                  ru.unexpected);
    assert_int_equal(ru.created, 50);
    assert_int_equal(ru.sold_out, 250);
    assert_int_equal(ru.other, 0);
    assert_int_equal(th_orders_of(ru.session), 50);
    assert_int_equal(th_stock_of(ru.session), 0);
    free(ru.tokens);
}

/* ---- the double click: a new key per click ---- */

struct clicks {
    int64_t session;
    int round;
    char tokens[5][96];
    pthread_mutex_t mu;
    int created, locked, other;
    char unexpected[256];
};

static void click_one(int i, void *ctx)
{
    struct clicks *c = ctx;
    char key[32], v[64];
    snprintf(key, sizeof key, "click-%d-%d", c->round, i);
    struct th_resp r = th_order(&srv, 77, key, c->tokens[i], c->session, 1);
    pthread_mutex_lock(&c->mu);
    if (r.status == 201) {
        c->created++;
    } else if (r.status == 409 && strcmp(th_code(&r), "DUPLICATE_SUBMISSION") == 0 &&
               th_header(&r, "Idempotency-Layer", v, sizeof v) != NULL &&
               strcmp(v, "session-lock") == 0) {
        c->locked++;
    } else {
        c->other++;
        snprintf(c->unexpected, sizeof c->unexpected, "%ld %s", r.status, r.body);
    }
    pthread_mutex_unlock(&c->mu);
    th_resp_free(&r);
}

static void test_double_click(void **state)
{
    struct clicks c = {0};
    int total_created = 0, total_locked = 0;
    (void)state;
    pthread_mutex_init(&c.mu, NULL);
    c.session = th_session(&srv, 1000, 100);
    for (int round = 0; round < 20; round++) {
        c.round = round;
        c.created = c.locked = c.other = 0;
        for (int i = 0; i < 5; i++)
            th_order_token(&srv, 77, c.tokens[i]);
        th_parallel(5, click_one, &c);
        if (c.other != 0)
            fail_msg("unexpected answer to a click: %s", c.unexpected);
        assert_true(c.created >= 1);
        total_created += c.created;
        total_locked += c.locked;
    }
    print_message("double click: %d orders from 100 clicks, %d stopped by the session lock\n",
                  total_created, total_locked);
    /* The books agree with the answers: every 201 is one order and its seat. */
    assert_int_equal(th_orders_of(c.session), total_created);
    assert_int_equal(th_stock_of(c.session), 1000 - total_created);
    assert_int_equal(total_created + total_locked, 100);
}

/* ---- single-request rules ---- */

static void test_key_reuse_and_tokens(void **state)
{
    char tok[96], tok2[96], other[96];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    int64_t s2 = th_session(&srv, 10, 1000);
    th_order_token(&srv, 5, tok);
    struct th_resp r = th_order(&srv, 5, "reuse", tok, s, 1);
    assert_int_equal(r.status, 201);

    /* Same key, another payload: refused, whatever the token. */
    struct th_resp q = th_order(&srv, 5, "reuse", tok, s, 3);
    th_expect_problem(&q, 422, "IDEMPOTENCY_KEY_REUSED");
    struct th_resp q2 = th_order(&srv, 5, "reuse", tok, s2, 1);
    th_expect_problem(&q2, 422, "IDEMPOTENCY_KEY_REUSED");

    /* A spent token with a new key. */
    struct th_resp t = th_order(&srv, 5, "reuse-2", tok, s, 1);
    th_expect_problem(&t, 409, "ORDER_TOKEN_INVALID");
    th_expect_layer(&t, "token");
    /* Someone else's token. */
    th_order_token(&srv, 6, other);
    struct th_resp t2 = th_order(&srv, 5, "reuse-3", other, s, 1);
    th_expect_problem(&t2, 409, "ORDER_TOKEN_INVALID");
    /* ... which stays valid for its owner. */
    struct th_resp t3 = th_order(&srv, 6, "theirs", other, s, 1);
    assert_int_equal(t3.status, 201);
    /* An unknown token. */
    struct th_resp t4 = th_order(&srv, 5, "reuse-4", "not-a-token", s, 1);
    th_expect_problem(&t4, 409, "ORDER_TOKEN_INVALID");
    assert_int_equal(th_orders_of(s), 2);
    assert_int_equal(th_stock_of(s), 8);

    /* The key scope is the user: another user may use the same key. */
    th_order_token(&srv, 9, tok2);
    struct th_resp u = th_order(&srv, 9, "reuse", tok2, s, 1);
    assert_int_equal(u.status, 201);

    th_resp_free(&r);
    th_resp_free(&q);
    th_resp_free(&q2);
    th_resp_free(&t);
    th_resp_free(&t2);
    th_resp_free(&t3);
    th_resp_free(&t4);
    th_resp_free(&u);
}

/* ---- hostile bodies ---- */

/* POSTs len bytes of body (NULs included) on a raw connection; the status,
 * and the problem's code and field (or "") into code and field. */
static int raw_post(const char *path, const char *const *headers, const char *body, size_t len,
                    char code[64], char field[64])
{
    char head[2048], req[4096], out[8192];
    size_t n = 0;
    n += (size_t)snprintf(head + n, sizeof head - n,
                          "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                          path, len);
    for (int i = 0; headers != NULL && headers[i] != NULL; i++)
        n += (size_t)snprintf(head + n, sizeof head - n, "%s\r\n", headers[i]);
    n += (size_t)snprintf(head + n, sizeof head - n, "\r\n");
    assert_true(n + len < sizeof req);
    memcpy(req, head, n);
    memcpy(req + n, body, len);
    memset(out, 0, sizeof out);
    int status = th_raw(srv.port, req, n + len, out, sizeof out - 1, 5000);
    code[0] = field[0] = '\0';
    const char *b = strstr(out, "\r\n\r\n");
    json_t *j = b != NULL ? json_loads(b + 4, 0, NULL) : NULL;
    if (json_string_value(json_object_get(j, "code")) != NULL)
        snprintf(code, 64, "%s", json_string_value(json_object_get(j, "code")));
    if (json_string_value(json_object_get(j, "field")) != NULL)
        snprintf(field, 64, "%s", json_string_value(json_object_get(j, "field")));
    if (strstr(out, "application/problem+json") == NULL || strstr(out, "X-Request-Id") == NULL)
        fail_msg("not a problem answer: %s", out);
    json_decref(j);
    return status;
}

static void test_hostile_bodies(void **state)
{
    char tok[96], code[64], field[64];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    int64_t sessions = th_db_int("SELECT COUNT(*) FROM sessions");
    th_order_token(&srv, 31, tok);
    char tokh[160];
    snprintf(tokh, sizeof tokh, "X-Order-Token: %s", tok);
    const char *order_h[] = {th_auth_header(31, false), "Idempotency-Key: hostile-1", tokh, NULL};

    /* A raw NUL inside the body: jansson alone would read "1\0}" as "1}". */
    char body[128];
    int n = snprintf(body, sizeof body, "{\"session_id\":%lld,\"quantity\":1", (long long)s);
    memcpy(body + n, "\0}", 2); /* {"session_id":S,"quantity":1\0} */
    n += 2;
    assert_int_equal(raw_post("/api/v1/orders", order_h, body, (size_t)n, code, field), 400);
    assert_string_equal(code, "INVALID_JSON");
    static const char nul_end[] = "{}\0";
    const char *tok_h[] = {th_auth_header(31, false), NULL};
    assert_int_equal(raw_post("/api/v1/tokens", tok_h, nul_end, sizeof nul_end - 1, code, field),
                     400);
    assert_string_equal(code, "INVALID_JSON");

    /* Numbers beyond what the parser holds are valid JSON: out of range
     * for their field (VALIDATION_FAILED), as 7 seats would be. */
    static const struct {
        const char *before, *after; /* the session id goes between */
        const char *field;
    } orders[] = {
        {"{\"session_id\":", ",\"quantity\":9223372036854775808}", "quantity"},
        {"{\"session_id\":", ",\"quantity\":1e309}", "quantity"},
        {"{\"session_id\":", ",\"quantity\":-9223372036854775809}", "quantity"},
        {"{\"quantity\":1,\"session_id\":1e309,\"x\":", "}", "session_id"},
        {"{\"session_id\":", ",\"quantity\":1,\"note\":{\"n\":1e400}}", "note.n"},
    };
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
        n = snprintf(body, sizeof body, "%s%lld%s", orders[i].before, (long long)s,
                     orders[i].after);
        assert_int_equal(raw_post("/api/v1/orders", order_h, body, (size_t)n, code, field), 400);
        if (strcmp(code, "VALIDATION_FAILED") != 0 || strcmp(field, orders[i].field) != 0)
            fail_msg("%s: %s field %s, want VALIDATION_FAILED field %s", body, code, field,
                     orders[i].field);
    }
    /* Every body, every route. */
    const char *admin_h[] = {th_auth_header(1, true), NULL};
    static const struct {
        const char *path;
        const char *body;
        const char *field;
    } others[] = {
        {"/api/v1/sessions", "{\"title\":\"t\",\"price_cents\":1e309,\"stock\":1}", "price_cents"},
        {"/api/v1/sessions", "{\"title\":\"t\",\"price_cents\":1,\"stock\":9223372036854775808}",
         "stock"},
        {"/api/v1/tokens", "{\"x\":18446744073709551616}", "x"},
        {"/api/v1/sessions", "[1e309]", ""},
        /* In a cart the item's own member is named, as for any bad item. */
        {"/api/v1/orders/batch",
         "{\"items\":[{\"key\":\"i1\",\"session_id\":9223372036854775808,\"quantity\":1}]}",
         "items[0].session_id"},
        {"/api/v1/orders/batch",
         "{\"items\":[{\"key\":\"i1\",\"session_id\":1,\"quantity\":1},"
         "{\"key\":\"i2\",\"session_id\":1,\"quantity\":1e309}]}",
         "items[1].quantity"},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        const char *const *h = strcmp(others[i].path, "/api/v1/sessions") == 0       ? admin_h
                               : strcmp(others[i].path, "/api/v1/orders/batch") == 0 ? order_h
                                                                                     : tok_h;
        assert_int_equal(
            raw_post(others[i].path, h, others[i].body, strlen(others[i].body), code, field), 400);
        const char *want = others[i].field[0] != '\0' ? "VALIDATION_FAILED" : "INVALID_JSON";
        if (strcmp(code, want) != 0 || strcmp(field, others[i].field) != 0)
            fail_msg("%s %s: %s field %s, want %s field %s", others[i].path, others[i].body, code,
                     field, want, others[i].field);
    }

    /* Nothing changed: no order, no session, the stock, the token and the
     * key are all still unspent. */
    assert_int_equal(th_orders_of(s), 0);
    assert_int_equal(th_stock_of(s), 10);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM sessions"), sessions);
    struct th_resp ok = th_order(&srv, 31, "hostile-1", tok, s, 1);
    assert_int_equal(ok.status, 201);
    th_resp_free(&ok);
    assert_int_equal(th_orders_of(s), 1);
}

/* Redis forgot the key (flushed) and the request reaches another instance
 * (an empty in-process cache): the database alone must still recognise the
 * key, for the same payload (replay) and for another session (422). */
static void test_key_known_to_the_database_only(void **state)
{
    struct th_server other;
    char tok[96];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    int64_t s2 = th_session(&srv, 10, 1000);
    th_order_token(&srv, 12, tok);
    struct th_resp first = th_order(&srv, 12, "db-only", tok, s, 2);
    assert_int_equal(first.status, 201);
    assert_int_equal(th_redis_int("FLUSHALL"), 0);
    th_start(&other, th_port(4), NULL);

    /* Another session under the key: refused, and (a failure) remembered nowhere. */
    th_order_token(&other, 12, tok);
    struct th_resp moved = th_order(&other, 12, "db-only", tok, s2, 2);
    th_expect_problem(&moved, 422, "IDEMPOTENCY_KEY_REUSED");
    th_expect_layer(&moved, "unique-index");

    /* The same payload: the first order, replayed from the database. */
    th_order_token(&other, 12, tok);
    struct th_resp same = th_order(&other, 12, "db-only", tok, s, 2);
    assert_int_equal(same.status, 201);
    th_expect_layer(&same, "unique-index");
    json_t *a = th_json(&first), *b = th_json(&same);
    assert_string_equal(json_string_value(json_object_get(a, "order_no")),
                        json_string_value(json_object_get(b, "order_no")));
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = 12"), 1);
    assert_int_equal(th_stock_of(s), 8);
    assert_int_equal(th_stock_of(s2), 10);

    json_decref(a);
    json_decref(b);
    th_resp_free(&first);
    th_resp_free(&same);
    th_resp_free(&moved);
    assert_int_equal(th_stop(&other), 0);
}

static void test_failures_leave_key_free(void **state)
{
    char tok[96], url[128];
    (void)state;
    int64_t s = th_session(&srv, 3, 1000);
    snprintf(url, sizeof url, "%s/api/v1/orders", srv.url);
    th_order_token(&srv, 8, tok);

    /* Validation failure: nothing touched, key still free. */
    char tk[160];
    snprintf(tk, sizeof tk, "X-Order-Token: %s", tok);
    const char *h[] = {th_auth_header(8, false), "Idempotency-Key: free-1", tk, NULL};
    struct th_resp v = th_request("POST", url, h, "{\"session_id\": 1, \"quantity\": 0}");
    th_expect_problem(&v, 400, "VALIDATION_FAILED");
    json_t *vj = th_json(&v);
    assert_string_equal(json_string_value(json_object_get(vj, "field")), "quantity");
    json_decref(vj);
    struct th_resp v2 = th_request("POST", url, h, "{\"session_id\": 1, \"quantity\": 2.0}");
    th_expect_problem(&v2, 400, "VALIDATION_FAILED");
    struct th_resp v3 = th_request("POST", url, h, "{\"session_id\": 1, \"quantity\": 1");
    th_expect_problem(&v3, 400, "INVALID_JSON");
    struct th_resp v4 =
        th_request("POST", url, h, "{\"session_id\": 1, \"quantity\": 1, \"quantity\": 1}");
    th_expect_problem(&v4, 400, "INVALID_JSON");
    struct th_resp v5 = th_order(&srv, 8, "free-1", tok, 999999, 1);
    th_expect_problem(&v5, 404, "SESSION_NOT_FOUND");

    /* The unknown session spent the token (it had passed the token check)
     * on behalf of key free-1: another key may not use it ... */
    struct th_resp so = th_order(&srv, 8, "free-2", tok, s, 1);
    th_expect_problem(&so, 409, "ORDER_TOKEN_INVALID");
    th_resp_free(&so);
    /* ... but the key is still free, and its retries may bring the token
     * again. Sold out likewise leaves the key free. */
    so = th_order(&srv, 8, "free-1", tok, s, 5);
    th_expect_problem(&so, 409, "SOLD_OUT");
    assert_int_equal(th_stock_of(s), 3);
    struct th_resp ok = th_order(&srv, 8, "free-1", tok, s, 3);
    assert_int_equal(ok.status, 201);
    assert_int_equal(th_stock_of(s), 0);

    th_resp_free(&v);
    th_resp_free(&v2);
    th_resp_free(&v3);
    th_resp_free(&v4);
    th_resp_free(&v5);
    th_resp_free(&so);
    th_resp_free(&ok);
}

static void test_header_rules(void **state)
{
    char tok[96], url[128], tk[160];
    (void)state;
    int64_t s = th_session(&srv, 10, 1000);
    snprintf(url, sizeof url, "%s/api/v1/orders", srv.url);
    char body[64];
    snprintf(body, sizeof body, "{\"session_id\":%lld,\"quantity\":1}", (long long)s);
    th_order_token(&srv, 11, tok);
    snprintf(tk, sizeof tk, "X-Order-Token: %s", tok);

    const char *nokey[] = {th_auth_header(11, false), tk, NULL};
    struct th_resp a = th_request("POST", url, nokey, body);
    th_expect_problem(&a, 400, "IDEMPOTENCY_KEY_REQUIRED");
    const char *badkey[] = {th_auth_header(11, false), tk, "Idempotency-Key: has space", NULL};
    struct th_resp b = th_request("POST", url, badkey, body);
    th_expect_problem(&b, 400, "IDEMPOTENCY_KEY_INVALID");
    char longkey[100] = "Idempotency-Key: ";
    memset(longkey + strlen(longkey), 'k', 65);
    const char *toolong[] = {th_auth_header(11, false), tk, longkey, NULL};
    struct th_resp c = th_request("POST", url, toolong, body);
    th_expect_problem(&c, 400, "IDEMPOTENCY_KEY_INVALID");
    const char *notoken[] = {th_auth_header(11, false), "Idempotency-Key: k1", NULL};
    struct th_resp d = th_request("POST", url, notoken, body);
    th_expect_problem(&d, 400, "ORDER_TOKEN_REQUIRED");
    const char *noauth[] = {"Idempotency-Key: k1", tk, NULL};
    struct th_resp e = th_request("POST", url, noauth, body);
    th_expect_problem(&e, 401, "UNAUTHENTICATED");
    const char *text[] = {th_auth_header(11, false), "Idempotency-Key: k1", tk,
                          "Content-Type: text/plain", NULL};
    struct th_resp f = th_request("POST", url, text, body);
    th_expect_problem(&f, 415, "UNSUPPORTED_MEDIA_TYPE");

    /* The structured-field form: the quotes are not part of the key. */
    const char *quoted[] = {th_auth_header(11, false), tk, "Idempotency-Key: \"q-1\"", NULL};
    struct th_resp g = th_request("POST", url, quoted, body);
    assert_int_equal(g.status, 201);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE request_id = 'q-1'"), 1);
    struct th_resp g2 = th_order(&srv, 11, "q-1", tok, s, 1);
    assert_int_equal(g2.status, 201);
    th_expect_layer(&g2, "response-cache");

    th_resp_free(&a);
    th_resp_free(&b);
    th_resp_free(&c);
    th_resp_free(&d);
    th_resp_free(&e);
    th_resp_free(&f);
    th_resp_free(&g);
    th_resp_free(&g2);
}

/* ---- Redis gone ---- */

static void test_redis_down_before_storm(void **state)
{
    struct storm st;
    (void)state;
    int64_t s = th_session(&srv, 100, 500);
    storm_init(&st, &srv, 1, 21, s, "no-redis");
    th_services("stop-redis");
    th_parallel(100, storm_one, &st);
    th_services("start-redis");
    storm_report(&st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.in_progress + st.dup_submission + st.token_invalid, 0);
    assert_int_equal(th_orders_of(s), 1);
    assert_int_equal(th_stock_of(s), 98);
    /* Once Redis is back the service uses it again, without a restart. */
    sleep(1);
    char tok[96];
    th_order_token(&srv, 22, tok);
    struct th_resp r = th_order(&srv, 22, "after", tok, s, 1);
    assert_int_equal(r.status, 201);
    th_resp_free(&r);
}

struct midstorm {
    struct storm st[10];
};

static void midstorm_one(int i, void *ctx)
{
    struct midstorm *m = ctx;
    if (i == 0) {
        usleep(20000);
        th_services("stop-redis");
        return;
    }
    storm_one(i, &m->st[i % 10]);
}

static void test_redis_dies_mid_storm(void **state)
{
    struct midstorm *m = calloc(1, sizeof *m);
    (void)state;
    int64_t s = th_session(&srv, 1000, 100);
    for (int k = 0; k < 10; k++) {
        char key[32];
        snprintf(key, sizeof key, "mid-%d", k);
        storm_init(&m->st[k], &srv, 1, 300 + k, s, key);
    }
    th_parallel(201, midstorm_one, m);
    th_services("start-redis");
    for (int k = 0; k < 10; k++) {
        storm_report(&m->st[k]);
        /* One order per key: created once, or (if every creator was told
         * 503) none yet but then exactly one after a retry below. */
        assert_true(m->st[k].created <= 1);
        int64_t n = th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = %d", 300 + k);
        assert_true(n <= 1);
    }
    /* A retry of each key now yields its one order. */
    sleep(1);
    for (int k = 0; k < 10; k++) {
        char key[32], tok[96];
        snprintf(key, sizeof key, "mid-%d", k);
        th_order_token(&srv, 300 + k, tok);
        struct th_resp r = th_order(&srv, 300 + k, key, tok, s, 2);
        assert_int_equal(r.status, 201);
        th_resp_free(&r);
        assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders WHERE user_id = %d", 300 + k), 1);
    }
    assert_int_equal(th_stock_of(s), 1000 - 2 * th_orders_of(s));
    free(m);
}

static void test_redis_strict_policy(void **state)
{
    struct th_server strict;
    char tok[96];
    (void)state;
    const char *env[] = {"TICKETD_REDIS_POLICY=strict", NULL};
    th_start(&strict, th_port(3), env);
    int64_t s = th_session(&srv, 10, 500);
    th_order_token(&strict, 31, tok);
    th_services("stop-redis");
    struct th_resp r = th_order(&strict, 31, "strict-1", tok, s, 1);
    th_services("start-redis");
    th_expect_problem(&r, 503, "DEPENDENCY_UNAVAILABLE");
    char v[16];
    assert_non_null(th_header(&r, "Retry-After", v, sizeof v));
    assert_int_equal(th_orders_of(s), 0);
    th_resp_free(&r);
    assert_int_equal(th_stop(&strict), 0);
}

static void test_mysql_down_leaves_nothing(void **state)
{
    char tok[96], v[16];
    (void)state;
    int64_t s = th_session(&srv, 10, 500);
    th_order_token(&srv, 41, tok);
    th_services("stop-mysql");
    struct th_resp r = th_order(&srv, 41, "db-down", tok, s, 1);
    th_services("start-mysql");
    th_expect_problem(&r, 503, "DEPENDENCY_UNAVAILABLE");
    assert_non_null(th_header(&r, "Retry-After", v, sizeof v));
    /* Nothing half-written, and the key is free for the retry, which
     * brings the same token (it was spent on behalf of this key) and, as a
     * client does, waits as long as Retry-After says. */
    assert_int_equal(th_orders_of(s), 0);
    assert_int_equal(th_stock_of(s), 10);
    sleep((unsigned)atoi(v));
    struct th_resp ok = th_order(&srv, 41, "db-down", tok, s, 1);
    assert_int_equal(ok.status, 201);
    assert_int_equal(th_stock_of(s), 9);
    th_resp_free(&r);
    th_resp_free(&ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_replay_get_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storm_one_instance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storm_three_instances, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storm_over_unix_sockets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_names_looked_up_off_the_loops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stock_rush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_double_click, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_reuse_and_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_known_to_the_database_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_leave_key_free, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_down_before_storm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_dies_mid_storm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_strict_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mysql_down_leaves_nothing, setup, teardown),
    };
    return cmocka_run_group_tests_name("orders", tests, NULL, NULL);
}
