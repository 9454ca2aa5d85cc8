/* Memory given back after floods of connections (memtrim.h): the release
 * build (ASan's allocator keeps freed memory in its quarantine, so its
 * figures say nothing about glibc's), its resident set read from
 * /proc/PID/status before and after three floods of keep-alive
 * connections, each held until every one has its answer, then closed.
 *
 * Every wait is tied to progress: a flood's connections are opened and
 * answered in batches, and after they close the test waits until /metrics
 * counts no connection open but its own and no trim pending. The deadline
 * of that wait only turns a hang into a failure. */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cmocka.h>

/* Connections of one flood: each holds one loop's share of libmicrohttpd's
 * pool and state (about 33 KiB), so a flood is about 70 MB, several times
 * the idle process. */
#define FLOOD_CONNS 2000
#define FLOODS      3
/* Opened, sent and answered together: under the listeners' backlog. */
#define FLOOD_BATCH 250
/* A wait that makes no progress for this long has hung. */
#define STALL_MS 30000
/* The most a held keep-alive connection may cost, in KiB (docs/speed.md
 * states the measured figure: about 33). */
#define CONN_KIB_MAX 64

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atol(line + 6);
    }
    fclose(f);
    assert_true(kib > 0);
    return kib;
}

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connection refused: %s", strerror(errno));
    return fd;
}

/* Reads one answer's start on each of fds[0..n) until every one has it. */
static void await_answers(const int *fds, int n)
{
    static struct pollfd p[FLOOD_BATCH];
    static bool done[FLOOD_BATCH];
    int left = n;
    memset(done, 0, sizeof done);
    while (left > 0) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!done[i])
                p[k++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        }
        int r = poll(p, (nfds_t)k, STALL_MS);
        if (r <= 0)
            fail_msg("%d of %d connections got no answer in %d ms", left, n, STALL_MS);
        for (int j = 0; j < k; j++) {
            if (!(p[j].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[1024];
            ssize_t got = read(p[j].fd, buf, sizeof buf);
            if (got < 12 || memcmp(buf, "HTTP/1.1 200", 12) != 0)
                fail_msg("a flood connection got no 200: %zd bytes", got);
            for (int i = 0; i < n; i++) {
                if (fds[i] == p[j].fd)
                    done[i] = true;
            }
            left--;
        }
    }
}

/* Waits until /metrics counts no connection but the one asking and no trim
 * pending: every close of the flood was served, and what it freed has been
 * trimmed. */
static void await_closed(const struct th_server *s)
{
    double deadline = th_now_s() + STALL_MS / 1000.0;
    long long open = -1, pending = -1;
    while (th_now_s() < deadline) {
        open = th_metric(s, "ticketd_http_connections_open");
        pending = th_metric(s, "ticketd_memory_trims_pending");
        if (open == 1 && pending == 0)
            return;
        th_msleep(20);
    }
    fail_msg("after the flood: %lld connections open, %lld trims pending", open, pending);
}

/* Three floods of FLOOD_CONNS keep-alive connections, each one answered
 * and held until all are, then all closed: after each, the resident set is
 * within twice the idle one (it was the held size before memtrim.c: glibc
 * kept what the connections freed), and a held connection costs at most
 * CONN_KIB_MAX. */
static void test_memory_comes_back_after_floods(void **state)
{
    (void)state;
    struct rlimit nofile;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &nofile), 0);
    if (nofile.rlim_cur < FLOOD_CONNS + 256 && nofile.rlim_max >= FLOOD_CONNS + 256) {
        nofile.rlim_cur = FLOOD_CONNS + 256;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    char bin[512];
    const char *env[] = {"TICKETD_WORKERS=0", "TICKETD_CONN_PER_IP=0", NULL};
    snprintf(bin, sizeof bin, "%s", getenv("TICKETD_BIN") ? getenv("TICKETD_BIN") : "");
    setenv("TICKETD_BIN", "build/release/ticketd", 1);
    struct th_server *s = th_serve(0, env);
    if (bin[0] != '\0')
        setenv("TICKETD_BIN", bin, 1);
    else
        unsetenv("TICKETD_BIN");

    await_closed(s);
    long idle = rss_kib(s->pid);
    static int fds[FLOOD_CONNS];
    static const char req[] = "GET /livez HTTP/1.1\r\nHost: flood\r\n\r\n";
    for (int flood = 1; flood <= FLOODS; flood++) {
        for (int b = 0; b < FLOOD_CONNS; b += FLOOD_BATCH) {
            for (int i = b; i < b + FLOOD_BATCH; i++) {
                fds[i] = connect_to(s->port);
                assert_int_equal(write(fds[i], req, sizeof req - 1), (ssize_t)(sizeof req - 1));
            }
            await_answers(fds + b, FLOOD_BATCH);
        }
        long held = rss_kib(s->pid);
        for (int i = 0; i < FLOOD_CONNS; i++)
            close(fds[i]);
        await_closed(s);
        long after = rss_kib(s->pid);
        long per_conn = (held - idle) / FLOOD_CONNS;
        print_message("flood %d of %d connections: RSS idle %ld KiB, held %ld KiB (%ld KiB a "
                      "connection), after %ld KiB\n",
                      flood, FLOOD_CONNS, idle, held, per_conn, after);
        if (after > 2 * idle)
            fail_msg("flood %d: RSS %ld KiB after, more than twice the idle %ld KiB", flood, after,
                     idle);
        if (per_conn > CONN_KIB_MAX)
            fail_msg("a held connection costs %ld KiB, more than %d", per_conn, CONN_KIB_MAX);
    }
    assert_true(th_metric(s, "ticketd_memory_trims_total") >= FLOODS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_memory_comes_back_after_floods, th_setup_fresh,
                                        th_teardown_stop),
    };
    return cmocka_run_group_tests_name("memory", tests, NULL, NULL);
}
