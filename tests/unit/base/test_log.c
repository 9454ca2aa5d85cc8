/* test_log.c - JSON log lines: the escaping that keeps every line one valid
 * JSON object whatever the message holds, the level gate, the fields of
 * the access line, a loop's access lines gathered for its turn, and the spill
 * that keeps a reader who stops reading from stopping the thread that
 * logs. Lines are captured by pointing stdout at a file (the gathered
 * lines' and the spill's tests: at a socket). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_escape_table(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *want;
    } cases[] = {
        {"", ""},
        {"plain text", "plain text"},
        {"say \"hi\"", "say \\\"hi\\\""},
        {"C:\\path", "C:\\\\path"},
        {"two\nlines", "two\\nlines"},
        {"tab\there", "tab\\u0009here"},
        {"cr\r", "cr\\u000d"},
        {"\x01\x1f", "\\u0001\\u001f"},
        {"caf\xc3\xa9", "caf\xc3\xa9"}, /* UTF-8 passes through */
        {"/", "/"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[128];
        size_t n = log_json_escape(cases[i].in, out, sizeof out);
        assert_string_equal(out, cases[i].want);
        assert_int_equal(n, strlen(cases[i].want));
    }
}

static void test_escape_truncates_whole_escapes(void **state)
{
    (void)state;
    char out[8];
    /* Room for 7 characters: three escaped quotes (6), never half of a
     * fourth, which would leave a dangling backslash. */
    size_t n = log_json_escape("\"\"\"\"\"", out, sizeof out);
    assert_string_equal(out, "\\\"\\\"\\\"");
    assert_int_equal(n, 6);
    n = log_json_escape("ab\x01", out, sizeof out);
    assert_string_equal(out, "ab"); /* \u0001 (6) does not fit after "ab" in 7 */
    n = log_json_escape("abcdefghij", out, sizeof out);
    assert_string_equal(out, "abcdefg");
    assert_int_equal(n, 7);
    n = log_json_escape("abc", out, 1);
    assert_string_equal(out, "");
    assert_int_equal(n, 0);
    out[0] = 'x';
    assert_int_equal(log_json_escape("abc", out, 0), 0);
    assert_int_equal(out[0], 'x'); /* nothing written at all */
}

static void test_parse_level(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        enum log_level want;
    } cases[] = {
        {"debug", TD_OK, LOG_DEBUG}, {"info", TD_OK, LOG_INFO}, {"warn", TD_OK, LOG_WARN},
        {"error", TD_OK, LOG_ERROR}, {"warning", TD_EINVAL, 0}, {"INFO", TD_EINVAL, 0},
        {"", TD_EINVAL, 0},          {"fatal", TD_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum log_level l = LOG_ERROR;
        int rc = log_parse_level(cases[i].s, &l);
        assert_int_equal(rc, cases[i].rc);
        if (rc == TD_OK)
            assert_int_equal(l, cases[i].want);
    }
}

/* Runs fn with stdout pointed at a temporary file; returns what it wrote
 * (new string). */
static char *capture(void (*fn)(void))
{
    char path[] = "/tmp/ticketd-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    fn();
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *text = calloc(1, (size_t)n + 1);
    assert_int_equal(pread(fd, text, (size_t)n, 0), n);
    close(fd);
    unlink(path);
    return text;
}

/* Parses each line of text as one JSON object; returns how many. */
static int each_line_is_json(const char *text, json_t **last)
{
    int lines = 0;
    const char *p = text;
    *last = NULL;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* every line is terminated */
        json_error_t e;
        json_t *o = json_loadb(p, (size_t)(nl - p), 0, &e);
        if (o == NULL)
            fail_msg("not JSON (%s): %.*s", e.text, (int)(nl - p), p);
        assert_true(json_is_object(o));
        json_decref(*last);
        *last = o;
        lines++;
        p = nl + 1;
    }
    return lines;
}

static void write_some(void)
{
    log_set_level(LOG_WARN);
    log_debug("hidden %d", 1);
    log_info("hidden %d", 2);
    log_warn("shown \"quoted\" %d", 3);
    log_error("shown\nsplit %s", "\x02");
    log_set_level(LOG_INFO);
}

static void test_lines_and_level_gate(void **state)
{
    (void)state;
    char *text = capture(write_some);
    json_t *last;
    assert_int_equal(each_line_is_json(text, &last), 2);
    assert_null(strstr(text, "hidden"));
    assert_string_equal(json_string_value(json_object_get(last, "level")), "error");
    assert_string_equal(json_string_value(json_object_get(last, "msg")), "shown\nsplit \x02");
    /* RFC 3339 UTC with milliseconds. */
    const char *ts = json_string_value(json_object_get(last, "ts"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), strlen("2026-12-01T08:00:00.000Z"));
    assert_int_equal(ts[10], 'T');
    assert_int_equal(ts[19], '.');
    assert_int_equal(ts[23], 'Z');
    json_decref(last);
    free(text);
}

static void write_long(void)
{
    /* Longer than the line buffer, and all of it needing escapes. */
    char msg[4000];
    memset(msg, '"', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    log_error("%s", msg);
    memset(msg, '\x01', sizeof msg - 1);
    log_error("%s", msg);
}

static void test_long_lines_stay_json(void **state)
{
    (void)state;
    char *text = capture(write_long);
    json_t *last;
    assert_int_equal(each_line_is_json(text, &last), 2);
    json_decref(last);
    free(text);
}

static void write_access(void)
{
    log_access("req-\"1\"", "POST", "/api/v1/orders", 409, 1.5, "DUPLICATE_SUBMISSION",
               "session-lock");
    log_access(NULL, NULL, NULL, 200, 0.25, NULL, NULL);
    log_set_level(LOG_WARN);
    log_access("hidden", "GET", "/livez", 200, 0.1, NULL, NULL);
    log_set_level(LOG_INFO);
}

static void test_access_line(void **state)
{
    (void)state;
    char *text = capture(write_access);
    assert_null(strstr(text, "hidden"));
    const char *second = strchr(text, '\n') + 1;
    json_error_t e;
    json_t *a = json_loadb(text, (size_t)(second - text - 1), 0, &e);
    assert_non_null(a);
    assert_string_equal(json_string_value(json_object_get(a, "msg")), "access");
    assert_string_equal(json_string_value(json_object_get(a, "request_id")), "req-\"1\"");
    assert_string_equal(json_string_value(json_object_get(a, "method")), "POST");
    assert_string_equal(json_string_value(json_object_get(a, "route")), "/api/v1/orders");
    assert_int_equal(json_integer_value(json_object_get(a, "status")), 409);
    assert_true(json_is_number(json_object_get(a, "duration_ms")));
    assert_string_equal(json_string_value(json_object_get(a, "code")), "DUPLICATE_SUBMISSION");
    assert_string_equal(json_string_value(json_object_get(a, "layer")), "session-lock");
    json_decref(a);

    json_t *b;
    assert_int_equal(each_line_is_json(second, &b), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "status")), 200);
    /* Absent code and layer are left out, not written empty. */
    assert_null(json_object_get(b, "code"));
    assert_null(json_object_get(b, "layer"));
    json_decref(b);
    free(text);
}

/* A message of the socket stdout points at (one write each), or NULL. */
static char *next_write(int fd)
{
    char buf[8192];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    memcpy(s, buf, (size_t)n);
    s[n] = '\0';
    return s;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s != '\0'; s++)
        n += *s == '\n';
    return n;
}

/* A loop thread's access lines (log_gather) wait for log_gather_flush and go
 * out in one write; a turn's worth over 4 KiB goes in writes of at most
 * 4 KiB of whole lines, in order; any other line writes the gathered ones
 * first. stdout is a datagram socket here, so each write(2) is one
 * message: a regression to a write per line shows as one message per
 * line. */
static void test_a_turns_access_lines_go_in_one_write(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(sv[0], STDOUT_FILENO);

    assert_false(log_gather(true));
    for (int i = 0; i < 5; i++)
        log_access("gathered", "POST", "/api/v1/orders", 201, i, NULL, NULL);
    assert_null(next_write(sv[1])); /* nothing written before the turn ends */
    log_gather_flush();
    char *w = next_write(sv[1]);
    assert_non_null(w);
    assert_int_equal(count_lines(w), 5);
    free(w);
    assert_null(next_write(sv[1]));
    log_gather_flush(); /* nothing gathered: no write */
    assert_null(next_write(sv[1]));

    /* About 200 bytes a line: 40 of them take more than one write. */
    char id[32];
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof id, "many-%02d", i);
        log_access(id, "POST", "/api/v1/orders", 201, 1.0, NULL, NULL);
    }
    log_gather_flush();
    int lines = 0, writes = 0;
    while ((w = next_write(sv[1])) != NULL) {
        assert_true(strlen(w) <= 4096);
        assert_int_equal(w[strlen(w) - 1], '\n'); /* whole lines only */
        for (char *p = w; (p = strstr(p, "\"many-")) != NULL; p++) {
            snprintf(id, sizeof id, "\"many-%02d\"", lines++);
            assert_memory_equal(p, id, strlen(id)); /* in order */
        }
        writes++;
        free(w);
    }
    assert_int_equal(lines, 40);
    assert_in_range(writes, 2, 3);

    /* A warning writes the gathered lines first, then itself. */
    log_access("before-warn", "GET", "/livez", 200, 0.1, NULL, NULL);
    log_warn("a warning after an access line");
    w = next_write(sv[1]);
    assert_non_null(strstr(w, "before-warn"));
    free(w);
    w = next_write(sv[1]);
    assert_non_null(strstr(w, "a warning after"));
    free(w);

    /* Off writes out what is gathered and stops gathering. */
    log_access("at-off", "GET", "/livez", 200, 0.1, NULL, NULL);
    assert_true(log_gather(false));
    w = next_write(sv[1]);
    assert_non_null(strstr(w, "at-off"));
    free(w);
    log_access("not-gathered", "GET", "/livez", 200, 0.1, NULL, NULL);
    w = next_write(sv[1]);
    assert_non_null(strstr(w, "not-gathered"));
    free(w);

    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(sv[0]);
    close(sv[1]);
}

/* The spill's test: more lines than the socket and the spill buffer hold
 * together, about 2 MiB. */
#define SPILL_LINES 20000

struct drain {
    int fd;
    char *buf;
    size_t len, cap;
};

static void *drain_socket(void *arg)
{
    struct drain *d = arg;
    char chunk[65536];
    ssize_t n;
    while ((n = read(d->fd, chunk, sizeof chunk)) > 0) {
        if (d->len + (size_t)n + 1 > d->cap) {
            d->cap = (d->len + (size_t)n + 1) * 2;
            d->buf = realloc(d->buf, d->cap);
        }
        memcpy(d->buf + d->len, chunk, (size_t)n);
        d->len += (size_t)n;
        d->buf[d->len] = '\0';
    }
    return NULL;
}

/* stdout on a stream socket nobody reads, as journald's is when it falls
 * behind: every log_write must return, a socket may take part of a line
 * (the rest waits in the spill), and whatever was kept comes out whole and
 * in order once the reader reads, followed by the count of the dropped.
 * Without the spill the first write past the socket's buffer never
 * returns; alarm() ends the test then. Runs last: the spill starts once
 * per process. */
static void test_spill_never_blocks_and_keeps_lines_whole(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(sv[0], STDOUT_FILENO);
    close(sv[0]);
    log_spill_start();
    alarm(60);
    for (int i = 0; i < SPILL_LINES; i++)
        log_info("line %d of the spill's test, padded to about a hundred bytes: %040d", i, i);
    alarm(0);

    struct drain d = {.fd = sv[1]};
    pthread_t reader;
    assert_int_equal(pthread_create(&reader, NULL, drain_socket, &d), 0);
    log_spill_stop();
    dup2(saved, STDOUT_FILENO); /* the socket's last writer gone: the reader sees its end */
    close(saved);
    pthread_join(reader, NULL);
    close(sv[1]);

    assert_non_null(d.buf);
    int kept = 0, last = -1;
    long long dropped = 0;
    char *save = NULL;
    for (char *line = strtok_r(d.buf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (j == NULL)
            fail_msg("a torn line: %.120s", line);
        const char *msg = json_string_value(json_object_get(j, "msg"));
        int n;
        long long lost;
        if (sscanf(msg, "line %d of the spill's test", &n) == 1) {
            if (n <= last)
                fail_msg("line %d after line %d", n, last);
            last = n;
            kept++;
        } else if (sscanf(msg, "%lld log lines dropped", &lost) == 1) {
            assert_string_equal(json_string_value(json_object_get(j, "level")), "warn");
            dropped += lost;
        }
        json_decref(j);
    }
    print_message("%d lines kept, %lld dropped and said\n", kept, dropped);
    assert_true(kept > 0);
    assert_true(dropped > 0);
    assert_int_equal(kept + dropped, SPILL_LINES);
    free(d.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_table),
        cmocka_unit_test(test_escape_truncates_whole_escapes),
        cmocka_unit_test(test_parse_level),
        cmocka_unit_test(test_lines_and_level_gate),
        cmocka_unit_test(test_long_lines_stay_json),
        cmocka_unit_test(test_access_line),
        cmocka_unit_test(test_a_turns_access_lines_go_in_one_write),
        cmocka_unit_test(test_spill_never_blocks_and_keeps_lines_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
