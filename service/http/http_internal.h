/* http_internal.h - what http.c, http_head.c and http_conns.c share and
 * nothing outside service/http/ may see: the server, a connection's slot,
 * a request's exchange, and the helpers one file defines for another. */
#ifndef TICKETD_HTTP_INTERNAL_H
#define TICKETD_HTTP_INTERNAL_H

#include "body.h"
#include "req.h"
#include "resp.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;
struct workers;

/* One client connection, from MHD's "started" to its "closed" notice. The
 * reaper reads it under conns_mu; MHD closes the socket only after the
 * "closed" notice, which takes the same mutex, so fd is always this
 * connection's while the slot is listed. */
struct conn_slot {
    int fd;
    const char *uri; /* the request target as MHD first saw it (http_uri_logger) */
    size_t uri_len;
    _Atomic bool busy;             /* a request's head has arrived */
    _Atomic bool body_done;        /* ... and its body: it is being answered */
    _Atomic int64_t idle_since_ms; /* opened, or its last answer sent */
    bool reaped;                   /* shut down for a late head */
    struct conn_slot *prev, *next;
};

struct http_server {
    struct MHD_Daemon *daemon;
    struct app *app;
    _Atomic int inflight;    /* requests read and not yet fully answered */
    _Atomic int connections; /* open client connections */
    _Atomic int64_t last_request_ms;
    atomic_bool stopping; /* the connections are about to be closed */

    struct workers *workers;  /* the blocking part of requests */
    pthread_mutex_t conns_mu; /* guards the list of slots */
    struct conn_slot *conns;
    pthread_t reaper;
    atomic_bool reaper_stop;
    bool reaper_started;
};

/* Per-request state, created on the first access-handler call and freed
 * only in the completed callback: the one hook MHD runs even when the
 * client goes away mid-request. */
#define TRIMMED_MAX 8

struct exchange {
    struct http_server *srv;
    struct conn_slot *slot;     /* the connection's, for the head deadline */
    char *trimmed[TRIMMED_MAX]; /* header values without trailing blanks */
    int ntrimmed;
    struct req req;
    struct resp resp;
    struct body body;
    int64_t start_ns;
    char request_id[72];
    bool too_large; /* the body outgrew the limit; keep discarding it */
    bool queued;
    /* The blocking step on a worker (see hand_to_worker): the connection
     * is suspended meanwhile and resumed with the answer ready. */
    struct MHD_Connection *conn;
    _Atomic int phase; /* enum worker_phase */
};

/* Where a request handed to a worker is. The worker moves it to DONE;
 * whoever finds the other side already past its step does the resume. */
enum worker_phase {
    PHASE_NONE,      /* not handed to a worker */
    PHASE_AT_WORKER, /* queued or running; the connection is not suspended */
    PHASE_SUSPENDED, /* still running; the connection is suspended */
    PHASE_DONE,      /* the answer is in x->resp */
};

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
/* http_conns.c: the reaper thread (deadlines and shedding). */
void *http_reaper_main(void *p);

#endif
