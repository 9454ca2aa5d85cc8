/* merge_turn.h - the server's turn over the loops: at most one batch of new
 * orders of the process at MariaDB at once (store_merge.c sends them).
 *
 * While one loop's batch is at the server, the orders of every loop
 * collect, and the next batch takes them all, whichever loop sends it
 * (store_merge.c). At 16 connections on two cores: batches of 4.8 orders
 * where each loop's went at once (3.0), a fifth less CPU per order for
 * ticketd, MariaDB and Redis together (docs/speed.md, "One batch at the
 * server; a key's end still waited for"); 5.5 once a batch took every
 * loop's orders, not its own loop's ("One batch of every loop's orders").
 * A loop whose batch may not go takes a place in the line. A batch that
 * ends with orders due keeps the turn: its own loop sends the next batch at
 * once, with every loop's due orders, the line's among them (take_due in
 * store_merge.c), and the loops whose queues it emptied leave the line.
 * Handing the turn to the first loop in line instead (loop_post) put that
 * loop's wake-up, a context switch on a busy core, between every two
 * batches: one batch at the server at a time makes that
 * gap the service's, and keeping the turn made 5 to 12 % more orders/s at
 * 16 connections (docs/speed.md, "The turn kept"). A batch that ends with
 * nothing due hands the turn to the first loop in line, if an order came
 * meanwhile, or leaves the server free.
 *
 * Two exceptions keep the line from costing what it saves: a full batch
 * goes at once, beside the other (waiting could make it late, not
 * larger); and a loop waits in line at most MERGE_TURN_WAIT_MAX_MS at a
 * time (counted from its latest place in line, not its first), since a
 * batch that takes longer waits for a row another transaction holds, and
 * the other loops' orders, which may not need that row, go beside it.
 *
 * Thread-safe: the line is under a mutex held for a few instructions; a
 * place is touched by its own loop, and by the others only under it. */
#ifndef TICKETD_MERGE_TURN_H
#define TICKETD_MERGE_TURN_H

#include "loop.h"

#include <stdbool.h>
#include <stdint.h>

/* How long a loop's orders wait in line for the server's turn at most. A
 * batch takes a few milliseconds. */
#define MERGE_TURN_WAIT_MAX_MS 50

/* A loop's place in the line. go(arg) runs on its loop when the turn is
 * handed to it, or when it waited in line too long: it should call
 * merge_turn_take again, which then says yes. Zero it, then set loop, go
 * and arg, before first use. */
struct merge_turn_place {
    struct loop *loop;
    void (*go)(void *arg);
    void *arg;
    bool has_turn; /* handed to it: the server counts it already */
    bool in_line;
    int64_t line_since_ms; /* when it last took its place in line */
    struct merge_turn_place *next;
    struct loop_timer net; /* MERGE_TURN_WAIT_MAX_MS in line: go anyway */
};

/* On p's loop: whether p may send a batch now (the turn was handed to it,
 * no batch is at the server, or full says its batch is full); if not, p
 * takes its place in the line and its go runs later. Each yes must be
 * matched by one merge_turn_give when that batch ends (or is not sent). */
bool merge_turn_take(struct merge_turn_place *p, bool full);

/* A batch ended: the turn goes to the first place in line, or the server
 * is free. Any loop's thread. */
void merge_turn_give(void);

/* On p's loop, as p's batch ends with orders due on some loop: the
 * server's turn stays with p, whose next batch takes them (its
 * merge_turn_take says yes), instead of passing to the first loop in
 * line. */
void merge_turn_keep(struct merge_turn_place *p);

/* Another loop's batch took p's orders: p leaves the line, if it is in it,
 * so that the turn is not handed to a loop with nothing to send (at a
 * stop, a loop that ended). Its orders that came since start_batches'
 * next take, or the next batch's. Any loop's thread. */
void merge_turn_leave(struct merge_turn_place *p);

/* On p's loop: whether the turn was handed to p and not taken yet (its
 * merge_turn_take will say yes; with nothing to send, it must then give
 * the turn on). */
bool merge_turn_handed(struct merge_turn_place *p);

#endif
