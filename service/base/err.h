/* err.h - the error vocabulary shared by every ticketd module.
 *
 * Fallible functions return int: TD_OK (0) or one of the negative values
 * below. Only the API layer turns them into status codes (the handlers of
 * api_*.c, and api_fail in reply.c for the rest). */
#ifndef TICKETD_ERR_H
#define TICKETD_ERR_H

enum td_err {
    TD_OK = 0,
    TD_EINVAL = -1,    /* the caller's input is wrong */
    TD_ENOTFOUND = -2, /* no such thing (or not the caller's) */
    TD_ECONFLICT = -3, /* a compare-and-set lost, a state forbids it */
    TD_EDUP = -4,      /* a unique key already holds this value */
    TD_ERETRY = -5,    /* deadlock, lock wait, or a race a fresh look settles: retry */
    TD_EUNAVAIL = -6,  /* a dependency is down or timed out */
    TD_EINTERNAL = -7, /* a bug or an unexpected answer */
    TD_ESPENT = -8,    /* a one-time token already bought something */
};

/* Returns a static, human-readable name for an error value. */
const char *td_strerror(int err);

#endif
