/* consume_naive.h - the demo's naive dedup key of the consumers: the
 * message id instead of the business key (consumers.h, consumer_key_fn).
 * boot.c puts it in app->dedup_key at boot when TICKETD_DEFENSES switches
 * consumer-dedup-business-key off (TICKETD_ENV=demo only). */
#ifndef TICKETD_CONSUME_NAIVE_H
#define TICKETD_CONSUME_NAIVE_H

struct consume_group;
struct stream_entry;

/* "<group>:<stream entry id>" (a new string): a copy of the event under
 * another entry id, as the relay publishes again, is taken for a new
 * event and applied again. */
char *consume_naive_key_by_entry(const struct consume_group *g, const struct stream_entry *en);

#endif
