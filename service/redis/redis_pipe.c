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
#include <string.h>

/* Pipelines at Redis at once: one collects while another is out. */
#define PIPE_LEADERS 2
/* Commands per write, at most. */
#define PIPE_MAX 64

/* A command waiting to be sent, on its thread's stack. */
struct piped {
    struct groupq_entry q; /* first: a pipeline's entries are cast back */
    int argc;
    const char **argv;
    size_t lens[REDIS_MAX_ARGS];
    redisReply *reply;
    int rc;
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

static void fail_from(struct piped **b, int from, int k, int rc)
{
    for (int i = from; i < k; i++)
        b[i]->rc = rc;
}

/* Sends b[0..k) on c in one write and reads their replies. Returns how
 * many replies were read before the link broke (k when it did not). */
static int exchange(struct redis_conn *c, struct piped **b, int k)
{
    for (int i = 0; i < k; i++) {
        if (redisAppendCommandArgv(c->ctx, b[i]->argc, b[i]->argv, b[i]->lens) != REDIS_OK) {
            redis_conn_broke(c, b[i]->argv[0]);
            fail_from(b, 0, k, TD_EUNAVAIL);
            return 0;
        }
    }
    for (int i = 0; i < k; i++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK || r == NULL) {
            redis_conn_broke(c, b[i]->argv[0]);
            fail_from(b, i, k, TD_EUNAVAIL);
            return i;
        }
        b[i]->rc = redis_conn_take(c, b[i]->argv[0], r, &b[i]->reply);
        if (c->ctx == NULL) {
            /* Dropped on a READONLY answer: the rest of the replies went
             * with the connection. */
            fail_from(b, i + 1, k, TD_EUNAVAIL);
            return i + 1;
        }
    }
    return k;
}

/* Runs one pipeline on the leader's own connection. */
static void run_pipeline(struct groupq *q, struct groupq_entry **queued, int k)
{
    (void)q;
    struct piped *b[PIPE_MAX];
    struct redis_conn *c;
    int rc = TD_OK;
    for (int i = 0; i < k; i++)
        b[i] = (struct piped *)queued[i];
    metrics_inc(M_REDIS_PIPELINES);
    metrics_add(M_REDIS_PIPELINED_COMMANDS, k);
    enum breaker_pass pass = redis_breaker_ask();
    if (pass == BREAKER_REFUSED) {
        fail_from(b, 0, k, TD_EUNAVAIL);
        return;
    }
    if (redis_conn_get(&c) != TD_OK) {
        fail_from(b, 0, k, TD_EUNAVAIL);
        redis_breaker_report(pass, TD_EUNAVAIL);
        return;
    }
    bool reused = c->used;
    if (exchange(c, b, k) == 0 && reused && c->peer_closed) {
        /* Closed by the server while idle: nothing reached it. */
        c->used = false;
        if (redis_conn_get(&c) == TD_OK)
            (void)exchange(c, b, k);
    }
    for (int i = 0; i < k; i++) {
        if (b[i]->rc == TD_EUNAVAIL)
            rc = TD_EUNAVAIL;
    }
    redis_breaker_report(pass, rc);
}

int redis_pipe_send(int argc, const char **argv, const size_t *lens, redisReply **reply)
{
    struct piped p = {.argc = argc, .argv = argv, .rc = TD_EINTERNAL};
    if (argc > REDIS_MAX_ARGS)
        return TD_EINTERNAL;
    for (int i = 0; i < argc; i++)
        p.lens[i] = lens != NULL ? lens[i] : strlen(argv[i]);
    groupq_join(&pipeline, &p.q);
    *reply = p.reply;
    return p.rc;
}
