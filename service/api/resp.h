/* resp.h - the response a handler produces, independent of the HTTP
 * library: status, headers, body. http.c turns it into bytes.
 *
 * A struct resp lives in the per-request state; handlers fill it with the
 * resp_* calls and never free it themselves (resp_reset does). Not
 * thread-safe: it belongs to its request, on that request's loop (its
 * fiber, or the loop itself for an answer given inline). */
#ifndef TICKETD_RESP_H
#define TICKETD_RESP_H

#include "problem.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define RESP_MAX_HEADERS 8

struct resp_header {
    char *name;
    char *value;
};

struct resp {
    int status;
    const char *content_type; /* static string */
    char *body;               /* owned; NUL-terminated */
    size_t body_len;
    struct resp_header headers[RESP_MAX_HEADERS];
    int nheaders;
    /* For logs and metrics: the problem code, if the answer is an error,
     * and the defence that produced the answer, if one did. Static strings. */
    const char *code;
    const char *layer;
};

void resp_init(struct resp *w);
/* Frees everything and leaves w as after resp_init(). */
void resp_reset(struct resp *w);

/* Sets the body to the compact JSON of obj. Takes obj (decref'd here). */
void resp_json(struct resp *w, int status, json_t *obj);
/* Sets the body to a stored JSON answer of len bytes, taking *body (set
 * to NULL: the answer moves into the response, no copy), and, when it is
 * a replay, says so (Idempotent-Replayed: true). */
void resp_json_take(struct resp *w, int status, char **body, size_t len, bool replayed);
/* Sets the body to a copy of len bytes of body. */
void resp_raw(struct resp *w, int status, const char *content_type, const char *body, size_t len);
/* An RFC 9457 problem: status, type, title and code from the table; detail
 * formatted like printf; field added when not NULL. Headers set
 * before or after stay. */
void resp_problem(struct resp *w, enum problem p, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Adds a header (copied). Replaces an existing one of the same name. */
void resp_header_add(struct resp *w, const char *name, const char *value);
/* Returns the borrowed value of a header set on w, or NULL. */
const char *resp_get_header(const struct resp *w, const char *name);

#endif
