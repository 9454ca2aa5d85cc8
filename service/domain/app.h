/* app.h - the process-wide state handlers share: the loaded config, the
 * draining flag, the switched-on defences, the in-process response cache,
 * the order-key filter's shape and the steps chosen at boot. Made by
 * boot.c (cmd_serve, cmd_partitions) before anything runs, freed there
 * after everything stopped. */
#ifndef TICKETD_APP_H
#define TICKETD_APP_H

#include "bloom.h"
#include "config.h"
#include "idem.h"

#include <stdatomic.h>
#include <stdbool.h>

struct consume_group;
struct order_steps;
struct respcache;
struct stream_entry;

struct app {
    const struct config *cfg; /* borrowed from main */
    _Atomic bool draining;    /* SIGTERM seen: /readyz answers 503 */
    unsigned defences;        /* DEFENCE_* bits switched on (defences.h) */
    struct respcache *respcache;
    char instance[IDEM_INSTANCE_LEN + 1]; /* this process's random id */
    struct bloom_shape bloom;             /* the order-key filter's, from the settings */
    char bloom_shape[48];                 /* "m:k", as the filter's state names it */
    /* An order was recorded that the filter could not be told of (Redis
     * failed): the filter must not be trusted, here at once and, once
     * Redis answers again, everywhere (bloom_job.h). */
    _Atomic bool bloom_missed;
    /* How the consumers name an entry's dedup row (consumers.h), chosen
     * at boot with the other adapters (boot.c). */
    char *(*dedup_key)(const struct consume_group *g, const struct stream_entry *en);
    /* The order flow's steps the demo replaces (order_steps.h), chosen at
     * boot; NULL: the real ones. Borrowed. */
    const struct order_steps *order_steps;
};

#endif
