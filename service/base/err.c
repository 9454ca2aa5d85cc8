/* err.c - the names of the error values (err.h), for logs and problems. */
#include "err.h"

#include <stddef.h>

/* Indexed by the value negated: TD_OK is 0 and every error below it. */
static const char *const names[] = {
    [-TD_OK] = "ok",
    [-TD_EINVAL] = "invalid",
    [-TD_ENOTFOUND] = "not found",
    [-TD_ECONFLICT] = "conflict",
    [-TD_EDUP] = "duplicate",
    [-TD_ERETRY] = "retriable",
    [-TD_EUNAVAIL] = "unavailable",
    [-TD_EINTERNAL] = "internal",
    [-TD_ESPENT] = "spent",
};

const char *td_strerror(int err)
{
    const int n = (int)(sizeof names / sizeof names[0]);
    if (err > 0 || err <= -n || names[-err] == NULL)
        return "unknown";
    return names[-err];
}
