/* api.h - the HTTP API above the transport: routing, authentication,
 * media-type checks, then the handler of the route. */
#ifndef TICKETD_API_H
#define TICKETD_API_H

#include "req.h"
#include "resp.h"

/* What api_begin, and a route's quick step before it returns, says of a
 * request: the one vocabulary for "answered" in the API layer. */
enum api_step {
    API_ANSWERED, /* w holds the answer */
    API_ON_FIBER, /* the rest waits for Redis or MariaDB: api_finish, on a fiber */
};

/* Everything of a request that needs no I/O, done at once by the loop that
 * read it: routing, authentication, the media type, and the route's own quick
 * checks (validation, a replay from the in-process cache). Routes that
 * touch no dependency (/livez, /metrics) are answered here whole. */
enum api_step api_begin(struct req *r, struct resp *w);

/* The rest of a request api_begin left, which waits for Redis or MySQL:
 * on a fiber of the loop that read the request (it parks where it waits). */
void api_finish(struct req *r, struct resp *w);

/* Both steps, one after the other, where it is called (tests, or a fiber).
 * Always fills w. */
void api_dispatch(struct req *r, struct resp *w);

#endif
