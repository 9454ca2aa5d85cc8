/* consume_naive.c - the demo's naive dedup key (consume_naive.h). */
#include "consume_naive.h"

#include "consume.h"
#include "stream.h"

char *consume_naive_key_by_entry(const struct consume_group *g, const struct stream_entry *en)
{
    return consume_dedup_key(g, en->id);
}
