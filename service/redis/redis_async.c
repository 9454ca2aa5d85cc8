/* redis_async.c - the loop's own Redis connection (redis_conn.h): a
 * hiredis asynchronous context per loop, driven by a small adapter onto
 * the loop's file events, shared by every fiber of that loop.
 *
 * A fiber's command is appended to the context's output buffer and the
 * fiber parks. The loop writes the buffer once, at the end of the turn
 * (a turn-end hook), so the commands of every request the turn served
 * leave in one write; Redis answers them in order and hiredis hands each
 * reply to its command's callback, which readies its fiber. Pipelining
 * needs no queue and no leader: it is what a shared connection does.
 * Redis still runs each command, each script, atomically: pipelining
 * changes how commands travel, not what any of them sees.
 *
 * The rules of the blocking path (redis.c) hold here too: every command
 * passes the shared breaker; an error reply fails its own command only;
 * READONLY (a demoted primary) and a link that breaks fail every command
 * still waiting on the connection as "unavailable" (they may have run,
 * as after a timeout) and close it, so the next command dials again (the
 * address published then: a closed link asks the resolver to look again,
 * redis_addr.c, and nothing here waits for its answer); a connection
 * opened to an old
 * primary generation is dropped at the next command; with Sentinel, the
 * first command on a new connection is ROLE, and a server that does not
 * say "master" has every command behind it answered "unavailable". A
 * command waits at most TICKETD_REDIS_TIMEOUT_MS (a loop timer): then the
 * connection is taken as broken, as a socket timeout is on the blocking
 * path. A server that closes an idle connection is seen at once (the loop
 * always watches it for reading), so the next command dials a new one.
 *
 * Nothing here blocks (loop.h): the connect is hiredis's non-blocking
 * one, to a numeric address (the resolver looked the name up), and
 * finishes on the loop's file events. Blocking commands (XREADGROUP
 * BLOCK) never come here: they would hold up every fiber behind them.
 * Thread-compatible: a loop's connection is
 * touched only on its loop thread. */
#include "redis_conn.h"

#include "err.h"
#include "fiber.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "redis.h"
#include "sentinel.h"
#include "util.h"

#include <async.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loops with a connection of their own, at most (TICKETD_LOOPS is far
 * below: one per core). */
#define ASYNC_MAX_LOOPS 256

/* A loop's connection, touched only on its thread. */
struct async_link {
    struct loop *loop;
    redisAsyncContext *ac; /* NULL: closed; the next command dials */
    unsigned gen;          /* the primary generation ac was opened to */
    struct loop_io io;
    bool io_on;
    unsigned want;
    struct loop_task flush; /* the turn's one write */
    bool writing;           /* inside our own redisAsyncHandleWrite */
    int appended;           /* commands appended since the last write */
    bool refused;           /* ROLE or READONLY said: not the primary */
    /* Calls of scripts that fold (redis.h), appended at the turn's end:
     * each script's as one call. */
    struct redis_fold_queue folds;
};

static struct async_link links[ASYNC_MAX_LOOPS];

/* A command waiting for its reply, on its fiber's stack. */
struct waiting {
    struct redis_cmd *cmd;
    struct fiber *fiber;
    struct async_link *link;
    struct loop_timer timer;
    bool answered;
};

/* The calls one fold carried, in the order of their answers. */
struct fold {
    int n;
    struct waiting *w[];
};

/* Calls of one script folded into one call at most (each adds its keys
 * and arguments to the fold's). */
#define FOLD_MAX 64

/* w's answer is rc, with no reply. */
static void answer_rc(struct waiting *w, int rc)
{
    loop_timer_stop(w->link->loop, &w->timer);
    w->cmd->rc = rc;
    w->answered = true;
    fiber_ready(w->fiber);
}

/* --- the adapter: hiredis's read and write interest onto loop_io -------- */

static void on_io(void *arg, unsigned ready);

static void want(struct async_link *l, unsigned w)
{
    if (w == l->want && l->io_on)
        return;
    l->want = w;
    if (!l->io_on) {
        loop_io_start(l->loop, &l->io, l->ac->c.fd, w, on_io, l);
        l->io_on = true;
    } else {
        loop_io_change(l->loop, &l->io, w);
    }
}

/* hiredis's callbacks each add or drop one interest of the link p. */
static void want_more(void *p, unsigned w)
{
    struct async_link *l = p;
    want(l, l->want | w);
}

static void want_less(void *p, unsigned w)
{
    struct async_link *l = p;
    want(l, l->want & ~w);
}

static void add_read(void *p)
{
    want_more(p, LOOP_READ);
}

static void del_read(void *p)
{
    want_less(p, LOOP_READ);
}

static void on_flush(void *arg);

/* Once connected, a command's write waits for the turn's end, where the
 * commands of the whole turn go in one write; only a write the socket did
 * not take whole (or the connect itself) waits for the socket. */
static void add_write(void *p)
{
    struct async_link *l = p;
    if ((l->ac->c.flags & REDIS_CONNECTED) && !l->writing) {
        loop_at_turn_end(l->loop, &l->flush, on_flush, l);
        return;
    }
    want_more(l, LOOP_WRITE);
}

static void del_write(void *p)
{
    want_less(p, LOOP_WRITE);
}

/* hiredis is freeing the context (closed, broken or timed out): stop
 * watching its socket before hiredis closes it, and have the resolver
 * look where the primary is (it answers later; this returns at once). */
static void cleanup(void *p)
{
    struct async_link *l = p;
    if (l->io_on)
        loop_io_stop(l->loop, &l->io);
    l->io_on = false;
    l->want = 0;
    l->ac = NULL;
    l->refused = false;
    l->appended = 0; /* they went with the connection */
    /* Calls not yet folded were not sent: they fail as the appended do. */
    for (struct redis_cmd *c = l->folds.head, *next; c != NULL; c = next) {
        next = c->next;
        answer_rc(c->waiter, TD_EUNAVAIL);
    }
    l->folds = (struct redis_fold_queue){0};
    redis_forget_primary(l->gen);
}

/* Every write of the link goes through here, the turn's (on_flush) and
 * the socket's (on_io: a write the socket did not take whole, or the
 * connect: a new link's first commands are written when it completes,
 * with no turn's end in between), so the commands are counted here, as
 * they leave. Counted only at the turn's end, a new link's first command
 * was counted with its second, in another request's turn. */
static void write_out(struct async_link *l)
{
    if (l->appended > 0) {
        metrics_inc(M_REDIS_PIPELINES);
        metrics_add(M_REDIS_PIPELINED_COMMANDS, l->appended);
        l->appended = 0;
    }
    l->writing = true;
    redisAsyncHandleWrite(l->ac); /* may free the context: cleanup ran */
    l->writing = false;
}

static void on_io(void *arg, unsigned ready)
{
    struct async_link *l = arg;
    redisAsyncContext *ac = l->ac;
    if (ac != NULL && (ready & LOOP_READ))
        redisAsyncHandleRead(ac);
    /* The read may have freed the context (end of file, error). */
    if (l->ac != NULL && l->ac == ac && (ready & LOOP_WRITE))
        write_out(l);
}

/* --- connecting ---------------------------------------------------------- */

static void on_connect(const redisAsyncContext *ac, int status)
{
    if (status != REDIS_OK) {
        metrics_inc(M_DEP_ERRORS_REDIS);
        log_warn("redis: connect failed: %s", ac->errstr);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    if (status != REDIS_OK) {
        metrics_inc(M_DEP_ERRORS_REDIS);
        log_warn("redis: connection lost: %s", ac->errstr);
    }
}

/* With Sentinel: the server a Sentinel named must say it is the primary
 * before anything written behind this ROLE counts. */
static void on_role(redisAsyncContext *ac, void *reply, void *arg)
{
    struct async_link *l = arg;
    if (reply == NULL || redis_role_is_master(reply))
        return;
    log_warn("redis: the server a Sentinel named does not answer ROLE master; asking again");
    l->refused = true;
    redisAsyncFree(ac); /* after this callback: every command behind it fails */
}

static int link_open(struct async_link *l)
{
    char host[SENTINEL_HOST_MAX];
    int port;
    unsigned gen;
    if (redis_primary(host, sizeof host, &port, &gen) != TD_OK) {
        metrics_inc(M_DEP_ERRORS_REDIS);
        log_warn("redis: the primary's address is not known yet");
        return TD_EUNAVAIL;
    }
    bool unix_socket = host[0] == '/';
    redisAsyncContext *ac =
        unix_socket ? redisAsyncConnectUnix(host) : redisAsyncConnect(host, port);
    if (ac == NULL || ac->err) {
        metrics_inc(M_DEP_ERRORS_REDIS);
        log_warn("redis: connect to %s:%d failed: %s", host, port,
                 ac != NULL ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        redis_forget_primary(gen);
        return TD_EUNAVAIL;
    }
    if (!unix_socket)
        (void)redisEnableKeepAlive(&ac->c);
    l->ac = ac;
    l->gen = gen;
    l->refused = false;
    ac->ev.data = l;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (redis_sentinel_on() && redisAsyncCommand(ac, on_role, l, "ROLE") != REDIS_OK) {
        redisAsyncFree(ac);
        return TD_EUNAVAIL;
    }
    return TD_OK;
}

static struct async_link *loop_link(struct loop *lp)
{
    struct async_link *l = loop_slot(lp, links, ASYNC_MAX_LOOPS, sizeof *links);
    if (l != NULL && l->loop == NULL)
        l->loop = lp;
    return l;
}

/* --- one command ---------------------------------------------------------- */

/* Moves r's contents into a reply of our own: hiredis frees what it handed
 * the callback as soon as the callback returns, and the fiber reads it
 * later. The shell hiredis frees is left an integer (nothing under it). */
static redisReply *steal(redisReply *r)
{
    redisReply *mine = xmalloc(sizeof *mine);
    *mine = *r;
    r->type = REDIS_REPLY_INTEGER;
    r->str = NULL;
    r->element = NULL;
    r->elements = 0;
    return mine;
}

/* w's reply (NULL: the link went): ac's callback, and a fold's for each
 * call it carried. */
static void on_reply(redisAsyncContext *ac, void *reply, void *arg)
{
    struct waiting *w = arg;
    struct async_link *l = w->link;
    struct redis_cmd *cmd = w->cmd;
    redisReply *r = reply;
    loop_timer_stop(l->loop, &w->timer);
    if (r == NULL || l->refused) {
        cmd->rc = TD_EUNAVAIL; /* the link went, or the server is not the primary */
    } else if (r->type == REDIS_REPLY_ERROR) {
        bool readonly;
        cmd->rc = redis_error_rc(cmd->argv[0], r->str, &readonly);
        if (readonly) {
            metrics_inc(M_DEP_ERRORS_REDIS);
            log_warn("redis: %s: %.100s", cmd->argv[0], r->str);
            l->refused = true;
            redisAsyncFree(ac); /* after this callback: the rest went with it */
        }
    } else {
        cmd->reply = steal(r);
        cmd->rc = TD_OK;
    }
    w->answered = true;
    fiber_ready(w->fiber);
}

/* A fold's reply: each call's answer in its place, or what answered the
 * whole fold (the link went, an error: NOSCRIPT, READONLY, ...) for
 * every call. */
static void on_fold_reply(redisAsyncContext *ac, void *reply, void *arg)
{
    struct fold *f = arg;
    redisReply *r = reply;
    bool each = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)f->n;
    bool whole = r == NULL || r->type == REDIS_REPLY_ERROR;
    if (!each && !whole)
        log_error("redis: a fold of %d calls gave an answer of unknown shape", f->n);
    for (int i = 0; i < f->n; i++) {
        if (each)
            on_reply(ac, r->element[i], f->w[i]);
        else if (whole)
            on_reply(ac, r, f->w[i]);
        else
            answer_rc(f->w[i], TD_EINTERNAL);
    }
    free(f);
}

/* Appends w's command as it was asked for. False when hiredis took none
 * (the context is going). */
static bool append_one(struct async_link *l, struct waiting *w)
{
    struct redis_cmd *c = w->cmd;
    if (redisAsyncCommandArgv(l->ac, on_reply, w, c->argc, c->argv, c->lens) != REDIS_OK)
        return false;
    l->appended++;
    return true;
}

/* Appends the calls c[0..n) of one script: alone as it was asked for,
 * else as one call of the script's fold. */
static void fold_append(struct async_link *l, struct redis_cmd **c, int n)
{
    if (n == 1) {
        if (!append_one(l, c[0]->waiter))
            answer_rc(c[0]->waiter, TD_EUNAVAIL);
        return;
    }
    const char **argv;
    size_t *lens;
    char *text;
    int argc = redis_fold_argv(c, n, &argv, &lens, &text);
    struct fold *f = xmalloc(sizeof *f + (size_t)n * sizeof *f->w);
    f->n = n;
    for (int i = 0; i < n; i++)
        f->w[i] = c[i]->waiter;
    if (redisAsyncCommandArgv(l->ac, on_fold_reply, f, argc, argv, lens) == REDIS_OK) {
        l->appended++;
        metrics_inc(M_REDIS_FOLDS);
        metrics_add(M_REDIS_FOLDED_CALLS, n);
    } else {
        for (int i = 0; i < n; i++)
            answer_rc(f->w[i], TD_EUNAVAIL);
        free(f);
    }
    free(argv);
    free(lens);
    free(text);
}

/* The turn's end: the turn's calls of each script that folds are appended
 * as one call, then every command the turn's fibers appended leaves in
 * one write (once the connect is done: else when it is, on_io). */
static void on_flush(void *arg)
{
    struct async_link *l = arg;
    struct redis_cmd *group[FOLD_MAX];
    int n;
    while (l->ac != NULL && (n = redis_fold_take(&l->folds, group, FOLD_MAX)) > 0)
        fold_append(l, group, n);
    if (l->ac == NULL || l->appended == 0 || !(l->ac->c.flags & REDIS_CONNECTED))
        return;
    write_out(l);
}

/* Sends w's command: appended at once, or, for a script that folds, kept
 * for the turn's end. False when it could not be appended. */
static bool put(struct async_link *l, struct waiting *w)
{
    struct redis_cmd *c = w->cmd;
    if (c->script != NULL && c->script->fold != NULL) {
        c->waiter = w;
        redis_fold_push(&l->folds, c);
        loop_at_turn_end(l->loop, &l->flush, on_flush, l);
        return true;
    }
    return append_one(l, w);
}

/* No reply in time: the connection is taken as broken, as a socket timeout
 * is on the blocking path, and every command waiting on it fails. */
static void on_timeout(void *arg)
{
    struct waiting *w = arg;
    struct async_link *l = w->link;
    if (w->answered || l->ac == NULL)
        return;
    metrics_inc(M_DEP_ERRORS_REDIS);
    log_warn("redis: %s: no reply in %d ms", w->cmd->argv[0], redis_config()->redis_timeout_ms);
    redisAsyncFree(l->ac); /* answers w and every other command with NULL */
}

int redis_async_send(struct redis_cmd *cmd)
{
    struct loop *lp = loop_self();
    struct async_link *l = loop_link(lp);
    enum breaker_pass pass = redis_breaker_ask();
    cmd->reply = NULL;
    cmd->rc = TD_EUNAVAIL;
    if (pass == BREAKER_REFUSED)
        return cmd->rc;
    if (l == NULL) {
        log_error("redis: loop %d has no connection slot", loop_index(lp));
        cmd->rc = TD_EINTERNAL;
        return cmd->rc;
    }
    if (l->ac != NULL && redis_primary_moved(l->gen))
        redisAsyncFree(l->ac); /* opened to a server that is no longer the primary */
    struct waiting w = {.cmd = cmd, .fiber = fiber_self(), .link = l};
    if ((l->ac != NULL || link_open(l) == TD_OK) && put(l, &w)) {
        loop_timer_start(lp, &w.timer, redis_config()->redis_timeout_ms, on_timeout, &w);
        while (!w.answered)
            fiber_park();
    }
    redis_breaker_report(pass, cmd->rc != TD_EUNAVAIL);
    return cmd->rc;
}

void redis_async_cleanup(void)
{
    for (int i = 0; i < ASYNC_MAX_LOOPS; i++) {
        redisAsyncContext *ac = links[i].ac;
        if (ac == NULL)
            continue;
        /* The loop may be gone: hiredis must not call the adapter. */
        memset(&ac->ev, 0, sizeof ac->ev);
        links[i] = (struct async_link){0};
        redisAsyncFree(ac);
    }
}
