# libFuzzer harnesses for the pure parsers that see client bytes (fuzz/).
#
#   make fuzz-bins               build build/fuzz/fuzz_NAME
#   make fuzz                    run each for FUZZ_SECONDS (default 300) on
#                                build/fuzz/corpus/NAME, seeded from
#                                fuzz/corpus/NAME; non-zero exit on a finding
#   make fuzz FUZZ_SECONDS=30    a shorter run
#
# Nothing here lists what a harness links, as in tests/unit/units.mk: each
# links its own .c with the service's objects as one archive per folder, so
# the linker takes just the modules the harness reaches. Left out are
# main.c and boot.c, the adapters' folders (service/layers.mk) and the
# transport's files with <microhttpd.h>: they are what needs libmicrohttpd,
# hiredis or MariaDB, which no harness links, so a harness that reached one
# would not link. The objects are built again for this (build/fuzz/obj), by
# clang with coverage for libFuzzer and under ASan+UBSan, with the
# service's include paths.

FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 300
FUZZ_PKGS := jansson libjwt libcrypto
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer $(FUZZ_SAN) -std=c11 -D_GNU_SOURCE $(WARN) $(HARDEN) $(SERVICE_INC) -Ifuzz \
	$(shell pkg-config --cflags $(FUZZ_PKGS) 2>/dev/null)
FUZZ_OBJ_CFLAGS = -g -O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN) -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(HARDEN) \
	$(PKG_CFLAGS)
FUZZ_LIBS = $(shell pkg-config --libs $(FUZZ_PKGS) 2>/dev/null) -lm

# Every fuzz/fuzz_NAME.c is a harness; its FUZZ_MAX_LEN is the largest
# input worth trying.
FUZZERS := $(sort $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c)))
fuzz_maxlen = $(shell sed -n 's/^\#define FUZZ_MAX_LEN \([0-9]*\).*/\1/p' fuzz/fuzz_$(1).c)

FUZZ_SRCS := $(filter-out service/main.c service/boot.c $(LAYER_ADAPTERS:%=service/%/%) \
	$(shell grep -l '<microhttpd.h>' $(SRCS)),$(SRCS))
FUZZ_FOLDERS := $(sort $(foreach s,$(FUZZ_SRCS),$(call layer_of,$(s))))
FUZZ_ARCHIVES := $(FUZZ_FOLDERS:%=build/fuzz/lib/lib%.a)

build/fuzz/obj/%.o: service/%.c $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) $(call layer_inc,$<) -c $< -o $@

# $(1): folder.
define fuzz_lib_rule
build/fuzz/lib/lib$(1).a: $$(patsubst service/%.c,build/fuzz/obj/%.o,$$(filter service/$(1)/%,$$(FUZZ_SRCS)))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef

$(foreach f,$(FUZZ_FOLDERS),$(eval $(call fuzz_lib_rule,$(f))))

define fuzz_rules
build/fuzz/fuzz_$(1): fuzz/fuzz_$(1).c fuzz/fuzz.h $$(FUZZ_ARCHIVES) $$(HDRS) | build/fuzz
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ $$< -Wl,--start-group $$(FUZZ_ARCHIVES) -Wl,--end-group $$(FUZZ_LIBS)
endef

$(foreach f,$(FUZZERS),$(eval $(call fuzz_rules,$(f))))

build/fuzz:
	@mkdir -p $@

.PHONY: fuzz fuzz-bins
fuzz-bins: $(FUZZERS:%=build/fuzz/fuzz_%)

# The committed seeds are copied into build/fuzz/corpus, where libFuzzer
# adds what it finds (kept between runs); fuzz/corpus stays as committed.
# All harnesses run even after a finding; the crashing input is saved as
# build/fuzz/artifacts/NAME-crash-*, and the log as build/fuzz/logs/NAME.log.
fuzz: fuzz-bins
	@mkdir -p build/fuzz/logs build/fuzz/artifacts; \
	failed=""; \
	for spec in $(foreach f,$(FUZZERS),$(f):$(call fuzz_maxlen,$(f))); do \
		name=$${spec%%:*}; maxlen=$${spec##*:}; \
		corpus=build/fuzz/corpus/$$name; log=build/fuzz/logs/$$name.log; \
		mkdir -p $$corpus; cp -n fuzz/corpus/$$name/* $$corpus/ 2>/dev/null; \
		echo "fuzz: $$name for $(FUZZ_SECONDS)s (max_len $$maxlen)"; \
		if build/fuzz/fuzz_$$name -max_total_time=$(FUZZ_SECONDS) -max_len=$$maxlen \
			-timeout=10 -print_final_stats=1 \
			-artifact_prefix=build/fuzz/artifacts/$$name- $$corpus >$$log 2>&1; then \
			grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|(DONE|INITED) +cov:' $$log \
				| sed 's/^/      /'; \
		else \
			failed="$$failed $$name"; \
			echo "FAIL  $$name (see $$log)"; \
			grep -E 'ERROR: |runtime error|invariant broken|Test unit written' $$log \
				| head -5 | sed 's/^/      /'; \
		fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings in:$$failed"; exit 1; fi; \
	echo "fuzz: no findings"
