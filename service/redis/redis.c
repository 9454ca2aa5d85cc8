/* redis.c - Redis commands with timeouts, the shared breaker and scripts
 * by SHA1 (redis.h); on a fiber they go through the loop's connection
 * (redis_async.c). Apart so that the Redis adapters share one way to call. */
#include "redis.h"

#include "redis_conn.h"

#include "breaker.h"
#include "err.h"
#include "fiber.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "sentinel.h"
#include "util.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* After a failure every caller leaves Redis alone this long, then one
 * probe finds out whether it is back (breaker.h). */
#define REDIS_COOLDOWN_MS 500

struct redis_conn {
    redisContext *ctx;
    unsigned gen;     /* the primary address generation ctx was opened to */
    bool used;        /* the context has answered at least once */
    bool peer_closed; /* the last failure was the server closing on us */
};

static const struct config *cfg;
static pthread_key_t conn_key;
static struct breaker health = BREAKER_INIT("redis", REDIS_COOLDOWN_MS);

/* The link failed: open the breaker (counted when this opened it). */
static void trip(enum breaker_pass pass)
{
    if (breaker_failure(&health, pass, mono_ms()))
        metrics_inc(M_BREAKER_OPENED_REDIS);
}

enum breaker_pass redis_breaker_ask(void)
{
    return breaker_ask(&health, mono_ms());
}

void redis_breaker_report(enum breaker_pass pass, bool reached)
{
    if (reached)
        breaker_success(&health, pass);
    else
        trip(pass);
}

const struct config *redis_config(void)
{
    return cfg;
}

static void conn_destroy(void *p)
{
    struct redis_conn *c = p;
    if (c == NULL)
        return;
    if (c->ctx != NULL)
        redisFree(c->ctx);
    free(c);
}

int redis_conn_init(const struct config *config)
{
    cfg = config;
    int rc = redis_addr_init(cfg);
    if (rc != TD_OK)
        return rc;
    if (pthread_key_create(&conn_key, conn_destroy) != 0)
        return TD_EINTERNAL;
    return TD_OK;
}

void redis_thread_release(void)
{
    conn_destroy(pthread_getspecific(conn_key));
    pthread_setspecific(conn_key, NULL);
}

void redis_conn_cleanup(void)
{
    redis_thread_release();
    pthread_key_delete(conn_key);
    redis_addr_cleanup();
}

void redis_script_prepare(struct redis_script *s)
{
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)s->source, strlen(s->source), md);
    hex_encode(md, sizeof md, s->sha);
    if (s->fold != NULL)
        redis_script_prepare(s->fold);
}

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* The context cannot be trusted any more: a hiredis context that saw an
 * error must not be used again. */
static void drop(struct redis_conn *c, const char *why)
{
    metrics_inc(M_DEP_ERRORS_REDIS);
    log_warn("redis: %s", why);
    if (c->ctx != NULL) {
        redisFree(c->ctx);
        c->ctx = NULL;
    }
    /* The primary may have moved: the resolver looks again (redis_addr.c),
     * and the next connection dials what it has published by then. */
    redis_forget_primary(c->gen);
}

/* A Sentinel's answer may lag a failover by a moment: before ticketd
 * writes to the server it was given, the server must say it is the
 * primary. */
bool redis_role_is_master(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
           r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
}

static bool is_primary(redisContext *ctx)
{
    redisReply *r = redisCommand(ctx, "ROLE");
    bool ok = redis_role_is_master(r);
    freeReplyObject(r);
    return ok;
}

static struct redis_conn *thread_conn(void)
{
    return xthread_object(conn_key, sizeof(struct redis_conn));
}

static int get_conn(struct redis_conn **out)
{
    struct redis_conn *c = thread_conn();
    *out = NULL;
    if (c->ctx != NULL && redis_primary_moved(c->gen)) {
        /* Opened to a server that is no longer the primary. */
        redisFree(c->ctx);
        c->ctx = NULL;
        c->used = false;
    }
    if (c->ctx == NULL) {
        struct timeval tv = ms_to_tv(cfg->redis_timeout_ms);
        char host[SENTINEL_HOST_MAX];
        int port;
        if (redis_primary(host, sizeof host, &port, &c->gen) != TD_OK) {
            metrics_inc(M_DEP_ERRORS_REDIS);
            log_warn("redis: the primary's address is not known yet");
            return TD_EUNAVAIL;
        }
        /* A host that is a path is a Unix socket: for a Redis on the same
         * machine it carries each command for less CPU on both sides than
         * TCP over loopback (docs/speed.md), and keepalive means nothing. */
        bool unix_socket = host[0] == '/';
        c->ctx = unix_socket ? redisConnectUnixWithTimeout(host, tv)
                             : redisConnectWithTimeout(host, port, tv);
        if (c->ctx == NULL || c->ctx->err) {
            char why[SENTINEL_HOST_MAX + 256];
            snprintf(why, sizeof why, "connect to %s:%d failed: %s", host, port,
                     c->ctx ? c->ctx->errstr : "out of memory");
            drop(c, why);
            return TD_EUNAVAIL;
        }
        if (redisSetTimeout(c->ctx, tv) != REDIS_OK ||
            (!unix_socket && redisEnableKeepAlive(c->ctx) != REDIS_OK)) {
            drop(c, "cannot set socket options");
            return TD_EUNAVAIL;
        }
        if (redis_sentinel_on() && !is_primary(c->ctx)) {
            char why[SENTINEL_HOST_MAX + 256];
            snprintf(why, sizeof why, "%s:%d does not answer ROLE master; asking a Sentinel again",
                     host, port);
            drop(c, why);
            return TD_EUNAVAIL;
        }
    }
    *out = c;
    return TD_OK;
}

/* Errors Redis gives while it cannot serve (starting, replica without a
 * master, script stuck) mean "unavailable", not "bug". */
static bool transient_error(const char *msg)
{
    return strncmp(msg, "LOADING", 7) == 0 || strncmp(msg, "BUSY", 4) == 0 ||
           strncmp(msg, "MASTERDOWN", 10) == 0 || strncmp(msg, "TRYAGAIN", 8) == 0 ||
           strncmp(msg, "CLUSTERDOWN", 11) == 0 || strncmp(msg, "READONLY", 8) == 0;
}

/* The link broke while command name waited for its reply: notes whether
 * the server closed it (peer_closed) and drops the context. */
static void link_broke(struct redis_conn *c, const char *name)
{
    char why[160];
    c->peer_closed = c->ctx->err == REDIS_ERR_EOF ||
                     (c->ctx->err == REDIS_ERR_IO && (strstr(c->ctx->errstr, "reset") != NULL ||
                                                      strstr(c->ctx->errstr, "pipe") != NULL));
    snprintf(why, sizeof why, "%s failed: %s", name, c->ctx->errstr);
    drop(c, why);
}

int redis_error_rc(const char *name, const char *msg, bool *readonly)
{
    *readonly = false;
    if (strncmp(msg, "NOSCRIPT", 8) == 0)
        return TD_ENOTFOUND; /* redis_eval retries with EVAL */
    if (strncmp(msg, "READONLY", 8) == 0) {
        /* A demoted primary (a failover happened): the connection goes,
         * and with Sentinel the next one asks where the primary is now. */
        *readonly = true;
        return TD_EUNAVAIL;
    }
    metrics_inc(M_DEP_ERRORS_REDIS);
    if (transient_error(msg)) {
        log_warn("redis: %s: %s", name, msg);
        return TD_EUNAVAIL;
    }
    log_error("redis: %s: %s", name, msg);
    return TD_EINTERNAL;
}

/* What a reply r to command name means: TD_OK with r in *reply, or r
 * freed and redis_error_rc's answer (READONLY drops the context). */
static int take_reply(struct redis_conn *c, const char *name, redisReply *r, redisReply **reply)
{
    if (r->type == REDIS_REPLY_ERROR) {
        bool readonly;
        int rc = redis_error_rc(name, r->str, &readonly);
        if (readonly) {
            char why[160];
            snprintf(why, sizeof why, "%s: %.100s", name, r->str);
            c->peer_closed = false;
            drop(c, why);
        }
        freeReplyObject(r);
        return rc;
    }
    c->used = true;
    *reply = r;
    return TD_OK;
}

bool redis_cmd_set(struct redis_cmd *cmd, int argc, const char **argv, const size_t *lens)
{
    *cmd = (struct redis_cmd){.argc = argc, .argv = argv, .rc = TD_EINTERNAL};
    if (argc > REDIS_MAX_ARGS)
        return false;
    for (int i = 0; i < argc; i++)
        cmd->lens[i] = lens != NULL ? lens[i] : strlen(argv[i]);
    return true;
}

static void fail_from(struct redis_cmd *const *cmds, int from, int k, int rc)
{
    for (int i = from; i < k; i++)
        cmds[i]->rc = rc;
}

/* Sends cmds[0..k) on c in one write and reads their replies in order.
 * Returns how many replies were read before the link broke (k when it
 * did not). */
static int send_and_read(struct redis_conn *c, struct redis_cmd *const *cmds, int k)
{
    for (int i = 0; i < k; i++) {
        if (redisAppendCommandArgv(c->ctx, cmds[i]->argc, cmds[i]->argv, cmds[i]->lens) !=
            REDIS_OK) {
            link_broke(c, cmds[i]->argv[0]);
            fail_from(cmds, 0, k, TD_EUNAVAIL);
            return 0;
        }
    }
    for (int i = 0; i < k; i++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK || r == NULL) {
            link_broke(c, cmds[i]->argv[0]);
            fail_from(cmds, i, k, TD_EUNAVAIL);
            return i;
        }
        cmds[i]->rc = take_reply(c, cmds[i]->argv[0], r, &cmds[i]->reply);
        if (c->ctx == NULL) {
            /* Dropped on a READONLY answer: the rest of the replies went
             * with the connection. */
            fail_from(cmds, i + 1, k, TD_EUNAVAIL);
            return i + 1;
        }
    }
    return k;
}

/* The calling thread's connection, with the socket timeout a blocking
 * command needs (block_ms > 0) or the usual one. */
static int conn_for(int block_ms, struct redis_conn **c)
{
    int rc = get_conn(c);
    if (rc == TD_OK && block_ms > 0)
        redisSetTimeout((*c)->ctx, ms_to_tv(block_ms + cfg->redis_timeout_ms));
    return rc;
}

/* Every write goes through the shared breaker: while Redis is known to be
 * down no thread waits for it, and the first answer after an outage opens
 * it to every thread at once. When a connection that used to work turns
 * out closed by the server (Redis restarted while we were idle), the
 * commands are sent once more on a new one: a closed socket means they
 * never reached the new server, so this cannot run them twice; a timeout
 * is never retried. */
void redis_send(struct redis_cmd *const *cmds, int k, int block_ms)
{
    LOOP_MUST_NOT_BLOCK("the blocking Redis client"); /* a fiber sends on its loop's link */
    struct redis_conn *c = NULL;
    enum breaker_pass pass = breaker_ask(&health, mono_ms());
    if (pass == BREAKER_REFUSED) {
        fail_from(cmds, 0, k, TD_EUNAVAIL);
        return;
    }
    if (conn_for(block_ms, &c) != TD_OK) {
        fail_from(cmds, 0, k, TD_EUNAVAIL);
    } else {
        bool reused = c->used;
        if (send_and_read(c, cmds, k) == 0 && reused && c->peer_closed) {
            c->used = false;
            if (conn_for(block_ms, &c) == TD_OK)
                (void)send_and_read(c, cmds, k);
        }
        if (block_ms > 0 && c != NULL && c->ctx != NULL)
            redisSetTimeout(c->ctx, ms_to_tv(cfg->redis_timeout_ms));
    }
    int rc = TD_OK;
    for (int i = 0; i < k; i++) {
        if (cmds[i]->rc == TD_EUNAVAIL)
            rc = TD_EUNAVAIL;
    }
    if (rc == TD_EUNAVAIL)
        trip(pass);
    else
        breaker_success(&health, pass);
}

bool redis_is_down(void)
{
    return breaker_is_open(&health, mono_ms());
}

void redis_lose_reply(const char *why)
{
    if (fiber_self() != NULL) {
        /* The loop's connection is shared by every fiber of the loop and
         * answered this command in order: only this reply is taken as
         * lost, and the breaker opens as after a timeout. */
        metrics_inc(M_DEP_ERRORS_REDIS);
        log_warn("redis: %s", why);
        trip(BREAKER_CALL);
        return;
    }
    struct redis_conn *c = thread_conn();
    drop(c, why);
    trip(BREAKER_CALL);
}
