/* redis.h - one hiredis connection per thread, with timeouts, one shared
 * circuit breaker (breaker.h) for the whole process, and Lua scripts run
 * by SHA1.
 *
 * hiredis 0.14 contexts cannot be reused after an error, so any failed
 * call drops the thread's context and opens the breaker: every thread then
 * fails fast until one probe finds Redis answering, and from then on every
 * thread reconnects on its next call. Used by the Redis adapters only (cache_redis.c, events).
 *
 * The server is TICKETD_REDIS_HOST/PORT, or, with TICKETD_REDIS_SENTINELS
 * and TICKETD_REDIS_MASTER, the primary a Sentinel names (and that says
 * ROLE master): asked once, remembered, and asked again after a failed
 * connection or a READONLY answer, so a failover costs the breaker's
 * cooldowns until the Sentinels have promoted a replica. */
#ifndef TICKETD_REDIS_H
#define TICKETD_REDIS_H

#include "config.h"

#include <hiredis.h>
#include <stdbool.h>
#include <stddef.h>

struct redis_script {
    const char *source;
    char sha[41]; /* filled by redis_script_prepare */
};

int redis_init(const struct config *cfg);
void redis_thread_release(void);
void redis_cleanup(void);

/* Computes the script's SHA1 so it can be run with EVALSHA. */
void redis_script_prepare(struct redis_script *s);

/* Sends one command. lens may be NULL (all arguments are C strings).
 * Returns TD_OK with a new reply in *reply (caller frees with
 * freeReplyObject, NULL-safe), TD_EUNAVAIL when Redis cannot be reached or
 * timed out, TD_EINTERNAL on an error reply (logged). */
int redis_command(int argc, const char **argv, const size_t *lens, redisReply **reply);

/* Like redis_command with a block timeout override in ms (for XREADGROUP
 * BLOCK): the socket timeout is raised to block_ms + the usual timeout. */
int redis_command_blocking(int argc, const char **argv, const size_t *lens, int block_ms,
                           redisReply **reply);

/* Runs a script by EVALSHA; after NOSCRIPT (a restarted or flushed Redis)
 * runs it once by EVAL, which also caches it again. */
int redis_eval(struct redis_script *s, int nkeys, const char **keys, int nargs, const char **args,
               redisReply **reply);

/* True while the breaker refuses calls (Redis known down). */
bool redis_is_down(void);

/* Treats the reply the calling thread just got as lost: drops its context
 * and opens the breaker, exactly as a timeout would. For the test build's
 * fault points, which stall Redis after it executed a command. */
void redis_lose_reply(const char *why);

#endif
