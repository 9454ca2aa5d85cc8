/* http_internal.h - what the files of service/http/ share and nothing
 * outside it may see: the server and its loops, a connection's slot, a
 * request's exchange, and the helpers one file defines for another. The
 * files call one another one way only: http.c (the start) uses the rest;
 * http_exchange.c uses http_head.c, http_conns.c, http_late.c and
 * http_mhd.c; http_drain.c uses http_conns.c and http_mhd.c; http_late.c
 * uses http_mhd.c, which uses none. */
#ifndef TICKETD_HTTP_INTERNAL_H
#define TICKETD_HTTP_INTERNAL_H

#include "body.h"
#include "http.h"
#include "loop.h"
#include "req.h"
#include "resp.h"

#include <microhttpd.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;
struct http_server;

/* One client connection, from MHD's "started" to its "closed" notice.
 * Everything in it is touched on the thread of the loop whose daemon has
 * the connection only: the request's calls (http_exchange.c) set busy and
 * body_done, and the deadlines and the shedding (http_conns.c, a timer of
 * the same loop) read them between two runs of the daemon, so a request
 * can never become whole between the look and the shutdown(). MHD closes
 * the socket only after the "closed" notice, so fd is this connection's
 * while the slot is listed. */
struct conn_slot {
    int fd;
    struct sockaddr_storage peer;
    bool counted;    /* in its address's count (TICKETD_CONN_PER_IP) */
    const char *uri; /* the request target as MHD first saw it (http_uri_logger) */
    size_t uri_len;
    bool busy;             /* a request's head has arrived */
    bool body_done;        /* ... and its body: it is being answered */
    int64_t idle_since_ms; /* opened, or its last answer sent */
    /* Shut down (a late request, shedding, or over its address's count):
     * whatever MHD still reads from it, bytes that were in the kernel's
     * buffer, is refused before it can change anything (http_on_request). */
    bool cut;
    struct conn_slot *prev, *next; /* the loop's list (http_loop.conns) */
};

/* One event loop of the server, on a thread of its own: its libmicrohttpd
 * daemon (no thread of its own: the loop runs it, http_mhd.c) and the
 * fibers of its requests. Everything but the atomics is touched on the
 * loop's thread only. */
struct http_loop {
    struct http_server *srv;
    int index;
    struct loop *loop;
    struct MHD_Daemon *daemon;
    pthread_t thread;
    bool thread_started;
    struct loop_io mhd_io;       /* MHD's epoll set, in the loop's */
    struct loop_timer mhd_timer; /* MHD_get_timeout's wait */
    struct loop_task mhd_again;  /* MHD_run in this turn (after a resume) */
    int fibers;                  /* request fibers started and not ended */
    int fibers_max;              /* beyond, 503 (http.c: fibers_per_loop) */
    bool stop_when_idle;         /* http_stop: end the loop once fibers is 0 */
    _Atomic int connections;     /* open connections of this daemon */
    int conn_limit;              /* this daemon's share of TICKETD_CONN_LIMIT */
    bool was_full;               /* it reached conn_limit since its last run below it */
    struct exchange *live;       /* its exchanges, newest first (http_late.c) */
    struct loop_timer late_timer;
    bool late_armed;

    /* The connections of this daemon, and the timer that holds them to
     * their deadlines and sheds them near the cap (http_conns.c). */
    struct conn_slot *conns;
    struct loop_timer reap_timer;

    /* The drain (http_drain.c): once MHD has given the listening socket back
     * (MHD_quiesce_daemon), the loop refuses new handshakes on it, accepts
     * what waits in its accept queue itself and closes the socket only
     * when accept() finds the queue empty and no handshake half done. */
    int listen_fd;                  /* -1: closed, or still MHD's */
    struct loop_io listen_io;       /* watched until it is closed */
    bool refusing;                  /* new handshakes are dropped (the filter is on) */
    int64_t half_open_until_ms;     /* past it, half-done handshakes are not waited for */
    struct loop_timer listen_timer; /* the next look */
    atomic_bool listener_closed;    /* its accept queue was emptied, then closed */
    _Atomic int unsettled;          /* connections the drain waits for (count_unsettled) */
    struct loop_timer stop_timer;   /* the drain's deadline, for fibers that outlive it */
};

struct http_server {
    struct app *app;
    _Atomic int inflight;    /* requests read and not yet fully answered */
    _Atomic int connections; /* open client connections */
    atomic_bool stopping;    /* the connections are about to be closed */

    int nloops;
    struct http_loop *loops;
    struct http_loop_hooks hooks; /* a copy; NULL members skipped */

    /* The loops share the count of connections per client address. */
    pthread_mutex_t by_ip_mu;
    struct ip_count **by_ip; /* IP_BUCKETS chains (http_conns.c) */

    int64_t drain_deadline_ms; /* http_drain's; 0: none yet */
};

/* Per-request state, created on the first access-handler call and freed
 * only in the completed callback: the one hook MHD runs even when the
 * client goes away mid-request. */
#define KEPT_MAX 16

/* A header or query value the API read, copied: a fiber may still hold it
 * when the client has gone and MHD has freed the connection's memory. */
struct kept_value {
    char kind; /* 'h' header, 'q' query argument */
    char *name;
    char *value; /* NULL: absent */
};

struct exchange {
    struct http_server *srv;
    struct http_loop *hl;   /* the loop whose daemon has the connection */
    struct conn_slot *slot; /* the connection's, for the head deadline */
    struct kept_value kept[KEPT_MAX];
    int nkept;
    char *method, *path, *version; /* copies, for the same reason */
    const char *wire_version;      /* MHD's own, on the first call only (http_precheck) */
    struct req req;
    struct resp resp;
    struct body body;
    int64_t start_ns;
    char request_id[72];
    bool too_large; /* the body outgrew the limit; keep discarding it */
    bool queued;
    /* The step that waits for Redis or MySQL, on a fiber (see
     * hand_to_fiber): the connection is suspended meanwhile and resumed
     * with the answer ready. */
    struct MHD_Connection *conn; /* NULL once abandoned */
    int phase;                   /* enum fiber_phase; the loop's thread only */
    /* The connection ended (the client went away) while the fiber had the
     * request: the fiber frees the exchange when it ends (answer_ready). */
    bool abandoned;
    /* On its loop's list of live exchanges, for the late-answer log. */
    struct exchange *live_prev, *live_next;
    bool late_logged;
};

/* Where a request handed to a fiber is. The fiber moves it to DONE and
 * resumes the connection if it was suspended meanwhile. */
enum fiber_phase {
    PHASE_NONE,      /* not handed to a fiber */
    PHASE_AT_FIBER,  /* started; the connection is not suspended */
    PHASE_SUSPENDED, /* still running; the connection is suspended */
    PHASE_DONE,      /* the answer is in x->resp */
};

/* http_exchange.c: libmicrohttpd's access handler and its completed
 * callback (MHD_OPTION_NOTIFY_COMPLETED), cls being the http_loop. */
enum MHD_Result http_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_size, void **state);
void http_on_completed(void *cls, struct MHD_Connection *c, void **state,
                       enum MHD_RequestTerminationCode why);

/* http_mhd.c (its rules at its top), each on hl's thread: attach starts
 * the loop's watch of the daemon's epoll set and its timer, detach stops
 * them; run_soon runs the daemon in this turn (after a connection was
 * resumed or added); suspend and resume hold a connection while a fiber
 * has its request, resume running the daemon too; suspended is
 * libmicrohttpd's own word on it. */
void http_mhd_attach(struct http_loop *hl);
void http_mhd_detach(struct http_loop *hl);
void http_mhd_run_soon(struct http_loop *hl);
void http_mhd_suspend(struct MHD_Connection *c);
void http_mhd_resume(struct http_loop *hl, struct MHD_Connection *c);
bool http_mhd_suspended(struct MHD_Connection *c);

/* http_late.c, on hl's thread: watch makes sure a check will look at an
 * exchange just listed in hl->live; stop ends the checks (the loop ends). */
void http_late_watch(struct http_loop *hl);
void http_late_stop(struct http_loop *hl);

/* http_head.c: what the API reads of a request, through struct req. */
extern const struct req_source http_exchange_source;
/* http_head.c: whether a client's X-Request-Id may be echoed. */
bool http_request_id_ok(const char *s);
/* http_head.c: the checks on a request head (see there). */
bool http_precheck(struct MHD_Connection *c, struct exchange *x);
/* http_head.c: MHD_OPTION_UNESCAPE_CALLBACK. */
size_t http_unescape(void *cls, struct MHD_Connection *c, char *s);

/* http_conns.c: the slot of connection c, or NULL. */
struct conn_slot *http_slot_of(struct MHD_Connection *c);
/* http_conns.c: MHD_OPTION_URI_LOG_CALLBACK. */
void *http_uri_logger(void *cls, const char *uri, struct MHD_Connection *c);
/* http_conns.c: MHD_OPTION_NOTIFY_CONNECTION. */
void http_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* http_conns.c: on hl's thread, starts the timer that holds hl's
 * connections to their deadlines and sheds them near the cap. */
void http_reap_start(struct http_loop *hl);
/* http_conns.c: on hl's thread, the connections of hl that the drain may
 * not close yet: a request in hand, bytes unread, or an answer or an
 * opening less than idle_ms ago. */
int http_conns_unsettled(struct http_loop *hl, int64_t idle_ms);
/* http_conns.c: the per-address counts' table, and its end. */
void http_conns_init(struct http_server *srv);
void http_conns_cleanup(struct http_server *srv);

/* http_listener.c: stops new handshakes from beginning on listening
 * socket fd (their SYNs dropped; those begun complete); false when the
 * kernel refused the filter. */
bool http_listener_refuse_handshakes(int fd);
/* http_listener.c: how many handshakes are half done on fd's port, over
 * the host (sock_diag); -1 when the kernel does not say. */
int http_listener_half_open(int fd);

#endif
