/* config_table.h - what config.c's table of settings offers
 * config_load.c: the table's names and a value applied by name. Private
 * to service/base/config*.c; everyone else uses config.h. */
#ifndef TICKETD_CONFIG_TABLE_H
#define TICKETD_CONFIG_TABLE_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether name is a row of the table. */
bool config_is_setting(const char *name);

/* Parses value onto name's field of cfg: TD_OK, or TD_EINVAL with the
 * reason in err (an unknown name, a value out of its bounds). */
int config_apply(struct config *cfg, const char *name, const char *value, char *err, size_t cap);

/* Applies every setting present in the environment, in the table's
 * order: TD_OK, or TD_EINVAL at the first bad value, the reason in err. */
int config_apply_environment(struct config *cfg, char *err, size_t cap);

#endif
