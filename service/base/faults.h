/* faults.h - named points where the test build can crash, fail or stall
 * on purpose, so the integration tests can reproduce exactly the faults a
 * production service meets between two steps: a process killed after its
 * COMMIT, a COMMIT whose answer was lost, Redis stalling mid-request, a
 * downstream slower than the in-flight and lock TTLs.
 *
 * Compiled only when TICKETD_FAULTS is defined (the ASan test build and
 * build/faults/ticketd). In any other build FAULT_POINT(name) is the
 * constant false: the name is dropped and no fault code or string reaches
 * the binary.
 *
 * Armed by the environment, read once: a comma-separated list of
 *   TICKETD_FAULT=<name>[:crash|:fail[:N]|:delay:MS[:N]|:hold:MS[:N]],...
 *   crash      the process dies at once with _exit(137), as if SIGKILLed:
 *              no cleanup, no flush, no atexit handlers;
 *   fail       FAULT_POINT returns true, every time or for the first N hits,
 *              and the caller treats it as the step failing;
 *   delay:MS   the calling thread sleeps MS milliseconds (every time, or
 *              the first N hits), then FAULT_POINT returns false: the step
 *              goes on, only late;
 *   hold:MS    the same, but the sleep ends as soon as the file named by
 *              TICKETD_FAULT_RELEASE exists (at most MS): a test holds a
 *              step until the progress it checks has happened.
 * The default mode is crash. Points in use:
 *   relay.after_xadd        entries are in the stream, outbox rows not yet marked
 *   consumer.before_effect  an entry was read, its effect not yet applied
 *   consumer.effect         the dedup row is written, the effect fails (fail:
 *                           the consumer's transaction is rolled back and the
 *                           entry stays pending, to be delivered again)
 *   consumer.after_effect   effect and dedup row committed, entry not yet acked
 *   order.after_redis       the Redis defences passed, the transaction not begun
 *   order.commit_lost       COMMIT succeeded but its connection is dropped
 *                           before the answer is read (fail: the caller sees
 *                           the database unavailable, as after a lost reply)
 *   redis.end_unsent        (fail) a key's end (complete, release) does not
 *                           reach Redis, as while its link is down: it is
 *                           kept, and each time it is sent again fails too
 *   order.lookup_conflict   (fail) the look-up of a key's order (after a refusal)
 *                           meets a conflict, as a locking read that was a
 *                           deadlock's victim or a Galera writeset's (1213)
 *   order.before_transition an order was read for a transition (pay, cancel,
 *                           ticket, complete, expire), not yet written
 *   order.after_commit      the order is committed, its answer not yet stored
 *                           in Redis nor sent
 *   merge.wait_full         (fail) a merged batch's leader waits until the batch
 *                           holds TICKETD_MERGE_MAX orders, so that the
 *                           orders a test sends together share one batch
 *   merge.killed_mid_batch  a merged batch's statements ran, its COMMIT not
 *                           sent: the process dies holding the transaction
 *   mysql.batch_answer_lost (fail) a transaction sent in one round trip ran
 *                           to its COMMIT; its rows are not read and its link
 *                           is dropped, as if the answer was lost before its
 *                           first result (a merged batch's CALL answers only
 *                           after its COMMIT: its outcome is then unknown)
 *   merge.outcome_unread    (fail) a merged batch's answer row is dropped as
 *                           if it did not read; its COMMIT runs all the same
 *   keywait.deaf            (fail) the key events listener hears nothing, as
 *                           when every announcement is lost: a waiting copy
 *                           learns its key's end only by looking again
 *   redis.token_stall       the token script ran in Redis but its reply is
 *                           treated as a timeout (fail), as when Redis
 *                           stalls after executing a command
 *   retention.before_ddl    a retention round holds the lease and has listed
 *                           a table's partitions, its first ALTER not sent
 *   http.drain_listener_close (hold, through faults_held) the drain found a
 *                           listener's accept queue empty and has not yet
 *                           closed it: the instant a client connecting
 *                           then would be reset in, were the listener
 *                           still taking handshakes
 * Thread-safe. */
#ifndef TICKETD_FAULTS_H
#define TICKETD_FAULTS_H

#include <stdbool.h>

/* Called once at start. The fault build reads TICKETD_FAULT now and logs
 * each point it arms; any other build, given TICKETD_FAULT, logs that it
 * has no fault points, so that a run meant to inject a fault is not
 * mistaken for one that did. */
void faults_announce(void);

#ifdef TICKETD_FAULTS

/* Returns true when name is armed in fail mode (and logs it); dies when it
 * is armed in crash mode; sleeps first when in delay mode; false otherwise. */
bool faults_hit(const char *name);

#define FAULT_POINT(name) faults_hit(name)

/* Whether name is armed, without taking a hit: for a point that needs the
 * step before it done differently (merge.killed_mid_batch). */
bool faults_armed(const char *name);

/* Hold mode for a point on a loop's own thread, which may not sleep: true
 * while name is held (armed in hold mode, its hit taken by the first call,
 * TICKETD_FAULT_RELEASE not yet there and its MS not yet over), and the
 * caller comes back to the point later, on a timer of its loop; false
 * once released, and for a point not armed so. */
bool faults_held(const char *name);

#else

#define FAULT_POINT(name)  false
#define faults_armed(name) false
#define faults_held(name)  false

#endif

#endif
