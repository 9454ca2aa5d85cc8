/* test_fiber_fd.c - an fd that fibers wait on again and again stays in its
 * loop's epoll set between the waits (the kernel's own list of the set,
 * /proc/self/fdinfo, says so), watched for reading only; leaves the set
 * when it turns readable with nobody waiting, and comes back at the next
 * wait; and leaves it at fiber_fd_forget. A watchdog timer of seconds
 * fails a test instead of hanging it; nothing depends on the clock
 * otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fiber.h"
#include "fiber_fd.h"
#include "loop.h"
#include "loop_watchdog.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The fibers' stacks go back to the pool's: each test starts with none. */
static int teardown(void **state)
{
    loop_test_teardown(state);
    fiber_pool_drain();
    return 0;
}

/* The events an epoll set of this process watches fd for, as the kernel
 * lists them; -1 when no set holds it. */
static long epoll_events_of(int fd)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    long found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d)) != NULL) {
        char path[300], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, "anon_inode:[eventpoll]") != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%s", e->d_name);
        FILE *f = fopen(path, "r");
        char line[256];
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            int tfd;
            unsigned long events;
            if (sscanf(line, "tfd: %d events: %lx", &tfd, &events) == 2 && tfd == fd)
                found = (long)events;
        }
        if (f != NULL)
            fclose(f);
    }
    closedir(d);
    return found;
}

static int sv[2];
static struct fiber_fd kept;
static unsigned waited[4];
static long between; /* the watched events between two waits */

static void stop_when_alone(void)
{
    if (fiber_live() == 1)
        loop_stop(loop_self());
}

static void wait_twice(void *arg)
{
    (void)arg;
    char c;
    assert_int_equal(write(sv[1], "a", 1), 1);
    waited[0] = fiber_fd_wait(&kept, sv[0], LOOP_READ, -1);
    assert_int_equal(read(sv[0], &c, 1), 1);
    between = epoll_events_of(sv[0]);
    assert_int_equal(write(sv[1], "b", 1), 1);
    waited[1] = fiber_fd_wait(&kept, sv[0], LOOP_READ, -1);
    assert_int_equal(read(sv[0], &c, 1), 1);
    /* A wait for writing watches writing only while it waits. */
    waited[2] = fiber_fd_wait(&kept, sv[0], LOOP_WRITE, -1);
    waited[3] = fiber_fd_wait(&kept, sv[0], LOOP_READ, 5); /* nothing comes */
    stop_when_alone();
}

static void test_the_fd_stays_in_the_set_between_waits(void **state)
{
    struct loop *l = *state;
    memset(&kept, 0, sizeof kept);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_non_null(fiber_spawn(l, wait_twice, NULL));
    loop_test_run(l);
    assert_int_equal(waited[0], LOOP_READ);
    assert_int_equal(waited[1], LOOP_READ);
    assert_int_equal(waited[2], LOOP_WRITE);
    assert_int_equal(waited[3], 0); /* the timeout */
    /* Between waits, and after the last: in the set, for reading alone. */
    assert_true(between >= 0 && (between & EPOLLIN) && !(between & EPOLLOUT));
    long after = epoll_events_of(sv[0]);
    assert_true(after >= 0 && (after & EPOLLIN) && !(after & EPOLLOUT));
    assert_true(fiber_fd_watched(&kept));
    /* Off the loop's thread (the loop has stopped), forgetting leaves the
     * set to the close. */
    fiber_fd_forget(&kept);
    assert_false(fiber_fd_watched(&kept));
    close(sv[0]);
    close(sv[1]);
}

static void wait_then_leave(void *arg)
{
    (void)arg;
    char c;
    assert_int_equal(write(sv[1], "a", 1), 1);
    waited[0] = fiber_fd_wait(&kept, sv[0], LOOP_READ, -1);
    assert_int_equal(read(sv[0], &c, 1), 1);
    /* Readable while nobody waits: a turn or two later it left the set. */
    assert_int_equal(write(sv[1], "u", 1), 1);
    for (int i = 0; i < 3 && fiber_fd_watched(&kept); i++)
        fiber_sleep_ms(0);
    between = epoll_events_of(sv[0]);
    /* The next wait puts it back, and finds the byte. */
    waited[1] = fiber_fd_wait(&kept, sv[0], LOOP_READ, -1);
    assert_int_equal(read(sv[0], &c, 1), 1);
    assert_int_equal(c, 'u');
    assert_true(epoll_events_of(sv[0]) >= 0);
    fiber_fd_forget(&kept); /* on the loop's thread: out of the set */
    waited[2] = epoll_events_of(sv[0]) < 0;
    stop_when_alone();
}

static void test_readable_with_nobody_waiting_leaves_the_set(void **state)
{
    struct loop *l = *state;
    memset(&kept, 0, sizeof kept);
    memset(waited, 0, sizeof waited);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_non_null(fiber_spawn(l, wait_then_leave, NULL));
    loop_test_run(l);
    assert_int_equal(waited[0], LOOP_READ);
    assert_int_equal(between, -1); /* out of the set: no turn finds it again */
    assert_int_equal(waited[1], LOOP_READ);
    assert_int_equal(waited[2], 1); /* forgotten: out of the set */
    assert_false(fiber_fd_watched(&kept));
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_the_fd_stays_in_the_set_between_waits, loop_test_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_readable_with_nobody_waiting_leaves_the_set,
                                        loop_test_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
