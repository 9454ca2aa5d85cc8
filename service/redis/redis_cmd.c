/* redis_cmd.c - redis.h's commands: on a fiber, on the loop's shared
 * asynchronous connection (redis_async.c), where the commands of a turn
 * leave together; off a fiber (background threads), and for a blocking
 * command anywhere, on the thread's own connection, in a round trip of its
 * own (redis.c). */
#include "redis.h"

#include "err.h"
#include "fiber.h"
#include "redis_conn.h"

#include <stdio.h>

int redis_init(const struct config *cfg)
{
    return redis_conn_init(cfg);
}

void redis_cleanup(void)
{
    redis_async_cleanup();
    redis_conn_cleanup();
}

/* One command; TD_ENOTFOUND stands for NOSCRIPT. script: the script
 * an EVALSHA or EVAL runs, with nkeys keys (else NULL). */
static int send_one(int argc, const char **argv, const size_t *lens, int block_ms,
                    const struct redis_script *script, int nkeys, redisReply **reply)
{
    struct redis_cmd cmd;
    struct redis_cmd *one = &cmd;
    *reply = NULL;
    if (!redis_cmd_set(&cmd, argc, argv, lens))
        return TD_EINTERNAL;
    cmd.script = script;
    cmd.nkeys = nkeys;
    if (block_ms == 0 && fiber_self() != NULL)
        (void)redis_async_send(&cmd);
    else
        redis_send(&one, 1, block_ms);
    *reply = cmd.reply;
    return cmd.rc;
}

int redis_command(int argc, const char **argv, const size_t *lens, redisReply **reply)
{
    int rc = send_one(argc, argv, lens, 0, NULL, 0, reply);
    return rc == TD_ENOTFOUND ? TD_EINTERNAL : rc;
}

int redis_command_blocking(int argc, const char **argv, const size_t *lens, int block_ms,
                           redisReply **reply)
{
    int rc = send_one(argc, argv, lens, block_ms, NULL, 0, reply);
    return rc == TD_ENOTFOUND ? TD_EINTERNAL : rc;
}

/* EVALSHA's arguments for s into argv (REDIS_MAX_ARGS), n the key
 * count's text; their count, or -1 when there are too many. */
static int eval_argv(const struct redis_script *s, int nkeys, const char **keys, int nargs,
                     const char **args, const char **argv, char n[16])
{
    if (3 + nkeys + nargs > REDIS_MAX_ARGS)
        return -1;
    snprintf(n, 16, "%d", nkeys);
    argv[0] = "EVALSHA";
    argv[1] = s->sha;
    argv[2] = n;
    for (int i = 0; i < nkeys; i++)
        argv[3 + i] = keys[i];
    for (int i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = args[i];
    return 3 + nkeys + nargs;
}

int redis_eval(struct redis_script *s, int nkeys, const char **keys, int nargs, const char **args,
               redisReply **reply)
{
    const char *argv[REDIS_MAX_ARGS];
    char n[16];
    *reply = NULL;
    if (eval_argv(s, nkeys, keys, nargs, args, argv, n) < 0)
        return TD_EINTERNAL;
    int rc = send_one(3 + nkeys + nargs, argv, NULL, 0, s, nkeys, reply);
    if (rc == TD_ENOTFOUND) {
        /* A restarted or flushed Redis: EVAL runs it and caches it again. */
        argv[0] = "EVAL";
        argv[1] = s->source;
        rc = send_one(3 + nkeys + nargs, argv, NULL, 0, s, nkeys, reply);
        if (rc == TD_ENOTFOUND)
            rc = TD_EINTERNAL;
    }
    return rc;
}
