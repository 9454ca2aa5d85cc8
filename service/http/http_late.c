/* http_late.c - a late answer, named.
 *
 * Every request gets its answer, and the answer goes out as soon as it is
 * ready: that is the loop's promise. This is how a break of it shows. An
 * exchange still open LATE_ANSWER_MS after its head arrived is logged
 * once, with its request id (the client's X-Request-Id, so a client left
 * without an answer finds its line), where it is (on a fiber, waiting on a
 * suspended connection, its answer ready), whether its answer is queued in
 * libmicrohttpd, and whether libmicrohttpd has the connection suspended.
 * A request that is slow on purpose (a Prefer: wait, a held fault point)
 * is logged too: its phase says so. The check only looks; it runs no part
 * of the daemon, so it cannot hide what it is there to show. One timer per
 * loop, armed while the loop has an exchange the check has not looked at
 * yet. */
#include "http_internal.h"

#include "log.h"
#include "loop.h"
#include "util.h"

#include <microhttpd.h>
#include <stdint.h>

#define LATE_ANSWER_MS 5000

static const char *phase_name(int phase)
{
    switch (phase) {
    case PHASE_AT_FIBER:
        return "on its fiber";
    case PHASE_SUSPENDED:
        return "on its fiber, connection suspended by ticketd";
    case PHASE_DONE:
        return "answer ready";
    default:
        return "not handed to a fiber";
    }
}

static void late_check(void *arg)
{
    struct http_loop *hl = arg;
    int64_t now = mono_ns(), next_ms = -1;
    hl->late_armed = false;
    for (struct exchange *x = hl->live; x != NULL; x = x->live_next) {
        if (x->late_logged)
            continue;
        int64_t age_ms = (now - x->start_ns) / 1000000;
        if (age_ms < LATE_ANSWER_MS) {
            int64_t left = LATE_ANSWER_MS - age_ms;
            if (next_ms < 0 || left < next_ms)
                next_ms = left;
            continue;
        }
        x->late_logged = true;
        /* Still on its fiber: slow on purpose or waiting on Redis or
         * MariaDB, which their own timeouts bound. Its answer ready and not
         * out: the break this check is for. */
        bool stuck = x->phase == PHASE_DONE || x->queued;
        log_at(stuck ? LOG_WARN : LOG_INFO,
               "late answer: request %s %s %s on loop %d, %lld ms since its head: %s; "
               "answer %s; libmicrohttpd: %s",
               x->request_id, x->method, x->path, hl->index, (long long)age_ms,
               phase_name(x->phase), x->queued ? "queued" : "not queued",
               x->conn == NULL               ? "connection gone"
               : http_mhd_suspended(x->conn) ? "suspended"
                                             : "not suspended");
    }
    if (next_ms >= 0) {
        loop_timer_start(hl->loop, &hl->late_timer, (int)next_ms + 1, late_check, hl);
        hl->late_armed = true;
    }
}

void http_late_watch(struct http_loop *hl)
{
    if (!hl->late_armed && hl->loop != NULL) {
        loop_timer_start(hl->loop, &hl->late_timer, LATE_ANSWER_MS, late_check, hl);
        hl->late_armed = true;
    }
}

void http_late_stop(struct http_loop *hl)
{
    loop_timer_stop(hl->loop, &hl->late_timer);
    hl->late_armed = false;
}
