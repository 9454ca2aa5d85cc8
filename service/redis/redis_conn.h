/* redis_conn.h - inside redis/: commands sent on the calling thread's
 * blocking connection through the shared breaker (redis.c), the commands
 * of a loop's fibers sent on the loop's asynchronous connection
 * (redis_async.c), and redis_cmd.c, which answers redis.h's commands with
 * one or the other. Not for other folders: they call redis.h. */
#ifndef TICKETD_REDIS_CONN_H
#define TICKETD_REDIS_CONN_H

#include "breaker.h"
#include "config.h"

#include <hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#define REDIS_MAX_ARGS 32

/* redis_init's part here: the configuration and the thread key. */
int redis_conn_init(const struct config *cfg);
/* redis_cleanup's part here: the calling thread's blocking connection
 * and the thread key. */
void redis_conn_cleanup(void);

/* One command and, once sent, its answer: rc as redis_command answers,
 * but TD_ENOTFOUND for NOSCRIPT, and the reply when TD_OK. */
struct redis_cmd {
    int argc;
    const char **argv; /* borrowed */
    size_t lens[REDIS_MAX_ARGS];
    redisReply *reply;
    int rc;
    /* An EVALSHA or EVAL of script (its keys argv[3..3+nkeys)), which a
     * loop may fold with others of the same script; NULL for any other
     * command. */
    const struct redis_script *script;
    int nkeys;
    /* On a loop's connection: who waits for the answer, and the next call
     * in the turn's queue of calls to fold (redis_async.c). */
    void *waiter;
    struct redis_cmd *next;
};

/* Fills cmd (lens NULL: the arguments are C strings). False when there
 * are more than REDIS_MAX_ARGS. */
bool redis_cmd_set(struct redis_cmd *cmd, int argc, const char **argv, const size_t *lens);

/* One call of the fold of cmds' script (redis.h, REDIS_FOLD_HEAD) carrying
 * cmds[0..n), n >= 1, each an EVALSHA or EVAL of that script with the
 * verb of cmds[0]: a new argv and lens (freed with free), pointing into
 * the commands' arguments and a new *text of numbers (freed with free);
 * answers the argument count. */
int redis_fold_argv(struct redis_cmd *const *cmds, int n, const char ***argv, size_t **lens,
                    char **text);

/* A turn's calls of scripts that fold, in the order they came. */
struct redis_fold_queue {
    struct redis_cmd *head, *tail;
};
void redis_fold_push(struct redis_fold_queue *q, struct redis_cmd *c);
/* Takes the first call's group out of q: the calls of its script, by its
 * verb (EVALSHA, or EVAL after NOSCRIPT), in the order they came, max at
 * most, into group; answers how many (0: q was empty). The others stay,
 * in their order. */
int redis_fold_take(struct redis_fold_queue *q, struct redis_cmd **group, int max);

/* Sends cmds[0..k) on the calling thread's connection in one write,
 * through the breaker, and sets each one's answer (block_ms > 0: one
 * blocking command's wait, added to the socket timeout). */
void redis_send(struct redis_cmd *const *cmds, int k, int block_ms);

/* What redis.c shares with redis_async.c: the configuration, the
 * breaker, the primary's address (Sentinel) and the meaning of an error
 * reply, so that both paths keep the same rules. */
const struct config *redis_config(void);
enum breaker_pass redis_breaker_ask(void);
/* After a call the breaker let through: reached false opens it. */
void redis_breaker_report(enum breaker_pass pass, bool reached);
bool redis_sentinel_on(void);

/* Where the primary is (redis_addr.c): resolved off the loops, by a
 * thread of its own, and published atomically, so that no call here
 * blocks or waits on a lock. redis_addr_init makes the first look-up
 * (on the starting thread) and starts the resolver when addresses may
 * change (Sentinel, a host name); redis_addr_cleanup stops it. */
int redis_addr_init(const struct config *cfg);
void redis_addr_cleanup(void);
/* The last address published (numeric, or a Unix socket path) and its
 * generation; TD_EUNAVAIL at once when none is known yet (a look-up is
 * then asked for). Never blocks. */
int redis_primary(char *host, size_t cap, int *port, unsigned *gen);
/* A connection to generation gen failed: asks the resolver to look again
 * (with Sentinel, the Sentinels; else the host name). Never blocks. */
void redis_forget_primary(unsigned gen);
/* True when a connection opened to generation gen is no longer to the
 * address published. */
bool redis_primary_moved(unsigned gen);
/* A ROLE reply that says "master". */
bool redis_role_is_master(const redisReply *r);
/* What the error reply msg to command name means: TD_ENOTFOUND for
 * NOSCRIPT, TD_EUNAVAIL for READONLY (*readonly set: the caller drops its
 * connection) or a transient error, TD_EINTERNAL otherwise (logged,
 * counted). */
int redis_error_rc(const char *name, const char *msg, bool *readonly);

/* The loop's asynchronous connection (redis_async.c). On a fiber only:
 * sends cmd on the calling loop's connection, where the commands of every
 * fiber of the turn leave in one write at the turn's end, parks the fiber
 * until its reply (or the timeout), and sets cmd's answer as redis_send
 * does. Returns cmd->rc. */
int redis_async_send(struct redis_cmd *cmd);
/* At the process's end, the loops stopped (and maybe freed): closes every
 * loop's connection, without touching its loop. A loop's connection lives
 * as long as the loop. */
void redis_async_cleanup(void);

#endif
