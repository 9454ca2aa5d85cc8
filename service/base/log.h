/* log.h - JSON log lines on stdout (or stderr), one object per line.
 *
 * Every line has "ts" (RFC 3339 UTC with milliseconds), "level" and "msg".
 * The level check happens in the macro, before the arguments are evaluated,
 * so debug lines cost nothing when they are off. Thread-safe: each line is
 * written with one write(2) (a loop's access lines: several in one,
 * log_gather), and never torn or interleaved with another. */
#ifndef TICKETD_LOG_H
#define TICKETD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

extern enum log_level log_min_level;

void log_set_level(enum log_level level);
/* Sends the lines to stderr from now on: for commands whose stdout is
 * their output. Call before any thread logs. */
void log_to_stderr(void);
/* For a server: from now on no thread waits for the log's reader. When the
 * output is a pipe or a socket, each line is written without blocking, and
 * what the output cannot take at once waits in a buffer that a thread of
 * its own (log-writer) writes out as the reader reads; a full buffer drops
 * lines, counted and said (log.c). Call before any thread logs, after the
 * signals are blocked (the writer inherits the mask). */
void log_spill_start(void);
/* Writes out what waits, waiting for the reader at most two seconds, and
 * ends the writer. Lines after it still never block: the output takes
 * them at once, or they are dropped. */
void log_spill_stop(void);
/* Parses "debug", "info", "warn" or "error". Returns 0 or TD_EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_at(level, ...)                                                                         \
    do {                                                                                           \
        if ((level) >= log_min_level)                                                              \
            log_write((level), __VA_ARGS__);                                                       \
    } while (0)
#define log_debug(...) log_at(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_at(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_at(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_at(LOG_ERROR, __VA_ARGS__)

/* The access log line of one request. Strings may be NULL. */
void log_access(const char *request_id, const char *method, const char *route, int status,
                double duration_ms, const char *code, const char *layer);

/* On a loop thread (loop.c): from now on (on) this thread's access lines
 * are gathered and written together by log_gather_flush, in writes of at
 * most 4 KiB (PIPE_BUF: never mixed with another thread's lines); any
 * other line it writes writes the gathered ones first. Off writes them out
 * and stops. Returns whether the thread gathered them before. */
bool log_gather(bool on);
/* Writes out this thread's gathered access lines: at the end of each loop
 * turn, before the loop sleeps, so that no line waits for the next. */
void log_gather_flush(void);

/* Writes s as the inside of a JSON string (no quotes) into out (cap bytes,
 * NUL-terminated, truncated if needed). Returns the length written. */
size_t log_json_escape(const char *s, char *out, size_t cap);

#endif
