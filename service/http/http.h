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
struct workers_thread_hooks;

/* Starts listening on cfg->bind:cfg->port and serving through
 * api_dispatch(), the blocking work on a pool whose threads run hooks
 * (borrowed, workers.h) around their jobs. Returns a new server, or NULL
 * (logged). */
struct http_server *http_start(struct app *app, const struct workers_thread_hooks *hooks);

/* Stops accepting new connections; requests in flight go on. */
void http_quiesce(struct http_server *s);

/* The graceful part of a shutdown, after http_quiesce and with
 * app->draining set (every answer then carries Connection: close): waits,
 * at most timeout_ms, until every request that was read has its answer
 * sent completely and the connections are closed or idle; requests that
 * arrive after that on idle connections get 503 and change nothing.
 * Returns the number of requests still in flight (0 on a clean drain). */
int http_drain(struct http_server *s, int timeout_ms);

/* Closes every connection and frees s. NULL is accepted. */
void http_stop(struct http_server *s);

#endif
