/* fiber.c - fibers (fiber.h). Each loop thread keeps its own
 * pool of stacks: a fiber starts, parks and ends on the thread that
 * spawned it, so nothing here is shared between threads and nothing takes
 * a lock. A stack is one mmap: a guard of FIBER_GUARD bytes (PROT_NONE) at
 * its low end, where a stack overflow faults instead of writing over a
 * neighbour, then the stack, with the struct fiber itself at its top. So
 * whatever lies below a stack in memory (another fiber's struct, a
 * library), a guard lies between them. The struct shares its page with
 * the fiber's first frames: a page of its own above the stack made every
 * live fiber one page (4 KiB) larger, 1 MiB at 256 orders in flight.
 *
 * Switching: the loop thread's own context (its scheduler) resumes a
 * fiber by switching to it (ctx_switch); the fiber parks or ends by
 * switching back. On x86-64 the switch is a few instructions of our own
 * that save the callee-saved registers on the stack being left and take
 * them from the stack being entered: glibc's swapcontext also saves and
 * restores the signal mask, one rt_sigprocmask system call per switch
 * (about ten per order), for a mask that never differs between a loop and
 * its fibers (the loops inherit main's, which blocks the shutdown signals,
 * boot.c, and nothing on a loop changes it).
 * Elsewhere it stays swapcontext.
 * AddressSanitizer is told of every switch (__sanitizer_start_switch_fiber
 * before, __sanitizer_finish_switch_fiber after), or it takes the fiber's
 * frames for a stack overflow of the thread and reports false errors. */
#include "fiber.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif

#ifdef FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
/* ASan's frames are several times larger (redzones around locals). */
#define FIBER_STACK (1024 * 1024)
#else
/* Request code runs jansson, OpenSSL (JWT signatures), the MariaDB and
 * Redis clients: a few tens of KiB deep at most. Only the pages a fiber
 * touches are resident; the rest is address space. */
#define FIBER_STACK (256 * 1024)
#endif

/* Below each stack: a frame larger than a page that skipped over a small
 * guard would write into whatever is mapped below. -fstack-clash-protection
 * (Makefile) makes the compiler touch each page of a large frame in turn,
 * so the first fault lands in the guard; 64 KiB also covers code built
 * without it (the libraries') for any frame up to that size. Address space
 * only: no page of it is ever resident. */
#define FIBER_GUARD (64 * 1024)

/* Spare stacks a loop thread keeps mapped for its next fibers; beyond
 * these, an ended fiber's stack is unmapped (a burst does not stay
 * resident). */
#define FIBER_POOL_KEEP 64

/* ---- the context switch ------------------------------------------------ */

#if defined(__x86_64__)

/* A context is the stack pointer of a stack that was left in
 * fiber_switch_asm: below it, what that call pushed. */
struct fiber_ctx {
    void *sp;
};

/* fiber_switch_asm(from, to): pushes the callee-saved registers of the
 * System V ABI (rbp, rbx, r12-r15, and the control words of the SSE and
 * x87 units) on the current stack, stores its stack pointer in *from,
 * moves to the stack pointer to and pops the same from there, returning
 * where that context last called fiber_switch_asm, or, on a new stack, into
 * fiber_entry (ctx_make). Every other register is the caller's to save,
 * as for any call. */
void fiber_switch_asm(void **from, void *to);
__asm__(".text\n"
        ".globl fiber_switch_asm\n"
        ".hidden fiber_switch_asm\n"
        ".type fiber_switch_asm,@function\n"
        "fiber_switch_asm:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size fiber_switch_asm, .-fiber_switch_asm\n");

static void ctx_switch(struct fiber_ctx *from, struct fiber_ctx *to)
{
    fiber_switch_asm(&from->sp, to->sp);
}

/* A context that enters entry on the stack [stack, stack + len): the
 * frame fiber_switch_asm pops, laid out as it pushed one, returning into
 * entry with the stack aligned as at any function's entry (16 bytes, less
 * the return address). entry never returns: its own return address is 0,
 * where a backtrace ends. */
static void ctx_make(struct fiber_ctx *c, char *stack, size_t len, void (*entry)(void))
{
    uint64_t *top = (uint64_t *)(((uintptr_t)stack + len) & ~(uintptr_t)15);
    uint64_t *sp = top - 9;
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = (uint64_t)mxcsr | (uint64_t)fpucw << 32; /* the control words */
    for (int i = 1; i <= 6; i++)
        sp[i] = 0; /* r15, r14, r13, r12, rbx, rbp */
    sp[7] = (uint64_t)(uintptr_t)entry;
    sp[8] = 0; /* entry's return address */
    c->sp = sp;
}

#else /* any other machine: glibc's ucontext */

#include <ucontext.h>

struct fiber_ctx {
    ucontext_t uc;
};

static void ctx_switch(struct fiber_ctx *from, struct fiber_ctx *to)
{
    swapcontext(&from->uc, &to->uc);
}

/* Never inlined: getcontext returns twice (to the compiler), which would
 * make it keep the caller's locals in memory. */
static __attribute__((noinline)) void ctx_make(struct fiber_ctx *c, char *stack, size_t len,
                                               void (*entry)(void))
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = len;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}

#endif

/* ---- fibers ---------------------------------------------------------- */

enum fiber_state {
    FIBER_READY,   /* queued on its loop to run in this turn */
    FIBER_RUNNING, /* on the CPU */
    FIBER_PARKED,  /* waiting for fiber_ready */
    FIBER_DONE,    /* its function returned */
};

struct fiber {
    struct fiber_ctx ctx;
    struct loop *loop;
    struct loop_task task; /* resumes the fiber in its loop's turn */
    void (*fn)(void *arg);
    void *arg;
    void *slots[FIBER_SLOTS];
    enum fiber_state state;
    bool wake_pending; /* readied while running: its next park returns at once */
    void *map;         /* the whole mapping, guard included */
    size_t map_len;
    char *stack; /* the usable stack's low end */
    size_t stack_len;
    struct fiber *next_free;
#ifdef FIBER_ASAN
    void *fake_stack;
#endif
};

static __thread struct fiber *current;
static __thread struct fiber_ctx scheduler;
static __thread struct fiber *pool;
static __thread int pooled;
static __thread int live;
static __thread void *thread_slots[FIBER_SLOTS];
#ifdef FIBER_ASAN
static __thread void *scheduler_fake_stack;
static __thread const void *scheduler_bottom;
static __thread size_t scheduler_size;
#endif

size_t fiber_stack_size(void)
{
    return FIBER_STACK;
}

struct fiber *fiber_self(void)
{
    return current;
}

int fiber_live(void)
{
    return live;
}

/* The slots taken by keys so far (fiber_slot), and the lock that makes a
 * key's first use take exactly one: held for a few instructions, never
 * across a park. */
static pthread_mutex_t keys_mu = PTHREAD_MUTEX_INITIALIZER;
static int keys_taken;

static int key_slot(struct fiber_key *key)
{
    int s = atomic_load_explicit(&key->slot, memory_order_acquire);
    if (s != 0)
        return s - 1;
    pthread_mutex_lock(&keys_mu);
    s = atomic_load_explicit(&key->slot, memory_order_relaxed);
    if (s == 0) {
        if (keys_taken == FIBER_SLOTS) {
            log_error("fiber: a key beyond the %d slots of a fiber (FIBER_SLOTS, fiber.h)",
                      FIBER_SLOTS);
            abort();
        }
        s = ++keys_taken;
        atomic_store_explicit(&key->slot, s, memory_order_release);
    }
    pthread_mutex_unlock(&keys_mu);
    return s - 1;
}

void **fiber_slot(struct fiber_key *key)
{
    int s = key_slot(key);
    return current != NULL ? &current->slots[s] : &thread_slots[s];
}

static size_t page_size(void)
{
    static size_t page;
    if (page == 0)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

size_t fiber_guard_size(void)
{
    size_t page = page_size();
    return (FIBER_GUARD + page - 1) / page * page;
}

/* A fiber with a stack: from the pool, or newly mapped. NULL when the
 * kernel refuses the mapping. */
static struct fiber *fiber_alloc(void)
{
    struct fiber *f = pool;
    if (f != NULL) {
        pool = f->next_free;
        pooled--;
        return f;
    }
    size_t guard = fiber_guard_size();
    size_t head = (sizeof *f + 63) & ~(size_t)63; /* the struct, in whole cache lines */
    size_t len = guard + FIBER_STACK;
    void *map =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    if (mprotect(map, guard, PROT_NONE) != 0) {
        munmap(map, len);
        return NULL;
    }
    f = (struct fiber *)((char *)map + guard + FIBER_STACK - head);
    memset(f, 0, sizeof *f);
    f->map = map;
    f->map_len = len;
    f->stack = (char *)map + guard;
    f->stack_len = FIBER_STACK - head;
    return f;
}

static void fiber_release(struct fiber *f)
{
    live--;
    if (pooled < FIBER_POOL_KEEP) {
        f->next_free = pool;
        pool = f;
        pooled++;
        return;
    }
    munmap(f->map, f->map_len);
}

void fiber_pool_drain(void)
{
    while (pool != NULL) {
        struct fiber *f = pool;
        pool = f->next_free;
        munmap(f->map, f->map_len);
    }
    pooled = 0;
}

/* The first code on a new fiber's stack. */
static void fiber_entry(void)
{
    struct fiber *f = current;
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &scheduler_bottom, &scheduler_size);
#endif
    f->fn(f->arg);
    f->state = FIBER_DONE;
#ifdef FIBER_ASAN
    /* NULL: this stack is not coming back, ASan may free its fake frames. */
    __sanitizer_start_switch_fiber(NULL, scheduler_bottom, scheduler_size);
#endif
    /* Saved where nothing will read it: this context never resumes. */
    ctx_switch(&f->ctx, &scheduler);
}

/* The loop's task: runs f until it parks or ends. */
static void fiber_resume(void *arg)
{
    struct fiber *f = arg;
    current = f;
    f->state = FIBER_RUNNING;
#ifdef FIBER_ASAN
    __sanitizer_start_switch_fiber(&scheduler_fake_stack, f->stack, f->stack_len);
#endif
    ctx_switch(&scheduler, &f->ctx);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(scheduler_fake_stack, NULL, NULL);
#endif
    current = NULL;
    if (f->state == FIBER_DONE)
        fiber_release(f);
}

struct fiber *fiber_spawn(struct loop *l, void (*fn)(void *), void *arg)
{
    struct fiber *f = fiber_alloc();
    if (f == NULL) {
        log_error("fiber: cannot map a stack of %zu bytes: %s", (size_t)FIBER_STACK,
                  strerror(errno));
        return NULL;
    }
    ctx_make(&f->ctx, f->stack, f->stack_len, fiber_entry);
    f->loop = l;
    f->fn = fn;
    f->arg = arg;
    memset(f->slots, 0, sizeof f->slots);
    f->wake_pending = false;
    f->next_free = NULL;
    f->task = (struct loop_task){0};
    f->state = FIBER_READY;
    live++;
    loop_soon(l, &f->task, fiber_resume, f);
    return f;
}

void fiber_park(void)
{
    struct fiber *f = current;
    if (f->wake_pending) {
        f->wake_pending = false;
        return;
    }
    f->state = FIBER_PARKED;
#ifdef FIBER_ASAN
    __sanitizer_start_switch_fiber(&f->fake_stack, scheduler_bottom, scheduler_size);
#endif
    ctx_switch(&f->ctx, &scheduler);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, &scheduler_bottom, &scheduler_size);
#endif
}

void fiber_ready(struct fiber *f)
{
    switch (f->state) {
    case FIBER_PARKED:
        f->state = FIBER_READY;
        loop_soon(f->loop, &f->task, fiber_resume, f);
        break;
    case FIBER_RUNNING:
        f->wake_pending = true;
        break;
    default:
        break; /* already due to run, or ended */
    }
}

struct sleeper {
    struct fiber *f;
    bool over;
};

static void sleep_over(void *arg)
{
    struct sleeper *z = arg;
    z->over = true;
    fiber_ready(z->f);
}

void fiber_sleep_ms(int64_t ms)
{
    if (current == NULL) {
        sleep_ms(ms);
        return;
    }
    struct sleeper z = {.f = current};
    struct loop_timer t = {0};
    loop_timer_start(current->loop, &t, ms > INT32_MAX ? INT32_MAX : (int)ms, sleep_over, &z);
    while (!z.over)
        fiber_park();
}
