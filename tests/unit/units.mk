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
unit_router_SRCS := service/router.c
unit_body_SRCS := service/body.c service/util.c
unit_config_SRCS := service/config.c service/sentinel.c service/log.c service/util.c
unit_auth_SRCS := service/auth.c service/util.c
unit_problem_SRCS := service/problem.c
unit_resp_SRCS := service/resp.c service/problem.c service/log.c service/util.c
unit_jsonv_SRCS := service/jsonv.c
unit_idem_SRCS := service/idem.c service/util.c
unit_cartbody_SRCS := service/cartbody.c service/jsonv.c service/idem.c service/util.c
unit_respcache_SRCS := service/respcache.c service/util.c
unit_defenses_SRCS := service/defenses.c service/log.c
unit_orders_SRCS := service/orders.c service/bloom.c service/ordertoken.c service/faults.c service/txretry.c service/idem.c service/respcache.c service/metrics.c service/config.c service/sentinel.c \
	service/log.c service/util.c service/defenses.c \
	tests/unit/fake_store.c tests/unit/fake_cache.c tests/unit/fake_calls.c
unit_merge_batch_SRCS := service/merge_batch.c service/util.c
unit_util_SRCS := service/util.c
unit_retention_SRCS := service/retention.c service/util.c
unit_bloom_SRCS := service/bloom.c service/util.c
unit_breaker_SRCS := service/breaker.c service/log.c
unit_stopper_SRCS := service/stopper.c
unit_ordertoken_SRCS := service/ordertoken.c service/util.c
unit_metrics_SRCS := service/metrics.c service/util.c
unit_log_SRCS := service/log.c
unit_model_SRCS := service/model.c service/err.c
unit_statemachine_SRCS := service/statemachine.c service/model.c
unit_paysig_SRCS := service/paysig.c service/util.c
unit_sentinel_SRCS := service/sentinel.c
unit_txretry_SRCS := service/txretry.c service/metrics.c service/util.c
unit_payments_SRCS := service/payments.c service/event_payload.c service/paysig.c service/statemachine.c service/txretry.c service/metrics.c \
	service/config.c service/sentinel.c service/model.c service/log.c service/util.c \
	tests/unit/fake_store_payments.c tests/unit/fake_store.c tests/unit/fake_cache.c \
	tests/unit/fake_calls.c
# The relay and the consumers link fakes of the stream (fake_stream.c) and
# of the events' store (fake_store_events.c); the thread code in them needs
# the store's and the cache's thread release (fake_store.c, fake_cache.c).
UNIT_EVENTS_FAKES := tests/unit/fake_stream.c tests/unit/fake_store_events.c \
	tests/unit/fake_store.c tests/unit/fake_cache.c tests/unit/fake_calls.c
unit_relay_SRCS := service/relay.c service/bgthread.c service/stopper.c service/metrics.c \
	service/log.c service/util.c $(UNIT_EVENTS_FAKES)
unit_consumers_SRCS := service/consumers.c service/consume.c service/consume_naive.c service/event_payload.c \
	service/bgthread.c service/stopper.c service/txretry.c service/faults.c service/metrics.c \
	service/config.c service/sentinel.c service/log.c service/util.c $(UNIT_EVENTS_FAKES)
unit_event_payload_SRCS := service/event_payload.c
unit_lifecycle_SRCS := service/lifecycle.c service/statemachine.c service/txretry.c \
	service/metrics.c service/config.c service/sentinel.c service/model.c service/log.c \
	service/util.c tests/unit/fake_store_lifecycle.c
# The API layer in process (test_api.c): every api_*.c over the domain it
# calls, with every port faked.
unit_api_SRCS := $(wildcard service/api*.c) service/router.c service/auth.c service/jsonv.c \
	service/resp.c service/problem.c service/orders.c service/cart.c service/cartbody.c \
	service/payments.c service/paysig.c service/lifecycle.c service/statemachine.c \
	service/event_payload.c service/bloom.c service/ordertoken.c service/faults.c \
	service/txretry.c service/idem.c service/respcache.c service/metrics.c service/config.c \
	service/sentinel.c service/defenses.c service/model.c service/err.c service/log.c \
	service/util.c tests/unit/fake_store.c tests/unit/fake_cache.c tests/unit/fake_calls.c \
	tests/unit/fake_store_payments.c tests/unit/fake_store_lifecycle.c \
	tests/unit/fake_store_api.c

UNIT_HDRS := $(wildcard tests/unit/*.h)
UNIT_LIBS = $(PKG_LIBS) -lcmocka

# $(1): the test name. One rule per build flavour and test.
define unit_test_rules
build/release/tests/test_$(1): tests/unit/test_$(1).c $$(unit_$(1)_SRCS) $$(HDRS) $$(UNIT_HDRS) | build/release/tests
	$$(CC) $$(RELEASE_CFLAGS) -Itests/unit -o $$@ $$< $$(unit_$(1)_SRCS) $$(UNIT_LIBS)

build/asan/tests/test_$(1): tests/unit/test_$(1).c $$(unit_$(1)_SRCS) $$(HDRS) $$(UNIT_HDRS) | build/asan/tests
	$$(CC) $$(ASAN_CFLAGS) -Itests/unit -o $$@ $$< $$(unit_$(1)_SRCS) $$(UNIT_LIBS)
endef

$(foreach t,$(UNIT_TESTS),$(eval $(call unit_test_rules,$(t))))

.PHONY: unit-bins unit-bins-release
unit-bins: $(UNIT_TESTS:%=build/release/tests/test_%) $(UNIT_TESTS:%=build/asan/tests/test_%)
unit-bins-release: $(UNIT_TESTS:%=build/release/tests/test_%)
