/* deadletters.h - `ticketd dead-letters`: the events a consumer group gave
 * up on (dead_letters, sql/002 and sql/004), listed for an operator and
 * re-driven once their cause is fixed.
 *
 *   ticketd dead-letters list [--config FILE] [--consumer NAME] [--json]
 *   ticketd dead-letters replay [--config FILE] (--id N | --all) [--consumer NAME]
 *
 * A re-drive reads the letter's event from the outbox (the database, not
 * the dead-letter stream, holds the payload) and applies it with
 * consume_apply, the live consumers' own code: effect and dedup row in one
 * transaction that also locks and stamps the letter. So a business key is
 * applied at most once however often, and from however many processes at
 * once, a letter is replayed, and a letter whose key another copy of the
 * event applied meanwhile is only marked "already applied". A letter whose
 * cause is still there stays open.
 *
 * Owns its process's use of the store: loads the configuration, opens and
 * closes the database client; needs no Redis. Output goes to stdout, logs
 * to stderr. */
#ifndef TICKETD_DEADLETTERS_H
#define TICKETD_DEADLETTERS_H

/* Runs the command; argv[0] is "dead-letters". Returns the exit status:
 * 0 done (replay: every letter applied or already applied), 1 a letter is
 * still failing or the database failed, 2 a usage or configuration error. */
int deadletters_main(int argc, char **argv);

#endif
