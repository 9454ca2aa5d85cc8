/* job.c - the background jobs' runner (job.h). */
#include "job.h"

#include "bgthread.h"
#include "err.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>

/* One instance of a job, on its thread. */
struct job_thread {
    const struct job *job;
    const struct job_hooks *hooks;
    struct job_ctx ctx;
    struct bgthread bg;
    int first_wait; /* after a tick_before_start tick */
};

struct jobs {
    size_t n;
    struct job_thread *threads;
};

static void release(const struct job_hooks *hooks, unsigned needs)
{
    if (hooks == NULL)
        return;
    if ((needs & JOB_STORE) && hooks->store_release != NULL)
        hooks->store_release();
    if ((needs & JOB_CACHE) && hooks->cache_release != NULL)
        hooks->cache_release();
}

static void *job_main(void *p)
{
    struct job_thread *t = p;
    const struct job *job = t->job;
    int wait = job->tick_before_start ? t->first_wait : job->tick(&t->ctx);
    while (!(wait > 0 ? stopper_sleep(&t->bg.stopper, wait) : stopper_stopped(&t->bg.stopper)))
        wait = job->tick(&t->ctx);
    if (job->finish != NULL)
        job->finish(&t->ctx);
    release(t->hooks, job->needs);
    return NULL;
}

static int instances(const struct job *job, const struct app *app)
{
    return job->instances != NULL ? job->instances(app) : 1;
}

/* Starts t, its ctx filled in but for the state and the stopper. */
static bool job_thread_start(struct job_thread *t)
{
    const struct job *job = t->job;
    t->ctx.state = job->state_size > 0 ? xcalloc(1, job->state_size) : NULL;
    if (job->open != NULL)
        job->open(&t->ctx);
    if (job->tick_before_start) {
        t->first_wait = job->tick(&t->ctx);
        release(t->hooks, job->needs);
    }
    t->ctx.stopper = &t->bg.stopper;
    if (bgthread_start(&t->bg, job_main, t, job->name))
        return true;
    free(t->ctx.state);
    return false;
}

void jobs_stop(struct jobs *js)
{
    if (js == NULL)
        return;
    for (size_t i = 0; i < js->n; i++)
        bgthread_request_stop(&js->threads[i].bg);
    for (size_t i = 0; i < js->n; i++) {
        bgthread_join(&js->threads[i].bg);
        free(js->threads[i].ctx.state);
    }
    free(js->threads);
    free(js);
}

struct jobs *jobs_start(struct app *app, const struct job *const *table, size_t n,
                        const struct job_hooks *hooks)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (size_t)instances(table[i], app);
    struct jobs *js = xcalloc(1, sizeof *js);
    js->threads = xcalloc(total > 0 ? total : 1, sizeof *js->threads);
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < instances(table[i], app); k++) {
            struct job_thread *t = &js->threads[js->n];
            *t = (struct job_thread){.job = table[i],
                                     .hooks = hooks,
                                     .ctx = {.name = table[i]->name, .app = app, .index = k}};
            if (!job_thread_start(t)) {
                jobs_stop(js);
                return NULL;
            }
            js->n++;
        }
    }
    return js;
}

void job_note(struct job_ctx *c, int rc, int retry_ms)
{
    if (rc != TD_OK && !c->failing)
        log_warn("%s failed: %s; trying again every %d ms", c->name, td_strerror(rc), retry_ms);
    else if (rc == TD_OK && c->failing)
        log_info("%s is working again", c->name);
    c->failing = rc != TD_OK;
}
