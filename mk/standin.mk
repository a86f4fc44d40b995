# mk/standin.mk: the TDLib-JSON test world — the real Telegram adapter
# (tg/tdlib over go-tdlib) against the Telegram simulator, through the real
# cgo boundary.
#
# The main Makefile includes this fragment after mk/tdlib.mk; it also works
# on its own:
#     make -f mk/standin.mk test-standin
#
# td/standin/td_json_standin.c is a stand-in for TDLib's libtdjson.so: it
# exports the four functions go-tdlib calls (td_create_client_id, td_send,
# td_receive, td_execute) and relays TDLib JSON over the Unix socket named
# by STASHD_TDJSON_SOCKET to a TDLib-JSON server (sim/tdjsonsim), which
# answers from the simulator: in-process in the tests, or `stashd sim` as a
# process of its own. Go code links it exactly as it links TDLib (the
# `libtdjson` tag, go-tdlib's dynamic linking), only with -L and the rpath
# pointing at STANDIN_DIR.
#
# Targets
#   standin        Build $(STANDIN_DIR)/libtdjson.so (SONAME libtdjson.so.1.8.40,
#                  like the real one) and its libtdjson.so.1.8.40 symlink;
#                  .cache/standin in the clone is a symlink to STANDIN_DIR.
#   test-standin   go test -race -tags libtdjson ./sim/tdjsonsim/...
#                  (in two processes side by side: the tests named by
#                  STANDIN_SLOW, and the rest; outputs in var/standin/)
#                  run on the stand-in (compiled like test-tdlib, so it
#                  fetches TDLib too; see below): the pipeline end-to-end
#                  test through go-tdlib, the real adapter, the stand-in
#                  library and the TDLib-JSON server (needs the PostgreSQL
#                  server binaries, like `make unit`). STANDIN_TEST_FLAGS
#                  adds flags (e.g. -count=1 -v).
#   vet-standin    go vet -tags libtdjson ./sim/tdjsonsim/... against it.
#   build-standin  Build $(STANDIN_BIN) (default bin/stashd-standin): stashd
#                  with the real adapter linked against the stand-in, for
#                  runs against a `stashd sim` process.
#
# Variables (all may be set on the command line)
#   STANDIN_DIR          Where the stand-in library is built. Default:
#                        $(STASHD_CACHE)/standin-HASH (mk/tdlib.mk), HASH
#                        naming its source and header: the same path in
#                        every clone holding the same stand-in, so that the
#                        cgo flags naming it leave Go's build cache usable
#                        across clones.
#   STANDIN_CFLAGS       C flags for the library.
#   STANDIN_CGO_LDFLAGS  CGO_LDFLAGS for Go code linked against it: -L and an
#                        rpath to STANDIN_DIR. The cgo flags from the
#                        environment come before go-tdlib's own
#                        (-L/usr/local/lib -ltdjson ...), so this -L wins.
#   STANDIN_GO_ENV       The environment prefix for any go command that links
#                        the stand-in (TDLIB_CGO_CFLAGS from mk/tdlib.mk puts
#                        td/telegram/td_json_client.h on the include path).
#
# A binary built against the real TDLib (make build-tdlib) also runs on the
# stand-in without relinking, since both libraries carry the same SONAME:
#     LD_LIBRARY_PATH=.cache/standin STASHD_TDJSON_SOCKET=var/sim/tdjson.sock bin/stashd ...

STANDIN_MK_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

# On its own this fragment needs mk/tdlib.mk's variables and targets
# (TDLIB_CGO_CFLAGS, GO_TDLIB_TAGS, tdlib-link-deps); included after it by
# the main Makefile, it must not include it twice.
ifndef TDLIB_MK_ROOT
include $(STANDIN_MK_ROOT)/mk/tdlib.mk
endif

GO ?= go
CC ?= cc

STANDIN_SRC         := $(STANDIN_MK_ROOT)/td/standin/td_json_standin.c
STANDIN_HEADER      := $(STANDIN_MK_ROOT)/td/telegram/td_json_client.h
STANDIN_HASH        := $(shell cat $(STANDIN_SRC) $(STANDIN_HEADER) | sha256sum | cut -c1-16)
STANDIN_DIR         ?= $(STASHD_CACHE)/standin-$(STANDIN_HASH)
STANDIN_CFLAGS      ?= -O2 -g -Wall -Wextra -Werror
STANDIN_CGO_LDFLAGS ?= -Wl,--as-needed -L$(STANDIN_DIR) -ltdjson -Wl,-rpath,$(STANDIN_DIR)
STANDIN_GO_ENV       = CGO_ENABLED=1 CGO_CFLAGS="$(TDLIB_CGO_CFLAGS)" CGO_LDFLAGS="$(STANDIN_CGO_LDFLAGS)"
STANDIN_BIN         ?= bin/stashd-standin
STANDIN_TEST_FLAGS  ?= -count=1

.PHONY: standin test-standin vet-standin build-standin

standin: $(STANDIN_DIR)/libtdjson.so.$(TDLIB_VERSION)
	@mkdir -p $(STANDIN_MK_ROOT)/.cache; \
	link=$(STANDIN_MK_ROOT)/.cache/standin; \
	if [ ! -L $$link ] || [ "$$(readlink $$link)" != $(STANDIN_DIR) ]; then rm -rf $$link; ln -sfn $(STANDIN_DIR) $$link; fi

$(STANDIN_DIR)/libtdjson.so: $(STANDIN_SRC) $(STANDIN_HEADER)
	mkdir -p $(STANDIN_DIR)
	$(CC) $(STANDIN_CFLAGS) -I$(STANDIN_MK_ROOT) -fPIC -shared -pthread \
		-Wl,-soname,libtdjson.so.$(TDLIB_VERSION) -o $@.tmp.$$$$ $(STANDIN_SRC) && mv $@.tmp.$$$$ $@

$(STANDIN_DIR)/libtdjson.so.$(TDLIB_VERSION): $(STANDIN_DIR)/libtdjson.so
	ln -sfn libtdjson.so $@

# go-tdlib's #cgo line also names -lstdc++ -lssl -lcrypto -lz, which the
# linker must resolve even though nothing uses them: tdlib-link-deps
# installs them when missing.
# The stand-in library keeps one connection per process and server socket
# (and go-tdlib one receiver per process), so the package's tests that go
# through it run one after another. test-standin builds the
# test binary once, then runs the end-to-end tests (STANDIN_SLOW) in one
# process and every other test in a second one beside it (-skip: together
# they are every test), and prints each one's output whole.
STANDIN_SLOW ?= ThroughStandIn$$
STANDIN_OUT  ?= $(STANDIN_MK_ROOT)/var/standin

#
# The tests are compiled with the real TDLib's flags (TDLIB_GO_ENV) and
# load the stand-in through LD_LIBRARY_PATH, which the binary's RUNPATH
# gives way to (both libraries carry the same SONAME): so they reuse the
# race build that `make test` compiled with those flags for its unit and
# test-tdlib phases instead of compiling most of the module once more.
# Had the real library been loaded instead, the tests would fail: it
# knows no simulator.
STANDIN_TEST_ENV = $(TDLIB_GO_ENV) LD_LIBRARY_PATH=$(STANDIN_DIR)

test-standin: standin tdlib
	cd $(STANDIN_MK_ROOT) && $(STANDIN_TEST_ENV) $(GO) test -race -tags $(GO_TDLIB_TAGS) -count=1 -run '^$$' ./sim/tdjsonsim/... >/dev/null
	@mkdir -p $(STANDIN_OUT); cd $(STANDIN_MK_ROOT) && \
	( $(STANDIN_TEST_ENV) $(GO) test -race -tags $(GO_TDLIB_TAGS) $(STANDIN_TEST_FLAGS) -run '$(STANDIN_SLOW)' ./sim/tdjsonsim/... \
		>$(STANDIN_OUT)/slow.out 2>&1; echo $$? >$(STANDIN_OUT)/slow.rc ) & \
	( $(STANDIN_TEST_ENV) $(GO) test -race -tags $(GO_TDLIB_TAGS) $(STANDIN_TEST_FLAGS) -skip '$(STANDIN_SLOW)' ./sim/tdjsonsim/... \
		>$(STANDIN_OUT)/rest.out 2>&1; echo $$? >$(STANDIN_OUT)/rest.rc ) & \
	wait; rc=0; \
	for part in slow rest; do \
		echo "test-standin ($$part):"; cat $(STANDIN_OUT)/$$part.out; \
		if [ "$$(cat $(STANDIN_OUT)/$$part.rc)" != 0 ]; then echo "test-standin $$part: FAILED"; rc=1; fi; \
	done; exit $$rc

vet-standin: standin tdlib-link-deps
	cd $(STANDIN_MK_ROOT) && $(STANDIN_GO_ENV) $(GO) vet -tags $(GO_TDLIB_TAGS) ./sim/tdjsonsim/...

build-standin: standin tdlib-link-deps
	cd $(STANDIN_MK_ROOT) && $(STANDIN_GO_ENV) $(GO) build -tags $(GO_TDLIB_TAGS) -o $(STANDIN_BIN) $(TDLIB_MAIN_PKG)
