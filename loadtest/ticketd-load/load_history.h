/*
 * load_history.h - the run's history of client operations, one JSON line
 * per event, in the shape of a Jepsen history.
 *
 * Every load request (every attempt of it: a client's retry is a new
 * operation) is an operation of the client (process) that sent it: an
 * "invoke" line when it leaves, with what it asks (f, key, token, body),
 * and one completion line when its answer came: "ok" (2xx, with status,
 * order_no, Idempotency-Layer), "fail" (a refusal, with its problem code:
 * the operation took no effect) or "info" (no answer, a timeout, a reset,
 * a 5xx: its effect is unknown). Both lines carry the operation's number,
 * so that a reader pairs them as Jepsen's tools do. docs/lab.md describes
 * the fields; lab/checker.py reads them.
 *
 * Cheap on purpose: the lines go through one stdio buffer of 1 MiB under
 * one mutex (the engines of a mixed run share it), written out when it
 * fills and at the end, so that the history does not slow the load it
 * records. Control requests (sessions, the audit, reads for the verdict)
 * are not client operations and are not written.
 */
#ifndef LOADTEST_LOAD_HISTORY_H
#define LOADTEST_LOAD_HISTORY_H

#include "load_engine.h"

/* Opens path for the run (truncated); times are written in seconds since
 * t0 (load_now()). Returns 0, or -1 with errno set. The engines tell it of
 * each attempt once load_main.c hands them load_history_observer. */
int load_history_open(const char *path, double t0);

/* Writes what is buffered and closes the history; a no-op when none is
 * open. Returns 0, or -1 if a write failed. */
int load_history_close(void);

/* The invoke line of r, just before it leaves; numbers the operation
 * (r->op). A no-op without a history or for LOAD_CONTROL. */
void load_history_invoke(struct load_req *r);

/* The completion line of r, once its answer (or its failure) is in. */
void load_history_complete(const struct load_req *r);

/* load_history_invoke and load_history_complete, as the engines'
 * observer (load_engine_observe). */
extern const struct load_observer load_history_observer;

/* The completion type of r's answer: "ok", "fail" or "info". */
const char *load_history_type(const struct load_req *r);

#endif
