# Redis from Debian's package on the same base as ticketd's image, for
# `make test-image` on machines without a registry (compose.yaml uses redis:7;
# tests/image/compose.local.yaml puts this image in its place).
FROM debian:bookworm-slim

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

COPY tests/image/redis-start.sh /usr/local/bin/redis-start.sh
USER redis
EXPOSE 6379
# Reachable only on the test's own container network (redis-start.sh).
ENTRYPOINT ["/usr/local/bin/redis-start.sh"]
# A cache and lock service for ticketd: nothing needs to survive a restart.
CMD ["redis-server", "--save", "", "--appendonly", "no"]
