# Integration tests: the real binary over HTTP (libcurl) against the real
# private Redis and MariaDB. Each itest_*.c is one cmocka binary, linked with
# the shared harness.

ITEST_SRCS := $(wildcard tests/integration/itest_*.c)
ITEST_BINS := $(ITEST_SRCS:tests/integration/%.c=build/release/tests/%)
ITEST_LIBS := $(PKG_LIBS) $(shell pkg-config --libs libcurl cmocka 2>/dev/null)
ITEST_DEPS := tests/integration/harness.c service/api/auth.c service/base/util.c service/base/digest.c loadtest/common/paysign.c

build/release/tests/itest_%: tests/integration/itest_%.c $(ITEST_DEPS) tests/integration/harness.h loadtest/common/paysign.h $(HDRS) | build/release/tests
	$(CC) $(RELEASE_CFLAGS) $(SERVICE_INC) -Itests/integration -Iloadtest/common -o $@ $< $(ITEST_DEPS) $(ITEST_LIBS)

.PHONY: integration-bins
integration-bins: $(ITEST_BINS)
