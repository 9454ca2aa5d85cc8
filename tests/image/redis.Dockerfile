# Redis from Debian's package on the same base as ticketd's image, for
# `make test-image` on machines without a registry (compose.yaml uses redis:7).
FROM debian:bookworm-slim

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

USER redis
EXPOSE 6379
# A cache and lock service for ticketd: nothing needs to survive a restart.
# Reachable only on the test's own container network.
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
