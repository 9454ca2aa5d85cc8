/* log.c - JSON log lines (log.h), one write(2) each or a loop turn's
 * access lines in one, and the spill that keeps a reader who stops reading
 * from stopping a server. Apart so that every module logs the same shape
 * of line. */
#include "log.h"

#include "err.h"
#include "metrics.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

/* ---- the spill ----
 *
 * A loop must never wait for whoever reads the log. When the output is a
 * pipe or a socket (a container runtime, journald, `ticketd serve | tee`),
 * a reader that stops reading fills it, and a plain write(2) then stops
 * the thread that logs: on a loop, every request of that loop, until the
 * reader reads again. So a server (log_spill_start) writes each line
 * without blocking, on a description of its own for a pipe (the process's
 * stdout stays as it was for everything else that writes to it) and with
 * MSG_DONTWAIT for a socket. What the output does not take at once goes to
 * the spill buffer, and so does every line after it until the buffer has
 * drained, so that the lines keep their order; the log writer thread
 * writes the buffer out as the reader takes it. A full buffer drops whole
 * lines: counted (ticketd_log_lines_dropped_total) and said in a line of
 * their own, written after the buffer's. A regular file or a terminal is
 * written as before: no reader holds a file up.
 *
 * One mutex keeps the lines whole and in order: a thread writes its line
 * to the output itself only when nothing is spilled or being written out,
 * and under the mutex, so that no line can go out between another's parts.
 * It is held for one non-blocking write(2), or a copy. */

/* The spill buffer. The writer swaps it for a second one of the same size
 * while it writes, so neither is touched by two threads at once. Allocated
 * at the first spill. */
#define SPILL_BYTES (1u << 20)
/* Room kept for the rest of a line the output took only part of (a socket
 * can take part of a write): a line is at most this long (log_write's
 * buffer), and its rest must never be dropped. */
#define SPILL_LINE_MAX 4096
/* At the stop, how long the writer still waits for the reader. */
#define SPILL_STOP_WAIT_MS 2000

static struct {
    pthread_mutex_t mu;
    pthread_cond_t queued; /* something to write out, or the stop */
    int fd;                /* the non-blocking output; -1: no spill, write(2) log_fd */
    bool sock;             /* fd is a socket: send(2) with MSG_DONTWAIT */
    bool running;          /* the writer runs: a line the output refuses is kept */
    bool writing;          /* the writer has taken the buffer and writes it out */
    char *fill;            /* the lines waiting, fill_len bytes */
    char *out;             /* the writer's, while writing */
    size_t fill_len;
    uint64_t dropped; /* lines dropped since the writer last said so */
    atomic_bool stop;
    int64_t stop_at_ms;
    pthread_t thread;
} spill = {.mu = PTHREAD_MUTEX_INITIALIZER, .queued = PTHREAD_COND_INITIALIZER, .fd = -1};

/* One write that does not block: bytes taken, or -1 (errno). */
static ssize_t spill_try(const char *p, size_t n)
{
    ssize_t w;
    do {
        w = spill.sock ? send(spill.fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : write(spill.fd, p, n);
    } while (w < 0 && errno == EINTR);
    return w;
}

/* Under spill.mu: whole lines (or a line's rest) dropped, or kept. */
static void spill_keep(const char *p, size_t n, bool rest)
{
    if (spill.fill == NULL) {
        spill.fill = malloc(SPILL_BYTES);
        spill.out = malloc(SPILL_BYTES);
        if (spill.fill == NULL || spill.out == NULL) {
            free(spill.fill);
            free(spill.out);
            spill.fill = spill.out = NULL;
        }
    }
    size_t room = spill.fill == NULL ? 0 : SPILL_BYTES - spill.fill_len;
    if (!spill.running || n > room || (!rest && n + SPILL_LINE_MAX > room)) {
        /* p holds one line, or a turn's gathered access lines: each counts. */
        uint64_t lines = 0;
        for (const char *q = p; (q = memchr(q, '\n', n - (size_t)(q - p))) != NULL; q++)
            lines++;
        spill.dropped += lines;
        metrics_add(M_LOG_LINES_DROPPED, (int64_t)lines);
        return;
    }
    if (spill.fill_len == 0)
        pthread_cond_signal(&spill.queued);
    memcpy(spill.fill + spill.fill_len, p, n);
    spill.fill_len += n;
}

/* The writer's: all of p out, waiting for the reader as long as it takes,
 * or until SPILL_STOP_WAIT_MS after the stop. false: given up (the reader
 * is gone, or did not read in time at the stop). */
static bool spill_write_out(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = spill_try(p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return false;
        if (atomic_load(&spill.stop) && mono_ms() >= spill.stop_at_ms)
            return false;
        struct pollfd pfd = {.fd = spill.fd, .events = POLLOUT};
        (void)poll(&pfd, 1, 100);
    }
    return true;
}

static void *spill_writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&spill.mu);
    for (;;) {
        while (spill.fill_len == 0 && spill.dropped == 0 && !atomic_load(&spill.stop))
            pthread_cond_wait(&spill.queued, &spill.mu);
        if (spill.fill_len == 0 && spill.dropped == 0)
            break; /* stopped, and nothing left */
        char *out = spill.fill;
        size_t n = spill.fill_len;
        uint64_t dropped = spill.dropped;
        spill.fill = spill.out;
        spill.out = out;
        spill.fill_len = 0;
        spill.dropped = 0;
        spill.writing = true;
        pthread_mutex_unlock(&spill.mu);
        bool ok = spill_write_out(out, n);
        if (ok && dropped > 0) {
            /* Said after the lines kept before the drop, before any kept
             * after it: where the gap is. */
            char note[256], ts[32];
            format_ts(ts, sizeof ts);
            int len = snprintf(note, sizeof note,
                               "{\"ts\":\"%s\",\"level\":\"warn\",\"msg\":\"%" PRIu64
                               " log lines dropped: the log's reader took nothing while "
                               "%u bytes waited\"}\n",
                               ts, dropped, SPILL_BYTES);
            ok = spill_write_out(note, (size_t)len);
        }
        pthread_mutex_lock(&spill.mu);
        spill.writing = false;
        if (!ok) {
            /* The reader is gone, or the stop waited long enough: what is
             * left is dropped, and the lines from now on too. */
            spill.running = false;
            spill.fill_len = 0;
            spill.dropped = 0;
            break;
        }
    }
    spill.running = false;
    pthread_mutex_unlock(&spill.mu);
    return NULL;
}

void log_spill_start(void)
{
    struct stat st;
    if (spill.fd >= 0 || fstat(log_fd, &st) != 0)
        return;
    if (S_ISSOCK(st.st_mode)) {
        spill.fd = log_fd;
        spill.sock = true;
    } else if (S_ISFIFO(st.st_mode)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", log_fd);
        spill.fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (spill.fd < 0)
            return; /* no /proc: written as before */
    } else {
        return;
    }
    spill.running = true;
    if (pthread_create(&spill.thread, NULL, spill_writer, NULL) != 0) {
        spill.running = false;
        if (!spill.sock)
            close(spill.fd);
        spill.fd = -1;
        return;
    }
    pthread_setname_np(spill.thread, "log-writer");
}

void log_spill_stop(void)
{
    if (spill.fd < 0 || atomic_load(&spill.stop))
        return; /* no spill, or stopped already */
    pthread_mutex_lock(&spill.mu);
    spill.stop_at_ms = mono_ms() + SPILL_STOP_WAIT_MS;
    atomic_store(&spill.stop, true);
    pthread_cond_signal(&spill.queued);
    pthread_mutex_unlock(&spill.mu);
    pthread_join(spill.thread, NULL);
    /* Lines from now on still never block: the output takes them at once,
     * or they are dropped. The buffers go with the process. */
}

/* One write of whole lines (one, or a loop turn's access lines):
 * straight to the output, or through the spill. */
static void out(const char *p, size_t n)
{
    if (spill.fd < 0) {
        ssize_t w = write(log_fd, p, n);
        (void)w;
        return;
    }
    pthread_mutex_lock(&spill.mu);
    size_t sent = 0;
    if (!spill.writing && spill.fill_len == 0) {
        ssize_t w = spill_try(p, n);
        sent = w > 0 ? (size_t)w : 0;
    }
    if (sent < n)
        spill_keep(p + sent, n - sent, sent > 0);
    pthread_mutex_unlock(&spill.mu);
}

/* ---- a loop turn's access lines, gathered ----
 *
 * A loop answers several requests in a turn, and each answer's access line
 * was a write(2) of its own: one system call in four of a replay's. A loop
 * thread gathers its access lines and writes them together when its turn
 * ends (loop.c), before it sleeps. At most GATHER_BYTES go in one write:
 * PIPE_BUF, the most a pipe takes without mixing another writer's bytes
 * in, so lines stay whole whatever the output. Any other line written on
 * the thread writes the gathered ones first, so that a thread's lines keep
 * their order (an error logged before an abort comes after the access
 * lines before it). A crash loses at most the lines of the turn it
 * interrupts. */
#define GATHER_BYTES 4096

static __thread struct {
    bool on;
    size_t len;
    char buf[GATHER_BYTES];
} gathered;

void log_gather_flush(void)
{
    if (gathered.len > 0) {
        out(gathered.buf, gathered.len);
        gathered.len = 0;
    }
}

bool log_gather(bool on)
{
    bool was = gathered.on;
    if (!on)
        log_gather_flush();
    gathered.on = on;
    return was;
}

/* Ends the line of n bytes in line (cap bytes) with its newline, cutting
 * it to fit; returns its length with the newline. */
static size_t end_line(char *line, size_t n, size_t cap)
{
    if (n >= cap - 1)
        n = cap - 2;
    line[n++] = '\n';
    return n;
}

/* Lines are assembled in a buffer of the thread's and written with one
 * write(2), so lines from different threads never interleave. */
static void emit(char *line, size_t n, size_t cap)
{
    n = end_line(line, n, cap);
    log_gather_flush();
    out(line, n);
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
    if (!gathered.on) {
        emit(line, n, sizeof line);
        return;
    }
    n = end_line(line, n, sizeof line);
    if (gathered.len + n > GATHER_BYTES)
        log_gather_flush();
    memcpy(gathered.buf + gathered.len, line, n);
    gathered.len += n;
}
