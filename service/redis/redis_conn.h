/* redis_conn.h - inside redis/: commands sent on the calling thread's
 * connection through the shared breaker (redis.c), the commands of many
 * threads gathered into one such write (redis_pipe.c), and redis_cmd.c,
 * which answers redis.h's commands with one or the other. Not for other
 * folders: they call redis.h. */
#ifndef TICKETD_REDIS_CONN_H
#define TICKETD_REDIS_CONN_H

#include "config.h"

#include <hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#define REDIS_MAX_ARGS 32

/* redis_init's part here: the configuration and the thread key. */
int redis_conn_init(const struct config *cfg);

/* One command and, once sent, its answer: rc as redis_command answers,
 * but TD_ENOTFOUND for NOSCRIPT, and the reply when TD_OK. */
struct redis_cmd {
    int argc;
    const char **argv; /* borrowed */
    size_t lens[REDIS_MAX_ARGS];
    redisReply *reply;
    int rc;
};

/* Fills cmd (lens NULL: the arguments are C strings). False when there
 * are more than REDIS_MAX_ARGS. */
bool redis_cmd_set(struct redis_cmd *cmd, int argc, const char **argv, const size_t *lens);

/* Sends cmds[0..k) on the calling thread's connection in one write,
 * through the breaker, and sets each one's answer (block_ms > 0: one
 * blocking command's wait, added to the socket timeout). */
void redis_send(struct redis_cmd *const *cmds, int k, int block_ms);

/* The pipeline (redis_pipe.c): on or off (TICKETD_MERGE), and one
 * command sent through it with the others queued at once (as
 * redis_send answers it). Returns cmd->rc. */
void redis_pipe_init(bool on);
bool redis_pipe_on(void);
int redis_pipe_send(struct redis_cmd *cmd);

#endif
