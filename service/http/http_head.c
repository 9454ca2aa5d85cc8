/* http_head.c - reading a request's head: the header values the API sees,
 * the checks a head must pass before any body byte is read (framing,
 * smuggling, size, hygiene) and the decoding of its target. Apart from
 * http_exchange.c because these are rules about bytes from the client, each with
 * its reason, that say nothing of how a request is then answered. */
#include "app.h"
#include "http_internal.h"
#include "req.h"
#include "resp.h"
#include "util.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The largest head ticketd serves, counted as the pool holds it: its bytes,
 * plus HEAD_ENTRY_COST for each header, cookie and query argument the
 * parser keeps (a 56-byte list entry, aligned), plus the Cookie value
 * again (the parser splits a copy). A head within it leaves at least
 * 8 KiB of the pool for the answer, whatever else a client pipelined
 * behind it, against the ~1 KiB the largest answer's header block needs;
 * a larger one is refused with 431 before anything is done. Heads beyond
 * what the pool can parse at all (~30 KiB) get libmicrohttpd's own 431. */
#define HEAD_MAX        (16 * 1024)
#define HEAD_ENTRY_COST 64

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The value kept for (kind, name), or NULL with *found false. */
static const char *kept_find(struct exchange *x, char kind, const char *name, bool *found)
{
    for (int i = 0; i < x->nkept; i++) {
        struct kept_value *k = &x->kept[i];
        if (k->kind == kind &&
            (kind == 'h' ? strcasecmp(k->name, name) : strcmp(k->name, name)) == 0) {
            *found = true;
            return k->value;
        }
    }
    *found = false;
    return NULL;
}

/* Keeps a copy of the first n bytes of v (NULL: absent) as (kind, name)'s
 * value, for as long as the exchange lives, and returns it. */
static const char *kept_add(struct exchange *x, char kind, const char *name, const char *v,
                            size_t n)
{
    if (x->nkept == KEPT_MAX)
        return NULL; /* never: no handler reads that many values */
    struct kept_value *k = &x->kept[x->nkept++];
    k->kind = kind;
    k->name = xstrdup(name);
    k->value = v != NULL ? xstrndup(v, n) : NULL;
    return k->value;
}

/* RFC 9110 5.5: whitespace around a field value is not part of it. MHD
 * strips the leading blanks; the trailing ones are cut here. */
static const char *read_header(struct MHD_Connection *c, const char *name, size_t *n)
{
    const char *v = NULL;
    *n = 0;
    if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, name, strlen(name), &v, n) != MHD_YES)
        return NULL;
    while (*n > 0 && blank(v[*n - 1]))
        (*n)--;
    return v;
}

static const char *read_query(struct MHD_Connection *c, const char *name, size_t *n)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    *n = v != NULL ? strlen(v) : 0;
    return v;
}

/* A header ('h') or query argument ('q') of the exchange, read once and
 * copied into it: the request's fiber may still use it after the client
 * went away and MHD freed the connection. */
static const char *exchange_value(struct exchange *x, char kind, const char *name,
                                  const char *(*read)(struct MHD_Connection *, const char *,
                                                      size_t *))
{
    bool found;
    const char *kept = kept_find(x, kind, name, &found);
    if (found || x->conn == NULL)
        return kept;
    size_t n;
    const char *v = read(x->conn, name, &n);
    return kept_add(x, kind, name, v, n);
}

/* ctx is the exchange (req_source). */
static const char *exchange_header(void *ctx, const char *name)
{
    return exchange_value(ctx, 'h', name, read_header);
}

static const char *exchange_query(void *ctx, const char *name)
{
    return exchange_value(ctx, 'q', name, read_query);
}

/* What the API reads of a request, through struct req. */
const struct req_source http_exchange_source = {exchange_header, exchange_query};

/* An X-Request-Id from the client is echoed only if it is short and
 * harmless in logs and headers; otherwise we make one. */
bool http_request_id_ok(const char *s)
{
    return id_chars_ok(s, 64);
}

/* Headers that say one thing once. A second copy is ambiguous (which one
 * did the proxy in front of us look at?), so it is refused, not guessed. */
static const char *const singletons[] = {
    "Idempotency-Key", "X-Order-Token",     "Authorization",     "X-Pay-Timestamp",
    "X-Pay-Signature", "X-Request-Id",      "Content-Type",      "Host",
    "webhook-id",      "webhook-timestamp", "webhook-signature",
};
#define N_SINGLETONS (sizeof singletons / sizeof singletons[0])

/* What the header block says about framing and hygiene, and the first
 * thing wrong with it (a static text, or NULL). */
struct head_check {
    const char *bad;
    int content_lengths;
    bool lengths_differ;
    const char *first_length;
    bool transfer_encoding;
    bool unknown_coding; /* a Transfer-Encoding other than chunked */
    int seen[N_SINGLETONS];
    const char *prev_end; /* where the previous value's text ended */
};

/* RFC 9110 5.6.2: a field name is a token. A name with a blank before the
 * colon is not one: MHD would keep "Content-Length " as an ordinary
 * header, and the body would be read as a second request (smuggling). */
static bool token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 9110 5.5: no NUL, CR, LF or other control in a value (HTAB is a
 * blank, bytes from 0x80 are obs-text). MHD cuts a value at a NUL, so
 * "Idempotency-Key: k\0tail" would read as key k: the length MHD parsed
 * tells them apart. */
static bool value_ok(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* "chunked", with n_blanks trailing blanks (libmicrohttpd strips the
 * leading ones). */
static bool is_chunked(const char *v, size_t n, size_t *n_blanks)
{
    size_t end = n;
    while (end > 0 && blank(v[end - 1]))
        end--;
    *n_blanks = n - end;
    return end == 7 && strncasecmp(v, "chunked", 7) == 0;
}

/* MHD parses the header block in place: each line's CR LF (or LF) becomes
 * NUL bytes, and names and values point into that buffer, in wire order.
 * So between the end of one value and the next name there are only the
 * one or two NULs that were the line break; anything else is the rest of
 * a value that a NUL cut short ("Idempotency-Key: k\0tail"). MHD reports
 * the cut length, so this is the only place the tail can be seen. Two
 * pointers that are not close together are not one buffer: no verdict. */
static bool hidden_bytes(const char *end, const char *next)
{
    if (end == NULL || next <= end || next - end > 64)
        return false;
    for (const char *p = end; p < next; p++) {
        if (*p != '\0')
            return true;
    }
    return false;
}

static enum MHD_Result inspect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size)
{
    struct head_check *h = cls;
    (void)kind;
    if (value == NULL)
        value = "";
    if (hidden_bytes(h->prev_end, key)) {
        h->bad = "a header value holds a NUL, CR, LF or another control character";
        return MHD_NO;
    }
    h->prev_end = value + value_size;
    bool name_ok = key_size > 0 && strlen(key) == key_size;
    for (size_t i = 0; name_ok && i < key_size; i++)
        name_ok = token_char((unsigned char)key[i]);
    if (!name_ok) {
        h->bad = "a header name is not a token (whitespace before the colon?)";
        return MHD_NO;
    }
    if (!value_ok(value, value_size)) {
        h->bad = "a header value holds a NUL, CR, LF or another control character";
        return MHD_NO;
    }
    for (size_t i = 0; i < N_SINGLETONS; i++) {
        if (strcasecmp(key, singletons[i]) == 0 && ++h->seen[i] > 1) {
            h->bad = "a header that may appear once appears twice";
            return MHD_NO;
        }
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (h->content_lengths > 0 && strcmp(h->first_length, value) != 0)
            h->lengths_differ = true;
        if (h->content_lengths == 0)
            h->first_length = value;
        h->content_lengths++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        size_t pad = 0;
        h->transfer_encoding = true;
        /* "chunked " is chunked (RFC 9110 5.5: blanks around a value are
         * not part of it), and answered as chunked is, below. */
        if (!is_chunked(value, value_size, &pad))
            h->unknown_coding = true;
    }
    return MHD_YES;
}

/* "GET /livez\0/x HTTP/1.1" would route as /livez: on the request line the
 * version follows the target and one space, so a target that ends sooner
 * was cut by a NUL. */
static bool target_whole(const struct conn_slot *slot, const char *version)
{
    if (slot == NULL || slot->uri == NULL || version == NULL)
        return true;
    return slot->uri + slot->uri_len + 1 == version;
}

static enum MHD_Result count_entry(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    size_t *cost = cls;
    (void)key_size;
    *cost += HEAD_ENTRY_COST;
    if (kind == MHD_HEADER_KIND && value != NULL && strcasecmp(key, "Cookie") == 0)
        *cost += value_size + 1;
    return MHD_YES;
}

/* What the head takes of the connection's pool (see HEAD_MAX). */
static size_t head_cost(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t cost = ci != NULL ? ci->header_size : 0;
    MHD_get_connection_values_n(c, MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND,
                                count_entry, &cost);
    return cost;
}

/* Checks the request line and headers before any body byte is read.
 * Returns false with x->resp set when the request must be refused now
 * (the connection is then closed: where the framing is in doubt, nothing
 * after this request on the connection can be trusted). */
bool http_precheck(struct MHD_Connection *c, struct exchange *x)
{
    struct head_check h = {0};
    if (head_cost(c) > HEAD_MAX) {
        resp_problem(&x->resp, PROBLEM_HEADERS_TOO_LARGE, NULL,
                     "the request head may be at most %d bytes (each header counts %d more)",
                     HEAD_MAX, HEAD_ENTRY_COST);
        return false;
    }
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, inspect_header, &h);
    /* After the last value come its line break and the empty line: NULs. */
    if (h.bad == NULL && h.prev_end != NULL && h.prev_end[1] != '\0')
        h.bad = "a header value holds a NUL, CR, LF or another control character";
    if (h.bad == NULL && !target_whole(x->slot, x->wire_version))
        h.bad = "the request target holds a NUL";
    if (h.bad != NULL) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "%s", h.bad);
        return false;
    }
    /* Both a length and chunked, or two different lengths, are how request
     * smuggling starts: a proxy and we could disagree on where this request
     * ends. Refuse rather than guess. */
    if (h.content_lengths > 0 && h.transfer_encoding) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL,
                     "Content-Length and Transfer-Encoding must not both be sent");
        return false;
    }
    /* RFC 9112 6.1: a transfer coding we do not know leaves the body's end
     * unknown: 501, and the connection closes. Chunked bodies are refused
     * too: libmicrohttpd decodes them before ticketd sees a byte, and a
     * chunk line longer than the connection's memory (a 100 KiB chunk
     * extension) ends in its own 500 page, with no way for ticketd to
     * answer. Clients and proxies send Content-Length instead. */
    if (h.unknown_coding || h.transfer_encoding) {
        resp_problem(&x->resp, PROBLEM_NOT_IMPLEMENTED, NULL,
                     "chunked and other transfer codings are not supported: send Content-Length");
        return false;
    }
    if (h.lengths_differ) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "conflicting Content-Length headers");
        return false;
    }
    if (h.content_lengths > 0) {
        int64_t n;
        if (!parse_i64(h.first_length, 0, INT64_MAX, &n)) {
            resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "malformed Content-Length");
            return false;
        }
        /* Answer 413 before reading a byte of an announced oversized body. */
        if (n > x->srv->app->cfg->max_body) {
            resp_problem(&x->resp, PROBLEM_PAYLOAD_TOO_LARGE, NULL,
                         "the body may be at most %d bytes", x->srv->app->cfg->max_body);
            return false;
        }
    }
    return true;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decoding for paths and query arguments, in place, except "%00"
 * and "%2F". MHD's own decoder turns %00 into a NUL that ends the string
 * early, so "/api/v1/admin/audit%00.css" would route as the audit (and a
 * cache in front could keep it as a stylesheet); a decoded %2F would make
 * "/api/v1/admin%2Faudit" route as the audit while a proxy's path rules
 * saw one segment. Left encoded, they match no route. */
size_t http_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r != '\0'; r++) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_value(r[1])) >= 0 && (lo = hex_value(r[2])) >= 0 &&
            (hi | lo) != 0 && hi * 16 + lo != '/') {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}
