/* Behind a reverse proxy: Debian's nginx, configured by docs/nginx.conf (the
 * same directives; only ports, user and file paths rewritten), in front of
 * two ticketd instances. The contract's basic flow runs through it once,
 * request ids pass through or are made by nginx, and an oversized body is
 * refused in problem details. nginx missing is a failure, never a skip:
 * scripts/deps.sh installs it. */
#include "harness.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define DOC_CONF "docs/nginx.conf"

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* Replaces the one occurrence of from in *text by to; fails the test when
 * from is missing or repeated, so the test and the documented file cannot
 * drift apart silently. */
static void replace_once(char **text, const char *from, const char *to)
{
    char *at = strstr(*text, from);
    if (at == NULL)
        fail_msg("%s no longer contains \"%s\": update itest_proxy.c with it", DOC_CONF, from);
    if (strstr(at + strlen(from), from) != NULL)
        fail_msg("%s contains \"%s\" twice", DOC_CONF, from);
    size_t pre = (size_t)(at - *text), n = strlen(*text) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    memcpy(out, *text, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    free(*text);
    *text = out;
}

static const char *find_nginx(void)
{
    static const char *const paths[] = {"/usr/sbin/nginx", "/usr/bin/nginx",
                                        "/usr/local/sbin/nginx"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    }
    return NULL;
}

struct nginx {
    pid_t pid;
    int port;
    char dir[512];
    char conf[600];
    char url[64];
};

/* Writes the test's nginx.conf from the documented one and starts nginx
 * in the foreground (daemon off), its master our child. */
static void nginx_start(struct nginx *ng, int port, int up_a, int up_b)
{
    const char *bin = find_nginx();
    if (bin == NULL)
        fail_msg("nginx is not installed (Debian package nginx): run scripts/deps.sh as root, "
                 "or apt-get install nginx");
    char *conf = read_file(DOC_CONF);
    if (conf == NULL)
        fail_msg("cannot read %s (run from the repository root): %s", DOC_CONF, strerror(errno));

    const char *state = getenv("TICKETD_TEST_STATE");
    char cwd[256];
    if (getcwd(cwd, sizeof cwd) == NULL)
        fail_msg("getcwd: %s", strerror(errno));
    snprintf(ng->dir, sizeof ng->dir, "%s%s%s/nginx-%d",
             state != NULL && state[0] != '/' ? cwd : "",
             state != NULL && state[0] != '/' ? "/" : "", state != NULL ? state : "/tmp", port);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/tmp'", ng->dir, ng->dir);
    if (system(cmd) != 0)
        fail_msg("cannot create %s", ng->dir);

    char line[4096];
    /* As root (CI) the workers run as root too, so they can use the test's
     * directories; as anyone else nginx runs as its caller. */
    replace_once(&conf, "user www-data;", getuid() == 0 ? "user root;" : "");
    replace_once(&conf, "worker_processes auto;", "daemon off;\nworker_processes 2;");
    snprintf(line, sizeof line, "pid %s/nginx.pid;", ng->dir);
    replace_once(&conf, "pid /run/nginx.pid;", line);
    snprintf(line, sizeof line, "error_log %s/error.log warn;", ng->dir);
    replace_once(&conf, "error_log /var/log/nginx/error.log warn;", line);
    snprintf(line, sizeof line, "access_log %s/access.log ticketd;", ng->dir);
    replace_once(&conf, "access_log /var/log/nginx/ticketd.access.log ticketd;", line);
    snprintf(line, sizeof line,
             "http {\n    client_body_temp_path %s/tmp/body;\n    proxy_temp_path %s/tmp/proxy;\n"
             "    fastcgi_temp_path %s/tmp/fastcgi;\n    uwsgi_temp_path %s/tmp/uwsgi;\n"
             "    scgi_temp_path %s/tmp/scgi;\n",
             ng->dir, ng->dir, ng->dir, ng->dir, ng->dir);
    replace_once(&conf, "http {\n", line);
    snprintf(line, sizeof line, "server 127.0.0.1:%d max_conns=256;", up_a);
    replace_once(&conf, "server 127.0.0.1:8081 max_conns=256;", line);
    snprintf(line, sizeof line, "server 127.0.0.1:%d max_conns=256;", up_b);
    replace_once(&conf, "server 127.0.0.1:8082 max_conns=256;", line);
    snprintf(line, sizeof line, "listen 127.0.0.1:%d;", port);
    replace_once(&conf, "listen 80;", line);

    snprintf(ng->conf, sizeof ng->conf, "%s/nginx.conf", ng->dir);
    FILE *f = fopen(ng->conf, "w");
    if (f == NULL || fputs(conf, f) < 0 || fclose(f) != 0)
        fail_msg("cannot write %s", ng->conf);
    free(conf);

    char prefix[600], elog[600], out[600];
    snprintf(prefix, sizeof prefix, "%s/", ng->dir);
    snprintf(elog, sizeof elog, "%s/error.log", ng->dir);
    snprintf(out, sizeof out, "%s/stderr.log", ng->dir);
    ng->port = port;
    snprintf(ng->url, sizeof ng->url, "http://127.0.0.1:%d", port);
    ng->pid = fork();
    if (ng->pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (ng->pid == 0) {
        if (freopen(out, "w", stdout) == NULL || freopen(out, "a", stderr) == NULL)
            _exit(126);
        execl(bin, "nginx", "-c", ng->conf, "-p", prefix, "-e", elog, (char *)NULL);
        _exit(127);
    }
    /* Up when it answers through to ticketd. */
    for (int i = 0; i < 100; i++) {
        int status;
        if (waitpid(ng->pid, &status, WNOHANG) == ng->pid) {
            char *log = read_file(out);
            ng->pid = 0;
            fail_msg("nginx exited at start (status %d): %s", status, log ? log : "");
        }
        char url[128];
        snprintf(url, sizeof url, "%s/livez", ng->url);
        struct th_resp r = th_request("GET", url, NULL, NULL);
        long st = r.status;
        th_resp_free(&r);
        if (st == 200)
            return;
        th_msleep(100);
    }
    fail_msg("nginx did not answer on %s within 10 s", ng->url);
}

/* Stops nginx by its PID: SIGQUIT (graceful), then SIGKILL after 5 s. */
static void nginx_stop(struct nginx *ng)
{
    if (ng->pid <= 0)
        return;
    kill(ng->pid, SIGQUIT);
    for (int i = 0; i < 50; i++) {
        if (waitpid(ng->pid, NULL, WNOHANG) == ng->pid) {
            ng->pid = 0;
            return;
        }
        th_msleep(100);
    }
    kill(ng->pid, SIGKILL);
    waitpid(ng->pid, NULL, 0);
    ng->pid = 0;
}

static bool is_hex32(const char *s)
{
    return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

static struct th_server a, b;
static struct nginx ng;

/* Whatever happened, nginx is stopped by its PID, and so are the two
 * instances the test left running. */
static int teardown(void **state)
{
    (void)state;
    nginx_stop(&ng);
    if (a.pid > 0)
        th_kill(&a);
    if (b.pid > 0)
        th_kill(&b);
    return 0;
}

static void test_basic_flow_through_nginx(void **state)
{
    struct th_server proxy;
    char v[256], url[256], tok[96], no[32], path[700];
    (void)state;
    th_reset();
    const char *env[] = {"TICKETD_ACCESS_LOG=1", NULL};
    th_start(&a, th_port(0), env);
    th_start(&b, th_port(1), env);
    nginx_start(&ng, th_port(2), a.port, b.port);
    /* The harness's shortcuts, pointed at the proxy. */
    memset(&proxy, 0, sizeof proxy);
    proxy.port = ng.port;
    snprintf(proxy.url, sizeof proxy.url, "%s", ng.url);

    /* An admin creates a session; a user gets a token and orders. */
    int64_t s = th_session(&proxy, 10, 1500);
    assert_true(s > 0);
    th_order_token(&proxy, 42, tok);
    struct th_resp r = th_order(&proxy, 42, "via-proxy-1", tok, s, 2);
    assert_int_equal(r.status, 201);
    char location[128];
    assert_non_null(th_header(&r, "Location", location, sizeof location));
    json_t *o = th_json(&r);
    snprintf(no, sizeof no, "%s", json_string_value(json_object_get(o, "order_no")));
    json_decref(o);
    snprintf(v, sizeof v, "/api/v1/orders/%s", no);
    assert_string_equal(location, v);

    /* The retry: the same 201 and body, replayed. */
    struct th_resp again = th_order(&proxy, 42, "via-proxy-1", tok, s, 2);
    assert_int_equal(again.status, 201);
    assert_string_equal(again.body, r.body);
    assert_non_null(th_header(&again, "Idempotent-Replayed", v, sizeof v));
    assert_string_equal(v, "true");
    th_resp_free(&again);
    th_resp_free(&r);

    /* Read back through the proxy, and the 409 of a spent token. */
    snprintf(url, sizeof url, "%s%s", ng.url, location);
    const char *mine[] = {th_auth_header(42, false), NULL};
    r = th_request("GET", url, mine, NULL);
    assert_int_equal(r.status, 200);
    th_resp_free(&r);
    r = th_order(&proxy, 42, "via-proxy-2", tok, s, 1);
    th_expect_problem(&r, 409, "ORDER_TOKEN_INVALID");
    th_resp_free(&r);

    /* The gateway's signed callback, and its retry. */
    char body[256], ts[32], sig[65], tsh[64], sigh[128];
    snprintf(body, sizeof body,
             "{\"txn_id\":\"gw-proxy-1\",\"order_no\":\"%s\",\"amount_cents\":3000,"
             "\"status\":\"SUCCESS\"}",
             no);
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    th_pay_sign(TH_PAY_SECRET, ts, body, sig);
    snprintf(tsh, sizeof tsh, "X-Pay-Timestamp: %s", ts);
    snprintf(sigh, sizeof sigh, "X-Pay-Signature: %s", sig);
    const char *pay_h[] = {tsh, sigh, NULL};
    snprintf(url, sizeof url, "%s/api/v1/payments/callback", ng.url);
    r = th_request("POST", url, pay_h, body);
    assert_int_equal(r.status, 200);
    o = th_json(&r);
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), "APPLIED");
    json_decref(o);
    th_resp_free(&r);
    r = th_request("POST", url, pay_h, body);
    assert_int_equal(r.status, 200);
    assert_non_null(th_header(&r, "Idempotent-Replayed", v, sizeof v));
    th_resp_free(&r);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM payments"), 1);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders"), 1);

    /* /me. */
    snprintf(url, sizeof url, "%s/api/v1/me", ng.url);
    r = th_request("GET", url, mine, NULL);
    assert_int_equal(r.status, 200);
    o = th_json(&r);
    assert_int_equal(json_integer_value(json_object_get(o, "user_id")), 42);
    json_decref(o);
    th_resp_free(&r);

    /* X-Request-Id: the client's is passed through and echoed ... */
    snprintf(url, sizeof url, "%s/api/v1/sessions/%lld", ng.url, (long long)s);
    const char *rid_h[] = {"X-Request-Id: proxy-test.rid:0001", NULL};
    r = th_request("GET", url, rid_h, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(th_header(&r, "X-Request-Id", v, sizeof v));
    assert_string_equal(v, "proxy-test.rid:0001");
    th_resp_free(&r);
    /* ... and without one, nginx makes it and ticketd uses it. */
    char made[3][64];
    for (int i = 0; i < 3; i++) {
        r = th_request("GET", url, NULL, NULL);
        assert_int_equal(r.status, 200);
        assert_non_null(th_header(&r, "X-Request-Id", made[i], sizeof made[i]));
        th_resp_free(&r);
        if (!is_hex32(made[i]))
            fail_msg("X-Request-Id %s is not nginx's $request_id", made[i]);
    }
    assert_string_not_equal(made[0], made[1]);
    th_msleep(300); /* access logs are written after the answer */
    snprintf(path, sizeof path, "%s/access.log", ng.dir);
    char *nlog = read_file(path);
    assert_non_null(nlog);
    for (int i = 0; i < 3; i++) {
        char needle[256];
        snprintf(needle, sizeof needle, "rid=%s", made[i]);
        if (strstr(nlog, needle) == NULL)
            fail_msg("nginx's access log lacks %s", needle);
        snprintf(needle, sizeof needle, "\"request_id\":\"%s\"", made[i]);
        if (!th_log_contains(&a, needle) && !th_log_contains(&b, needle))
            fail_msg("no ticketd logged request id %s: nginx's id was not passed on", made[i]);
    }
    assert_non_null(strstr(nlog, "rid=proxy-test.rid:0001"));
    free(nlog);
    /* Both instances served (round robin over the pool). */
    assert_true(th_log_contains(&a, "\"msg\":\"access\""));
    assert_true(th_log_contains(&b, "\"msg\":\"access\""));

    /* A body over 16k is refused, in problem details, before any order. */
    size_t big = 17 * 1024;
    char *huge = malloc(big + 64);
    int n =
        snprintf(huge, big + 64, "{\"session_id\":%lld,\"quantity\":1,\"pad\":\"", (long long)s);
    memset(huge + n, 'x', big - (size_t)n);
    strcpy(huge + big, "\"}");
    char tok2[96], tokh[160];
    th_order_token(&proxy, 43, tok2);
    snprintf(tokh, sizeof tokh, "X-Order-Token: %s", tok2);
    snprintf(url, sizeof url, "%s/api/v1/orders", ng.url);
    const char *big_h[] = {th_auth_header(43, false), "Idempotency-Key: via-proxy-big", tokh,
                           "X-Request-Id: proxy-big-1", NULL};
    r = th_request("POST", url, big_h, huge);
    th_expect_problem(&r, 413, "PAYLOAD_TOO_LARGE");
    assert_non_null(th_header(&r, "X-Request-Id", v, sizeof v));
    assert_string_equal(v, "proxy-big-1");
    th_resp_free(&r);
    free(huge);
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM orders"), 1);

    nginx_stop(&ng);
    assert_int_equal(th_stop(&a), 0);
    assert_int_equal(th_stop(&b), 0);
}

int main(void)
{
    /* nginx makes each request's id ($request_id): the harness sends none. */
    th_request_ids(false);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_basic_flow_through_nginx, teardown),
    };
    return cmocka_run_group_tests_name("proxy", tests, NULL, NULL);
}
