/* boot.h - what main.c asks of boot.c: the commands that boot ticketd. */
#ifndef TICKETD_BOOT_H
#define TICKETD_BOOT_H

#include "config.h"

#include <stdbool.h>

#define TICKETD_VERSION "1.0.0"

/* `ticketd serve` (http true) or `ticketd worker` (http false): runs until
 * SIGTERM or SIGINT, then drains. Returns the exit status. */
int cmd_serve(struct config *cfg, bool http);
/* `ticketd partitions`: one round of the retention job, in the foreground,
 * after waiting up to wait_ms for the job's lease (-1: as long as a
 * holder's lease lasts). Returns the exit status. */
int cmd_partitions(struct config *cfg, int wait_ms);

#endif
