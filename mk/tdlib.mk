# mk/tdlib.mk: TDLib for the real Telegram adapter (tg/tdlib).
#
# The main Makefile includes this fragment; it also works on its own:
#     make -f mk/tdlib.mk test-tdlib
#
# stashd links go-tdlib v0.7.6 dynamically against TDLib 1.8.40 (the exact
# TDLib that go-tdlib v0.7.6 was generated from). Builds without the
# `libtdjson` tag need none of this: tg/tdlib then compiles to a stub whose
# New returns tg.ErrNoTDLib.
#
# Targets
#   tdlib        Make sure TDLIB_DIR holds libtdjson.so of TDLib 1.8.40.
#                With the default TDLIB_DIR it fetches the npm package
#                @prebuilt-tdlib/linux-x64-glibc@0.1008040.0 with `npm pack`
#                into TDLIB_CACHE (below) and adds the libtdjson.so.1.8.40
#                symlink the library's SONAME asks for; .cache/tdlib in the
#                clone is a symlink to it. It does nothing when the library
#                is already there. It copies td/telegram/td_json_client.h
#                into TDLIB_CACHE/include when that copy differs. It also
#                installs, when missing, the Debian -dev packages whose
#                libraries go-tdlib's own `#cgo LDFLAGS` line names
#                (-lstdc++ -lssl -lcrypto -lz): the prebuilt library needs
#                none of them at run time (it links them statically; ldd
#                shows only libc, libm, libdl, libpthread), but the linker
#                must still resolve each -l.
#   build-tdlib  Build $(TDLIB_BIN) (default bin/stashd) from
#                $(TDLIB_MAIN_PKG) (default ./cmd/stashd) with TDLib linked in.
#   test-tdlib   go test -race -tags libtdjson ./tg/tdlib/... against the
#                real library. TDLIB_TEST_FLAGS adds flags (e.g. -count=1 -v).
#   vet-tdlib    go vet -tags libtdjson ./tg/tdlib/...
#   tdlib-dir    Print TDLIB_DIR (to copy the library from when installing).
#
# Variables (all may be set on the command line)
#   STASHD_CACHE       Where the prebuilt TDLib and the stand-in library
#                      (mk/standin.mk) are kept, outside the clone.
#                      Default: stashd/ beside Go's own build cache (`go env
#                      GOCACHE`: ~/.cache/stashd, or $XDG_CACHE_HOME/stashd),
#                      which is writable wherever go builds. The cgo flags below name
#                      paths there, the same in every clone of stashd, and go
#                      commands run with -trimpath (the Makefile adds it to
#                      GOFLAGS), so a fresh clone reuses the packages Go has
#                      compiled for another: both the cgo flags and, without
#                      -trimpath, a package's directory are part of the keys
#                      of Go's build cache.
#   TDLIB_CACHE        $(STASHD_CACHE)/tdlib-1.8.40: lib/ and include/.
#   TDLIB_DIR          Directory holding libtdjson.so and libtdjson.so.1.8.40.
#                      Default: $(TDLIB_CACHE)/lib (the prebuilt npm library).
#   TDLIB_CGO_CFLAGS   CGO_CFLAGS for the tagged build: puts TDLIB_CACHE's
#                      include/ on the include path for td/telegram/td_json_client.h
#                      (the npm package ships no header; go-tdlib includes it;
#                      the repository's copy is installed there).
#   TDLIB_CGO_LDFLAGS  CGO_LDFLAGS: -L$(TDLIB_DIR) -ltdjson and an rpath to
#                      TDLIB_DIR, so the binary finds the library without
#                      LD_LIBRARY_PATH. --as-needed keeps the libraries
#                      go-tdlib names but the binary never calls (libssl,
#                      libcrypto, libz, libstdc++) out of its dependencies.
#   GO_TDLIB_TAGS      The build tag that selects go-tdlib's dynamic linking
#                      (client/tdjson_dynamic.go) and stashd's real adapter:
#                      libtdjson. Without it go-tdlib tries to link TDLib's
#                      static libraries instead.
#   TDLIB_GO_ENV       The environment prefix for any go command that builds
#                      the tagged code: CGO_ENABLED=1 CGO_CFLAGS=... CGO_LDFLAGS=...
#                      e.g. $(TDLIB_GO_ENV) go run -tags $(GO_TDLIB_TAGS) ./cmd/stashd version
#
# Using a TDLib built from source instead of the npm package
#   Build TDLib 1.8.40 (commit 22d49d5b87a4d5fc60a194dab02dd1d71529687f) as
#   TDLib's README describes, install it (cmake --install build --prefix
#   /opt/td), then point TDLIB_DIR at the directory holding libtdjson.so:
#       make build-tdlib TDLIB_DIR=/opt/td/lib
#       make test-tdlib TDLIB_DIR=/opt/td/lib
#   Nothing is fetched then; the build stops with a message if
#   $(TDLIB_DIR)/libtdjson.so.1.8.40 is missing (another TDLib version does
#   not match go-tdlib v0.7.6's generated API). The binary keeps an rpath to
#   TDLIB_DIR: install the library there, or set LD_LIBRARY_PATH, on the
#   machine that runs it.

TDLIB_MK_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

GO ?= go

TDLIB_VERSION     := 1.8.40
TDLIB_NPM_PACKAGE := @prebuilt-tdlib/linux-x64-glibc@0.1008040.0
ifndef STASHD_CACHE
STASHD_CACHE      := $(patsubst %/,%,$(dir $(shell $(GO) env GOCACHE)))/stashd
endif
TDLIB_CACHE       := $(STASHD_CACHE)/tdlib-$(TDLIB_VERSION)
TDLIB_CACHE_LIB   := $(TDLIB_CACHE)/lib
TDLIB_INCLUDE     := $(TDLIB_CACHE)/include
TDLIB_HEADER      := $(TDLIB_MK_ROOT)/td/telegram/td_json_client.h

TDLIB_DIR         ?= $(TDLIB_CACHE_LIB)
TDLIB_CGO_CFLAGS  ?= -O2 -g -I$(TDLIB_INCLUDE)
TDLIB_CGO_LDFLAGS ?= -Wl,--as-needed -L$(TDLIB_DIR) -ltdjson -Wl,-rpath,$(TDLIB_DIR)
GO_TDLIB_TAGS     ?= libtdjson
TDLIB_GO_ENV       = CGO_ENABLED=1 CGO_CFLAGS="$(TDLIB_CGO_CFLAGS)" CGO_LDFLAGS="$(TDLIB_CGO_LDFLAGS)"

TDLIB_BIN        ?= bin/stashd
TDLIB_MAIN_PKG   ?= ./cmd/stashd
TDLIB_TEST_FLAGS ?=

.PHONY: tdlib tdlib-link-deps tdlib-header tdlib-dir build-tdlib test-tdlib vet-tdlib

tdlib: tdlib-link-deps tdlib-header $(TDLIB_DIR)/libtdjson.so.$(TDLIB_VERSION)
ifeq ($(abspath $(TDLIB_DIR)),$(TDLIB_CACHE_LIB))
	@mkdir -p $(TDLIB_MK_ROOT)/.cache; \
	link=$(TDLIB_MK_ROOT)/.cache/tdlib; \
	if [ ! -L $$link ] || [ "$$(readlink $$link)" != $(TDLIB_CACHE) ]; then rm -rf $$link; ln -sfn $(TDLIB_CACHE) $$link; fi
endif

tdlib-dir:
	@echo $(abspath $(TDLIB_DIR))

# The header is copied only when it differs, by a rename, so that clones
# building at once never see half of it.
tdlib-header:
	@mkdir -p $(TDLIB_INCLUDE)/td/telegram; \
	dst=$(TDLIB_INCLUDE)/td/telegram/td_json_client.h; \
	cmp -s $(TDLIB_HEADER) $$dst || { cp $(TDLIB_HEADER) $$dst.tmp.$$$$ && mv $$dst.tmp.$$$$ $$dst; }

ifeq ($(abspath $(TDLIB_DIR)),$(TDLIB_CACHE_LIB))
# The symlink is written last, so an interrupted fetch is redone next time;
# each fetch works in a directory of its own and renames the library into
# place, so that clones fetching at once do not clash.
$(TDLIB_CACHE_LIB)/libtdjson.so.$(TDLIB_VERSION):
	@command -v npm >/dev/null 2>&1 || { echo "tdlib: npm is needed to fetch $(TDLIB_NPM_PACKAGE)" >&2; exit 1; }
	mkdir -p $(TDLIB_CACHE_LIB)
	set -e; npm=$$(mktemp -d $(TDLIB_CACHE)/npm.XXXXXX); trap 'rm -rf "$$npm"' EXIT; \
	(cd "$$npm" && npm pack --silent $(TDLIB_NPM_PACKAGE) >/dev/null); \
	tar -xzf "$$npm"/*.tgz -C "$$npm"; \
	node -e 'const v = require(process.argv[1]).tdlib.version; if (v !== process.argv[2]) { console.error("tdlib: npm package holds TDLib " + v + ", want " + process.argv[2]); process.exit(1); }' \
		"$$npm"/package/package.json $(TDLIB_VERSION); \
	lib=$$(find "$$npm" -name libtdjson.so -type f | head -n 1); \
	test -n "$$lib" || { echo "tdlib: no libtdjson.so in $(TDLIB_NPM_PACKAGE)" >&2; exit 1; }; \
	mv "$$lib" $(TDLIB_CACHE_LIB)/libtdjson.so
	ln -sfn libtdjson.so $@
else
$(TDLIB_DIR)/libtdjson.so.$(TDLIB_VERSION):
	@echo "tdlib: $@ not found: TDLIB_DIR must hold libtdjson.so of TDLib $(TDLIB_VERSION) (see mk/tdlib.mk)" >&2; exit 1
endif

# go-tdlib's client/tdjson_dynamic.go says
#   #cgo linux LDFLAGS: -L/usr/local/lib -ltdjson -lstdc++ -lssl -lcrypto -ldl -lz -lm
# so each of those must be found at link time. -ldl and -lm come with libc.
tdlib-link-deps:
	@missing=; \
	for pair in stdc++:g++ ssl:libssl-dev crypto:libssl-dev z:zlib1g-dev; do \
		lib=$${pair%%:*}; pkg=$${pair#*:}; \
		case "$$($(CC) -print-file-name=lib$$lib.so)" in \
			/*) ;; \
			*) case " $$missing " in *" $$pkg "*) ;; *) missing="$$missing $$pkg" ;; esac ;; \
		esac; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "tdlib: installing link-time libraries:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

build-tdlib: tdlib
	cd $(TDLIB_MK_ROOT) && $(TDLIB_GO_ENV) $(GO) build -tags $(GO_TDLIB_TAGS) -o $(TDLIB_BIN) $(TDLIB_MAIN_PKG)

test-tdlib: tdlib
	cd $(TDLIB_MK_ROOT) && $(TDLIB_GO_ENV) $(GO) test -race -tags $(GO_TDLIB_TAGS) $(TDLIB_TEST_FLAGS) ./tg/tdlib/...

vet-tdlib: tdlib
	cd $(TDLIB_MK_ROOT) && $(TDLIB_GO_ENV) $(GO) vet -tags $(GO_TDLIB_TAGS) ./tg/tdlib/...
