# mk/fuzz.mk: the permanent fuzz targets, each run briefly.
#
# Included by the main Makefile; `make test` runs test-fuzz.
#
# Targets
#   test-fuzz   Run every target of FUZZ_TARGETS for FUZZTIME with
#               FUZZ_FLAGS, FUZZ_JOBS at a time (mk/fuzz-all.sh; go test
#               runs one target per invocation). A crash fails the run; go test then
#               writes the input under the package's testdata/fuzz/TARGET/,
#               where every later `go test` replays it. Each target's seed
#               corpus is committed there too, and plain `go test ./...`
#               replays it without fuzzing.
#   fuzz        The same for FUZZTIME_LONG each (default 60s).
#
# Variables
#   FUZZ_TARGETS   package:Target pairs. Default: file-name and set parsing
#                  (archive FuzzParseName), archive listing (archive FuzzList),
#                  TDLib JSON decoding (tg/tdlib FuzzDecode), search cursors
#                  and queries on a real catalogue (store FuzzSearchCursor,
#                  FuzzSearch), the console's handlers (web FuzzConsole).
#   FUZZ_JOBS      targets fuzzed at the same time (default 2).
#   FUZZTIME       how long each target runs in test-fuzz (default 5s).
#   FUZZTIME_LONG  how long each target runs in fuzz (default 60s).
#   FUZZ_FLAGS     extra go test flags (default -parallel 1: one worker, so
#                  the run shares the machine; -fuzzminimizetime 1s: each new
#                  interesting input is minimised for a second, not the
#                  default minute, which would take a short run's whole
#                  time and leave a target at a dozen executions).

GO ?= go
FUZZ_TARGETS ?= ./archive:FuzzParseName ./archive:FuzzList ./archive:FuzzZip ./archive:FuzzRar \
	./archive:Fuzz7z ./archive:FuzzTar ./archive:FuzzAssemble ./tg/tdlib:FuzzDecode \
	./store:FuzzSearchCursor ./store:FuzzSearch ./web:FuzzConsole ./internal/config:FuzzLoad
FUZZ_JOBS ?= 2
FUZZTIME ?= 5s
FUZZTIME_LONG ?= 60s
FUZZ_FLAGS ?= -parallel 1 -fuzzminimizetime 1s

.PHONY: test-fuzz fuzz

test-fuzz: deps postgres
	@GO=$(GO) FUZZ_JOBS=$(FUZZ_JOBS) mk/fuzz-all.sh $(FUZZTIME) "$(FUZZ_FLAGS)" $(FUZZ_TARGETS)

fuzz: deps postgres
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME_LONG)"; \
		GO=$(GO) mk/fuzz-one.sh $$pkg $$name $(FUZZTIME_LONG) $(FUZZ_FLAGS); \
	done
