# Unit tests: one cmocka binary per tests/unit/test_NAME.c, compiled straight
# from its source, the service modules it exercises and, for the domain
# logic, the link-time fakes of the ports (fake_store.c, fake_cache.c) in
# place of the MySQL and Redis adapters. No objects are shared with the
# service build, so each binary is built with exactly its own flags: once for
# release and once under ASan+UBSan.

# Every tests/unit/test_NAME.c is a test; NAME is listed here.
UNIT_TESTS := $(sort $(patsubst tests/unit/test_%.c,%,$(wildcard tests/unit/test_*.c)))

# The service sources each test links besides its own .c (a new test adds
# its line here).
unit_router_SRCS := service/api/router.c
unit_body_SRCS := service/http/body.c service/base/util.c
unit_config_SRCS := service/base/config.c service/base/log.c service/base/util.c
unit_auth_SRCS := service/api/auth.c service/base/util.c
unit_problem_SRCS := service/api/problem.c
unit_resp_SRCS := service/api/resp.c service/api/problem.c service/base/log.c service/base/util.c
unit_jsonv_SRCS := service/api/jsonv.c
unit_idem_SRCS := service/model/idem.c service/base/util.c
unit_cartbody_SRCS := service/api/cartbody.c service/api/jsonv.c service/model/idem.c service/base/util.c
unit_respcache_SRCS := service/model/respcache.c service/base/util.c
unit_defenses_SRCS := service/model/defenses.c service/base/log.c
unit_orders_SRCS := service/domain/orders.c service/model/bloom.c service/api/problem.c service/model/ordertoken.c service/base/faults.c service/base/txretry.c service/model/idem.c service/model/respcache.c service/base/metrics.c service/base/config.c service/redis/sentinel.c \
	service/api/router.c service/base/log.c service/base/util.c service/model/defenses.c \
	tests/unit/fake_store.c tests/unit/fake_cache.c tests/unit/fake_calls.c
unit_util_SRCS := service/base/util.c
unit_retention_SRCS := service/model/retention.c service/base/util.c
unit_bloom_SRCS := service/model/bloom.c service/base/util.c
unit_breaker_SRCS := service/base/breaker.c service/base/log.c
unit_stopper_SRCS := service/base/stopper.c
unit_ordertoken_SRCS := service/model/ordertoken.c service/base/util.c
unit_metrics_SRCS := service/base/metrics.c service/api/router.c service/base/util.c
unit_log_SRCS := service/base/log.c
unit_model_SRCS := service/model/model.c service/base/err.c
unit_statemachine_SRCS := service/model/statemachine.c service/model/model.c
unit_paysig_SRCS := service/model/paysig.c service/base/util.c
unit_sentinel_SRCS := service/redis/sentinel.c
unit_txretry_SRCS := service/base/txretry.c service/base/metrics.c service/api/router.c service/base/util.c
unit_payments_SRCS := service/domain/payments.c service/model/payment.c service/model/event_payload.c service/model/paysig.c service/model/statemachine.c service/base/txretry.c service/base/metrics.c service/api/router.c \
	service/base/config.c service/redis/sentinel.c service/model/model.c service/base/log.c service/base/util.c \
	tests/unit/fake_store_payments.c tests/unit/fake_store.c tests/unit/fake_cache.c \
	tests/unit/fake_calls.c
# The relay and the consumers link fakes of the stream (fake_stream.c) and
# of the events' store (fake_store_events.c); the thread code in them needs
# the store's and the cache's thread release (fake_store.c, fake_cache.c).
UNIT_EVENTS_FAKES := tests/unit/fake_stream.c tests/unit/fake_store_events.c \
	tests/unit/fake_store.c tests/unit/fake_cache.c tests/unit/fake_calls.c
unit_relay_SRCS := service/jobs/relay.c service/base/bgthread.c service/base/stopper.c service/base/metrics.c service/api/router.c \
	service/base/log.c service/base/util.c $(UNIT_EVENTS_FAKES)
unit_consumers_SRCS := service/jobs/consumers.c service/domain/consume.c service/model/model.c service/model/event_payload.c \
	service/base/bgthread.c service/base/stopper.c service/base/txretry.c service/base/faults.c service/base/metrics.c service/api/router.c \
	service/base/config.c service/redis/sentinel.c service/base/log.c service/base/util.c $(UNIT_EVENTS_FAKES)
unit_event_payload_SRCS := service/model/event_payload.c
unit_lifecycle_SRCS := service/domain/lifecycle.c service/model/statemachine.c service/base/txretry.c \
	service/base/metrics.c service/api/router.c service/base/config.c service/redis/sentinel.c service/model/model.c service/base/log.c \
	service/base/util.c tests/unit/fake_store_lifecycle.c

UNIT_HDRS := $(wildcard tests/unit/*.h)
UNIT_LIBS = $(PKG_LIBS) -lcmocka

# $(1): the test name. One rule per build flavour and test.
define unit_test_rules
build/release/tests/test_$(1): tests/unit/test_$(1).c $$(unit_$(1)_SRCS) $$(HDRS) $$(UNIT_HDRS) | build/release/tests
	$$(CC) $$(RELEASE_CFLAGS) $$(SERVICE_INC) -Itests/unit -o $$@ $$< $$(unit_$(1)_SRCS) $$(UNIT_LIBS)

build/asan/tests/test_$(1): tests/unit/test_$(1).c $$(unit_$(1)_SRCS) $$(HDRS) $$(UNIT_HDRS) | build/asan/tests
	$$(CC) $$(ASAN_CFLAGS) $$(SERVICE_INC) -Itests/unit -o $$@ $$< $$(unit_$(1)_SRCS) $$(UNIT_LIBS)
endef

$(foreach t,$(UNIT_TESTS),$(eval $(call unit_test_rules,$(t))))

.PHONY: unit-bins unit-bins-release
unit-bins: $(UNIT_TESTS:%=build/release/tests/test_%) $(UNIT_TESTS:%=build/asan/tests/test_%)
unit-bins-release: $(UNIT_TESTS:%=build/release/tests/test_%)
