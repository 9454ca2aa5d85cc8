/* api.h - the HTTP API above the transport: routing, authentication,
 * media-type checks, then the handler of the route. */
#ifndef TICKETD_API_H
#define TICKETD_API_H

#include "req.h"
#include "resp.h"

/* Answers r into w. Always fills w (a problem on any failure). */
void api_dispatch(struct req *r, struct resp *w);

#endif
