/* err.c - the names of the error values (err.h), for logs and problems. */
#include "err.h"

const char *td_strerror(int err)
{
    switch (err) {
    case TD_OK:
        return "ok";
    case TD_EINVAL:
        return "invalid";
    case TD_ENOTFOUND:
        return "not found";
    case TD_ECONFLICT:
        return "conflict";
    case TD_EDUP:
        return "duplicate";
    case TD_ERETRY:
        return "retriable";
    case TD_EUNAVAIL:
        return "unavailable";
    case TD_EINTERNAL:
        return "internal";
    case TD_ESPENT:
        return "spent";
    }
    return "unknown";
}
