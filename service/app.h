/* app.h - the process-wide state handlers share: the loaded config, the
 * draining flag, the switched-on defences and the in-process response
 * cache. Created by main before the server starts, freed after it stops. */
#ifndef TICKETD_APP_H
#define TICKETD_APP_H

#include "config.h"
#include "idem.h"

#include <stdatomic.h>
#include <stdbool.h>

struct respcache;

struct app {
    const struct config *cfg; /* borrowed from main */
    _Atomic bool draining;    /* SIGTERM seen: /readyz answers 503 */
    unsigned defenses;        /* DEFENSE_* bits switched on (defenses.h) */
    struct respcache *respcache;
    char instance[IDEM_INSTANCE_LEN + 1]; /* this process's random id */
};

#endif
