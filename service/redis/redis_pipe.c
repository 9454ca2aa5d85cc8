/* redis_pipe.c - the Redis commands of requests in flight together go in
 * one write (TICKETD_MERGE=1, the default).
 *
 * Each request's command (an order's script, the filter's add, the
 * answer's record) is a round trip of its own: a write, a wait, a read, on
 * both sides. When many requests are at that point at once, their
 * commands queue (groupq.h) and one of their threads, the leader, appends
 * them all to its own connection, sends them in one write and reads the
 * replies in order, handing each to its thread. Redis runs each command,
 * each script, atomically as before: pipelining changes how commands
 * travel, not what any of them sees. A command's thread waits for its
 * reply as it did before; an idle service sends a lone command at once.
 *
 * Failures stay per command where Redis answers (an error reply fails its
 * own command only) and common where the link breaks: every command from
 * the one whose reply did not come on is "unavailable", with the same
 * meaning as a timeout today (it may have run). A write to a connection
 * the server had closed while idle reached nobody, so the whole pipeline
 * is sent once more on a new connection, as a lone command is.
 *
 * Blocking commands (XREADGROUP BLOCK) never join: they would hold up
 * everyone behind them. */
#include "redis_conn.h"

#include "err.h"
#include "groupq.h"
#include "metrics.h"

#include <stdatomic.h>

/* Pipelines at Redis at once: one collects while another is out. */
#define PIPE_LEADERS 2
/* Commands per write, at most. */
#define PIPE_MAX 64

/* A command waiting to be sent, on its thread's stack. */
struct piped {
    struct groupq_entry q; /* first: a pipeline's entries are cast back */
    struct redis_cmd *cmd; /* the caller's: answered in place */
};

static atomic_bool pipe_on;

static void run_pipeline(struct groupq *q, struct groupq_entry **queued, int k);

static struct groupq pipeline = GROUPQ_INIT(PIPE_LEADERS, PIPE_MAX, run_pipeline);

void redis_pipe_init(bool on)
{
    atomic_store(&pipe_on, on);
}

bool redis_pipe_on(void)
{
    return atomic_load(&pipe_on);
}

/* Runs one pipeline on the leader's own connection. */
static void run_pipeline(struct groupq *q, struct groupq_entry **queued, int k)
{
    (void)q;
    struct redis_cmd *cmds[PIPE_MAX];
    for (int i = 0; i < k; i++)
        cmds[i] = ((struct piped *)queued[i])->cmd;
    metrics_inc(M_REDIS_PIPELINES);
    metrics_add(M_REDIS_PIPELINED_COMMANDS, k);
    redis_send(cmds, k, 0);
}

int redis_pipe_send(struct redis_cmd *cmd)
{
    struct piped p = {.cmd = cmd};
    groupq_join(&pipeline, &p.q);
    return cmd->rc;
}
