#include "harness.h"

#include "paysign.h"

#include "auth.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : def;
}

void th_msleep(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

double th_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- processes ---- */

static void child_env(int port, const char *const *extra)
{
    char buf[64];
    setenv("TICKETD_ENV", "test", 1);
    snprintf(buf, sizeof buf, "%d", port);
    setenv("TICKETD_PORT", buf, 1);
    setenv("TICKETD_BIND", "127.0.0.1", 1);
    setenv("TICKETD_REDIS_HOST", "127.0.0.1", 1);
    setenv("TICKETD_REDIS_PORT", env_or("TICKETD_TEST_REDIS_PORT", "26379"), 1);
    setenv("TICKETD_MYSQL_HOST", "127.0.0.1", 1);
    setenv("TICKETD_MYSQL_PORT", env_or("TICKETD_TEST_MYSQL_PORT", "23306"), 1);
    setenv("TICKETD_MYSQL_USER", "ticketd", 1);
    setenv("TICKETD_MYSQL_PASSWORD", "ticketd", 1);
    setenv("TICKETD_MYSQL_DB", "ticketd", 1);
    setenv("TICKETD_JWT_SECRET", TH_JWT_SECRET, 1);
    setenv("TICKETD_PAY_SECRET", TH_PAY_SECRET, 1);
    setenv("TICKETD_LOG_LEVEL", "info", 1);
    setenv("TICKETD_ACCESS_LOG", "0", 1);
    for (; extra != NULL && *extra != NULL; extra++) {
        char kv[512];
        snprintf(kv, sizeof kv, "%s", *extra);
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        setenv(kv, eq + 1, 1);
    }
}

/* Every process this test binary started, so that none outlives it when a
 * failing assertion jumps past its th_stop(). */
#define MAX_CHILDREN 256
static pid_t children[MAX_CHILDREN];
static int nchildren;

static void kill_children(void)
{
    for (int i = 0; i < nchildren; i++) {
        if (children[i] > 0 && kill(children[i], 0) == 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
        }
    }
}

static void forget_child(pid_t pid)
{
    for (int i = 0; i < nchildren; i++) {
        if (children[i] == pid)
            children[i] = 0;
    }
}

/* out_fd: the child's stdout and stderr, or -1 for the log file. */
static void spawn(struct th_server *s, const char *cmd, const char *name, int port,
                  const char *const *extra_env, int out_fd)
{
    memset(s, 0, sizeof *s);
    s->port = port;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", port);
    snprintf(s->log_path, sizeof s->log_path, "%s/ticketd-%s-%d.log",
             env_or("TICKETD_TEST_LOGS", "/tmp"), name, (int)getpid());
    struct stat st;
    s->log_from = stat(s->log_path, &st) == 0 ? (long)st.st_size : 0;
    const char *bin = env_or("TICKETD_BIN", "build/asan/ticketd");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = out_fd >= 0 ? out_fd : open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        child_env(port, extra_env);
        execl(bin, bin, cmd, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    if (nchildren == 0)
        atexit(kill_children);
    if (nchildren < MAX_CHILDREN)
        children[nchildren++] = pid;
}

static bool port_taken(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bool taken = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return taken;
}

void th_start_to(struct th_server *s, int port, const char *const *extra_env, int out_fd)
{
    char name[16];
    /* A server left over from an aborted test would answer /livez for us. */
    if (port_taken(port))
        fail_msg("port %d is already in use; is an old ticketd still running?", port);
    snprintf(name, sizeof name, "%d", port);
    spawn(s, "serve", name, port, extra_env, out_fd);
    char url[128];
    snprintf(url, sizeof url, "%s/livez", s->url);
    for (int i = 0; i < 300; i++) {
        struct th_resp r = th_request("GET", url, NULL, NULL);
        long st = r.status;
        th_resp_free(&r);
        int status;
        bool gone = waitpid(s->pid, &status, WNOHANG) == s->pid;
        if (st == 200 && !gone)
            return;
        if (gone) {
            s->pid = 0;
            fail_msg("ticketd on port %d exited at start; see %s", port, s->log_path);
        }
        th_msleep(50);
    }
    fail_msg("ticketd on port %d did not answer /livez; see %s", port, s->log_path);
}

void th_start(struct th_server *s, int port, const char *const *extra_env)
{
    th_start_to(s, port, extra_env, -1);
}

void th_start_worker(struct th_server *s, const char *name, const char *const *extra_env)
{
    spawn(s, "worker", name, 1, extra_env, -1);
}

/* Whether a line of path from byte from on holds needle. */
static bool file_contains_from(const char *path, long from, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    bool found = false;
    if (f == NULL)
        return false;
    if (from > 0 && fseek(f, from, SEEK_SET) != 0) {
        fclose(f);
        return false;
    }
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

bool th_file_contains(const char *path, const char *needle)
{
    return file_contains_from(path, 0, needle);
}

bool th_log_contains(const struct th_server *s, const char *needle)
{
    /* This process's lines only: a test binary's earlier servers on the
     * same port wrote to the same log. */
    return file_contains_from(s->log_path, s->log_from, needle);
}

void th_log_request(const struct th_server *s, const char *request_id)
{
    FILE *f = request_id[0] != '\0' ? fopen(s->log_path, "r") : NULL;
    char line[1024];
    int n = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, request_id) != NULL) {
            print_message("  server log: %s", line);
            n++;
        }
    }
    if (f != NULL)
        fclose(f);
    if (n == 0)
        print_message("  server log: no line names request %s\n",
                      request_id[0] != '\0' ? request_id : "(none sent)");
}

static bool sanitizer_report(const char *path)
{
    return th_file_contains(path, "ERROR: AddressSanitizer") ||
           th_file_contains(path, "ERROR: LeakSanitizer") ||
           th_file_contains(path, "runtime error:");
}

int th_stop(struct th_server *s)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 600; i++) {
        pid_t w = waitpid(s->pid, &status, WNOHANG);
        if (w == s->pid) {
            forget_child(s->pid);
            s->pid = 0;
            if (sanitizer_report(s->log_path)) {
                print_error("sanitizer report in %s\n", s->log_path);
                return -1;
            }
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        th_msleep(50);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    forget_child(s->pid);
    s->pid = 0;
    return -1;
}

void th_kill(struct th_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    int status;
    waitpid(s->pid, &status, 0);
    forget_child(s->pid);
    s->pid = 0;
}

/* ---- a test's processes and fixtures ---- */

static struct th_server procs[TH_PROCS_MAX];
static int nprocs;

static struct th_server *proc_slot(void)
{
    if (nprocs == TH_PROCS_MAX)
        fail_msg("a test may start at most %d processes", TH_PROCS_MAX);
    return &procs[nprocs++];
}

struct th_server *th_serve(int port_offset, const char *const *env)
{
    struct th_server *s = proc_slot();
    th_start(s, th_port(port_offset), env);
    return s;
}

struct th_server *th_worker(const char *name, const char *const *env)
{
    struct th_server *s = proc_slot();
    th_start_worker(s, name, env);
    return s;
}

void th_stop_clean(struct th_server *s)
{
    if (s->pid > 0)
        assert_int_equal(th_stop(s), 0);
}

void th_fresh_start(struct th_server *s, int port, const char *const *env)
{
    th_reset();
    th_start(s, port, env);
}

int th_setup_fresh(void **state)
{
    (void)state;
    th_reset();
    nprocs = 0;
    return 0;
}

int th_teardown_stop(void **state)
{
    (void)state;
    int n = nprocs;
    nprocs = 0; /* forgotten first: a failing stop ends this function */
    for (int i = 0; i < n; i++)
        th_stop_clean(&procs[i]);
    return 0;
}

int th_teardown_kill(void **state)
{
    (void)state;
    for (int i = 0; i < nprocs; i++)
        th_kill(&procs[i]);
    nprocs = 0;
    return 0;
}

int th_next_port(int first, int count)
{
    static int n;
    return th_port(first + n++ % count);
}

/* ---- ticketd commands ---- */

void th_cli_start(struct th_cli *c, const char *const *args, const char *const *extra_env)
{
    static int seq;
    char *argv[32];
    int n = 0;
    memset(c, 0, sizeof *c);
    seq++;
    const char *logs = env_or("TICKETD_TEST_LOGS", "/tmp");
    snprintf(c->out_path, sizeof c->out_path, "%s/ticketd-cli-%d-%d.out", logs, (int)getpid(), seq);
    snprintf(c->err_path, sizeof c->err_path, "%s/ticketd-cli-%d-%d.err", logs, (int)getpid(), seq);
    const char *bin = env_or("TICKETD_BIN", "build/asan/ticketd");
    argv[n++] = (char *)bin;
    for (; args != NULL && *args != NULL && n < 31; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int out = open(c->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out >= 0 && err >= 0) {
            dup2(out, 1);
            dup2(err, 2);
            close(out);
            close(err);
        }
        child_env(1, extra_env);
        execv(bin, argv);
        _exit(127);
    }
    c->pid = pid;
    if (nchildren == 0)
        atexit(kill_children);
    if (nchildren < MAX_CHILDREN)
        children[nchildren++] = pid;
}

int th_cli_wait(struct th_cli *c)
{
    int status = 0;
    bool done = false;
    for (int i = 0; i < 3000 && !done; i++) {
        done = waitpid(c->pid, &status, WNOHANG) == c->pid;
        if (!done)
            th_msleep(20);
    }
    forget_child(c->pid);
    if (!done) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
        c->pid = 0;
        fail_msg("ticketd command did not finish in 60 s; see %s", c->err_path);
    }
    c->pid = 0;
    free(c->out);
    c->out = NULL;
    FILE *f = fopen(c->out_path, "r");
    if (f != NULL) {
        size_t cap = 4096, len = 0, got;
        c->out = malloc(cap);
        while ((got = fread(c->out + len, 1, cap - len - 1, f)) > 0) {
            len += got;
            if (cap - len < 2048) {
                cap *= 2;
                c->out = realloc(c->out, cap);
            }
        }
        c->out[len] = '\0';
        fclose(f);
    } else {
        c->out = calloc(1, 1);
    }
    if (sanitizer_report(c->err_path)) {
        print_error("sanitizer report in %s\n", c->err_path);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void th_cli_free(struct th_cli *c)
{
    free(c->out);
    c->out = NULL;
}

int th_cli(const char *const *args, const char *const *extra_env, char **out)
{
    struct th_cli c;
    th_cli_start(&c, args, extra_env);
    int rc = th_cli_wait(&c);
    if (out != NULL)
        *out = c.out;
    else
        th_cli_free(&c);
    return rc;
}

/* ---- HTTP ---- */

struct buf {
    char *p;
    size_t len;
};

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
    struct buf *b = ctx;
    size_t add = size * n;
    b->p = realloc(b->p, b->len + add + 1);
    memcpy(b->p + b->len, data, add);
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    struct buf *b = ctx;
    /* A new status line (after 100 Continue) starts the block anew. */
    if (size * n >= 5 && strncmp(data, "HTTP/", 5) == 0)
        b->len = 0;
    return on_data(data, size, n, ctx);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static atomic_bool tag_requests = true;
static atomic_long requests_sent;

void th_request_ids(bool on)
{
    atomic_store(&tag_requests, on);
}

/* One request on handle c (a new one, or a client's kept-alive one). */
static struct th_resp request_on(CURL *c, long timeout_s, const char *method, const char *url,
                                 const char *const *headers, const char *body)
{
    struct th_resp r = {0};
    struct buf b = {NULL, 0}, h = {NULL, 0};
    struct curl_slist *list = NULL;
    bool has_ct = false, has_id = false;
    for (; headers != NULL && *headers != NULL; headers++) {
        list = curl_slist_append(list, *headers);
        if (strncasecmp(*headers, "Content-Type:", 13) == 0)
            has_ct = true;
        if (strncasecmp(*headers, "X-Request-Id:", 13) == 0)
            has_id = true;
    }
    if (body != NULL && !has_ct)
        list = curl_slist_append(list, "Content-Type: application/json");
    if (!has_id && atomic_load(&tag_requests)) {
        char line[80];
        snprintf(r.request_id, sizeof r.request_id, "th-%d-%ld", (int)getpid(),
                 atomic_fetch_add(&requests_sent, 1) + 1);
        snprintf(line, sizeof line, "X-Request-Id: %s", r.request_id);
        list = curl_slist_append(list, line);
    }
    list = curl_slist_append(list, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    /* Without a body, a GET or HEAD sends none; any other method an empty
     * one with Content-Length: 0. (Post fields of NULL would make libcurl
     * send its read callback's data, stdin, as a chunked body.) */
    bool bodiless = body == NULL && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0);
    if (bodiless) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, body != NULL ? (long)strlen(body) : 0L);
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    double t0 = th_now_s();
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    r.error = rc == CURLE_OK ? "" : curl_easy_strerror(rc);
    r.seconds = th_now_s() - t0;
    r.body = b.p != NULL ? b.p : calloc(1, 1);
    r.body_len = b.len;
    r.headers = h.p != NULL ? h.p : calloc(1, 1);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(list);
    return r;
}

struct th_resp th_request(const char *method, const char *url, const char *const *headers,
                          const char *body)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    struct th_resp r = request_on(c, 30L, method, url, headers, body);
    curl_easy_cleanup(c);
    return r;
}

struct th_client {
    CURL *curl;
    long timeout_s;
};

struct th_client *th_client_new(void)
{
    pthread_once(&curl_once, curl_init_once);
    struct th_client *cl = calloc(1, sizeof *cl);
    assert_non_null(cl);
    cl->curl = curl_easy_init();
    cl->timeout_s = 30;
    return cl;
}

void th_client_timeout(struct th_client *cl, long seconds)
{
    cl->timeout_s = seconds;
}

struct th_resp th_client_request(struct th_client *cl, const char *method, const char *url,
                                 const char *const *headers, const char *body)
{
    return request_on(cl->curl, cl->timeout_s, method, url, headers, body);
}

long th_client_connections(struct th_client *cl)
{
    long n = 0;
    curl_easy_getinfo(cl->curl, CURLINFO_NUM_CONNECTS, &n);
    return n;
}

void th_client_free(struct th_client *cl)
{
    if (cl == NULL)
        return;
    curl_easy_cleanup(cl->curl);
    free(cl);
}

void th_resp_free(struct th_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

const char *th_header(const struct th_resp *r, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (const char *line = r->headers; line != NULL && *line != '\0';) {
        const char *eol = strstr(line, "\r\n");
        size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);
        if (len > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= cap)
                vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        line = eol != NULL ? eol + 2 : NULL;
    }
    return NULL;
}

json_t *th_json(const struct th_resp *r)
{
    json_error_t e;
    json_t *j = json_loadb(r->body, r->body_len, 0, &e);
    if (j == NULL)
        fail_msg("not JSON (status %ld): %.200s", r->status, r->body);
    return j;
}

const char *th_code(const struct th_resp *r)
{
    static __thread char code[64];
    code[0] = '\0';
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    const char *c = json_string_value(json_object_get(j, "code"));
    if (c != NULL)
        snprintf(code, sizeof code, "%s", c);
    json_decref(j);
    return code;
}

struct th_resp th_call(const struct th_server *s, const char *method, const char *path,
                       const char *const *headers, const char *body)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    return th_request(method, url, headers, body);
}

void th_expect_problem(const struct th_resp *r, long status, const char *code)
{
    char v[128];
    if (r->status != status || strcmp(th_code(r), code) != 0)
        fail_msg("expected %ld %s, got %ld %s", status, code, r->status, r->body);
    if (th_header(r, "Content-Type", v, sizeof v) == NULL ||
        strcmp(v, "application/problem+json") != 0)
        fail_msg("%s: Content-Type is not application/problem+json", code);
    assert_non_null(th_header(r, "X-Request-Id", v, sizeof v));
    json_t *j = th_json(r);
    assert_int_equal(json_integer_value(json_object_get(j, "status")), status);
    assert_non_null(json_string_value(json_object_get(j, "type")));
    assert_non_null(json_string_value(json_object_get(j, "title")));
    json_decref(j);
}

int th_raw_ex(const struct th_raw_opts *o, const char *bytes, size_t len, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (o->source != NULL) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        inet_pton(AF_INET, o->source, &src.sin_addr);
        if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0)
            fail_msg("cannot bind a client socket to %s", o->source);
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, bytes + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server may close early (413): read what it said */
        off += (size_t)w;
    }
    char local[8192];
    char *dst = out != NULL ? out : local;
    size_t dcap = out != NULL ? cap : sizeof local;
    size_t got = 0;
    double deadline = th_now_s() + o->timeout_ms / 1000.0;
    dst[0] = '\0';
    while (got + 1 < dcap && th_now_s() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, dst + got, dcap - got - 1, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        dst[got] = '\0';
        /* One complete response is enough when it has no body to wait for. */
        if (!o->until_close && strstr(dst, "\r\n\r\n") != NULL &&
            strstr(dst, "Content-Length: ") != NULL) {
            const char *cl = strstr(dst, "Content-Length: ") + 16;
            const char *hend = strstr(dst, "\r\n\r\n") + 4;
            if ((size_t)(dst + got - hend) >= (size_t)atol(cl))
                break;
        }
    }
    dst[got] = '\0';
    close(fd);
    int status = 0;
    if (sscanf(dst, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    return status;
}

int th_raw(int port, const char *bytes, size_t len, char *out, size_t cap, int timeout_ms)
{
    struct th_raw_opts o = {.port = port, .timeout_ms = timeout_ms};
    return th_raw_ex(&o, bytes, len, out, cap);
}

void th_wait_db(int64_t want, int timeout_ms, const char *what, const char *fmt, ...)
{
    char q[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    int64_t got = -1;
    double deadline = th_now_s() + timeout_ms / 1000.0;
    while (th_now_s() < deadline) {
        got = th_db_int("%s", q);
        if (got == want)
            return;
        th_msleep(50);
    }
    fail_msg("%s: waited %d ms for %lld, have %lld", what, timeout_ms, (long long)want,
             (long long)got);
}

long long th_metric(const struct th_server *s, const char *sample)
{
    struct th_resp r = th_call(s, "GET", "/metrics", NULL, NULL);
    long long v = -1;
    size_t n = strlen(sample);
    for (const char *line = r.body; line != NULL && *line != '\0';) {
        if (strncmp(line, sample, n) == 0 && line[n] == ' ')
            v = atoll(line + n + 1);
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    th_resp_free(&r);
    return v;
}

void th_wait_metric(const struct th_server *s, const char *sample, long long want, int timeout_ms)
{
    double deadline = th_now_s() + timeout_ms / 1000.0;
    long long got = -1;
    while (th_now_s() < deadline) {
        got = th_metric(s, sample);
        if (got >= want)
            return;
        th_msleep(50);
    }
    fail_msg("%s: waited for %lld, have %lld", sample, want, got);
}

/* ---- identity ---- */

char *th_jwt(int64_t user_id, bool admin)
{
    return auth_issue(TH_JWT_SECRET, user_id, admin, (int64_t)time(NULL), 3600);
}

char *th_auth_header(int64_t user_id, bool admin)
{
    static __thread char slots[8][1024];
    static __thread int next;
    char *jwt = th_jwt(user_id, admin);
    char *out = slots[next++ % 8];
    snprintf(out, 1024, "Authorization: Bearer %s", jwt);
    free(jwt);
    return out;
}

/* ---- state ---- */

static MYSQL *db;

MYSQL *th_db(void)
{
    /* Pinged only when reopened by a failed query (th_db_int/th_db_exec
     * retry once), so a caller's unread result is never thrown away. */
    if (db != NULL)
        return db;
    db = mysql_init(NULL);
    unsigned int t = 10;
    mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    if (mysql_real_connect(db, "127.0.0.1", "ticketd", "ticketd", "ticketd",
                           (unsigned int)atoi(env_or("TICKETD_TEST_MYSQL_PORT", "23306")), NULL,
                           0) == NULL)
        fail_msg("cannot connect to the test MariaDB: %s", mysql_error(db));
    return db;
}

/* Runs q, failing the test if it fails. A client-side (2xxx) error means
 * the test server was restarted since: reconnect once and run it again. */
static MYSQL *db_query(const char *q)
{
    MYSQL *m = th_db();
    int qrc = mysql_query(m, q);
    if (qrc != 0 && mysql_errno(m) >= 2000) {
        mysql_close(db);
        db = NULL;
        m = th_db();
        qrc = mysql_query(m, q);
    }
    if (qrc != 0)
        fail_msg("statement failed: %s: %s", q, mysql_error(m));
    return m;
}

int64_t th_db_int(const char *fmt, ...)
{
    char q[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    MYSQL *m = db_query(q);
    MYSQL_RES *res = mysql_store_result(m);
    int64_t v = -1;
    MYSQL_ROW row = res != NULL ? mysql_fetch_row(res) : NULL;
    if (row != NULL && row[0] != NULL)
        v = atoll(row[0]);
    else if (row != NULL)
        v = 0;
    mysql_free_result(res);
    return v;
}

void th_db_exec(const char *fmt, ...)
{
    char q[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    db_query(q);
}

static redisContext *redis_ctx(void)
{
    static __thread redisContext *rc;
    if (rc != NULL && rc->err == 0)
        return rc;
    if (rc != NULL)
        redisFree(rc);
    struct timeval tv = {2, 0};
    rc = redisConnectWithTimeout("127.0.0.1", atoi(env_or("TICKETD_TEST_REDIS_PORT", "26379")), tv);
    return rc;
}

static redisReply *redis_run(const char *fmt, va_list ap)
{
    /* A context from before a Redis restart fails once; dial again then. */
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *c = redis_ctx();
        if (c == NULL || c->err)
            return NULL;
        va_list copy;
        va_copy(copy, ap);
        redisReply *r = redisvCommand(c, fmt, copy);
        va_end(copy);
        if (r != NULL)
            return r;
        c->err = c->err ? c->err : REDIS_ERR_IO;
    }
    return NULL;
}

long long th_redis_int(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redis_run(fmt, ap);
    va_end(ap);
    long long v = -2;
    if (r != NULL) {
        if (r->type == REDIS_REPLY_INTEGER)
            v = r->integer;
        else if (r->type == REDIS_REPLY_STRING)
            v = atoll(r->str);
        else if (r->type == REDIS_REPLY_NIL)
            v = -1;
        else if (r->type == REDIS_REPLY_STATUS)
            v = 0;
        freeReplyObject(r);
    }
    return v;
}

char *th_redis_text(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redis_run(fmt, ap);
    va_end(ap);
    char *text = NULL;
    if (r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
        text = strndup(r->str, r->len);
    freeReplyObject(r);
    return text;
}

void th_reset(void)
{
    static const char *const tables[] = {"idempotency_records",
                                         "order_key_filter_misses",
                                         "dead_letters",
                                         "consume_records",
                                         "user_points",
                                         "points_ledger",
                                         "order_tokens",
                                         "outbox",
                                         "payments",
                                         "order_history",
                                         "orders",
                                         "sessions",
                                         "job_leases"};
    th_db_exec("SET FOREIGN_KEY_CHECKS = 0");
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        th_db_exec("TRUNCATE TABLE %s", tables[i]);
    th_db_exec("SET FOREIGN_KEY_CHECKS = 1");
    if (th_redis_int("FLUSHALL") != 0)
        fail_msg("cannot flush the test Redis");
}

void th_services(const char *cmd)
{
    char line[1024];
    snprintf(line, sizeof line, "scripts/services.sh %s %s >/dev/null 2>&1", cmd,
             env_or("TICKETD_TEST_STATE", ".state/test"));
    int rc = system(line);
    if (rc != 0)
        fail_msg("services.sh %s failed (%d)", cmd, rc);
}

/* ---- domain shortcuts ---- */

int64_t th_session(const struct th_server *s, int64_t stock, int64_t price_cents)
{
    char url[128], body[256];
    snprintf(url, sizeof url, "%s/api/v1/sessions", s->url);
    snprintf(body, sizeof body, "{\"title\":\"Test show\",\"price_cents\":%lld,\"stock\":%lld}",
             (long long)price_cents, (long long)stock);
    const char *h[] = {th_auth_header(1, true), NULL};
    struct th_resp r = th_request("POST", url, h, body);
    if (r.status != 201)
        fail_msg("creating a session: %ld %s", r.status, r.body);
    json_t *j = th_json(&r);
    int64_t id = json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    th_resp_free(&r);
    return id;
}

void th_order_token(const struct th_server *s, int64_t user_id, char *out)
{
    char url[128];
    snprintf(url, sizeof url, "%s/api/v1/tokens", s->url);
    const char *h[] = {th_auth_header(user_id, false), NULL};
    struct th_resp r = th_request("POST", url, h, NULL);
    if (r.status != 201)
        fail_msg("issuing a token: %ld %s", r.status, r.body);
    json_t *j = th_json(&r);
    snprintf(out, 96, "%s", json_string_value(json_object_get(j, "token")));
    json_decref(j);
    th_resp_free(&r);
}

struct th_resp th_client_order(struct th_client *cl, const struct th_server *s, int64_t user_id,
                               const char *key, const char *token, int64_t session_id,
                               int64_t quantity)
{
    char url[128], body[128], kh[128], tk[160];
    snprintf(url, sizeof url, "%s/api/v1/orders", s->url);
    snprintf(body, sizeof body, "{\"session_id\":%lld,\"quantity\":%lld}", (long long)session_id,
             (long long)quantity);
    snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
    snprintf(tk, sizeof tk, "X-Order-Token: %s", token != NULL ? token : "");
    const char *h[] = {th_auth_header(user_id, false), kh, token != NULL ? tk : NULL, NULL};
    if (cl != NULL)
        return th_client_request(cl, "POST", url, h, body);
    return th_request("POST", url, h, body);
}

struct th_resp th_order(const struct th_server *s, int64_t user_id, const char *key,
                        const char *token, int64_t session_id, int64_t quantity)
{
    return th_client_order(NULL, s, user_id, key, token, session_id, quantity);
}

int64_t th_stock_of(int64_t session)
{
    return th_db_int("SELECT stock FROM sessions WHERE id = %lld", (long long)session);
}

void th_release_init(struct th_release *r, const char *tag)
{
    snprintf(r->path, sizeof r->path, "/tmp/ticketd-%s-%d.release", tag, (int)getpid());
    unlink(r->path);
    snprintf(r->env, sizeof r->env, "TICKETD_FAULT_RELEASE=%s", r->path);
}

void th_release_now(const struct th_release *r)
{
    FILE *f = fopen(r->path, "w");
    assert_non_null(f);
    fclose(f);
}

void th_release_done(const struct th_release *r)
{
    unlink(r->path);
}

void th_wait_held(const struct th_server *s, const char *point)
{
    char line[160];
    snprintf(line, sizeof line, "fault point %s: holding", point);
    for (int i = 0; i < 1500 && !th_log_contains(s, line); i++)
        th_msleep(20);
    if (!th_log_contains(s, line))
        fail_msg("%s never held a step (see %s)", point, s->log_path);
}

int th_tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

pid_t th_mariadb_pid(void)
{
    char path[512];
    const char *state = getenv("TICKETD_TEST_STATE");
    snprintf(path, sizeof path, "%s/mysql/mysqld.pid",
             state != NULL && state[0] != '\0' ? state : ".state/test");
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f == NULL)
        fail_msg("cannot read %s", path);
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    if (pid <= 1 || kill((pid_t)pid, 0) != 0)
        fail_msg("no running MariaDB with the pid in %s", path);
    return (pid_t)pid;
}

int64_t th_orders_of(int64_t session)
{
    return th_db_int("SELECT COUNT(*) FROM orders WHERE session_id = %lld", (long long)session);
}

void th_expect_layer(const struct th_resp *r, const char *layer)
{
    char v[64];
    if (th_header(r, "Idempotency-Layer", v, sizeof v) == NULL)
        fail_msg("no Idempotency-Layer on %ld %s", r->status, r->body);
    assert_string_equal(v, layer);
}

void th_order_no(int tag, int i, char out[21])
{
    snprintf(out, 21, "%02d%018d", tag, i);
}

int64_t th_user_of(int tag, int i)
{
    return (int64_t)tag * 100000 + i + 1;
}

/* ---- concurrency ---- */

struct par {
    pthread_barrier_t barrier;
    void (*fn)(int, void *);
    void *ctx;
};

struct par_arg {
    struct par *p;
    int i;
};

static void *par_main(void *a)
{
    struct par_arg *pa = a;
    pthread_barrier_wait(&pa->p->barrier);
    pa->p->fn(pa->i, pa->p->ctx);
    return NULL;
}

void th_parallel(int n, void (*fn)(int i, void *ctx), void *ctx)
{
    struct par p = {.fn = fn, .ctx = ctx};
    pthread_t *t = calloc((size_t)n, sizeof *t);
    struct par_arg *args = calloc((size_t)n, sizeof *args);
    pthread_barrier_init(&p.barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        args[i] = (struct par_arg){&p, i};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        if (pthread_create(&t[i], &attr, par_main, &args[i]) != 0)
            fail_msg("pthread_create failed at %d", i);
        pthread_attr_destroy(&attr);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&p.barrier);
    free(t);
    free(args);
}

int th_port(int offset)
{
    return atoi(env_or("TICKETD_TEST_HTTP_PORT", "24080")) + offset;
}

void th_pay_sign(const char *secret, const char *ts, const char *body, char out[65])
{
    _Static_assert(PAYSIGN_HEX_LEN == 65, "a signature's hex and its NUL");
    if (paysign(secret, ts, body, strlen(body), out) != 0)
        fail_msg("cannot sign a payment callback");
}

int th_run_logged(const char *const *argv, const char *log_path, int wait_s)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    for (int i = 0;; i++) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            fail_msg("waitpid: %s", strerror(errno));
        if (i >= wait_s * 20) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("%s did not finish in %d s; see %s", argv[0], wait_s, log_path);
        }
        th_msleep(50);
    }
    if (!WIFEXITED(status))
        fail_msg("%s was killed by signal %d; see %s", argv[0], WTERMSIG(status), log_path);
    return WEXITSTATUS(status);
}
