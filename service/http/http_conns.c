/* http_conns.c - the client connections: each loop's list of its own,
 * the count per client address (shared by the loops), the deadlines a
 * request head and a whole request must meet (slowloris), and the
 * shedding of connections near TICKETD_CONN_LIMIT. Apart from http_exchange.c
 * because it looks at connections, never at requests; it runs on each
 * loop's thread, a timer beside the daemon, so it sees a connection's
 * state exactly as the daemon left it. */
#include "app.h"
#include "http_internal.h"
#include "log.h"
#include "memtrim.h"
#include "metrics.h"
#include "util.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* How often each loop looks for connections past their deadlines, and
 * for the connection count near its cap. */
#define REAP_INTERVAL_MS 100

/* Chains of the per-address counts. */
#define IP_BUCKETS 1024

/* How many connections one client address holds, over every daemon: each
 * daemon (one per loop) would count only its own, and the kernel spreads a
 * client's connections over all of them, so TICKETD_CONN_PER_IP is
 * counted here, under by_ip_mu, and MHD's own limit is off. */
struct ip_count {
    unsigned char addr[16]; /* IPv4 in the first 4 bytes, or IPv6 */
    int count;
    struct ip_count *next;
};

void http_conns_init(struct http_server *srv)
{
    pthread_mutex_init(&srv->by_ip_mu, NULL);
    srv->by_ip = xcalloc(IP_BUCKETS, sizeof *srv->by_ip);
}

void http_conns_cleanup(struct http_server *srv)
{
    if (srv->by_ip == NULL)
        return;
    for (int i = 0; i < IP_BUCKETS; i++) {
        struct ip_count *c = srv->by_ip[i];
        while (c != NULL) {
            struct ip_count *next = c->next;
            free(c);
            c = next;
        }
    }
    free(srv->by_ip);
    srv->by_ip = NULL;
    pthread_mutex_destroy(&srv->by_ip_mu);
}

/* The address bytes of a peer; false for a family without one (a Unix
 * socket: not limited). */
static bool peer_key(const struct sockaddr_storage *ss, unsigned char key[16])
{
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        return true;
    }
    if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
        return true;
    }
    return false;
}

static struct ip_count **ip_bucket(struct http_server *srv, const unsigned char key[16])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return &srv->by_ip[h % IP_BUCKETS];
}

/* Counts one more connection from key; false (nothing counted) when its
 * address already holds TICKETD_CONN_PER_IP. Called with by_ip_mu held. */
static bool ip_take(struct http_server *srv, const unsigned char key[16])
{
    int limit = srv->app->cfg->conn_per_ip;
    struct ip_count **b = ip_bucket(srv, key);
    struct ip_count *c = *b;
    while (c != NULL && memcmp(c->addr, key, 16) != 0)
        c = c->next;
    if (c == NULL) {
        c = xcalloc(1, sizeof *c);
        memcpy(c->addr, key, 16);
        c->next = *b;
        *b = c;
    }
    if (limit > 0 && c->count >= limit)
        return false;
    c->count++;
    return true;
}

/* Called with by_ip_mu held. */
static void ip_give(struct http_server *srv, const unsigned char key[16])
{
    struct ip_count **at = ip_bucket(srv, key);
    while (*at != NULL && memcmp((*at)->addr, key, 16) != 0)
        at = &(*at)->next;
    struct ip_count *c = *at;
    if (c == NULL)
        return;
    if (--c->count == 0) {
        *at = c->next;
        free(c);
    }
}

struct conn_slot *http_slot_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

/* Called by MHD with the request target as it was on the request line,
 * before the query is split off and the path decoded: its length then is
 * where the target really ends, unless a NUL cut it short. */
void *http_uri_logger(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    struct conn_slot *slot = http_slot_of(c);
    if (slot != NULL) {
        slot->uri = uri;
        slot->uri_len = strlen(uri);
    }
    return NULL;
}

/* Shuts the socket down, and marks the slot, so that whatever MHD still
 * reads from it is refused before it changes anything (http_on_request): bytes
 * already in the kernel's buffer are still read after shutdown() on
 * Linux, and a request found there must not commit an order whose answer
 * cannot be written. */
static void cut(struct conn_slot *slot)
{
    shutdown(slot->fd, SHUT_RDWR);
    slot->cut = true;
}

/* A connection from an address that holds its TICKETD_CONN_PER_IP is
 * shut down as soon as it starts: the client sees it closed at once, as
 * with MHD's own limit. Runs on the loop's thread (MHD_run, or the
 * drain's MHD_add_connection), or on the stopping thread once the loop
 * has ended (MHD_stop_daemon). */
void http_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    struct http_loop *hl = cls;
    struct http_server *srv = hl->srv;
    struct conn_slot *slot = *socket_context;
    unsigned char key[16];
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        slot = xcalloc(1, sizeof *slot);
        slot->fd = ci != NULL ? ci->connect_fd : -1;
        if (ai != NULL && ai->client_addr != NULL) {
            size_t n = ai->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                              : sizeof(struct sockaddr_in);
            memcpy(&slot->peer, ai->client_addr, n);
        }
        slot->idle_since_ms = mono_ms();
        if (peer_key(&slot->peer, key)) {
            pthread_mutex_lock(&srv->by_ip_mu);
            slot->counted = ip_take(srv, key);
            pthread_mutex_unlock(&srv->by_ip_mu);
            if (!slot->counted && slot->fd >= 0)
                cut(slot);
        }
        slot->next = hl->conns;
        if (hl->conns != NULL)
            hl->conns->prev = slot;
        hl->conns = slot;
        *socket_context = slot;
        int open = atomic_fetch_add(&srv->connections, 1) + 1;
        atomic_fetch_add(&hl->connections, 1);
        metrics_add(M_HTTP_CONNECTIONS_OPEN, 1);
        memtrim_connections(hl->loop, open);
        return;
    }
    if (slot != NULL) {
        if (slot->counted && peer_key(&slot->peer, key)) {
            pthread_mutex_lock(&srv->by_ip_mu);
            ip_give(srv, key);
            pthread_mutex_unlock(&srv->by_ip_mu);
        }
        if (slot->prev != NULL)
            slot->prev->next = slot->next;
        else
            hl->conns = slot->next;
        if (slot->next != NULL)
            slot->next->prev = slot->prev;
        free(slot);
        *socket_context = NULL;
    }
    int open = atomic_fetch_sub(&srv->connections, 1) - 1;
    atomic_fetch_sub(&hl->connections, 1);
    /* A trim this close calls for is queued before the gauge says the
     * connection is gone (memtrim.h). */
    memtrim_connections(hl->loop, open);
    metrics_add(M_HTTP_CONNECTIONS_OPEN, -1);
    /* While draining, a listener left alone at the daemon's limit
     * (accept_queued in http_drain.c) may accept again. */
    if (hl->listen_fd >= 0 && loop_self() == hl->loop)
        loop_io_change(hl->loop, &hl->listen_io, LOOP_READ);
}

/* Bytes the client sent that MHD has not read yet: a request arriving. */
static int unread(const struct conn_slot *c)
{
    int n = 0;
    if (c->fd < 0 || ioctl(c->fd, FIONREAD, &n) != 0)
        return 0;
    return n;
}

/* Slowloris: a client that opens connections and sends its request a
 * byte at a time keeps each alive forever, since MHD's timeout is an idle
 * timeout. Here a connection must complete a request head within
 * TICKETD_HEADER_TIMEOUT_S, and the whole request, head and body, within
 * TICKETD_REQUEST_TIMEOUT_S, of being opened or of its last answer;
 * otherwise its socket is shut down, and MHD closes it. A request that is
 * whole is never cut off: it is being answered. */
enum reap_reason { KEEP, LATE_HEAD, LATE_REQUEST };

static enum reap_reason reap_reason_of(const struct conn_slot *c, int64_t now,
                                       const struct config *cfg)
{
    int64_t age = now - c->idle_since_ms;
    if (!c->busy)
        return age >= (int64_t)cfg->header_timeout_s * 1000 ? LATE_HEAD : KEEP;
    if (!c->body_done)
        return age >= (int64_t)cfg->request_timeout_s * 1000 ? LATE_REQUEST : KEEP;
    return KEEP;
}

/* A connection that may be shed: no whole request in hand (an idle
 * keep-alive connection, or a head or body still arriving), and, when no
 * head has arrived, nothing in the kernel's buffer either: bytes there may
 * be a whole request that MHD reads in its next run. */
static bool sheddable(const struct conn_slot *c)
{
    if (c->cut || c->fd < 0 || c->body_done)
        return false;
    return c->busy || unread(c) == 0;
}

static int by_idle_since(const void *a, const void *b)
{
    int64_t x = (*(struct conn_slot *const *)a)->idle_since_ms;
    int64_t y = (*(struct conn_slot *const *)b)->idle_since_ms;
    return (x > y) - (x < y);
}

/* At the connection cap, libmicrohttpd stops accepting, and every new
 * client, however quick, waits behind whoever holds the slots: slow heads
 * and bodies from many addresses that reopen as they are closed can keep
 * the cap reached for good. So once the open connections come within
 * 1/16 of the daemon's share of TICKETD_CONN_LIMIT, those without a whole
 * request in hand are shut down, the longest without one first (idle
 * keep-alive connections, then the slowest requests), until a quarter of
 * the slots is free. A new client's connection is the newest: it is
 * served before its turn comes. A connection whose request is whole, being
 * answered or its answer being sent, is never shed: its order may be
 * committed. Each daemon (one per loop) has its share of the cap and its
 * own accept queue, so this is done per daemon, on its loop. Returns how
 * many were shed. */
static int shed_at_cap(struct http_loop *hl, int open)
{
    int cap = hl->conn_limit;
    int high = cap - (cap / 16 > 0 ? cap / 16 : 1), low = cap - (cap / 4 > 0 ? cap / 4 : 1);
    if (open < high)
        return 0;
    struct conn_slot **v = xcalloc((size_t)open + 1, sizeof *v);
    int n = 0;
    for (struct conn_slot *c = hl->conns; c != NULL && n <= open; c = c->next) {
        if (sheddable(c))
            v[n++] = c;
    }
    qsort(v, (size_t)n, sizeof *v, by_idle_since);
    int shed = 0;
    for (; shed < n && open - shed > low; shed++)
        cut(v[shed]);
    free(v);
    return shed;
}

/* One pass over the loop's connections, between two runs of its daemon:
 * the deadlines first, then the shedding. */
static void reap(void *arg)
{
    struct http_loop *hl = arg;
    const struct config *cfg = hl->srv->app->cfg;
    int64_t now = mono_ms();
    int late[3] = {0}, open = 0;
    for (struct conn_slot *c = hl->conns; c != NULL; c = c->next) {
        if (c->cut || c->fd < 0)
            continue;
        enum reap_reason why = reap_reason_of(c, now, cfg);
        if (why == KEEP) {
            open++;
            continue;
        }
        cut(c);
        late[why]++;
    }
    int shed = shed_at_cap(hl, open);
    if (late[LATE_HEAD] > 0) {
        metrics_add(M_HTTP_HEAD_TIMEOUTS, late[LATE_HEAD]);
        log_info("http: closed %d connections that sent no whole request head in %d s",
                 late[LATE_HEAD], cfg->header_timeout_s);
    }
    if (late[LATE_REQUEST] > 0) {
        metrics_add(M_HTTP_REQUEST_TIMEOUTS, late[LATE_REQUEST]);
        log_info("http: closed %d connections that sent no whole request in %d s",
                 late[LATE_REQUEST], cfg->request_timeout_s);
    }
    if (shed > 0) {
        metrics_add(M_HTTP_CONNECTIONS_SHED, shed);
        log_info("http: loop %d near its cap of %d connections, closed the %d longest without "
                 "a whole request",
                 hl->index, hl->conn_limit, shed);
    }
    http_reap_start(hl);
}

void http_reap_start(struct http_loop *hl)
{
    loop_timer_start(hl->loop, &hl->reap_timer, REAP_INTERVAL_MS, reap, hl);
}

int http_conns_unsettled(struct http_loop *hl, int64_t idle_ms)
{
    int64_t now = mono_ms();
    int n = 0;
    for (struct conn_slot *c = hl->conns; c != NULL; c = c->next) {
        if (c->busy || now - c->idle_since_ms < idle_ms || unread(c) > 0)
            n++;
    }
    return n;
}
