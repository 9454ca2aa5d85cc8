# Unit tests: one cmocka binary per tests/unit/<folder>/test_<module>.c,
# which tests service/<folder>/<module>.c. Nothing here lists what a test
# links: each links its own .c with
#   - the service's objects of its folder and of the folders the folder may
#     use (service/layers.mk), as one archive per folder, and
#   - the link-time fakes of the ports (tests/unit/fakes/), as an archive
#     too, in place of the MySQL and Redis adapters, with the runner of the
#     order flow's rows (order_rows.c) that the domain's test of each
#     defence shares (test_response_cache, test_inflight_key,
#     test_session_lock, test_token, test_unique_index, and test_orders for
#     the flow itself),
# so the linker takes just the objects the test reaches. A test that would
# need an adapter does not link: the rule the service follows holds for its
# tests as well. The objects are the service build's (same flags), once for
# release and once under ASan+UBSan.

UNIT_SOURCES := $(sort $(wildcard tests/unit/*/test_*.c))
# The test's name: its module's.
UNIT_TESTS := $(patsubst test_%.c,%,$(notdir $(UNIT_SOURCES)))
# $(1): a test name -> its source, its folder.
unit_src = $(filter %/test_$(1).c,$(UNIT_SOURCES))
unit_folder = $(patsubst tests/unit/%/,%,$(dir $(call unit_src,$(1))))

# The folders that have objects, and each one's archive.
UNIT_LIB_FOLDERS := $(filter-out main,$(sort $(foreach s,$(filter service/%/,$(dir $(SRCS))),$(call layer_of,$(s)x.c))))
# $(1): folder -> the folders its tests link: its own, those it may use, and
# those the open exceptions of any of them reach (service/layers.mk).
unit_reach = $(sort $(1) $(LAYER_$(1)) $(foreach e,$(LAYER_EXCEPTIONS),$(if $(filter \
	$(firstword $(subst /, ,$(firstword $(subst :, ,$(e))))),$(1) $(LAYER_$(1))),$(firstword \
	$(subst /, ,$(word 2,$(subst :, ,$(e))))))))
unit_libs = $(filter $(UNIT_LIB_FOLDERS),$(call unit_reach,$(call unit_folder,$(1))))

UNIT_FAKES := $(sort $(wildcard tests/unit/fakes/*.c))
UNIT_HDRS := $(wildcard tests/unit/fakes/*.h)
UNIT_LIBS = $(PKG_LIBS) -lcmocka

# $(1): flavour (release, asan), $(2): its CFLAGS variable.
define unit_flavour_rules
build/$(1)/lib/libfakes.a: $$(UNIT_FAKES:tests/unit/fakes/%.c=build/$(1)/tests/fakes/%.o)
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^

build/$(1)/tests/fakes/%.o: tests/unit/fakes/%.c $$(HDRS) $$(UNIT_HDRS)
	@mkdir -p $$(@D)
	$$(CC) $$($(2)) $$(SERVICE_INC) -Itests/unit/fakes -c $$< -o $$@

$$(foreach f,$$(UNIT_LIB_FOLDERS),$$(eval $$(call unit_lib_rule,$(1),$$(f))))
endef

# $(1): flavour, $(2): folder.
define unit_lib_rule
build/$(1)/lib/lib$(2).a: $$(patsubst service/%.c,build/$(1)/obj/%.o,$$(filter service/$(2)/%,$$(SRCS)))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef

# $(1): the test name, $(2): flavour, $(3): its CFLAGS variable. The test's
# own .c sees the include path of the module it tests, and the fakes.
define unit_test_rules
build/$(2)/tests/test_$(1): $$(call unit_src,$(1)) $$(foreach l,$$(call unit_libs,$(1)),build/$(2)/lib/lib$$(l).a) \
		build/$(2)/lib/libfakes.a $$(HDRS) $$(UNIT_HDRS) | build/$(2)/tests
	$$(CC) $$($(3)) $$(call layer_inc,service/$$(call unit_folder,$(1))/$(1).c) -Itests/unit/fakes -o $$@ $$< \
		-Wl,--start-group $$(foreach l,$$(call unit_libs,$(1)),build/$(2)/lib/lib$$(l).a) \
		build/$(2)/lib/libfakes.a -Wl,--end-group $$(UNIT_LIBS)
endef

$(eval $(call unit_flavour_rules,release,RELEASE_CFLAGS))
$(eval $(call unit_flavour_rules,asan,ASAN_CFLAGS))
$(foreach t,$(UNIT_TESTS),$(eval $(call unit_test_rules,$(t),release,RELEASE_CFLAGS)))
$(foreach t,$(UNIT_TESTS),$(eval $(call unit_test_rules,$(t),asan,ASAN_CFLAGS)))

.PHONY: unit-bins unit-bins-release
unit-bins: $(UNIT_TESTS:%=build/release/tests/test_%) $(UNIT_TESTS:%=build/asan/tests/test_%)
unit-bins-release: $(UNIT_TESTS:%=build/release/tests/test_%)
