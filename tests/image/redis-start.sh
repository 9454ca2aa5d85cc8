#!/bin/sh
# The Redis test image's entrypoint (tests/image/redis.Dockerfile), so that
# compose.yaml's own `command` for redis:7 runs here unchanged: a server
# started from the command line, without a config file, listens on every
# interface, and with protected mode off, since only the containers of its
# network reach it (what the registry's image does for such a command).
# Any other command runs as given.
set -eu
if [ "${1:-}" = redis-server ]; then
    shift
    exec redis-server --bind 0.0.0.0 --protected-mode no "$@"
fi
exec "$@"
