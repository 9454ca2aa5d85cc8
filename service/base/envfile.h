/* envfile.h - the grammar of an env file, as Compose reads an env_file:
 * KEY=VALUE lines, blank lines and # comments skipped, values unquoted up
 * to a comment or single/double quoted with escapes. Knows no setting:
 * config.c applies the pairs. Pure but for envfile_read; thread-safe. */
#ifndef TICKETD_ENVFILE_H
#define TICKETD_ENVFILE_H

#include <stddef.h>

/* One pair of the file, at where ("origin:line"). Returns TD_OK, or an
 * error with the reason in why (cap bytes), which stops the walk. */
typedef int (*envfile_fn)(const char *key, const char *value, const char *where, void *ctx,
                          char *why, size_t cap);

/* Calls each for every KEY=VALUE line of text, in order. TD_OK, or
 * TD_EINVAL with "origin:line: reason" in err: a line that is no pair, an
 * empty key, a badly quoted value, or each's refusal. */
int envfile_walk(const char *text, const char *origin, envfile_fn each, void *ctx, char *err,
                 size_t cap);

/* Reads the whole file at path into *out (NUL-terminated, caller frees).
 * TD_OK, or an error with *out NULL. */
int envfile_read(const char *path, char **out);

#endif
