# libFuzzer harnesses for the pure parsers that see client bytes (fuzz/).
#
#   make fuzz-bins               build build/fuzz/fuzz_NAME
#   make fuzz                    run each for FUZZ_SECONDS (default 300) on
#                                build/fuzz/corpus/NAME, seeded from
#                                fuzz/corpus/NAME; non-zero exit on a finding
#   make fuzz FUZZ_SECONDS=30    a shorter run
#
# Each harness is compiled straight from its .c, fuzz.h and the service
# modules it exercises (no MHD, hiredis or MariaDB), instrumented for
# coverage and under ASan+UBSan.

FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 300
FUZZ_PKGS := jansson libjwt libcrypto
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -std=c11 -D_GNU_SOURCE $(WARN) $(SERVICE_INC) -Ifuzz \
	$(shell pkg-config --cflags $(FUZZ_PKGS) 2>/dev/null)
FUZZ_LIBS = $(shell pkg-config --libs $(FUZZ_PKGS) 2>/dev/null)

# Every fuzz/fuzz_NAME.c is a harness.
FUZZERS := $(sort $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c)))

# The service sources each harness links, and the largest input worth
# trying (a little past the limits the parser enforces).
fuzz_idem_key_SRCS := service/model/idem.c service/base/util.c
fuzz_idem_key_MAXLEN := 160
fuzz_idem_record_SRCS := service/model/idem.c service/base/util.c
fuzz_idem_record_MAXLEN := 1024
fuzz_jsonv_SRCS := service/api/jsonv.c
fuzz_jsonv_MAXLEN := 4096
fuzz_auth_SRCS := service/api/auth.c service/base/util.c
fuzz_auth_MAXLEN := 4400
fuzz_paysig_SRCS := service/model/paysig.c service/base/util.c
fuzz_paysig_MAXLEN := 2048
fuzz_router_SRCS := service/api/router.c
fuzz_router_MAXLEN := 256
fuzz_config_SRCS := service/base/config.c service/base/envfile.c service/base/log.c service/base/util.c
fuzz_config_MAXLEN := 4096
fuzz_body_SRCS := service/http/body.c service/base/util.c
fuzz_body_MAXLEN := 8192
fuzz_parse_i64_SRCS := service/base/util.c
fuzz_parse_i64_MAXLEN := 48

define fuzz_rules
build/fuzz/fuzz_$(1): fuzz/fuzz_$(1).c fuzz/fuzz.h $$(fuzz_$(1)_SRCS) $$(HDRS) | build/fuzz
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ $$< $$(fuzz_$(1)_SRCS) $$(FUZZ_LIBS)
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
	for spec in $(foreach f,$(FUZZERS),$(f):$(fuzz_$(f)_MAXLEN)); do \
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
