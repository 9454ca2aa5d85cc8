/*
 * ticketd-paysign - signs one payment callback as the gateway would, for
 * scripts/pay.sh: reads the raw body from stdin, prints its X-Pay-Signature.
 *
 *   TICKETD_PAY_SECRET=... ticketd-paysign TIMESTAMP < body
 *
 * The secret comes from the environment, never the command line, where
 * every user of the machine could read it. Exit code 0, or 2 on misuse.
 */
#include "paysign.h"

#include <stdio.h>
#include <stdlib.h>

/* A callback body is a few hundred bytes; ticketd refuses more than 1 MiB. */
#define BODY_MAX (1024 * 1024)

int main(int argc, char **argv)
{
    const char *secret = getenv("TICKETD_PAY_SECRET");
    char hex[PAYSIGN_HEX_LEN];
    char *body;
    size_t len;

    if (argc != 2) {
        fprintf(stderr, "usage: TICKETD_PAY_SECRET=... ticketd-paysign TIMESTAMP < body\n");
        return 2;
    }
    if (secret == NULL || secret[0] == '\0') {
        fprintf(stderr, "ticketd-paysign: TICKETD_PAY_SECRET is not set\n");
        return 2;
    }
    body = malloc(BODY_MAX + 1);
    if (body == NULL)
        return 2;
    len = fread(body, 1, BODY_MAX + 1, stdin);
    if (ferror(stdin) || len > BODY_MAX) {
        fprintf(stderr, "ticketd-paysign: cannot read a body of at most %d bytes\n", BODY_MAX);
        free(body);
        return 2;
    }
    if (paysign(secret, argv[1], body, len, hex) != 0) {
        free(body);
        return 2;
    }
    free(body);
    printf("%s\n", hex);
    return 0;
}
