/* http_listener.c - what the drain asks of the kernel about a listening
 * socket before it closes it (http_drain.c says why).
 *
 * Closing a listener resets every connection in its accept queue, and a
 * handshake can complete, and its client send a request, at any moment
 * until the close. So the drain first stops new handshakes from beginning
 * on the socket (a classic BPF socket filter that drops a segment with
 * SYN set and ACK clear: the client's SYN goes unanswered, it sends it
 * again a second later and then finds the port closed, ECONNREFUSED,
 * nothing sent), lets those already begun complete (their final ACK and
 * their data pass the filter), and asks the kernel (sock_diag) how many
 * are still half done on the port before the last accept(). */
#include "http_internal.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A socket filter on a TCP socket sees the segment from its TCP header:
 * the flags are its 14th byte. */
#define TCP_FLAGS_AT 13
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10

bool http_listener_refuse_handshakes(int fd)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, TCP_FLAGS_AT),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, TCP_FLAG_SYN | TCP_FLAG_ACK),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TCP_FLAG_SYN, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0),           /* a new handshake's SYN: dropped */
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu), /* anything else: kept whole */
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0;
}

/* How many TCP sockets of family are half-open (SYN_RECV) on local port
 * port_be (network order), over the whole host; -1 when the kernel does
 * not say. One dump of the kernel's table through NETLINK_SOCK_DIAG. */
static int half_open_of(int family, uint16_t port_be)
{
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct {
        struct nlmsghdr head;
        struct inet_diag_req_v2 req;
    } ask;
    memset(&ask, 0, sizeof ask);
    ask.head.nlmsg_len = sizeof ask;
    ask.head.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    ask.head.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    ask.req.sdiag_family = (uint8_t)family;
    ask.req.sdiag_protocol = IPPROTO_TCP;
    ask.req.idiag_states = 1u << TCP_SYN_RECV;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int n = -1;
    if (sendto(nl, &ask, sizeof ask, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        goto out;
    n = 0;
    for (;;) {
        char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
        ssize_t got = recv(nl, buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            n = -1;
            goto out;
        }
        /* NLMSG_OK and NLMSG_NEXT, spelt out: the macros compare a
         * signed length with an unsigned one. */
        for (size_t at = 0; at + sizeof(struct nlmsghdr) <= (size_t)got;) {
            const struct nlmsghdr *h = (const struct nlmsghdr *)(buf + at);
            if (h->nlmsg_len < sizeof *h || h->nlmsg_len > (size_t)got - at)
                break;
            if (h->nlmsg_type == NLMSG_DONE)
                goto out;
            if (h->nlmsg_type == NLMSG_ERROR) {
                n = -1;
                goto out;
            }
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            if (h->nlmsg_len >= NLMSG_LENGTH(sizeof *m) && m->id.idiag_sport == port_be)
                n++;
            at += NLMSG_ALIGN(h->nlmsg_len);
        }
    }
out:
    close(nl);
    return n;
}

int http_listener_half_open(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return half_open_of(AF_INET, ((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family != AF_INET6)
        return -1;
    /* An IPv6 listener takes IPv4 handshakes too; the kernel keeps those
     * half done as IPv4 sockets. */
    uint16_t port = ((struct sockaddr_in6 *)&ss)->sin6_port;
    int v6 = half_open_of(AF_INET6, port), v4 = half_open_of(AF_INET, port);
    return v6 < 0 || v4 < 0 ? -1 : v6 + v4;
}
