# mk/chaos.mk: kill -9 chaos with an audit (stashd chaos).
#
# The main Makefile includes this fragment after mk/standin.mk.
#
# Targets
#   chaos        The acceptance run: for each of CHAOS_SEEDS, stashd chaos
#                with CHAOS_FLAGS (default 50 daemon SIGKILLs and 5
#                postmaster SIGKILLs per seed), each printing its report as
#                one JSON line; fails on the first seed whose audit fails.
#                Logs of each run in var/chaos/seed-N/ and the harness's
#                own in var/chaos/seed-N.log.
#   test-chaos   The short run `make test` includes: one seed, 5 daemon
#                kills and one postmaster kill.
#
# Both run bin/stashd-standin (make build-standin): stashd linked against
# the stand-in libtdjson, which serves as the simulator (stashd sim), the
# harness and the daemon (stashd serve).

CHAOS_SEEDS      ?= 1 2 3 4 5
CHAOS_FLAGS      ?= --kills 50 --pg-kills 5
CHAOS_TEST_FLAGS ?= --kills 5 --pg-kills 1 --duration 12s --seed 3

.PHONY: chaos test-chaos

chaos: build-standin postgres
	@mkdir -p var/chaos; start=$$(date +%s); \
	for seed in $(CHAOS_SEEDS); do \
		$(STANDIN_BIN) chaos $(CHAOS_FLAGS) --seed $$seed --json 2>var/chaos/seed-$$seed.log | tail -n 1 || { \
			echo "chaos seed $$seed: audit failed (var/chaos/seed-$$seed/, var/chaos/seed-$$seed.log)"; exit 1; }; \
	done; \
	echo "chaos: seeds $(CHAOS_SEEDS) passed in $$(( $$(date +%s) - start ))s"

test-chaos: build-standin postgres
	$(STANDIN_BIN) chaos $(CHAOS_TEST_FLAGS) --dir var/chaos/test
