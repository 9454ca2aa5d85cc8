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
 * The look-ups, the thread and the published records are resolver.h's;
 * this file says what is looked up. A numeric host (and a Unix socket
 * path) without Sentinel is published once at start, with no thread. */
#include "redis_conn.h"

#include "err.h"
#include "log.h"
#include "loop.h"
#include "resolver.h"
#include "sentinel.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

/* The resolver asks the Sentinels at most this often: every connection of
 * every loop that breaks asks for a look-up, and one look-up answers
 * them all. The Redis breaker's cooldown (redis.c). */
#define LOOKUP_GAP_MS 500

static const struct config *cfg;
static bool use_sentinel;
static struct sentinel_list sentinels;
static int preferred_sentinel; /* the resolver's: the one that answered last */

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

/* What the resolver looks up (resolver.h): the primary the Sentinels
 * name, the one that answered last asked first, then the others
 * (sentinel_pick), at most one connect and one command timeout each; or
 * the configured host. */
static bool find_primary(void *arg, char *host, size_t cap, int *port)
{
    (void)arg;
    if (!use_sentinel) {
        snprintf(host, cap, "%s", cfg->redis_host);
        *port = cfg->redis_port;
        return true;
    }
    struct sentinel_addr found;
    int idx;
    for (int a = 0; (idx = sentinel_pick(preferred_sentinel, a, sentinels.n)) >= 0; a++) {
        if (!ask_sentinel(&sentinels.a[idx], &found))
            continue;
        preferred_sentinel = idx;
        snprintf(host, cap, "%s", found.host);
        *port = found.port;
        return true;
    }
    log_warn("redis: no Sentinel named the primary '%s'", cfg->redis_master);
    return false;
}

static void primary_published(void *arg, const char *host, int port, bool first)
{
    (void)arg;
    if (use_sentinel)
        log_info("redis: the Sentinels name %s:%d as primary '%s'", host, port, cfg->redis_master);
    else if (!first)
        log_info("redis: %s now is %s", cfg->redis_host, host);
}

static struct resolver primary = {
    .what = "redis",
    .find = find_primary,
    .published_cb = primary_published,
    .gap_ms = LOOKUP_GAP_MS,
};

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
    return resolver_start(&primary, !use_sentinel && resolver_is_fixed(cfg->redis_host));
}

void redis_addr_cleanup(void)
{
    resolver_stop(&primary);
}

bool redis_sentinel_on(void)
{
    return use_sentinel;
}

int redis_primary(char *host, size_t cap, int *port, unsigned *gen)
{
    return resolver_get(&primary, host, cap, port, gen);
}

void redis_forget_primary(unsigned gen)
{
    resolver_forget(&primary, gen);
}

bool redis_primary_moved(unsigned gen)
{
    return resolver_moved(&primary, gen);
}
