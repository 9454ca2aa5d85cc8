/* prefer.h - the one preference ticketd honours in an RFC 7240 Prefer
 * header: wait=N, on POST /orders and POST /orders/batch (orders.h: a copy
 * that meets its key in flight waits for the first copy instead of a 409).
 *
 * A Prefer header is a list of preferences, each a token, optionally
 * "=" and a value (a token or a quoted string), optionally followed by
 * ";"-separated parameters. Names are case-insensitive; a preference given
 * twice counts the first time only (RFC 7240 §2). Clients also write
 * "return=minimal; wait=5", where wait is, strictly, a parameter of
 * "return": the parser takes wait there too, so that a client's intent is
 * not lost to a separator. A wait whose value is not 1*DIGIT (quoted or
 * not), or is 0, is ignored, as RFC 7240 says of a preference that is not
 * understood: the request is then served as without the header. Pure: no
 * allocation, no I/O. */
#ifndef TICKETD_PREFER_H
#define TICKETD_PREFER_H

#include <stddef.h>

/* The seconds a valid wait=N in the len bytes of a Prefer header asks for,
 * cut to max_s (a larger N is cut to it); 0 when there is none, it is
 * malformed, 0, or the header is NULL. */
int prefer_wait_s(const char *value, size_t len, int max_s);

#endif
