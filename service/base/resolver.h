/* resolver.h - where a server is, as a numeric address, found off the
 * loops.
 *
 * Connecting to a host name looks it up first (getaddrinfo), and a look-up
 * blocks: on a loop thread it would stall every request of the loop
 * (loop.h) for as long as the name service takes, seconds when it is slow
 * or gone. So a connection made on a loop dials a numeric address that a
 * resolver found beforehand, and never a name.
 *
 * A resolver looks its server up once at start, on the starting thread,
 * and publishes what it found as one immutable record (numeric address,
 * port, generation) through an atomic pointer: a reader copies the record
 * without a lock. A connection that fails asks for another look-up
 * (resolver_forget, which neither blocks nor takes a lock) and goes on
 * with the address it has; a thread of the resolver's own looks again, at
 * most once every gap_ms however many ask, and when the answer differs the
 * generation moves on, so that connections can tell that theirs is to the
 * old address. What it looks up is find's answer: the configured host, or
 * (Redis's Sentinels) whatever a query names. While a look-up learns
 * nothing, the last address found stays published.
 *
 * A server whose address needs no look-up (fixed: a numeric address, a
 * Unix socket path, or a name the client library treats as its own, such
 * as MariaDB's "localhost") is published once as find names it, and no
 * thread is started. Records
 * replaced by newer ones are kept until resolver_stop, since a reader may
 * still be copying one; there is one per change of address, so they are
 * few. */
#ifndef TICKETD_RESOLVER_H
#define TICKETD_RESOLVER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define RESOLVER_HOST_MAX 256

/* One published address. Immutable once published. */
struct resolver_addr {
    char host[RESOLVER_HOST_MAX]; /* numeric address, or as find named a fixed one */
    int port;
    unsigned gen;
    struct resolver_addr *older; /* the one it replaced (kept until resolver_stop) */
};

/* Names the server to look up next: its host (a name, a numeric address
 * or a socket path) and port. Runs at start and on the resolver's thread,
 * where it may block. False when it learnt nothing. */
typedef bool (*resolver_find_fn)(void *arg, char *host, size_t cap, int *port);

/* Tells of an address published (first: the first one), for a log line.
 * May be NULL. */
typedef void (*resolver_published_fn)(void *arg, const char *host, int port, bool first);

struct resolver {
    const char *what; /* "redis", "mysql": in log lines */
    resolver_find_fn find;
    resolver_published_fn published_cb;
    void *arg;
    int gap_ms; /* at most one look-up this often */

    /* The resolver's own. */
    _Atomic(struct resolver_addr *) published;
    bool on; /* its thread runs */
    pthread_t thread;
    sem_t asked;
    atomic_bool wanted;
    atomic_bool stopping;
};

/* The first look-up, on the calling thread (never a loop: it blocks), and
 * the thread that looks again unless fixed (then find's host is published
 * as it is, without a look-up). TD_OK also when the first
 * look-up learnt nothing: the thread keeps trying, and resolver_get says
 * TD_EUNAVAIL meanwhile. */
int resolver_start(struct resolver *r, bool fixed);
/* Stops the thread and frees every record. */
void resolver_stop(struct resolver *r);

/* The published address. TD_EUNAVAIL when none was found yet (and a
 * look-up is asked for). Never blocks. */
int resolver_get(struct resolver *r, char *host, size_t cap, int *port, unsigned *gen);
/* A connection to generation gen failed: look again, unless that address
 * was replaced already (the connection will follow). Never blocks. */
void resolver_forget(struct resolver *r, unsigned gen);
/* Whether a newer address than generation gen is published. */
bool resolver_moved(struct resolver *r, unsigned gen);

/* Whether host is a numeric IPv4 or IPv6 address or a Unix socket path:
 * connecting to it looks nothing up. */
bool resolver_is_fixed(const char *host);
/* host as a numeric address in out (getaddrinfo: blocks, never on a
 * loop); a fixed host is copied as it is. False, logged, when the name
 * does not resolve. */
bool resolver_numeric(const char *what, const char *host, char *out, size_t cap);

#endif
