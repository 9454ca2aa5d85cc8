/* cache_scripts.h - the Redis cache adapter's Lua scripts (cache_scripts.c),
 * for cache_redis.c alone, which runs them; their KEYS and ARGV are
 * described where each is written. */
#ifndef TICKETD_CACHE_SCRIPTS_H
#define TICKETD_CACHE_SCRIPTS_H

#include "redis.h"

/* Lua: same_marker(cur, m), true when the key's value cur is the marker m
 * (idem.h: "P|<fp>|<owner>"), as set or as a waiting copy marked it
 * ("W|...": watched). Shared with the naive scripts (cache_naive.c), which
 * compare markers as the real ones do. */
#define CACHE_LUA_SAME_MARKER                                                                      \
    "local function same_marker(cur, m)\n"                                                         \
    "  return cur and m ~= '' and string.sub(cur, 1, 1) ~= 'D'\n"                                  \
    "    and string.sub(cur, 2) == string.sub(m, 2)\n"                                             \
    "end\n"

extern struct redis_script cache_lua_bloom_check;
extern struct redis_script cache_lua_bloom_add;
extern struct redis_script cache_lua_bloom_begin;
extern struct redis_script cache_lua_bloom_progress;
extern struct redis_script cache_lua_begin;
extern struct redis_script cache_lua_take_over;
extern struct redis_script cache_lua_token_take;
extern struct redis_script cache_lua_complete;
extern struct redis_script cache_lua_release;
extern struct redis_script cache_lua_watch;

/* Computes every script's SHA1 for EVALSHA (cache_init). */
void cache_scripts_prepare(void);

#endif
