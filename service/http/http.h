/* http.h - the HTTP server: libmicrohttpd's request lifecycle, bodies and
 * their limits, request ids, access logs and metrics. The only folder that
 * includes <microhttpd.h>.
 *
 * TICKETD_LOOPS event loops (base/loop.h), each on a thread of its own,
 * each run a libmicrohttpd daemon of their own on the same port
 * (SO_REUSEPORT: the kernel spreads new connections over them). A request
 * is read, checked and, when it needs no I/O, answered on its loop; the
 * rest of it (api_finish: Redis, MySQL) runs on a fiber of the same loop
 * (base/fiber.h), which parks while it waits, so one waiting request
 * holds up no other connection and no request crosses to another loop. */
#ifndef TICKETD_HTTP_H
#define TICKETD_HTTP_H

struct app;
struct http_server;

/* What each loop runs around its requests; a NULL member is skipped.
 * Called on the loop's own thread. */
struct http_loop_hooks {
    void (*after_request)(void); /* on the request's fiber, after it: what it borrowed back */
    void (*end)(void);           /* once, before the loop's thread ends: what the loop owned */
};

/* Starts listening on cfg->bind:cfg->port with cfg->loops event loops,
 * serving through api_begin() and api_finish(); hooks (borrowed, may be
 * NULL) are copied. Returns a new server, or NULL (logged). */
struct http_server *http_start(struct app *app, const struct http_loop_hooks *hooks);

/* Stops taking new connections: each loop accepts those already waiting
 * in its listener's accept queue, then closes the listener once the queue
 * is empty (closing it first would reset them). Requests in flight go on.
 * Returns once every loop has begun; a loop at its connection limit
 * finishes as its connections close. */
void http_quiesce(struct http_server *s);

/* The graceful part of a shutdown, after http_quiesce and with
 * app->draining set (every answer then carries Connection: close): waits,
 * at most timeout_ms, until every listener is closed (past it, they are
 * closed whatever waits in them), then until every request that was read
 * has its answer sent completely and the connections are closed or idle;
 * requests that arrive after that on idle connections get 503 and change
 * nothing. The same deadline bounds http_stop. Returns the number of
 * requests still in flight (0 on a clean drain). */
int http_drain(struct http_server *s, int timeout_ms);

/* Ends the loops, closes every connection and frees s; returns 0. NULL
 * is accepted. A loop whose request fibers still wait for Redis or MySQL
 * at the drain's deadline (http_drain's timeout) is stopped without them:
 * then nothing is closed or freed, since the parked fibers hold it, and
 * the number of requests abandoned is returned, for the caller to exit at
 * once. */
int http_stop(struct http_server *s);

#endif
