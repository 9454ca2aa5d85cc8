/* redis.h - Redis commands with timeouts, one shared circuit breaker
 * (breaker.h) for the whole process, and Lua scripts run by SHA1.
 *
 * On a request's fiber a command goes on its loop's asynchronous
 * connection, shared by the loop's fibers: the commands of one loop turn
 * leave in one write (redis_async.c) and the fiber parks until its reply.
 * On a plain thread (background jobs), and for a blocking command
 * anywhere, it goes on the thread's own blocking connection.
 *
 * hiredis 0.14 contexts cannot be reused after an error, so any failed
 * call drops its context and opens the breaker: every caller then fails
 * fast until one probe finds Redis answering, and from then on every
 * connection is dialled again at its next call. Used by the Redis adapters only (cache_redis.c,
 * events).
 *
 * The server is TICKETD_REDIS_HOST/PORT, or, with TICKETD_REDIS_SENTINELS
 * and TICKETD_REDIS_MASTER, the primary a Sentinel names (and that says
 * ROLE master): looked up by a thread of its own, never by a caller
 * (redis_addr.c), and asked again after a failed connection or a
 * READONLY answer, so a failover costs the breaker's cooldowns until the
 * Sentinels have promoted a replica, and Sentinels that do not answer
 * cost a caller nothing: it dials the last primary named. */
#ifndef TICKETD_REDIS_H
#define TICKETD_REDIS_H

#include "config.h"

#include <hiredis.h>
#include <stdbool.h>
#include <stddef.h>

struct redis_script {
    const char *source;
    char sha[41]; /* filled by redis_script_prepare */
    /* The same script over many calls' keys and arguments, one after
     * another in one call (REDIS_FOLD_HEAD), or NULL. On a loop, the
     * calls of this script that one turn sends go as one call of fold:
     * Redis runs one script where it ran one per order (redis_async.c). */
    struct redis_script *fold;
};

/* A fold's source: REDIS_FOLD_HEAD, the script's own source, then
 * REDIS_FOLD_TAIL (or REDIS_FOLD_LOOP, what the fold does once after its
 * calls, then "return out"). The script becomes a function of its KEYS
 * and ARGV, called once per folded call, each under pcall: an error (a
 * command refused, a script fault) answers its own call, as it would
 * have alone. The fold's KEYS are every call's keys in turn; its ARGV the
 * number of calls n, then each call's number of keys and of arguments,
 * then every call's arguments in turn. It answers an array of each call's
 * answer, out (a nil answer as false, which keeps its place). */
#define REDIS_FOLD_HEAD "local function one(KEYS, ARGV)\n"
#define REDIS_FOLD_LOOP                                                                            \
    "\nend\n"                                                                                      \
    "local n = tonumber(ARGV[1])\n"                                                                \
    "local out, k, a = {}, 0, 1 + 2 * n\n"                                                         \
    "for i = 1, n do\n"                                                                            \
    "  local nk, na = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])\n"                          \
    "  local keys, args = {}, {}\n"                                                                \
    "  for j = 1, nk do keys[j] = KEYS[k + j] end\n"                                               \
    "  for j = 1, na do args[j] = ARGV[a + j] end\n"                                               \
    "  k, a = k + nk, a + na\n"                                                                    \
    "  local ok, r = pcall(one, keys, args)\n"                                                     \
    "  if not ok and type(r) ~= 'table' then r = redis.error_reply(tostring(r)) end\n"             \
    "  if r == nil then r = false end\n"                                                           \
    "  out[i] = r\n"                                                                               \
    "end\n"
#define REDIS_FOLD_TAIL REDIS_FOLD_LOOP "return out\n"

int redis_init(const struct config *cfg);
/* Closes the calling thread's blocking connection. The loops' connections
 * live as long as the loops: redis_cleanup closes them. */
void redis_thread_release(void);
void redis_cleanup(void);

/* Computes the script's SHA1 so it can be run with EVALSHA (and its
 * fold's, when it has one). */
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

/* Treats the reply the caller just got as lost: opens the breaker, as a
 * timeout would, and off a fiber drops the thread's context (a fiber's
 * loop connection is shared and answered in order, so it stays). For the
 * test build's fault points, which stall Redis after it executed a
 * command. */
void redis_lose_reply(const char *why);

#endif
