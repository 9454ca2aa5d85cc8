/* Operating ticketd: Redis or MariaDB going away and coming back under a
 * running server, the SIGTERM drain with a request in flight, refused
 * configuration, the token command and the logged effective config. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static struct th_server srv;

/* Faults a test injected, undone by the teardown whatever happened, so a
 * failing test never leaves a stopped or frozen server to the next one. */
static bool redis_stopped, mysql_stopped;
static pid_t frozen_mysql;

static void thaw_mysql(void)
{
    if (frozen_mysql > 0)
        kill(frozen_mysql, SIGCONT);
    frozen_mysql = 0;
}

static int setup(void **state)
{
    (void)state;
    th_fresh_start(&srv, th_next_port(20, 8), NULL);
    return 0;
}

/* The drain test needs database calls that outlast a short freeze. */
static int setup_patient(void **state)
{
    (void)state;
    const char *env[] = {"TICKETD_MYSQL_TIMEOUT_S=30", "TICKETD_DRAIN_TIMEOUT_S=20", NULL};
    th_fresh_start(&srv, th_next_port(20, 8), env);
    return 0;
}

static int setup_none(void **state)
{
    (void)state;
    memset(&srv, 0, sizeof srv);
    return 0;
}

static pthread_t slow_thread;
static bool slow_started;
static int keepalive_fd = -1;

static int teardown(void **state)
{
    (void)state;
    thaw_mysql();
    if (keepalive_fd >= 0) {
        close(keepalive_fd);
        keepalive_fd = -1;
    }
    if (slow_started) {
        pthread_join(slow_thread, NULL);
        slow_started = false;
    }
    if (redis_stopped) {
        redis_stopped = false;
        th_services("start-redis");
    }
    if (mysql_stopped) {
        mysql_stopped = false;
        th_services("start-mysql");
    }
    th_stop_clean(&srv);
    return 0;
}

/* ---- helpers ---- */

static void expect_unavailable(const struct th_resp *r, const char *what)
{
    char v[128];
    if (r->status != 503 || strcmp(th_code(r), "DEPENDENCY_UNAVAILABLE") != 0)
        fail_msg("%s: expected 503 DEPENDENCY_UNAVAILABLE, got %ld %s", what, r->status, r->body);
    if (th_header(r, "Content-Type", v, sizeof v) == NULL ||
        strcmp(v, "application/problem+json") != 0)
        fail_msg("%s: not a problem", what);
    if (th_header(r, "Retry-After", v, sizeof v) == NULL || atoi(v) < 1)
        fail_msg("%s: no Retry-After in seconds", what);
    assert_non_null(th_header(r, "X-Request-Id", v, sizeof v));
}

/* Polls /readyz (up to 5 s) until it answers want_status with key set to
 * want: each server thread finds out about a dependency that came back on
 * its own next call, after its back-off. Returns the last JSON. */
static json_t *wait_readyz(long want_status, const char *key, const char *want)
{
    double t0 = th_now_s();
    json_t *j = NULL;
    long st = 0;
    while (th_now_s() - t0 < 5.0) {
        struct th_resp r = th_call(&srv, "GET", "/readyz", NULL, NULL);
        st = r.status;
        json_decref(j);
        j = json_loadb(r.body, r.body_len, 0, NULL);
        th_resp_free(&r);
        const char *v = json_string_value(json_object_get(j, key));
        if (st == want_status && v != NULL && strcmp(v, want) == 0)
            return j;
        th_msleep(100);
    }
    fail_msg("/readyz still %ld without %s=%s after 5 s", st, key, want);
    return j;
}

/* Fails the test if the server has exited (and reaps it). */
static void expect_running(const char *when)
{
    int status;
    if (srv.pid > 0 && waitpid(srv.pid, &status, WNOHANG) == srv.pid) {
        srv.pid = 0;
        fail_msg("ticketd died %s (%s %d); see %s", when, WIFSIGNALED(status) ? "signal" : "exit",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), srv.log_path);
    }
}

/* The background threads (relay, consumers, sweep) meet an outage on
 * their own schedule; give them time to, so a crash there shows here. */
#define OUTAGE_SETTLE_MS 1200

/* The JSON of /readyz after checking its status. */
static json_t *readyz(long want_status)
{
    struct th_resp r = th_call(&srv, "GET", "/readyz", NULL, NULL);
    if (r.status != want_status)
        fail_msg("/readyz: expected %ld, got %ld %s", want_status, r.status, r.body);
    json_t *j = th_json(&r);
    th_resp_free(&r);
    return j;
}

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "(none)";
}

static long post_token(int64_t user, char *token_out)
{
    const char *h[] = {th_auth_header(user, false), NULL};
    struct th_resp r = th_call(&srv, "POST", "/api/v1/tokens", h, NULL);
    long st = r.status;
    if (st == 201 && token_out != NULL) {
        json_t *j = th_json(&r);
        snprintf(token_out, 96, "%s", jstr(j, "token"));
        json_decref(j);
    }
    th_resp_free(&r);
    return st;
}

/* ---- Redis goes away ---- */

static void test_redis_down_and_back(void **state)
{
    char tok[96];
    (void)state;
    int64_t s = th_session(&srv, 5, 100);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/sessions/%lld", (long long)s);
    assert_int_equal(post_token(50, NULL), 201);
    long long errors_before =
        th_metric(&srv, "ticketd_dependency_errors_total{dependency=\"redis\"}");
    assert_true(errors_before >= 0);

    th_services("stop-redis");
    redis_stopped = true;
    th_msleep(OUTAGE_SETTLE_MS);
    expect_running("once Redis stopped");

    /* Still ready: Redis only accelerates, MySQL decides. */
    json_t *j = readyz(200);
    assert_string_equal(jstr(j, "status"), "ready");
    assert_string_equal(jstr(j, "mysql"), "up");
    assert_string_equal(jstr(j, "redis"), "down");
    json_decref(j);

    /* Tokens live only in Redis: none can be issued. */
    for (int i = 0; i < 3; i++) {
        const char *h[] = {th_auth_header(50, false), NULL};
        struct th_resp r = th_call(&srv, "POST", "/api/v1/tokens", h, NULL);
        expect_unavailable(&r, "POST /tokens with Redis stopped");
        th_resp_free(&r);
    }
    /* What needs only MySQL still works. */
    struct th_resp g = th_call(&srv, "GET", path, NULL, NULL);
    assert_int_equal(g.status, 200);
    th_resp_free(&g);
    assert_true(th_metric(&srv, "ticketd_dependency_errors_total{dependency=\"redis\"}") >
                errors_before);

    th_services("start-redis");
    redis_stopped = false;
    /* Our own Redis connection died with the server; the first command on
     * it only finds that out, and the next one reconnects. */
    th_redis_int("PING");

    /* Back without a restart of ticketd, within a few seconds. */
    double t0 = th_now_s();
    long st = 0;
    while (th_now_s() - t0 < 5.0) {
        st = post_token(51, tok);
        if (st == 201)
            break;
        th_msleep(100);
    }
    if (st != 201)
        fail_msg("tokens still refused %.1f s after Redis came back (last %ld)", th_now_s() - t0,
                 st);
    print_message("tokens issued again %.2f s after Redis came back\n", th_now_s() - t0);
    expect_running("after Redis came back");
    assert_int_equal(th_redis_int("GET token:{51}:%s", tok), 51);
    j = wait_readyz(200, "redis", "up");
    assert_string_equal(jstr(j, "status"), "ready");
    json_decref(j);
}

/* ---- MariaDB goes away ---- */

static void test_mysql_down_and_back(void **state)
{
    (void)state;
    int64_t s = th_session(&srv, 5, 100);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/sessions/%lld", (long long)s);
    long long errors_before =
        th_metric(&srv, "ticketd_dependency_errors_total{dependency=\"mysql\"}");
    assert_true(errors_before >= 0);

    th_services("stop-mysql");
    mysql_stopped = true;
    th_msleep(OUTAGE_SETTLE_MS);
    expect_running("once MariaDB stopped");

    json_t *j = readyz(503);
    assert_string_equal(jstr(j, "mysql"), "down");
    assert_string_equal(jstr(j, "redis"), "up");
    assert_string_not_equal(jstr(j, "status"), "ready");
    json_decref(j);
    struct th_resp r = th_call(&srv, "GET", "/readyz", NULL, NULL);
    char v[32];
    assert_non_null(th_header(&r, "Retry-After", v, sizeof v));
    th_resp_free(&r);

    for (int i = 0; i < 3; i++) {
        r = th_call(&srv, "GET", path, NULL, NULL);
        expect_unavailable(&r, "GET /sessions/{id} with MariaDB stopped");
        th_resp_free(&r);
    }
    r = th_call(&srv, "GET", "/api/v1/sessions/1", NULL, NULL);
    expect_unavailable(&r, "GET /sessions/1 with MariaDB stopped");
    th_resp_free(&r);
    const char *admin[] = {th_auth_header(1, true), NULL};
    r = th_call(&srv, "POST", "/api/v1/sessions", admin,
                "{\"title\":\"Lost\",\"price_cents\":100,\"stock\":3}");
    expect_unavailable(&r, "POST /sessions with MariaDB stopped");
    th_resp_free(&r);
    /* Alive, and what needs only Redis still works. */
    r = th_call(&srv, "GET", "/livez", NULL, NULL);
    assert_int_equal(r.status, 200);
    th_resp_free(&r);
    assert_int_equal(post_token(60, NULL), 201);
    assert_true(th_metric(&srv, "ticketd_dependency_errors_total{dependency=\"mysql\"}") >
                errors_before);

    th_services("start-mysql");
    mysql_stopped = false;

    double t0 = th_now_s();
    long st = 0;
    while (th_now_s() - t0 < 5.0) {
        r = th_call(&srv, "GET", path, NULL, NULL);
        st = r.status;
        th_resp_free(&r);
        if (st == 200)
            break;
        th_msleep(100);
    }
    if (st != 200)
        fail_msg("sessions still unavailable %.1f s after MariaDB came back (last %ld)",
                 th_now_s() - t0, st);
    print_message("sessions served again %.2f s after MariaDB came back\n", th_now_s() - t0);
    expect_running("after MariaDB came back");
    j = wait_readyz(200, "mysql", "up");
    assert_string_equal(jstr(j, "status"), "ready");
    json_decref(j);
    /* The refused creation left nothing behind. */
    assert_int_equal(th_db_int("SELECT COUNT(*) FROM sessions"), 1);
}

/* ---- SIGTERM with a request in flight ---- */

struct slow {
    char url[160];
    struct th_resp resp;
    _Atomic bool done;
};

static struct slow slow;

static void *slow_main(void *arg)
{
    (void)arg;
    slow.resp = th_request("GET", slow.url, NULL, NULL);
    slow.done = true;
    return NULL;
}

/* Sends a GET for path (unless NULL) on an open connection, then reads one
 * whole response into buf (by its Content-Length). Returns the status, 0
 * on close or timeout. */
static int keepalive_get(int fd, const char *path, char *buf, size_t cap, int timeout_ms)
{
    char req[256];
    int status = 0;
    size_t got = 0;
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path ? path : "/");
    buf[0] = '\0';
    if (path != NULL && send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
        return 0;
    double deadline = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < deadline && got + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        const char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (end != NULL && cl != NULL && got >= (size_t)(end + 4 - buf) + (size_t)atol(cl + 17))
            break;
    }
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    return status;
}

/* True when a new TCP connection to port is refused. */
static bool connection_refused(int port)
{
    int fd = th_tcp_connect(port);
    if (fd >= 0)
        close(fd);
    return fd < 0;
}

static void test_sigterm_drains_in_flight(void **state)
{
    (void)state;
    int64_t s = th_session(&srv, 7, 100);
    snprintf(slow.url, sizeof slow.url, "%s/api/v1/sessions/%lld", srv.url, (long long)s);
    slow.done = false;
    memset(&slow.resp, 0, sizeof slow.resp);

    /* Freeze MariaDB so the read below stays in flight as long as we like. */
    frozen_mysql = th_mariadb_pid();
    assert_int_equal(kill(frozen_mysql, SIGSTOP), 0);
    assert_int_equal(pthread_create(&slow_thread, NULL, slow_main, NULL), 0);
    slow_started = true;
    /* A server thread takes every connection waiting when it wakes, and a
     * thread blocked in a handler serves none of them: let the slow request
     * be taken alone, so the connections below go to other threads. */
    th_msleep(300);

    /* In flight: the /metrics request that asks is the other one. */
    double t0 = th_now_s();
    long long inflight = 0;
    while (th_now_s() - t0 < 5.0) {
        inflight = th_metric(&srv, "ticketd_inflight_requests");
        if (inflight >= 2)
            break;
        th_msleep(20);
    }
    if (inflight < 2)
        fail_msg("the request never got in flight (%lld)", inflight);

    /* A client connected (and served) before the signal, to ask readiness
     * after it. */
    char buf[4096];
    keepalive_fd = th_tcp_connect(srv.port);
    assert_true(keepalive_fd >= 0);
    assert_int_equal(keepalive_get(keepalive_fd, "/livez", buf, sizeof buf, 3000), 200);

    assert_int_equal(kill(srv.pid, SIGTERM), 0);

    /* The listener closes at once: a new connection is refused. */
    t0 = th_now_s();
    bool refused = false;
    while (!refused && th_now_s() - t0 < 3.0) {
        refused = connection_refused(srv.port);
        if (!refused)
            th_msleep(20);
    }
    if (!refused)
        fail_msg("new connections still accepted %.1f s after SIGTERM", th_now_s() - t0);
    /* The client that was already connected asks for readiness; its
     * answer waits on the frozen database like the other request. */
    char req[] = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    assert_int_equal(send(keepalive_fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    /* ... while the request in flight is held, not cut, and ticketd waits. */
    th_msleep(200);
    assert_false(slow.done);
    int status;
    assert_int_equal(waitpid(srv.pid, &status, WNOHANG), 0);

    thaw_mysql();
    /* Draining: not ready, whatever MySQL says. */
    int ready = keepalive_get(keepalive_fd, NULL, buf, sizeof buf, 10000);
    close(keepalive_fd);
    keepalive_fd = -1;
    if (ready != 503 || strstr(buf, "\"status\":\"draining\"") == NULL)
        fail_msg("/readyz while draining: %s", buf);
    pthread_join(slow_thread, NULL);
    slow_started = false;
    if (slow.resp.status != 200)
        fail_msg("the request in flight ended with %ld %s", slow.resp.status, slow.resp.body);
    json_t *j = th_json(&slow.resp);
    assert_int_equal(json_integer_value(json_object_get(j, "id")), s);
    json_decref(j);
    th_resp_free(&slow.resp);

    /* It exits by itself, cleanly. */
    t0 = th_now_s();
    pid_t w = 0;
    while (w == 0 && th_now_s() - t0 < 15.0) {
        w = waitpid(srv.pid, &status, WNOHANG);
        if (w == 0)
            th_msleep(20);
    }
    if (w != srv.pid)
        fail_msg("ticketd still running %.1f s after the drain", th_now_s() - t0);
    srv.pid = 0;
    print_message("ticketd exited %.2f s after the last request finished\n", th_now_s() - t0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(th_log_contains(&srv, "draining"));
    assert_false(th_log_contains(&srv, "still in flight"));
    assert_false(th_log_contains(&srv, "ERROR: AddressSanitizer"));
    assert_false(th_log_contains(&srv, "ERROR: LeakSanitizer"));
    assert_false(th_log_contains(&srv, "runtime error:"));
}

/* ---- the binary's own commands and configuration ---- */

struct run {
    int status; /* exit code, or -1 if killed by a signal or the timeout */
    char out[16384];
};

/* Runs $TICKETD_BIN with args and the test settings plus extra_env
 * ("KEY=VALUE", NULL-terminated), capturing stdout and stderr together.
 * Kills it after timeout_ms. */
static void run_ticketd(const char *const *args, const char *const *extra_env, int timeout_ms,
                        struct run *out)
{
    const char *bin = getenv("TICKETD_BIN");
    char port[16], cache_port[16], db_port[16];
    int fds[2];
    memset(out, 0, sizeof *out);
    if (bin == NULL || bin[0] == '\0')
        bin = "build/asan/ticketd";
    snprintf(port, sizeof port, "%d", th_port(29));
    snprintf(cache_port, sizeof cache_port, "%s",
             getenv("TICKETD_TEST_REDIS_PORT") ? getenv("TICKETD_TEST_REDIS_PORT") : "26379");
    snprintf(db_port, sizeof db_port, "%s",
             getenv("TICKETD_TEST_MYSQL_PORT") ? getenv("TICKETD_TEST_MYSQL_PORT") : "23306");
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *argv[16];
        int n = 0;
        argv[n++] = bin;
        for (; args[n - 1] != NULL && n < 15; n++)
            argv[n] = args[n - 1];
        argv[n] = NULL;
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        setenv("TICKETD_ENV", "test", 1);
        setenv("TICKETD_BIND", "127.0.0.1", 1);
        setenv("TICKETD_PORT", port, 1);
        setenv("TICKETD_REDIS_HOST", "127.0.0.1", 1);
        setenv("TICKETD_REDIS_PORT", cache_port, 1);
        setenv("TICKETD_MYSQL_HOST", "127.0.0.1", 1);
        setenv("TICKETD_MYSQL_PORT", db_port, 1);
        setenv("TICKETD_MYSQL_USER", "ticketd", 1);
        setenv("TICKETD_MYSQL_PASSWORD", "ticketd", 1);
        setenv("TICKETD_MYSQL_DB", "ticketd", 1);
        setenv("TICKETD_JWT_SECRET", TH_JWT_SECRET, 1);
        setenv("TICKETD_PAY_SECRET", TH_PAY_SECRET, 1);
        for (; extra_env != NULL && *extra_env != NULL; extra_env++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s", *extra_env);
            char *eq = strchr(kv, '=');
            if (eq == NULL) {
                unsetenv(kv);
                continue;
            }
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    double deadline = th_now_s() + timeout_ms / 1000.0;
    bool eof = false;
    while (!eof && th_now_s() < deadline) {
        struct pollfd p = {fds[0], POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        char tmp[4096];
        ssize_t n = read(fds[0], tmp, sizeof tmp);
        if (n <= 0) {
            eof = true;
            break;
        }
        size_t keep = (size_t)n;
        if (got + keep >= sizeof out->out)
            keep = sizeof out->out - 1 - got;
        memcpy(out->out + got, tmp, keep);
        got += keep;
    }
    out->out[got] = '\0';
    close(fds[0]);
    int status = 0;
    pid_t w = 0;
    while (w == 0 && th_now_s() < deadline) {
        w = waitpid(pid, &status, WNOHANG);
        if (w == 0)
            th_msleep(10);
    }
    if (w != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        out->status = -1;
        return;
    }
    out->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect_refused(const struct run *r, const char *what, const char *needle)
{
    if (r->status <= 0)
        fail_msg("%s: expected a non-zero exit, got %d: %s", what, r->status, r->out);
    if (strstr(r->out, needle) == NULL)
        fail_msg("%s: the message does not name %s: %s", what, needle, r->out);
    if (strstr(r->out, "listening on") != NULL)
        fail_msg("%s: it started serving anyway", what);
    if (strstr(r->out, "Sanitizer") != NULL || strstr(r->out, "runtime error") != NULL)
        fail_msg("%s: sanitizer report: %s", what, r->out);
}

/* Writes text to a new file under the logs folder; returns its path. */
static void write_file(const char *name, const char *text, char *path, size_t cap)
{
    const char *dir = getenv("TICKETD_TEST_LOGS");
    snprintf(path, cap, "%s/%s-%d.env", dir != NULL && dir[0] != '\0' ? dir : "/tmp", name,
             (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_bad_config_refused(void **state)
{
    static const struct {
        const char *env;
        const char *needle;
    } bad[] = {
        {"TICKETD_PORT=70000", "TICKETD_PORT"},
        {"TICKETD_PORT=0", "TICKETD_PORT"},
        {"TICKETD_PORT=80x", "TICKETD_PORT"},
        {"TICKETD_MAX_PER_ORDER=abc", "TICKETD_MAX_PER_ORDER"},
        {"TICKETD_MAX_PER_ORDER=", "TICKETD_MAX_PER_ORDER"},
        {"TICKETD_MAX_FIBERS=0", "TICKETD_MAX_FIBERS"},
        /* Settings that no longer do anything name what replaced them. */
        {"TICKETD_QUEUE_MAX=4096", "TICKETD_QUEUE_MAX is no longer a setting"},
        {"TICKETD_QUEUE_MAX=64", "TICKETD_MAX_FIBERS"},
        {"TICKETD_IO_THREADS=2", "TICKETD_LOOPS"},
        {"TICKETD_MAX_BODY=-1", "TICKETD_MAX_BODY"},
        {"TICKETD_REDIS_POLICY=sometimes", "expected degrade or strict"},
        {"TICKETD_ENV=staging", "TICKETD_ENV=staging: expected dev, test, demo or production"},
        {"TICKETD_ACCESS_LOG=maybe", "TICKETD_ACCESS_LOG"},
        {"TICKETD_LOG_LEVEL=loud", "TICKETD_LOG_LEVEL"},
        {"TICKETD_JWT_SECRET=short", "TICKETD_JWT_SECRET"},
        {"TICKETD_JWT_SECRET=", "TICKETD_JWT_SECRET"},
    };
    static const char *const serve[] = {"serve", NULL};
    struct run r;
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *env[] = {bad[i].env, NULL};
        run_ticketd(serve, env, 10000, &r);
        expect_refused(&r, bad[i].env, bad[i].needle);
    }

    /* In a --config file: a line that is no setting, a bad value; each
     * named with its place in the file. (An unknown key is only warned
     * about: test_cli_answers_before_config.) */
    char path[512];
    const char *with_file[] = {"serve", "--config", path, NULL};
    write_file("noeq", "TICKETD_MAX_FIBERS 4\n", path, sizeof path);
    run_ticketd(with_file, NULL, 10000, &r);
    expect_refused(&r, "a line without =", path);

    write_file("badvalue", "TICKETD_TX_RETRIES=many\n", path, sizeof path);
    run_ticketd(with_file, NULL, 10000, &r);
    expect_refused(&r, "a bad value in the file", "TICKETD_TX_RETRIES");

    const char *missing[] = {"serve", "--config", "/nonexistent/ticketd.env", NULL};
    run_ticketd(missing, NULL, 10000, &r);
    expect_refused(&r, "a missing file", "/nonexistent/ticketd.env");

    /* The real environment wins over the file: a bad value in the file is
     * not even read when the environment sets that key. */
    write_file("overridden", "TICKETD_MAX_PER_ORDER=abc\n", path, sizeof path);
    const char *token[] = {"token", "--user", "5", "--config", path, NULL};
    const char *env_ok[] = {"TICKETD_MAX_PER_ORDER=6", NULL};
    run_ticketd(token, env_ok, 10000, &r);
    if (r.status != 0)
        fail_msg("the environment did not win over the file: %d %s", r.status, r.out);

    /* Unknown commands and options. */
    static const char *const usage_errors[][4] = {
        {"frobnicate", NULL}, {"serve", "--no-such-option", NULL}, {"serve", "extra", NULL}};
    for (size_t i = 0; i < sizeof usage_errors / sizeof usage_errors[0]; i++) {
        run_ticketd(usage_errors[i], NULL, 10000, &r);
        expect_refused(&r, usage_errors[i][0], "usage:");
    }
}

/* Help and unknown commands need no settings at all, and unknown TICKETD_*
 * names are warned about, one line each, without stopping the command. */
static void test_cli_answers_before_config(void **state)
{
    static const struct {
        const char *args[4];
        int status;
        const char *needle;
    } cli[] = {
        {{"-h", NULL}, 0, "usage: ticketd serve"},
        {{"--help", NULL}, 0, "usage: ticketd serve"},
        {{"help", NULL}, 0, "ticketd help [COMMAND]"},
        {{"help", "token", NULL}, 0, "--ttl SECONDS"},
        {{"serve", "--help", NULL}, 0, "Serves the HTTP API"},
        /* The defences TICKETD_DEFENSES may switch off, from their table. */
        {{"serve", "--help", NULL},
         0,
         "  consumer-dedup-business-key  consumer-dedup-business-key"},
        {{"help", "worker", NULL}, 0, "  bloom-liveness               bloom-liveness"},
        {{"worker", "-h", NULL}, 0, "only the background work"},
        {{"token", "--help", NULL}, 0, "--user ID"},
        {{"dead-letters", "--help", NULL}, 0, "replay applies"},
        {{"version", "--help", NULL}, 0, "usage: ticketd version"},
        {{"frobnicate", NULL}, 2, "unknown command 'frobnicate' (choices: serve, worker"},
        {{"serve", "--user", "3", NULL}, 2, "ticketd serve: takes no --user"},
    };
    /* No secret: every one of these is answered before settings are read. */
    static const char *const no_secret[] = {"TICKETD_JWT_SECRET", NULL};
    struct run r;
    (void)state;
    for (size_t i = 0; i < sizeof cli / sizeof cli[0]; i++) {
        run_ticketd(cli[i].args, no_secret, 10000, &r);
        if (r.status != cli[i].status || strstr(r.out, cli[i].needle) == NULL)
            fail_msg("ticketd %s %s: exit %d (want %d), want '%s' in: %s", cli[i].args[0],
                     cli[i].args[1] ? cli[i].args[1] : "", r.status, cli[i].status, cli[i].needle,
                     r.out);
        if (strstr(r.out, "is not set") != NULL)
            fail_msg("ticketd %s asked for a secret: %s", cli[i].args[0], r.out);
    }

    /* A misspelt name in the environment and in the file: a warning each,
     * naming the closest setting, and the command still does its work. */
    char path[512];
    write_file("unknown", "# settings\nTICKETD_PORT=8080\nTICKETD_REDIS_PROT=1\n", path,
               sizeof path);
    const char *token[] = {"token", "--user", "5", "--config", path, NULL};
    const char *typo[] = {"TICKETD_MAX_FIBER=4", NULL};
    run_ticketd(token, typo, 10000, &r);
    if (r.status != 0)
        fail_msg("an unknown name stopped the command: %d %s", r.status, r.out);
    static const char *const warnings[] = {
        "environment: TICKETD_MAX_FIBER is not a setting of ticketd (ignored); did you mean "
        "TICKETD_MAX_FIBERS?",
        ":3: TICKETD_REDIS_PROT is not a setting of ticketd (ignored); did you mean "
        "TICKETD_REDIS_PORT?",
    };
    for (size_t i = 0; i < sizeof warnings / sizeof warnings[0]; i++) {
        if (strstr(r.out, warnings[i]) == NULL)
            fail_msg("no warning '%s' in: %s", warnings[i], r.out);
    }
}

/* The first line of a command's output, trimmed. */
static void first_line(const char *text, char *out, size_t cap)
{
    size_t n = strcspn(text, "\r\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, text, n);
    out[n] = '\0';
}

static void test_token_command(void **state)
{
    static const char *const user42[] = {"token", "--user", "42", NULL};
    static const char *const admin43[] = {"token", "--user", "43", "--admin", NULL};
    static const char *const short_lived[] = {"token", "--user", "44", "--ttl", "1", NULL};
    struct run r;
    char jwt[2048], hdr[2200], tok[96];
    (void)state;

    run_ticketd(user42, NULL, 10000, &r);
    assert_int_equal(r.status, 0);
    first_line(r.out, jwt, sizeof jwt);
    /* One line, three base64url parts: a JWT and nothing else. */
    assert_int_equal(strlen(r.out), strlen(jwt) + 1);
    assert_int_equal(strspn(jwt, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                 "0123456789-_."),
                     strlen(jwt));
    const char *dot1 = strchr(jwt, '.');
    assert_non_null(dot1);
    const char *dot2 = strchr(dot1 + 1, '.');
    assert_non_null(dot2);
    assert_null(strchr(dot2 + 1, '.'));

    /* The server takes it as user 42. */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
    const char *h[] = {hdr, NULL};
    struct th_resp t = th_call(&srv, "POST", "/api/v1/tokens", h, NULL);
    assert_int_equal(t.status, 201);
    json_t *j = th_json(&t);
    snprintf(tok, sizeof tok, "%s", jstr(j, "token"));
    json_decref(j);
    th_resp_free(&t);
    assert_int_equal(th_redis_int("GET token:{42}:%s", tok), 42);
    /* ... and not as an administrator. */
    t = th_call(&srv, "POST", "/api/v1/sessions", h,
                "{\"title\":\"A\",\"price_cents\":1,\"stock\":1}");
    assert_int_equal(t.status, 403);
    th_resp_free(&t);

    run_ticketd(admin43, NULL, 10000, &r);
    assert_int_equal(r.status, 0);
    first_line(r.out, jwt, sizeof jwt);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
    t = th_call(&srv, "POST", "/api/v1/sessions", h,
                "{\"title\":\"A\",\"price_cents\":1,\"stock\":1}");
    assert_int_equal(t.status, 201);
    th_resp_free(&t);

    /* Signed with another secret, the server refuses it. */
    const char *other[] = {"TICKETD_JWT_SECRET=a-different-secret-0123456789abcdefghij", NULL};
    run_ticketd(user42, other, 10000, &r);
    assert_int_equal(r.status, 0);
    first_line(r.out, jwt, sizeof jwt);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
    t = th_call(&srv, "POST", "/api/v1/tokens", h, NULL);
    assert_int_equal(t.status, 401);
    th_resp_free(&t);

    /* --ttl is honoured: a one-second token is refused once it is past. */
    run_ticketd(short_lived, NULL, 10000, &r);
    assert_int_equal(r.status, 0);
    first_line(r.out, jwt, sizeof jwt);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", jwt);
    th_msleep(2100);
    t = th_call(&srv, "POST", "/api/v1/tokens", h, NULL);
    assert_int_equal(t.status, 401);
    th_resp_free(&t);

    /* Bad arguments. */
    static const char *const bad[][4] = {{"token", NULL},
                                         {"token", "--user", "0", NULL},
                                         {"token", "--user", "abc", NULL},
                                         {"token", "--user", "9007199254740992", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_ticketd(bad[i], NULL, 10000, &r);
        if (r.status <= 0 || strstr(r.out, "--user") == NULL)
            fail_msg("token with bad arguments %zu: %d %s", i, r.status, r.out);
    }
}

/* ---- a log reader that stops reading ---- */

/* Requests sent while nobody reads the log: their access lines (about 150
 * bytes each) are more than the pipe (64 KiB) and the spill (1 MiB) hold
 * together, so lines are dropped as well as kept. */
#define STALLED_LOG_REQUESTS 12000

/* The read end of ticketd's stdout, read to its end on a thread of its own
 * once the test lets it. */
static struct {
    int fd;
    pthread_mutex_t mu;
    char *buf;
    size_t len, cap;
} log_pipe = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static void *read_log_pipe(void *arg)
{
    (void)arg;
    char chunk[65536];
    ssize_t n;
    while ((n = read(log_pipe.fd, chunk, sizeof chunk)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        pthread_mutex_lock(&log_pipe.mu);
        if (log_pipe.len + (size_t)n + 1 > log_pipe.cap) {
            log_pipe.cap = (log_pipe.len + (size_t)n + 1) * 2;
            log_pipe.buf = realloc(log_pipe.buf, log_pipe.cap);
            assert_non_null(log_pipe.buf);
        }
        memcpy(log_pipe.buf + log_pipe.len, chunk, (size_t)n);
        log_pipe.len += (size_t)n;
        log_pipe.buf[log_pipe.len] = '\0';
        pthread_mutex_unlock(&log_pipe.mu);
    }
    return NULL;
}

/* The lines dropped that the log has said so far (each "N log lines
 * dropped" line adds its N). */
static long long dropped_said(const char *text)
{
    long long sum = 0;
    const char *say = " log lines dropped: ";
    for (const char *at = strstr(text, say); at != NULL; at = strstr(at + 1, say)) {
        const char *num = at;
        while (num > text && num[-1] >= '0' && num[-1] <= '9')
            num--;
        sum += strtoll(num, NULL, 10);
    }
    return sum;
}

/* A reader that stops reading (a stuck log shipper, `| less` left open)
 * fills the pipe on ticketd's stdout. With a plain blocking write the loop
 * that logs next would wait in write(2) for the reader, and with it every
 * request of that loop: this test's requests time out after a few hundred.
 * The lines must instead wait in the spill buffer, or be dropped, counted
 * and said, and never torn or reordered. */
static void test_a_stalled_log_reader_stops_no_loop(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    const char *env[] = {"TICKETD_ACCESS_LOG=1", NULL};
    th_start_to(&srv, th_next_port(20, 8), env, p[1]);
    close(p[1]);
    log_pipe.fd = p[0];

    struct th_client *cl = th_client_new();
    th_client_timeout(cl, 10);
    char url[128], id[64];
    snprintf(url, sizeof url, "%s/livez", srv.url);
    const char *headers[] = {id, NULL};
    for (int i = 0; i < STALLED_LOG_REQUESTS; i++) {
        snprintf(id, sizeof id, "X-Request-Id: stalled-log-%d", i);
        struct th_resp r = th_client_request(cl, "GET", url, headers, NULL);
        if (r.status != 200)
            fail_msg("request %d of %d with nobody reading the log: status %ld (%s)", i + 1,
                     STALLED_LOG_REQUESTS, r.status, r.body ? r.body : "");
        th_resp_free(&r);
    }
    th_client_free(cl);
    long long dropped = th_metric(&srv, "ticketd_log_lines_dropped_total");
    print_message("%d requests answered with nobody reading the log; %lld lines dropped\n",
                  STALLED_LOG_REQUESTS, dropped);
    assert_true(dropped > 0);

    /* The reader comes back: what the spill kept comes out, then the line
     * that says how many were dropped. */
    pthread_t reader;
    assert_int_equal(pthread_create(&reader, NULL, read_log_pipe, NULL), 0);
    /* Each look at the metric is a request whose own access line is
     * dropped too while the spill is still full: look, wait until the log
     * has said as many (its note comes after the lines the buffer kept),
     * and look again, until the two agree. Once the buffer has been
     * written out nothing more is dropped. */
    long long said = 0;
    for (int look = 0; look < 20; look++) {
        dropped = th_metric(&srv, "ticketd_log_lines_dropped_total");
        for (int i = 0; i < 600 && said < dropped; i++) {
            th_msleep(50);
            pthread_mutex_lock(&log_pipe.mu);
            said = log_pipe.buf ? dropped_said(log_pipe.buf) : 0;
            pthread_mutex_unlock(&log_pipe.mu);
        }
        if (said == dropped && th_metric(&srv, "ticketd_log_lines_dropped_total") == said)
            break;
    }
    assert_int_equal(said, dropped);
    assert_int_equal(th_metric(&srv, "ticketd_log_lines_dropped_total"), dropped);
    assert_int_equal(th_stop(&srv), 0);
    pthread_join(reader, NULL);
    close(log_pipe.fd);
    log_pipe.fd = -1;

    /* Every line whole, JSON, and the requests' lines in the order they
     * were answered (one connection: one loop). */
    int kept = 0, last = -1;
    char *save = NULL;
    assert_non_null(log_pipe.buf);
    assert_null(strstr(log_pipe.buf, "ERROR: AddressSanitizer"));
    assert_null(strstr(log_pipe.buf, "runtime error:"));
    for (char *line = strtok_r(log_pipe.buf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        if (j == NULL || json_string_value(json_object_get(j, "msg")) == NULL)
            fail_msg("a torn or foreign log line: %.200s", line);
        const char *rid = json_string_value(json_object_get(j, "request_id"));
        if (rid != NULL && strncmp(rid, "stalled-log-", 12) == 0) {
            int n = atoi(rid + 12);
            if (n <= last)
                fail_msg("the line of request %d came after request %d's", n, last);
            last = n;
            kept++;
        }
        json_decref(j);
    }
    print_message("the log kept %d of the %d requests' lines and said %lld were dropped\n", kept,
                  STALLED_LOG_REQUESTS, said);
    assert_true(kept > 0);
    assert_true(kept + said >= STALLED_LOG_REQUESTS);
    assert_true(kept <= STALLED_LOG_REQUESTS);
    free(log_pipe.buf);
    log_pipe.buf = NULL;
    log_pipe.len = log_pipe.cap = 0;
}

static void test_config_logged_masked(void **state)
{
    char line[128];
    (void)state;
    assert_true(th_log_contains(&srv, "config TICKETD_JWT_SECRET=********"));
    assert_true(th_log_contains(&srv, "config TICKETD_PAY_SECRET=********"));
    assert_true(th_log_contains(&srv, "config TICKETD_MYSQL_PASSWORD=********"));
    assert_false(th_log_contains(&srv, TH_JWT_SECRET));
    assert_false(th_log_contains(&srv, TH_PAY_SECRET));
    assert_false(th_log_contains(&srv, "TICKETD_MYSQL_PASSWORD=ticketd"));
    /* The rest is there as it took effect, defaults included. */
    snprintf(line, sizeof line, "config TICKETD_PORT=%d\"", srv.port);
    assert_true(th_log_contains(&srv, line));
    assert_true(th_log_contains(&srv, "config TICKETD_MAX_BODY=16384\""));
    assert_true(th_log_contains(&srv, "config TICKETD_REDIS_POLICY=degrade\""));
    assert_true(th_log_contains(&srv, "config TICKETD_MAX_FIBERS=4096\""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_redis_down_and_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mysql_down_and_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_drains_in_flight, setup_patient, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config_refused, setup_none, teardown),
        cmocka_unit_test_setup_teardown(test_cli_answers_before_config, setup_none, teardown),
        cmocka_unit_test_setup_teardown(test_token_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_logged_masked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stalled_log_reader_stops_no_loop, setup_none,
                                        teardown),
    };
    /* Nor may an early exit of this process leave MariaDB frozen. */
    atexit(thaw_mysql);
    return cmocka_run_group_tests_name("ops", tests, NULL, NULL);
}
