/* faults.h - named points where the test build can crash or fail on
 * purpose, so the integration tests can kill ticketd exactly between two
 * steps that must survive a crash (a stream entry added but its outbox row
 * not yet marked, an effect committed but not acknowledged).
 *
 * Compiled only when TICKETD_FAULTS is defined (the ASan test build). In
 * any other build FAULT_POINT(name) is the constant false: the name is
 * dropped and no fault code or string reaches the binary.
 *
 * Armed by the environment, read once: TICKETD_FAULT=<name>[:crash|:fail[:N]]
 *   crash      the process dies at once with _exit(137), as if SIGKILLed:
 *              no cleanup, no flush, no atexit handlers;
 *   fail       FAULT_POINT returns true, every time or for the first N hits,
 *              and the caller treats it as the step failing.
 * The default mode is crash. Points in use:
 *   relay.after_xadd        entries are in the stream, outbox rows not yet marked
 *   consumer.before_effect  an entry was read, its effect not yet applied
 *   consumer.after_effect   effect and dedup row committed, entry not yet acked
 * Thread-safe. */
#ifndef TICKETD_FAULTS_H
#define TICKETD_FAULTS_H

#include <stdbool.h>

#ifdef TICKETD_FAULTS

/* Returns true when the armed fault is name in fail mode (and logs it);
 * dies when it is name in crash mode; false otherwise. */
bool faults_hit(const char *name);

#define FAULT_POINT(name) faults_hit(name)

#else

#define FAULT_POINT(name) false

#endif

#endif
