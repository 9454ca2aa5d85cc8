# ticketd - build, run and test.
#
#   make run     install what the demo needs (scripts/deps.sh run: the build,
#                Redis, MariaDB, curl, jq), build, start private Redis and
#                MariaDB under .state/run, migrate, seed, serve on :8080
#   make test    install what the tests use besides (scripts/deps.sh test:
#                cmocka, clang-format, libFuzzer, Valgrind, nginx, Chromium,
#                Node.js, Prometheus, ...); release and ASan+UBSan builds;
#                unit and integration tests against private servers under
#                .state/test (other ports, so a running demo is untouched)
#   make stop    stop the private servers of `make run`
#   make reset   empty the database and Redis of `make run` (they must be
#                running) and seed the demo session again
#   make bench   side-by-side figures (loadtest/)
#   make build   just the release binary (build/release/ticketd)
#   make lab     the replay lab's live page on http://127.0.0.1:8090/ (lab/):
#                its own Redis, MariaDB and two instances; Ctrl-C stops all
#   make lesson  the lessons' names; make lesson L=<name> runs one without its
#                defence, then with it, and prints both figures (the galera-*
#                lessons on the test cluster of scripts/cluster.sh, as root)
#   make lessons-run
#                every lesson, both ways, into docs/lessons-run.md (the
#                figures the docs quote)
#   make cluster-lessons-run
#                the three galera-* lessons, twice, into
#                docs/cluster-lessons-run.md (lab/cluster_lessons.py; root)
#   make test-lab
#                the lab's tests: the page in headless Chromium, make lesson,
#                and what the lab refuses (also part of make test)
#   make test-repeat
#                the loop's promises many times in a row beside busy loops:
#                the held-request test 50 times, the 64 x 20 order storm 5
#                times (scripts/repeat-tests.sh; REPEAT_ARGS="--held 10")
#   make test-drain
#                the SIGTERM drain at full size: 500 connections queued at the
#                signal and 500 clients under live load, five runs each
#                (tests/integration/itest_conns.c; docs/http.md)
#   make test-cluster
#                three ticketd on a 3-node Galera cluster and a Redis that
#                fails over (Sentinel), storms and faults (tests/cluster/run.sh;
#                docs/scaling.md)
#   make image   the container image (ticketd:local) with Docker or Podman;
#                where no registry answers, the Debian base images are made
#                once with debootstrap (scripts/image.sh)
#   make test-image
#                the image built and run with Redis and MariaDB containers,
#                driven through its published port, stopped with SIGTERM
#                (tests/image/run.sh)

SHELL := /bin/bash
CC ?= cc

PKGS := libmicrohttpd hiredis libmariadb jansson libjwt libcrypto
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm

WARN := -Wall -Wextra -Werror -Wshadow -Wvla -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
# service/ holds one folder per layer; headers are included by bare name.
# Each service file is compiled with -I for its own folder and the folders
# service/layers.mk lets it use, so an include that breaks the rule fails to
# compile. Tests and tools outside service/ see every folder.
include service/layers.mk
SERVICE_INC = $(LAYERS:%=-Iservice/%)
# $(1): a service source or module path -> its folder (main for main.c).
layer_of = $(if $(filter service/,$(dir $(1))),main,$(patsubst service/%/,%,$(dir $(1))))
# $(1): folder, $(2): folder/name of a module -> the folders the open
# exceptions of either add.
layer_extra = $(foreach e,$(filter $(1):% $(2):%,$(LAYER_EXCEPTIONS)),$(firstword $(subst /, ,$(word 2,$(subst :, ,$(e))))))
# $(1): a service source -> its -I flags.
layer_inc = $(addprefix -Iservice/,$(filter-out main,$(sort $(call layer_of,$(1)) $(LAYER_$(call layer_of,$(1))) \
	$(call layer_extra,$(call layer_of,$(1)),$(call layer_of,$(1))/$(basename $(notdir $(1)))))))
# -fstack-clash-protection: a function whose frame is larger than a page
# touches each page as it grows its stack, so an overflow faults in the
# guard below the stack (fiber.c's, a thread's) instead of stepping over it
# into a neighbour's memory.
HARDEN := -fstack-clash-protection
BASE_CFLAGS = -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(HARDEN) $(PKG_CFLAGS)
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

RELEASE_CFLAGS = $(BASE_CFLAGS) -O2 -g
# The ASan build is the test build: it also compiles in the fault points
# (faults.h) that integration tests switch on to crash the process on purpose.
ASAN_CFLAGS = $(BASE_CFLAGS) -O1 -g $(SAN) -DTICKETD_FAULTS
# The replay lab's fault build: release speed, with the fault points, so the
# demo can slow a downstream step beyond the TTLs (TICKETD_FAULT=...:delay).
FAULTS_CFLAGS = $(RELEASE_CFLAGS) -DTICKETD_FAULTS

SRCS := $(wildcard service/*.c service/*/*.c)
HDRS := $(wildcard service/*.h service/*/*.h service/*/*.def)

# Private servers: `make run` and `make test` each have their own.
RUN_STATE := .state/run
RUN_REDIS_PORT := 16379
RUN_MYSQL_PORT := 13306
TEST_STATE := .state/test
TEST_REDIS_PORT := 26379
TEST_MYSQL_PORT := 23306

# services.sh treats TICKETD_*_HOST as "use an external server"; it must see
# only what the user exported, never config/ticketd.env.
SERVICES := scripts/services.sh

.PHONY: all build deps deps-run deps-demo deps-bench deps-lab run stop reset test test-repeat test-drain test-cluster image test-image unit integration format format-check layers-check sources-check bench \
	demo lab lesson lessons-run cluster-lessons-run lab-bins test-lab valgrind clean

all: build

# Each target installs what it uses (scripts/deps.sh GROUP): `make run` the
# demo's packages only, `make test` (and plain `make deps`) everything the
# tests drive as well.
deps:
	@scripts/deps.sh test

deps-run deps-demo deps-bench deps-lab:
	@scripts/deps.sh $(@:deps-%=%)

build: build/release/ticketd

# --- the service ------------------------------------------------------------

build/release/obj/%.o: service/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(RELEASE_CFLAGS) $(call layer_inc,$<) -c $< -o $@

build/asan/obj/%.o: service/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) $(call layer_inc,$<) -c $< -o $@

build/faults/obj/%.o: service/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(FAULTS_CFLAGS) $(call layer_inc,$<) -c $< -o $@

build/release/ticketd: $(SRCS:service/%.c=build/release/obj/%.o)
	$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(PKG_LIBS)

build/asan/ticketd: $(SRCS:service/%.c=build/asan/obj/%.o)
	$(CC) $(ASAN_CFLAGS) -o $@ $^ $(PKG_LIBS)

build/faults/ticketd: $(SRCS:service/%.c=build/faults/obj/%.o)
	$(CC) $(FAULTS_CFLAGS) -o $@ $^ $(PKG_LIBS)

build/release/tests build/asan/tests:
	@mkdir -p $@

# --- tests ------------------------------------------------------------------
#
# Unit tests link the objects of their folder and the folders below it plus
# link-time fakes of the ports (tests/unit/fakes/) in place of the Redis and
# MySQL adapters (tests/unit/units.mk).

-include tests/unit/units.mk
-include tests/integration/integration.mk
-include fuzz/fuzz.mk

C_FILES = $(wildcard service/*.[ch] service/*/*.[ch] tests/unit/*/*.[ch] tests/integration/*.[ch] loadtest/*/*.[ch] \
	fuzz/*.[ch])

format:
	clang-format -i $(C_FILES)

format-check:
	@clang-format --dry-run --Werror $(C_FILES)
	@echo "format: ok"

# The rule of service/layers.mk checked on the objects and on the include
# paths (scripts/check-layers.sh); run-tests.sh counts it as one check.
comma := ,
empty :=
space := $(empty) $(empty)
layers-check: build/release/ticketd
	@LAYER_RULES="$(foreach l,$(LAYERS) main,$(l):$(subst $(space),$(comma),$(strip $(LAYER_$(l)))))" \
	LAYER_FLAGS="$(foreach l,$(LAYERS),$(l):$(subst $(space),$(comma),$(strip $(call layer_inc,service/$(l)/x.c))))" \
	LAYER_ADAPTERS="$(LAYER_ADAPTERS)" LAYER_EXCEPTIONS="$(strip $(LAYER_EXCEPTIONS))" CC="$(CC)" \
	scripts/check-layers.sh build/release/obj $(SRCS:service/%.c=build/release/obj/%.o)

# The length of service's .c files and where a client library's header may
# be included (scripts/check-sources.sh); run-tests.sh counts each rule as
# one check.
sources-check:
	@scripts/check-sources.sh

# run-tests.sh also runs format-check, counted as one check, so that the
# summary line stays the last thing `make test` prints.
test: deps
	@$(MAKE) --no-print-directory build/release/ticketd build/asan/ticketd build/faults/ticketd \
		unit-bins integration-bins fuzz-bins
	@$(MAKE) --no-print-directory -C loadtest
	@scripts/run-tests.sh

test-repeat: deps
	@$(MAKE) --no-print-directory build/asan/ticketd build/release/ticketd \
		build/release/tests/itest_faults build/release/tests/itest_answers
	@scripts/repeat-tests.sh $(REPEAT_ARGS)

# The drain cases of tests/integration/itest_conns.c at full size: 500
# connections queued at SIGTERM and 500 clients under live load, five runs
# of each (make test runs one of each with 200).
test-drain: deps
	@$(MAKE) --no-print-directory build/release/ticketd build/asan/ticketd integration-bins
	@DRAIN_CONNS=500 DRAIN_RUNS=5 TICKETD_TEST_ONLY=itest_conns scripts/run-tests.sh

# The cluster's packages (Galera, mariabackup, socat, Redis Sentinel) come on
# top of the usual ones; everything runs under .state/cluster, on the ports
# scripts/cluster.sh lists, and is stopped at the end.
test-cluster:
	@scripts/deps.sh test --cluster
	@$(MAKE) --no-print-directory build/release/ticketd
	@$(MAKE) --no-print-directory -C loadtest
	@tests/cluster/run.sh

# Podman, runc, debootstrap come on top of the usual packages where Docker is
# not running; without root to install them the test is skipped (said so).
test-image: deps
	@$(MAKE) --no-print-directory -C loadtest
	@tests/image/run.sh

image:
	@scripts/image.sh build

unit: unit-bins
	@$(MAKE) --no-print-directory -C loadtest
	@scripts/run-tests.sh --unit-only

# --- running ----------------------------------------------------------------

run: deps-run build
	@env -u TICKETD_CONFIG $(SERVICES) up $(RUN_STATE) $(RUN_REDIS_PORT) $(RUN_MYSQL_PORT)
	@$(SERVICES) migrate $(RUN_STATE)
	@$(SERVICES) seed $(RUN_STATE)
	@echo "ticketd: serving on http://127.0.0.1:8080 (Ctrl-C stops it; 'make stop' stops Redis and MariaDB)"
	exec build/release/ticketd serve --config config/ticketd.env

stop:
	@$(SERVICES) down $(RUN_STATE)

# After a defence was switched off against `make run`, the damage stays in the
# database and the audit stays red; this starts the books afresh. Only the
# servers `make run` started: a stopped stack is refused rather than started.
reset:
	@if ! $(SERVICES) status $(RUN_STATE) >/dev/null 2>&1; then \
	    echo "make reset: the Redis and MariaDB of 'make run' ($(RUN_STATE)) are not running; start them with 'make run' (nothing was emptied)" >&2; \
	    exit 1; \
	fi
	@$(SERVICES) reset $(RUN_STATE)
	@$(SERVICES) seed $(RUN_STATE)
	@echo "make reset: emptied; a running ticketd serve still remembers answers in process, restart it to forget them too"

bench: deps-bench build
	@$(MAKE) --no-print-directory -C loadtest
	@loadtest/bench.sh --start $(BENCH_ARGS)

demo: deps-demo build build/faults/ticketd
	@$(MAKE) --no-print-directory -C loadtest
	@loadtest/demo.sh

# --- the replay lab (lab/ticketd-lab; LAB_ARGS adds its options, e.g.
# LAB_ARGS="--port 8091 --size 0.5") -----------------------------------------

LAB := lab/ticketd-lab

lab-bins: build/release/ticketd build/faults/ticketd
	@$(MAKE) --no-print-directory -C loadtest

lab: deps-lab
	@$(MAKE) --no-print-directory lab-bins
	@exec $(LAB) serve $(LAB_ARGS)

# Without L only the names, so that listing them builds nothing.
lesson:
	@if [[ -z "$(L)" ]]; then exec $(LAB) lesson; fi; \
	    scripts/deps.sh lab $(if $(filter galera-%,$(L)),--cluster) && \
	    $(MAKE) --no-print-directory lab-bins >/dev/null && \
	    exec $(LAB) lesson "$(L)" $(LAB_ARGS)

lessons-run: deps-lab
	@$(MAKE) --no-print-directory lab-bins
	@$(LAB) record $(LAB_ARGS)

cluster-lessons-run:
	@scripts/deps.sh lab --cluster
	@$(MAKE) --no-print-directory lab-bins
	@lab/cluster_lessons.py record

test-lab: deps
	@$(MAKE) --no-print-directory lab-bins
	@tests/lab/run.sh

valgrind: deps unit-bins-release build/release/ticketd
	@scripts/valgrind.sh

clean:
	rm -rf build
