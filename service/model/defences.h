/* defences.h - which of ticketd's defences against duplicates are on.
 *
 * All are on by default. TICKETD_DEFENSES can switch single ones off so a
 * demo can show the damage each one prevents; that is refused unless
 * TICKETD_ENV=demo, and logged loudly when allowed. Pure. */
#ifndef TICKETD_DEFENSES_H
#define TICKETD_DEFENSES_H

#include <stdbool.h>
#include <stddef.h>

/* One bit each, from the table (defences.def): DEFENCE_<id> = 1u << bit. */
enum defence {
#define DEFENCE(id, bit, name, lesson, anchor, harm) DEFENCE_##id = 1u << (bit),
#include "defences.def"
#undef DEFENCE
};

/* Every defence of the table on: what "all" means, and the default. */
enum {
    DEFENCES_ALL_BITS = 0
#define DEFENCE(id, bit, name, lesson, anchor, harm) | DEFENCE_##id
#include "defences.def"
#undef DEFENCE
};
#define DEFENCES_ALL ((unsigned)DEFENCES_ALL_BITS)

/* Parses "all", "none", or a comma list of the table's names (defences.def),
 * each optionally prefixed with '-' to switch it off. A list that starts with
 * '-' starts from all on. Returns TD_OK or TD_EINVAL with a reason in err. */
int defences_parse(const char *spec, unsigned *out, char *err, size_t cap);

/* Logs every switched-off defence, one line each: "DEFENCE SWITCHED OFF:
 * <name> -- <what gets through>". Returns TD_EINVAL (logged) if any is off
 * and env is not "demo". */
int defences_check_env(unsigned on, const char *env);

/* The name of one defence bit, e.g. "session-lock". */
const char *defence_name(enum defence d);

#endif
