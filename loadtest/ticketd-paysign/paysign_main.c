/*
 * ticketd-paysign - signs one payment callback as the gateway would, for
 * scripts/pay.sh: reads the raw body from stdin, prints its signature, in
 * either of the schemes ticketd accepts.
 *
 *   TICKETD_PAY_SECRET=... ticketd-paysign TIMESTAMP < body
 *       X-Pay-Signature: lowercase hex HMAC-SHA256 of "<TIMESTAMP>.<body>"
 *   TICKETD_PAY_SECRET=... ticketd-paysign --webhook ID TIMESTAMP < body
 *       webhook-signature (Standard Webhooks): "v1,<base64>" over
 *       "<ID>.<TIMESTAMP>.<body>", keyed with a whsec_ secret's decoded
 *       base64 or another secret's bytes
 *
 * A gateway signs with one secret: when TICKETD_PAY_SECRET holds two (a
 * rotation, "new,old"), the first is used. The secret comes from the
 * environment, never the command line, where every user of the machine
 * could read it. Exit code 0, or 2 on misuse.
 */
#include "paysign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A callback body is a few hundred bytes; ticketd refuses more than 1 MiB. */
#define BODY_MAX (1024 * 1024)

static int usage(void)
{
    fprintf(stderr, "usage: TICKETD_PAY_SECRET=... ticketd-paysign [--webhook ID] TIMESTAMP "
                    "< body\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *env = getenv("TICKETD_PAY_SECRET");
    const char *id = NULL, *ts;
    char hex[PAYSIGN_HEX_LEN], sig[PAYSIGN_WEBHOOK_LEN], secret[1024];
    char *body;
    size_t len;
    int rc;

    if (argc == 4 && strcmp(argv[1], "--webhook") == 0) {
        id = argv[2];
        ts = argv[3];
    } else if (argc == 2) {
        ts = argv[1];
    } else {
        return usage();
    }
    if (env == NULL || env[0] == '\0') {
        fprintf(stderr, "ticketd-paysign: TICKETD_PAY_SECRET is not set\n");
        return 2;
    }
    /* The first secret, blanks around it dropped, as ticketd reads it. */
    size_t n = strcspn(env, ",");
    while (n > 0 && (env[0] == ' ' || env[0] == '\t')) {
        env++;
        n--;
    }
    while (n > 0 && (env[n - 1] == ' ' || env[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof secret) {
        fprintf(stderr, "ticketd-paysign: TICKETD_PAY_SECRET holds no usable secret\n");
        return 2;
    }
    memcpy(secret, env, n);
    secret[n] = '\0';
    body = malloc(BODY_MAX + 1);
    if (body == NULL)
        return 2;
    len = fread(body, 1, BODY_MAX + 1, stdin);
    if (ferror(stdin) || len > BODY_MAX) {
        fprintf(stderr, "ticketd-paysign: cannot read a body of at most %d bytes\n", BODY_MAX);
        free(body);
        return 2;
    }
    rc = id != NULL ? paysign_webhook(secret, id, ts, body, len, sig)
                    : paysign(secret, ts, body, len, hex);
    free(body);
    if (rc != 0) {
        fprintf(stderr, "ticketd-paysign: cannot sign with this secret\n");
        return 2;
    }
    printf("%s\n", id != NULL ? sig : hex);
    return 0;
}
