# ticketd container image.
#
#   docker build -t ticketd .
#   docker compose up          # with Redis and MariaDB, see compose.yaml
#
# Two stages: the first has the compiler and -dev packages, the second only
# the shared libraries the binary links against, so the image stays small and
# carries no toolchain.

FROM debian:bookworm AS build

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        build-essential \
        pkg-config \
        libmicrohttpd-dev \
        libhiredis-dev \
        libmariadb-dev \
        libjansson-dev \
        libjwt-dev \
        libcurl4-openssl-dev \
        libssl-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Only what the release build needs: a local build/ or .state/ folder of the
# checkout must not leak into the image.
COPY Makefile ./
COPY service/ service/
COPY scripts/ scripts/
COPY sql/ sql/
COPY config/ config/

# The packages above are all the build needs; the full developer set checked
# by scripts/deps.sh (servers, load and test tools) is not wanted here.
ENV TICKETD_SKIP_DEPS=1
RUN make build && test -x build/release/ticketd


FROM debian:bookworm-slim AS runtime

# Runtime libraries of the build stage's -dev packages, plus
# mariadb-client-core (the `mariadb` command, all `services.sh migrate` runs;
# mariadb-client would add Perl and 100 MB) and curl for the health check.
# apt's lists and package caches (80 MB) stay out of the layer.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates \
        curl \
        libcurl4 \
        libhiredis0.14 \
        libjansson4 \
        libjwt0 \
        libmariadb3 \
        libmicrohttpd12 \
        libssl3 \
        mariadb-client-core \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

RUN groupadd --system ticketd \
    && useradd --system --gid ticketd --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin ticketd

WORKDIR /app
COPY --from=build /src/build/release/ticketd /usr/local/bin/ticketd
COPY sql/ /app/sql/
COPY scripts/services.sh scripts/proc.sh /app/scripts/
COPY config/ticketd.env /app/config/ticketd.env

# Inside a container the service must listen on all interfaces to be
# reachable through a published port; config/ticketd.env binds to loopback
# for local development.
ENV TICKETD_BIND=0.0.0.0 \
    TICKETD_PORT=8080

USER ticketd
EXPOSE 8080

HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${TICKETD_PORT}/readyz" >/dev/null || exit 1

CMD ["ticketd", "serve"]
