/* memtrim.h - memory given back to the kernel once a burst of connections
 * is over.
 *
 * Each open connection holds about 33 KiB of heap (libmicrohttpd's
 * per-connection pool, HTTP_CONN_MEMORY, which it zeroes after every
 * request, so all of it is resident, and its connection state). glibc's
 * malloc gives freed memory back to the kernel only from the top of each
 * heap: after a flood of connections has closed, what they freed stays
 * with the process, interleaved with what is still in use (5,000 keep-alive
 * connections: 11 MB idle, 175 MB while held, and 175 MB after they all
 * closed). malloc_trim walks every arena and hands the free pages back.
 *
 * The trigger follows the connections, not the clock: the connections
 * open are followed from their peak since the last trim, and once at least
 * MEMTRIM_AFTER have closed and at most half of that peak are still open,
 * the loop that saw the close trims at the end of its turn (after every
 * close of the turn). A flood that ends halves its way down in a few trims;
 * a steady churn at a constant count never trims, so memory that the next
 * connections reuse at once is not given back and faulted in again.
 * /metrics shows the trims (ticketd_memory_trims_total) and those queued
 * and not yet run (ticketd_memory_trims_pending): with no connection open
 * and no trim pending, what the connections took has been given back. */
#ifndef TICKETD_MEMTRIM_H
#define TICKETD_MEMTRIM_H

struct loop;

/* Connections closed since the peak before a trim is worth its walk: what
 * is left untrimmed is bounded by about this many connections' memory. */
#define MEMTRIM_AFTER 128

/* On loop l's thread, whenever a connection opened or closed: open is the
 * number of connections of the whole process open now. Thread-safe across
 * loops. */
void memtrim_connections(struct loop *l, int open);

#endif
