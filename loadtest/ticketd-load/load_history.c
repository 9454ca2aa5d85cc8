/*
 * load_history.c - the run's history of client operations (load_history.h).
 */
#include "load_history.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HISTORY_BUF (1 << 20)

static pthread_mutex_t history_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *history_out;
static char *history_buf;
static double history_t0;
static atomic_llong history_ops;

int load_history_open(const char *path, double t0)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return -1;
    history_buf = load_xcalloc(1, HISTORY_BUF);
    setvbuf(f, history_buf, _IOFBF, HISTORY_BUF);
    history_t0 = t0;
    history_out = f;
    return 0;
}

int load_history_close(void)
{
    int rc = 0;

    pthread_mutex_lock(&history_mu);
    if (history_out != NULL) {
        if (ferror(history_out) || fclose(history_out) != 0)
            rc = -1;
        history_out = NULL;
    }
    free(history_buf);
    history_buf = NULL;
    pthread_mutex_unlock(&history_mu);
    return rc;
}

/* s as a JSON string, escaped. */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* The value of header "name: value" among r's headers, or NULL. */
static const char *header_of(const struct load_req *r, const char *name)
{
    size_t n = strlen(name);

    for (const struct curl_slist *h = r->headers; h != NULL; h = h->next)
        if (strncasecmp(h->data, name, n) == 0 && h->data[n] == ':')
            return h->data[n + 1] == ' ' ? h->data + n + 2 : h->data + n + 1;
    return NULL;
}

/* What the operation is, in the words of the history. */
static const char *op_name(const struct load_req *r)
{
    switch (r->kind) {
    case LOAD_ORDER:
        return strstr(r->path, "/batch") != NULL ? "cart" : "create";
    case LOAD_TOKEN:
        return "token";
    case LOAD_CALLBACK:
        return "pay";
    case LOAD_CANCEL:
        return "cancel";
    default:
        return "control";
    }
}

/* The client: the user the JWT names, or the payment gateway. */
static void put_process(FILE *f, const struct load_req *r)
{
    if (r->kind == LOAD_CALLBACK)
        fputs("\"gateway\"", f);
    else
        fprintf(f, "%llu", (unsigned long long)r->client);
}

/* The fields every line of the operation repeats. */
static void put_head(FILE *f, const char *type, const struct load_req *r, double t)
{
    const char *key = header_of(r, "Idempotency-Key");

    fprintf(f, "{\"type\":\"%s\",\"op\":%lld,\"process\":", type, r->op);
    put_process(f, r);
    fprintf(f, ",\"f\":\"%s\",\"time\":%.6f", op_name(r), t - history_t0);
    if (key != NULL) {
        fputs(",\"key\":", f);
        put_str(f, key);
    }
}

void load_history_invoke(struct load_req *r)
{
    const char *token;

    if (history_out == NULL || r->kind == LOAD_CONTROL)
        return;
    r->op = atomic_fetch_add(&history_ops, 1) + 1;
    token = header_of(r, "X-Order-Token");
    pthread_mutex_lock(&history_mu);
    if (history_out != NULL) {
        FILE *f = history_out;

        put_head(f, "invoke", r, r->t_start);
        if (token != NULL) {
            fputs(",\"token\":", f);
            put_str(f, token);
        }
        if (r->kind == LOAD_CANCEL) {
            const char *no = strstr(r->path, "/orders/");
            char order_no[40];

            if (no != NULL && sscanf(no, "/orders/%39[^/]", order_no) == 1) {
                fputs(",\"order_no\":", f);
                put_str(f, order_no);
            }
        }
        fprintf(f, ",\"attempt\":%d,\"target\":%d,\"path\":", r->attempts, r->target);
        put_str(f, r->path);
        if (r->body != NULL && r->body_len > 0) {
            /* The scenarios' bodies are compact JSON of their own making. */
            fputs(",\"body\":", f);
            if (r->body[0] == '{' && memchr(r->body, '\n', r->body_len) == NULL)
                fwrite(r->body, 1, r->body_len, f);
            else
                put_str(f, r->body);
        }
        fputs("}\n", f);
    }
    pthread_mutex_unlock(&history_mu);
}

const char *load_history_type(const struct load_req *r)
{
    if (r->status == 0 || r->status >= 500)
        return "info";
    if (r->status >= 400)
        return "fail";
    return "ok";
}

void load_history_complete(const struct load_req *r)
{
    const char *type = load_history_type(r);
    const char *order_no = NULL;
    const char *token = NULL;

    if (history_out == NULL || r->kind == LOAD_CONTROL || r->op == 0)
        return;
    if (r->json != NULL) {
        order_no = json_string_value(json_object_get(r->json, "order_no"));
        if (r->kind == LOAD_TOKEN)
            token = json_string_value(json_object_get(r->json, "token"));
    }
    pthread_mutex_lock(&history_mu);
    if (history_out != NULL) {
        FILE *f = history_out;

        put_head(f, type, r, r->t_end);
        fprintf(f, ",\"status\":%ld", r->status);
        if (r->code[0] != '\0') {
            /* A refusal's problem code, or a callback's outcome. */
            fputs(r->kind == LOAD_CALLBACK && r->status < 400 ? ",\"outcome\":" : ",\"code\":", f);
            put_str(f, r->code);
        }
        if (r->layer[0] != '\0') {
            fputs(",\"layer\":", f);
            put_str(f, r->layer);
        }
        if (r->replayed)
            fputs(",\"replayed\":true", f);
        if (order_no != NULL) {
            fputs(",\"order_no\":", f);
            put_str(f, order_no);
        }
        if (token != NULL) {
            fputs(",\"token\":", f);
            put_str(f, token);
        }
        if (r->status == 0) {
            fputs(",\"error\":", f);
            put_str(f, r->error[0] != '\0' ? r->error : "no answer");
        }
        fputs("}\n", f);
    }
    pthread_mutex_unlock(&history_mu);
}

const struct load_observer load_history_observer = {
    .sent = load_history_invoke,
    .answered = load_history_complete,
};
