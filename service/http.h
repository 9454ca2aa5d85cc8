/* http.h - the HTTP server: libmicrohttpd's request lifecycle, bodies and
 * their limits, request ids, access logs and metrics. The only file that
 * includes <microhttpd.h>.
 *
 * Requests are served on an internal thread pool (epoll); handlers may
 * block on Redis or MySQL there. */
#ifndef TICKETD_HTTP_H
#define TICKETD_HTTP_H

struct app;
struct http_server;

/* Starts listening on cfg->bind:cfg->port and serving through
 * api_dispatch(). Returns a new server, or NULL (logged). */
struct http_server *http_start(struct app *app);

/* Stops accepting new connections; requests in flight go on. */
void http_quiesce(struct http_server *s);

/* Waits until no request is in flight or timeout_ms passed. Returns the
 * number still in flight. */
int http_drain(struct http_server *s, int timeout_ms);

/* Closes every connection and frees s. NULL is accepted. */
void http_stop(struct http_server *s);

#endif
