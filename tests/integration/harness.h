/* harness.h - what every integration test uses: ticketd processes started
 * from the real binary, HTTP through libcurl, the real private MariaDB and
 * Redis for setting up and checking state, and many requests at once.
 *
 * Settings come from the environment run-tests.sh exports: TICKETD_BIN,
 * TICKETD_TEST_STATE, TICKETD_TEST_REDIS_PORT, TICKETD_TEST_MYSQL_PORT,
 * TICKETD_TEST_LOGS. Failures inside helpers fail the running cmocka test. */
#ifndef TICKETD_HARNESS_H
#define TICKETD_HARNESS_H

#include <jansson.h>
#include <mysql.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TH_JWT_SECRET "integration-test-jwt-secret-0123456789abcdef"
#define TH_PAY_SECRET "integration-test-pay-secret-0123456789abcdef"

/* ---- ticketd processes ---- */

struct th_server {
    pid_t pid;
    int port;
    char url[64];
    char log_path[512];
    long log_from; /* the log's size when this process started: a test
                      binary's servers on one port share one log */
};

/* Starts `ticketd serve` on port with the test settings plus extra_env
 * ("KEY=VALUE" strings, NULL-terminated, may be NULL; later ones win) and
 * waits until /livez answers. Fails the test if it does not. */
void th_start(struct th_server *s, int port, const char *const *extra_env);
/* th_start with the process's stdout and stderr on out_fd (a pipe's end;
 * -1: the log file, as th_start): th_log_contains then finds nothing. */
void th_start_to(struct th_server *s, int port, const char *const *extra_env, int out_fd);
/* Like th_start but runs `ticketd worker` (no HTTP); no wait. */
void th_start_worker(struct th_server *s, const char *name, const char *const *extra_env);
/* SIGTERM, then waits (bounded). Returns the exit status (0 clean), or -1
 * when it had to be killed or a sanitizer reported an error in its log. */
int th_stop(struct th_server *s);
/* SIGKILL and reap: a crash. */
void th_kill(struct th_server *s);
/* True when a line s logged (since this process started: the log is
 * shared by a test binary's servers on one port) contains needle. */
bool th_log_contains(const struct th_server *s, const char *needle);
/* True when a line of the file at path contains needle (a command's
 * output, th_cli's out_path, while it runs). */
bool th_file_contains(const char *path, const char *needle);
/* Stops s when it runs, failing the test unless it exits 0 (th_stop). */
void th_stop_clean(struct th_server *s);

/* ---- a test's processes, and the fixtures around them ---- */

/* A test that starts several processes starts them through th_serve and
 * th_worker: the harness keeps them (at most TH_PROCS_MAX, the test fails
 * beyond), so that its teardown stops every one whatever failed. */
#define TH_PROCS_MAX 8
/* th_start on th_port(port_offset), kept until the teardown. */
struct th_server *th_serve(int port_offset, const char *const *env);
/* th_start_worker, kept until the teardown. */
struct th_server *th_worker(const char *name, const char *const *env);

/* cmocka fixtures for those tests. th_setup_fresh: th_reset, and no
 * process kept. th_teardown_stop: th_stop_clean on each process kept (a
 * test's own th_kill or th_stop leaves nothing to stop). th_teardown_kill:
 * th_kill on each, for tests that judge exits themselves. */
int th_setup_fresh(void **state);
int th_teardown_stop(void **state);
int th_teardown_kill(void **state);

/* A test's one server, in its own setup: th_reset, then th_start. */
void th_fresh_start(struct th_server *s, int port, const char *const *env);

/* The next of count ports from th_port(first), round robin: each test
 * gets a port, and so a log file, of its own, so that a sanitizer report
 * in one test's log cannot fail the next. */
int th_next_port(int first, int count);

/* ---- ticketd commands ---- */

/* A ticketd command run to its end, such as `ticketd dead-letters list`. */
struct th_cli {
    pid_t pid;
    char out_path[512]; /* its stdout */
    char err_path[512]; /* its stderr (logs, sanitizer reports) */
    char *out;          /* stdout, read by th_cli_wait; th_cli_free frees it */
};

/* Starts the binary with args (NULL-terminated, after the program name)
 * and the test settings plus extra_env, as th_start does; returns at once,
 * so that several can run side by side. */
void th_cli_start(struct th_cli *c, const char *const *args, const char *const *extra_env);
/* Waits (bounded) for it and reads its stdout into c->out. Returns its
 * exit status, or -1 when it was killed or a sanitizer reported an error
 * on its stderr. */
int th_cli_wait(struct th_cli *c);
void th_cli_free(struct th_cli *c);
/* th_cli_start and th_cli_wait; *out (caller frees) gets stdout when not
 * NULL. */
int th_cli(const char *const *args, const char *const *extra_env, char **out);

/* ---- HTTP ---- */

struct th_resp {
    long status;
    char *body;
    size_t body_len;
    char *headers; /* raw header block of the final response */
    double seconds;
    /* With status 0: libcurl's reason (a timeout, a connection reset, an
     * empty reply), so a failure says which; "" otherwise. */
    const char *error;
    /* The X-Request-Id this request was sent with ("" if none): a client
     * left without an answer names it, and the server's log line for the
     * same request ("late answer: request ...") can be found by it. */
    char request_id[48];
};

/* Whether requests that carry no X-Request-Id of their own are sent with
 * one the harness makes ("th-<pid>-<n>"); on by default. The test of the
 * server's own ids turns it off. */
void th_request_ids(bool on);
/* Prints the server's log lines that name request_id, or says there are
 * none: what a failure shows of a request the client got no answer to. */
void th_log_request(const struct th_server *s, const char *request_id);

/* Sends a request. headers: "Name: value" strings, NULL-terminated, may be
 * NULL. body may be NULL. Content-Type: application/json is added when
 * body is given and no Content-Type header is. Returns status 0 when the
 * connection failed. Caller frees with th_resp_free. */
/* The payment gateway's X-Pay-Signature of body, sent with X-Pay-Timestamp
 * ts, under secret, into out (65 bytes): made by loadtest/common/paysign.c, the
 * one signer of every client that plays the gateway, apart from the
 * service's own check. */
void th_pay_sign(const char *secret, const char *ts, const char *body, char out[65]);

struct th_resp th_request(const char *method, const char *url, const char *const *headers,
                          const char *body);
void th_resp_free(struct th_resp *r);

/* A client that keeps its connection alive across requests, as browsers,
 * gateways and reverse proxies do. One thread at a time. */
struct th_client;
struct th_client *th_client_new(void);
struct th_resp th_client_request(struct th_client *cl, const char *method, const char *url,
                                 const char *const *headers, const char *body);
/* New connections the last request had to open (0: it reused one). */
long th_client_connections(struct th_client *cl);
/* How long a request of cl may take before libcurl gives up (30 s unless
 * set): a client that times out reports status 0 and libcurl's reason. */
void th_client_timeout(struct th_client *cl, long seconds);
void th_client_free(struct th_client *cl);
/* The value of a response header (case-insensitive), copied into buf, or
 * NULL when absent. */
const char *th_header(const struct th_resp *r, const char *name, char *buf, size_t cap);
/* The body as JSON (new reference), failing the test if it is not. */
json_t *th_json(const struct th_resp *r);
/* The problem "code" of an error body, copied into a static per-thread
 * buffer ("" if none). */
const char *th_code(const struct th_resp *r);

/* A request to path (e.g. "/livez") on s: th_request on s's URL. */
struct th_resp th_call(const struct th_server *s, const char *method, const char *path,
                       const char *const *headers, const char *body);
/* Fails the test unless r is a problem details answer (RFC 9457) with this
 * status and code: application/problem+json, X-Request-Id, and the type,
 * title and status members. */
void th_expect_problem(const struct th_resp *r, long status, const char *code);

/* Polls an integer query (th_db_int) until it equals want or timeout_ms
 * pass; fails the test, naming what, with the last value otherwise. */
void th_wait_db(int64_t want, int timeout_ms, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The value of one sample of s's GET /metrics ("name" or "name{labels}"),
 * or -1 when there is none. */
long long th_metric(const struct th_server *s, const char *sample);
/* Waits (at most timeout_ms) until th_metric(s, sample) >= want; fails the
 * test otherwise. */
void th_wait_metric(const struct th_server *s, const char *sample, long long want, int timeout_ms);

/* Sends raw bytes on a new TCP connection to 127.0.0.1:port and reads
 * the answer until the server closes or timeout_ms passes. Returns the
 * status code of the first response line (0 if none); the whole answer is
 * copied into out (cap bytes) when out is not NULL. */
int th_raw(int port, const char *bytes, size_t len, char *out, size_t cap, int timeout_ms);

struct th_raw_opts {
    int port;
    int timeout_ms;
    const char *source; /* client address to bind, e.g. "127.0.0.2"; NULL: any */
    bool until_close;   /* read until the server closes, not one response */
};
/* th_raw with options. */
int th_raw_ex(const struct th_raw_opts *o, const char *bytes, size_t len, char *out, size_t cap);

/* Fails the test unless r carries Idempotency-Layer: layer. */
void th_expect_layer(const struct th_resp *r, const char *layer);

/* ---- time ---- */

void th_msleep(int ms);

/* Runs argv[0] (a program of the build, such as the load tool) with its
 * stdout and stderr in log_path and waits for it, at most wait_s seconds:
 * past that it is killed and the test fails, as it does when a signal ends
 * it. Returns its exit status. */
int th_run_logged(const char *const *argv, const char *log_path, int wait_s);
/* The monotonic clock, in seconds and in milliseconds. */
double th_now_s(void);
int64_t th_now_ms(void);

/* ---- identity ---- */

/* A new JWT for user (caller frees). */
char *th_jwt(int64_t user_id, bool admin);
/* "Authorization: Bearer ..." for user, in a static per-user-slot buffer. */
char *th_auth_header(int64_t user_id, bool admin);

/* ---- state ---- */

MYSQL *th_db(void);
/* The first column of the first row of a query, as an integer (-1 if no row). */
int64_t th_db_int(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void th_db_exec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Empties every table (but schema_migrations) and Redis. */
void th_reset(void);
/* Runs a Redis command through redis-cli-like hiredis; returns the integer
 * or string-as-integer reply, -1 for nil. */
long long th_redis_int(const char *fmt, ...);
/* A command's text answer (a bulk string or a status), new; NULL if none. */
char *th_redis_text(const char *fmt, ...);
/* Runs scripts/services.sh CMD STATE_DIR (stop-redis, start-redis, ...). */
void th_services(const char *cmd);

/* ---- domain shortcuts ---- */

/* Creates a session via the admin API; returns its id. */
int64_t th_session(const struct th_server *s, int64_t stock, int64_t price_cents);
/* Issues an order token for user via the API; copies it into out (96 bytes). */
void th_order_token(const struct th_server *s, int64_t user_id, char *out);
/* Places an order; returns the response. token may be NULL. */
struct th_resp th_order(const struct th_server *s, int64_t user_id, const char *key,
                        const char *token, int64_t session_id, int64_t quantity);
/* The same on cl's kept-alive connection (cl NULL: a new connection). */
struct th_resp th_client_order(struct th_client *cl, const struct th_server *s, int64_t user_id,
                               const char *key, const char *token, int64_t session_id,
                               int64_t quantity);

/* The stock of a session, and the orders placed on it, as MariaDB has them. */
int64_t th_stock_of(int64_t session);
int64_t th_orders_of(int64_t session);
/* The pid of the private MariaDB (TICKETD_TEST_STATE's mysqld.pid), for a
 * test that pauses it (SIGSTOP); fails the test when none runs. */
pid_t th_mariadb_pid(void);
/* A blocking TCP connection to 127.0.0.1:port, or -1: for a test that
 * speaks raw HTTP (half-closes, queued connections, pauses mid-request). */
int th_tcp_connect(int port);

/* A fault point held in hold mode (service/base/faults.h) and its release:
 * the file the held step waits for, and the TICKETD_FAULT_RELEASE line of
 * the environment that names it. */
struct th_release {
    char path[128];
    char env[160];
};
/* Names tag's release file for this test process; none is there yet. */
void th_release_init(struct th_release *r, const char *tag);
/* Lets the held step go on: the file appears. */
void th_release_now(const struct th_release *r);
/* Takes the file away again, for the next hold. */
void th_release_done(const struct th_release *r);
/* Bounded: until s's log says fault point `point` holds a step
 * (th_log_contains: this process's lines). */
void th_wait_held(const struct th_server *s, const char *point);

/* Orders a test writes by SQL, as the payment transaction would (the event
 * tests): order i of a test's tag has number th_order_no (20 digits, the
 * tag first) and belongs to user th_user_of, a user of that order alone. */
void th_order_no(int tag, int i, char out[21]);
int64_t th_user_of(int tag, int i);

/* ---- concurrency ---- */

/* Runs fn(i, ctx) on n threads released together by a barrier; returns
 * when all are done. */
void th_parallel(int n, void (*fn)(int i, void *ctx), void *ctx);

/* The first TCP port of the ticketd instances a test starts: offset from
 * TICKETD_TEST_HTTP_PORT (default 24080). */
int th_port(int offset);

#endif
