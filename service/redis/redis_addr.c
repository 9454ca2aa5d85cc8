/* redis_addr.c - where the Redis primary is (redis_conn.h), found off the
 * loops. Both paths (redis.c, redis_async.c) dial the address published
 * here, and neither ever waits to learn it.
 *
 * The address is TICKETD_REDIS_HOST/PORT, or with TICKETD_REDIS_SENTINELS
 * the primary a Sentinel names. Asking a Sentinel is a blocking connect
 * and command, and looking a host name up is getaddrinfo, which blocks
 * too: on a loop thread either would stall every request of the loop
 * (loop.h), and a paused Sentinel stalls it for a timeout per Sentinel.
 * So a thread of its own, the resolver, does both, and publishes what it
 * found as one immutable record (numeric address, port, generation)
 * through an atomic pointer: a reader takes the pointer and copies the
 * record, without a lock. A connection that fails (a link cut, a command
 * timed out, READONLY, ROLE not master) asks for a new look-up and goes
 * on with the address it has: the resolver asks the Sentinels meanwhile,
 * and when one names another server the generation moves on, so that
 * every connection to the old one is dropped at its next command. While
 * no Sentinel answers, the last address found stays published: the
 * primary most likely is still there (ROLE tells the connection if it is
 * not), and a call that cannot reach it fails within the Redis timeout as
 * any other. Before any Sentinel answered there is no address, and every
 * call fails at once.
 *
 * A numeric host (and a Unix socket path) without Sentinel needs no
 * resolver: it is published once at start. Records replaced by a newer
 * one are kept until redis_addr_cleanup, since a reader may still be
 * copying one; there is one per change of address, so they are few. */
#include "redis_conn.h"

#include "err.h"
#include "log.h"
#include "loop.h"
#include "sentinel.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* The resolver asks the Sentinels at most this often: every connection of
 * every loop that breaks asks for a look-up, and one look-up answers
 * them all. The Redis breaker's cooldown (redis.c). */
#define LOOKUP_GAP_MS 500

/* One published address. Immutable once published. */
struct primary_addr {
    char host[SENTINEL_HOST_MAX]; /* numeric address, or a Unix socket path */
    int port;
    unsigned gen;
    struct primary_addr *older; /* the one it replaced (kept until cleanup) */
};

static const struct config *cfg;
static bool use_sentinel;
static struct sentinel_list sentinels;
static int preferred_sentinel; /* the resolver's: the one that answered last */

static _Atomic(struct primary_addr *) published;

/* The resolver thread, when there is one: asked through a semaphore
 * (sem_post neither blocks nor takes a lock) with the flag wanted. */
static bool resolver_on;
static pthread_t resolver;
static sem_t asked;
static atomic_bool wanted;
static atomic_bool stopping;

/* --- the look-up, on the resolver's thread (or at start) ------------------ */

/* host as a numeric address in out, looking a name up (blocking: never on
 * a loop). A Unix socket path is kept as it is. */
static bool numeric_host(const char *host, char *out, size_t cap)
{
    if (host[0] == '/') {
        snprintf(out, cap, "%s", host);
        return true;
    }
    LOOP_MUST_NOT_BLOCK("getaddrinfo");
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        log_warn("redis: cannot look up '%s': %s", host, gai_strerror(rc));
        return false;
    }
    const void *a = res->ai_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
    bool ok = inet_ntop(res->ai_family, a, out, (socklen_t)cap) != NULL;
    freeaddrinfo(res);
    return ok;
}

/* A numeric address or a Unix socket path: connecting to it looks
 * nothing up. */
static bool is_numeric(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return host[0] == '/' || inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* Asks one Sentinel for the primary's address: a blocking connect and
 * command, each bounded by TICKETD_REDIS_TIMEOUT_MS. */
static bool ask_sentinel(const struct sentinel_addr *s, struct sentinel_addr *out)
{
    LOOP_MUST_NOT_BLOCK("the Sentinel query");
    struct timeval tv = ms_to_tv(cfg->redis_timeout_ms);
    redisContext *ctx = redisConnectWithTimeout(s->host, s->port, tv);
    bool ok = false;
    if (ctx == NULL || ctx->err) {
        log_warn("redis: Sentinel %s:%d: %s", s->host, s->port,
                 ctx ? ctx->errstr : "out of memory");
        goto out;
    }
    redisSetTimeout(ctx, tv);
    redisReply *r = redisCommand(ctx, "SENTINEL get-master-addr-by-name %s", cfg->redis_master);
    if (r == NULL) {
        log_warn("redis: Sentinel %s:%d: %s", s->host, s->port, ctx->errstr);
        goto out;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING)
        ok = sentinel_read_master(r->element[0]->str, r->element[1]->str, out);
    if (!ok)
        log_warn("redis: Sentinel %s:%d does not know a primary named '%s'", s->host, s->port,
                 cfg->redis_master);
    freeReplyObject(r);
out:
    if (ctx != NULL)
        redisFree(ctx);
    return ok;
}

/* The Sentinels, the one that answered last first, then the others
 * (sentinel_pick): at most one connect and one command timeout each. */
static bool ask_sentinels(struct sentinel_addr *found)
{
    int idx;
    for (int a = 0; (idx = sentinel_pick(preferred_sentinel, a, sentinels.n)) >= 0; a++) {
        if (!ask_sentinel(&sentinels.a[idx], found))
            continue;
        preferred_sentinel = idx;
        return true;
    }
    log_warn("redis: no Sentinel named the primary '%s'", cfg->redis_master);
    return false;
}

/* Publishes host:port when it differs from what is published: a new
 * generation. Only the resolver (or the start) writes. */
static void publish(const char *host, int port)
{
    struct primary_addr *cur = atomic_load(&published);
    if (cur != NULL && strcmp(cur->host, host) == 0 && cur->port == port)
        return;
    struct primary_addr *p = xcalloc(1, sizeof *p);
    snprintf(p->host, sizeof p->host, "%s", host);
    p->port = port;
    p->gen = cur != NULL ? cur->gen + 1 : 1;
    p->older = cur;
    if (use_sentinel)
        log_info("redis: the Sentinels name %s:%d as primary '%s'", host, port, cfg->redis_master);
    else if (cur != NULL)
        log_info("redis: %s now is %s", cfg->redis_host, host);
    atomic_store(&published, p);
}

/* One look-up: the Sentinels' answer or the configured host, as a
 * numeric address. False when nothing was learnt (what is published
 * stays). */
static bool look_up(void)
{
    struct sentinel_addr found;
    char numeric[SENTINEL_HOST_MAX];
    if (use_sentinel) {
        if (!ask_sentinels(&found))
            return false;
    } else {
        snprintf(found.host, sizeof found.host, "%s", cfg->redis_host);
        found.port = cfg->redis_port;
    }
    if (!numeric_host(found.host, numeric, sizeof numeric))
        return false;
    publish(numeric, found.port);
    return true;
}

/* Waits on the semaphore until ms have passed or it is posted (ms < 0:
 * no limit). */
static void wait_asked(int64_t ms)
{
    if (ms < 0) {
        while (sem_wait(&asked) != 0 && errno == EINTR)
            ;
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    while (sem_timedwait(&asked, &ts) != 0 && errno == EINTR)
        ;
}

/* The resolver: one look-up per request for one (requests that arrive
 * meanwhile are answered by the next), at most one every LOOKUP_GAP_MS. A
 * look-up that learnt nothing is not repeated on its own: the next
 * connection that fails asks again, so that Sentinels that stay down cost
 * a look-up per failed call of the breaker (its probes), and nothing
 * while no call is made. */
static void *resolver_main(void *arg)
{
    (void)arg;
    int64_t last = 0;
    while (!atomic_load(&stopping)) {
        if (!atomic_load(&wanted)) {
            wait_asked(-1);
            continue;
        }
        int64_t gap = last + LOOKUP_GAP_MS - mono_ms();
        if (last != 0 && gap > 0) {
            wait_asked(gap);
            continue;
        }
        atomic_store(&wanted, false);
        last = mono_ms();
        (void)look_up();
    }
    return NULL;
}

/* --- what the connections call -------------------------------------------- */

int redis_addr_init(const struct config *config)
{
    cfg = config;
    use_sentinel = false;
    if (cfg->redis_sentinels != NULL && cfg->redis_sentinels[0] != '\0') {
        char why[160];
        if (!sentinel_parse(cfg->redis_sentinels, &sentinels, why, sizeof why)) {
            log_error("redis: TICKETD_REDIS_SENTINELS: %s", why);
            return TD_EINVAL;
        }
        use_sentinel = true;
        log_info("redis: following primary '%s' through %d Sentinel(s)", cfg->redis_master,
                 sentinels.n);
    }
    /* The first look-up at start, on the starting thread (no loop runs
     * yet): the loops begin with an address whenever one can be had. */
    bool found = look_up();
    if (!use_sentinel && is_numeric(cfg->redis_host))
        return TD_OK; /* nothing to look up again, ever */
    atomic_store(&wanted, !found);
    atomic_store(&stopping, false);
    if (sem_init(&asked, 0, 0) != 0)
        return TD_EINTERNAL;
    if (pthread_create(&resolver, NULL, resolver_main, NULL) != 0) {
        log_error("redis: cannot start the resolver thread");
        sem_destroy(&asked);
        return TD_EINTERNAL;
    }
    resolver_on = true;
    if (!found)
        sem_post(&asked);
    return TD_OK;
}

void redis_addr_cleanup(void)
{
    if (resolver_on) {
        atomic_store(&stopping, true);
        sem_post(&asked);
        pthread_join(resolver, NULL);
        sem_destroy(&asked);
        resolver_on = false;
    }
    struct primary_addr *p = atomic_exchange(&published, NULL);
    while (p != NULL) {
        struct primary_addr *older = p->older;
        free(p);
        p = older;
    }
}

bool redis_sentinel_on(void)
{
    return use_sentinel;
}

int redis_primary(char *host, size_t cap, int *port, unsigned *gen)
{
    struct primary_addr *p = atomic_load(&published);
    if (p == NULL) {
        redis_forget_primary(0);
        return TD_EUNAVAIL;
    }
    snprintf(host, cap, "%s", p->host);
    *port = p->port;
    *gen = p->gen;
    return TD_OK;
}

void redis_forget_primary(unsigned gen)
{
    if (!resolver_on)
        return;
    struct primary_addr *p = atomic_load(&published);
    if (p != NULL && p->gen != gen)
        return; /* already replaced: the connection will follow */
    if (!atomic_exchange(&wanted, true))
        sem_post(&asked);
}

bool redis_primary_moved(unsigned gen)
{
    struct primary_addr *p = atomic_load(&published);
    return p != NULL && p->gen != gen;
}
