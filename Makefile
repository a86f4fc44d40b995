# stashd — the two commands a newcomer needs:
#
#   make demo   the whole pipeline on the Telegram simulator and a private
#               PostgreSQL, ending with an audit
#   make test   every test: go vet, the documentation's link check, go test
#               -race (real PostgreSQL), the real-TDLib tests, the pipeline
#               through the real adapter and a stand-in libtdjson
#               (mk/standin.mk), the dashboard and alert-rule tests, the
#               web console in a headless Chromium (mk/browser.mk), every
#               fuzz target for 5 s (mk/fuzz.mk; make fuzz runs each for a
#               minute), and a short kill -9 chaos run with an audit
#               (mk/chaos.mk; make chaos runs the full one)
#
# Both install what they need: Go modules, the PostgreSQL server package when
# no server binaries are found, the archive tools (mk/hostile.mk), the
# prebuilt TDLib (mk/tdlib.mk) and promtool (mk/promtool.mk) and Chromium
# for the browser test (mk/browser.mk).

GO ?= go
DEMO_FLAGS ?= --duration 20s --seed 7
# Every go command builds with -trimpath: a package's directory is then no
# part of its key in Go's build cache, and a fresh clone reuses what Go
# compiled for another (mk/tdlib.mk keeps the cgo flags the same too).
GOFLAGS += -trimpath
export GOFLAGS
GOTEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build demo test vet unit deps postgres clean
all: build

include mk/tdlib.mk
include mk/standin.mk
include mk/promtool.mk
include mk/browser.mk
include mk/chaos.mk
include mk/bench.mk
include mk/fuzz.mk
include mk/hostile.mk

deps:
	$(GO) mod download

# PostgreSQL server binaries (initdb, postgres) for the embedded default and
# the test harness. Debian's package is installed when none are found.
postgres:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		true; \
	else \
		echo "installing the PostgreSQL server package"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; \
	fi

# bin/stashd with TDLib linked in (see mk/tdlib.mk).
build: deps build-tdlib

demo: build postgres
	bin/stashd demo $(DEMO_FLAGS)

# vet: the import rules (mk/layers.sh), go vet, gofmt, and the
# documentation's links and anchors (mk/links.py).
vet: deps
	sh mk/layers.sh
	python3 mk/links.py
	$(UNIT_GO_ENV) $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

# unit: every package's tests (UNIT_PKGS), with the archive tools the
# archive tests build their inputs with (hostile-tools: zip, 7z, the
# compressors). Within `make test` the
# simulator's TDLib-JSON face (sim/tdjsonsim) is left to test-standin,
# which runs all of its tests too, through the stand-in library.
# UNIT_P packages' test binaries run at once (go test -p): most of their
# time is spent waiting on simulated clocks and the database, so four on
# two cores finish the phase sooner than go's default of one per core.
# Within a package, UNIT_PARALLEL tests run at once (go test -parallel;
# go's default is one per core): most of the daemon's and ingest's tests
# sit on a flood wait, a lease or a settle delay, and with two at a time
# those waits, not the CPU, set the phase's length.
UNIT_PKGS ?= ./...
UNIT_P ?= 4
UNIT_PARALLEL ?= 8
unit: deps postgres hostile-tools
	$(UNIT_GO_ENV) $(GO) test $(GOTEST_FLAGS) -p $(UNIT_P) -parallel $(UNIT_PARALLEL) $(UNIT_PKGS)

# Within `make test` go vet and every test (unit, test-tdlib, test-standin,
# test-browser, and the stashd binaries cmd/stashd's tests build) are
# compiled with the real adapter's cgo flags (TDLIB_GO_ENV): cgo flags are
# part of the build key of the standard library's cgo packages and so of
# every package above them, and with flags that differ the module is
# compiled once more for each. Untagged code calls no TDLib function, so
# the unit test binaries do not load the library.
test: UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/sim/tdjsonsim$$')
test: UNIT_GO_ENV = $(TDLIB_GO_ENV)
test: vet tdlib unit test-fuzz test-tdlib test-together test-chaos

# test-together runs the checks that spend much of their time waiting (on
# the simulator's clocks, a headless browser) side by side with the build
# of the chaos runs' binary; each one's output is printed whole when it
# ends. The CPU-bound phases before it run one after another, and so do the
# chaos runs after it: their 3 s leases are judged on time, which a machine
# busy compiling would distort.
.PHONY: test-together
test-together:
	$(MAKE) --no-print-directory -j4 --output-sync=target UNIT_GO_ENV='$(UNIT_GO_ENV)' \
		test-standin test-dashboards test-browser build-standin

clean:
	rm -rf bin var

# distclean also removes what the build keeps outside the clone: the
# prebuilt TDLib and the stand-in library under STASHD_CACHE (shared by
# every clone; the next build fetches them again), and .cache/.
.PHONY: distclean
distclean: clean
	rm -rf .cache '$(STASHD_CACHE)'
