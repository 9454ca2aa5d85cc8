#!/usr/bin/env python3
"""flood.py - a flood of client connections, for the bench's memory row.

    flood.py HOST PORT CONNECTIONS [SECONDS]

Opens CONNECTIONS connections to HOST:PORT as fast as the machine lets it,
sends one `GET /livez` on each, reads until its answer or its close, and
closes them all; gives up on whatever is still open after SECONDS (30).
Prints one line: connections opened, answered, refused or closed unanswered.

What it measures is not speed but what the server keeps afterwards: a
server that grows its memory for a flood and never gives it back holds it
for good (the bench compares ticketd's RSS, idle, before and after three
floods). Standard library only, one thread, non-blocking sockets.
"""
import errno
import resource
import selectors
import socket
import sys
import time

REQUEST = b"GET /livez HTTP/1.1\r\nHost: flood\r\n\r\n"


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    seconds = float(sys.argv[4]) if len(sys.argv) == 5 else 30.0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, n + 64) if hard != resource.RLIM_INFINITY else n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    sel = selectors.DefaultSelector()
    opened = answered = refused = unanswered = 0
    deadline = time.monotonic() + seconds
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS):
            refused += 1
            s.close()
            continue
        opened += 1
        sel.register(s, selectors.EVENT_WRITE, "connecting")
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            if key.data == "connecting":
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    refused += 1
                    sel.unregister(s)
                    s.close()
                    continue
                try:
                    s.sendall(REQUEST)
                except OSError:
                    unanswered += 1
                    sel.unregister(s)
                    s.close()
                    continue
                sel.modify(s, selectors.EVENT_READ, "reading")
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data.startswith(b"HTTP/1.1 "):
                answered += 1
            else:
                unanswered += 1
            sel.unregister(s)
            s.close()
    left = len(sel.get_map())
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    print("flood: %d opened, %d answered, %d refused, %d closed unanswered, %d still open at the end"
          % (opened, answered, refused, unanswered, left))


if __name__ == "__main__":
    main()
