/* resolver.c - a server's numeric address, looked up off the loops
 * (resolver.h). */
#include "resolver.h"

#include "err.h"
#include "log.h"
#include "loop.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

bool resolver_is_fixed(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return host[0] == '/' || inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

bool resolver_numeric(const char *what, const char *host, char *out, size_t cap)
{
    if (resolver_is_fixed(host)) {
        snprintf(out, cap, "%s", host);
        return true;
    }
    LOOP_MUST_NOT_BLOCK("getaddrinfo");
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        log_warn("%s: cannot look up '%s': %s", what, host, gai_strerror(rc));
        return false;
    }
    /* An IPv4 address first when the name has both: a name such as
     * localhost lists ::1 first, and servers often listen on IPv4 alone
     * (MariaDB's packaged bind-address is 127.0.0.1). */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    }
    const void *a = pick->ai_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)pick->ai_addr)->sin_addr;
    bool ok = inet_ntop(pick->ai_family, a, out, (socklen_t)cap) != NULL;
    freeaddrinfo(res);
    return ok;
}

/* Publishes host:port when it differs from what is published: a new
 * generation. Only the resolver's thread (or the start) writes. */
static void publish(struct resolver *r, const char *host, int port)
{
    struct resolver_addr *cur = atomic_load(&r->published);
    if (cur != NULL && strcmp(cur->host, host) == 0 && cur->port == port)
        return;
    struct resolver_addr *p = xcalloc(1, sizeof *p);
    snprintf(p->host, sizeof p->host, "%s", host);
    p->port = port;
    p->gen = cur != NULL ? cur->gen + 1 : 1;
    p->older = cur;
    atomic_store(&r->published, p);
    if (r->published_cb != NULL)
        r->published_cb(r->arg, host, port, cur == NULL);
}

/* One look-up: find's answer as a numeric address (as it is when fixed).
 * False when nothing was learnt (what is published stays). */
static bool look_up(struct resolver *r, bool fixed)
{
    char host[RESOLVER_HOST_MAX], numeric[RESOLVER_HOST_MAX];
    int port = 0;
    if (!r->find(r->arg, host, sizeof host, &port))
        return false;
    if (fixed)
        snprintf(numeric, sizeof numeric, "%s", host);
    else if (!resolver_numeric(r->what, host, numeric, sizeof numeric))
        return false;
    publish(r, numeric, port);
    return true;
}

/* Waits on the semaphore until ms have passed or it is posted (ms < 0:
 * no limit). */
static void wait_asked(struct resolver *r, int64_t ms)
{
    if (ms < 0) {
        while (sem_wait(&r->asked) != 0 && errno == EINTR)
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
    while (sem_timedwait(&r->asked, &ts) != 0 && errno == EINTR)
        ;
}

/* The resolver's thread: one look-up per request for one (requests that
 * arrive meanwhile are answered by the next), at most one every gap_ms. A
 * look-up that learnt nothing is not repeated on its own: the next
 * connection that fails asks again, so that a name service that stays
 * down costs a look-up per failed call of the caller's breaker (its
 * probes), and nothing while no call is made. */
static void *resolver_main(void *arg)
{
    struct resolver *r = arg;
    int64_t last = 0;
    while (!atomic_load(&r->stopping)) {
        if (!atomic_load(&r->wanted)) {
            wait_asked(r, -1);
            continue;
        }
        int64_t gap = last + r->gap_ms - mono_ms();
        if (last != 0 && gap > 0) {
            wait_asked(r, gap);
            continue;
        }
        atomic_store(&r->wanted, false);
        last = mono_ms();
        (void)look_up(r, false);
    }
    return NULL;
}

int resolver_start(struct resolver *r, bool fixed)
{
    atomic_store(&r->published, NULL);
    r->on = false;
    /* The first look-up on the starting thread (no loop runs yet): the
     * loops begin with an address whenever one can be had. */
    bool found = look_up(r, fixed);
    if (fixed)
        return found ? TD_OK : TD_EINVAL; /* nothing to look up again, ever */
    atomic_store(&r->wanted, !found);
    atomic_store(&r->stopping, false);
    if (sem_init(&r->asked, 0, 0) != 0)
        return TD_EINTERNAL;
    if (pthread_create(&r->thread, NULL, resolver_main, r) != 0) {
        log_error("%s: cannot start the resolver thread", r->what);
        sem_destroy(&r->asked);
        return TD_EINTERNAL;
    }
    r->on = true;
    if (!found)
        sem_post(&r->asked);
    return TD_OK;
}

void resolver_stop(struct resolver *r)
{
    if (r->on) {
        atomic_store(&r->stopping, true);
        sem_post(&r->asked);
        pthread_join(r->thread, NULL);
        sem_destroy(&r->asked);
        r->on = false;
    }
    struct resolver_addr *p = atomic_exchange(&r->published, NULL);
    while (p != NULL) {
        struct resolver_addr *older = p->older;
        free(p);
        p = older;
    }
}

void resolver_forget(struct resolver *r, unsigned gen)
{
    if (!r->on)
        return;
    struct resolver_addr *p = atomic_load(&r->published);
    if (p != NULL && p->gen != gen)
        return; /* already replaced: the connection will follow */
    if (!atomic_exchange(&r->wanted, true))
        sem_post(&r->asked);
}

int resolver_get(struct resolver *r, char *host, size_t cap, int *port, unsigned *gen)
{
    struct resolver_addr *p = atomic_load(&r->published);
    if (p == NULL) {
        resolver_forget(r, 0);
        return TD_EUNAVAIL;
    }
    snprintf(host, cap, "%s", p->host);
    *port = p->port;
    *gen = p->gen;
    return TD_OK;
}

bool resolver_moved(struct resolver *r, unsigned gen)
{
    struct resolver_addr *p = atomic_load(&r->published);
    return p != NULL && p->gen != gen;
}

#ifdef TICKETD_FAULTS
#include <dlfcn.h>

/* In the test builds (loop.h), every name look-up the process makes,
 * ticketd's own and its client libraries' (Connector/C and hiredis look a
 * host up inside their connects), comes through here first: a name looked
 * up on a loop thread aborts, naming getaddrinfo, so a test that drives a
 * connect on a loop finds a look-up that would block it. A numeric address
 * looks nothing up and passes. */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    static _Atomic(void *) next; /* libc's (or the sanitizer's), found once */
    if (node != NULL && !resolver_is_fixed(node))
        LOOP_MUST_NOT_BLOCK("getaddrinfo");
    void *fn = atomic_load(&next);
    if (fn == NULL) {
        fn = dlsym(RTLD_NEXT, "getaddrinfo");
        atomic_store(&next, fn);
    }
    gai_fn real;
    memcpy(&real, &fn, sizeof real);
    return real(node, service, hints, res);
}
#endif
