# mk/bench.mk: `stashd bench`, every performance goal measured against its
# baseline in one run (the simulator and a private PostgreSQL).
#
# Included by the main Makefile (it uses its deps and postgres targets).
#
# Targets
#   bench   Build bin/stashd-bench (pure Go, no TDLib needed) and run
#           `stashd bench $(BENCH_FLAGS)`: the table on stderr, the JSON
#           summary as the last line of stdout. Takes up to 10 minutes on
#           2 cores. BENCH_FLAGS=--quick runs the seconds-long smoke.
# The smoke test (harness/bench/bench_test.go) runs with `make test` (go test ./...).

GO ?= go
BENCH_FLAGS ?= --json

.PHONY: bench
bench: deps postgres build-standin
	$(GO) build -o bin/stashd-bench ./cmd/stashd
	bin/stashd-bench bench $(BENCH_FLAGS)
