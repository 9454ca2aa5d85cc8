/* redis_conn.h - inside redis/: the calling thread's connection and the
 * shared breaker (redis.c), the commands of many threads in one write
 * (redis_pipe.c), both used by redis_cmd.c, which answers redis.h's
 * commands with one or the other. Not for other folders: they call
 * redis.h. */
#ifndef TICKETD_REDIS_CONN_H
#define TICKETD_REDIS_CONN_H

#include "breaker.h"
#include "config.h"

#include <hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#define REDIS_MAX_ARGS 32

struct redis_conn {
    redisContext *ctx;
    unsigned gen;     /* the primary address generation ctx was opened to */
    bool used;        /* the context has answered at least once */
    bool peer_closed; /* the last failure was the server closing on us */
};

/* redis_init's part here: the configuration and the thread key. */
int redis_conn_init(const struct config *cfg);

/* One command in a round trip of its own on the calling thread's
 * connection, through the breaker (block_ms > 0: a blocking command's
 * wait, added to the socket timeout). Answers as redis_command, but
 * TD_ENOTFOUND for NOSCRIPT. */
int redis_conn_send(int argc, const char **argv, const size_t *lens, int block_ms,
                    redisReply **reply);

/* The calling thread's connection, opened (to the current primary) if it
 * is not. TD_OK, or TD_EUNAVAIL (logged, dropped). */
int redis_conn_get(struct redis_conn **out);

/* The link broke while command name waited for its reply: notes whether
 * the server closed it (peer_closed) and drops the context. */
void redis_conn_broke(struct redis_conn *c, const char *name);

/* What a reply r to command name means: TD_OK with r in *reply, or r
 * freed and TD_ENOTFOUND (NOSCRIPT), TD_EUNAVAIL (READONLY: the context
 * is dropped; or a transient error) or TD_EINTERNAL (logged). */
int redis_conn_take(struct redis_conn *c, const char *name, redisReply *r, redisReply **reply);

/* The shared breaker: ask before a round trip, then report its outcome
 * (TD_EUNAVAIL opens it). */
enum breaker_pass redis_breaker_ask(void);
void redis_breaker_report(enum breaker_pass pass, int rc);

/* The pipeline (redis_pipe.c): on or off (TICKETD_MERGE), and one
 * command through it, answered as redis_command answers. */
void redis_pipe_init(bool on);
bool redis_pipe_on(void);
int redis_pipe_send(int argc, const char **argv, const size_t *lens, redisReply **reply);

#endif
