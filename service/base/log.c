/* log.c - JSON log lines (log.h), one write(2) each. Apart so that every
 * module logs the same shape of line. */
#include "log.h"

#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum log_level log_min_level = LOG_INFO;
static int log_fd = STDOUT_FILENO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level level)
{
    log_min_level = level;
}

void log_to_stderr(void)
{
    log_fd = STDERR_FILENO;
}

int log_parse_level(const char *s, enum log_level *out)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return TD_OK;
        }
    }
    return TD_EINVAL;
}

/* The date and time to the second change once a second, and gmtime_r
 * takes glibc's time zone lock: each thread formats them once per second
 * and then appends only the milliseconds. */
static size_t format_ts(char *out, size_t cap)
{
    static _Thread_local time_t last_s = -1;
    static _Thread_local char last[32];
    static _Thread_local size_t last_len;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (tv.tv_sec != last_s) {
        struct tm tm;
        gmtime_r(&tv.tv_sec, &tm);
        last_len = strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%S", &tm);
        last_s = tv.tv_sec;
    }
    if (cap < last_len + 6)
        return 0;
    memcpy(out, last, last_len);
    int ms = (int)(tv.tv_usec / 1000);
    char *p = out + last_len;
    *p++ = '.';
    *p++ = (char)('0' + ms / 100);
    *p++ = (char)('0' + ms / 10 % 10);
    *p++ = (char)('0' + ms % 10);
    *p++ = 'Z';
    *p = '\0';
    return last_len + 5;
}

size_t log_json_escape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        char esc[8];
        const char *add = esc;
        size_t len;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            len = 2;
        } else if (*p == '\n') {
            add = "\\n";
            len = 2;
        } else if (*p < 0x20) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            esc[0] = (char)*p;
            len = 1;
        }
        if (o + len >= cap)
            break;
        memcpy(out + o, add, len);
        o += len;
    }
    out[o] = '\0';
    return o;
}

/* Lines are assembled in a buffer of the thread's and written with one
 * write(2), so lines from different threads never interleave. */
static void emit(char *line, size_t n, size_t cap)
{
    if (n >= cap - 1)
        n = cap - 2;
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, n);
    (void)w;
}

/* log_write's buffers: the thread's own, not its stack's. A line is up to
 * about 4 KiB, and log_write runs on fibers too, whose stacks are small
 * (fiber.h): a frame that size on every logging call would bring a deep
 * fiber that much nearer its guard. No log call runs inside another on one
 * thread (nothing here logs, and a fiber never parks in here), so one pair
 * per thread is enough. */
static __thread char write_msg[1536];
static __thread char write_line[2304];

void log_write(enum log_level level, const char *fmt, ...)
{
    static const char tail[] = "\"}";
    char *line = write_line;
    size_t cap = sizeof write_line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(write_msg, sizeof write_msg, fmt, ap);
    va_end(ap);
    size_t n = (size_t)snprintf(line, cap, "{\"ts\":\"");
    n += format_ts(line + n, cap - n);
    n += (size_t)snprintf(line + n, cap - n, "\",\"level\":\"%s\",\"msg\":\"", level_names[level]);
    /* Escaped straight into the line, leaving room for the tail and the
     * newline emit adds. */
    n += log_json_escape(write_msg, line + n, cap - n - sizeof tail);
    memcpy(line + n, tail, sizeof tail);
    n += sizeof tail - 1;
    emit(line, n, cap);
}

void log_access(const char *request_id, const char *method, const char *route, int status,
                double duration_ms, const char *code, const char *layer)
{
    if (LOG_INFO < log_min_level)
        return;
    char rid[160], m[32], r[96], c[64], l[64];
    char line[1024];
    log_json_escape(request_id ? request_id : "", rid, sizeof rid);
    log_json_escape(method ? method : "", m, sizeof m);
    log_json_escape(route ? route : "", r, sizeof r);
    log_json_escape(code ? code : "", c, sizeof c);
    log_json_escape(layer ? layer : "", l, sizeof l);
    size_t n = (size_t)snprintf(line, sizeof line, "{\"ts\":\"");
    n += format_ts(line + n, sizeof line - n);
    n += (size_t)snprintf(line + n, sizeof line - n,
                          "\",\"level\":\"info\",\"msg\":\"access\",\"request_id\":\"%s\","
                          "\"method\":\"%s\",\"route\":\"%s\",\"status\":%d,\"duration_ms\":%.3f",
                          rid, m, r, status, duration_ms);
    if (code != NULL)
        n += (size_t)snprintf(line + n, sizeof line - n, ",\"code\":\"%s\"", c);
    if (layer != NULL)
        n += (size_t)snprintf(line + n, sizeof line - n, ",\"layer\":\"%s\"", l);
    n += (size_t)snprintf(line + n, sizeof line - n, "}");
    emit(line, n, sizeof line);
}
