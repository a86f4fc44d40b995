# mk/chaos.mk: kill -9 chaos with an audit (stashd chaos).
#
# The main Makefile includes this fragment after mk/standin.mk.
#
# Targets
#   chaos        The acceptance run: for each of CHAOS_SEEDS, at the same
#                time, stashd chaos with CHAOS_FLAGS (default 50 daemon
#                SIGKILLs and 5 postmaster SIGKILLs per seed; a run mostly
#                waits for its processes, so the seeds share the cores);
#                prints each seed's report as one JSON line and fails when
#                any seed's audit fails.
#                Logs of each run in var/chaos/seed-N/ and the harness's
#                own in var/chaos/seed-N.log.
#   test-chaos   The short runs `make test` includes, at the same time:
#                one seed, 5 daemon kills and one postmaster kill; and the
#                same with two daemons on one database and one owner
#                paused; both with 5 s package locks (--lock-ttl), so the
#                locks the kills leave lapse sooner. Each run's output is
#                printed whole when both end (kept in var/chaos/test.out,
#                var/chaos/test-failover.out).
#   soak         The in-process no-loss test (harness/demo
#                TestNoLossUnderFaults) over SOAK_SEEDS seeds (default 50;
#                `make test` runs 4).
#   chaos-failover
#                Failover: CHAOS_FAILOVER_FLAGS (default 2 daemons on one
#                database, 20 SIGKILLs of an account's owner or a standby,
#                5 SIGSTOPs of an owner past its 3 s lease, seed 1); prints
#                the report as one JSON line (failovers,
#                longest_ownerless_seconds, session_overlaps) and fails
#                when the audit fails, an account ran in two sessions at
#                once, or an account was without an owner longer than
#                twice the TTL. Logs in var/chaos/failover/ and the
#                harness's own in var/chaos/failover.log.
#
# Both run bin/stashd-standin (make build-standin): stashd linked against
# the stand-in libtdjson, which serves as the simulator (stashd sim), the
# harness and the daemon (stashd serve).

CHAOS_SEEDS      ?= 1 2 3 4 5
SOAK_SEEDS       ?= 50
CHAOS_FLAGS      ?= --kills 50 --pg-kills 5
CHAOS_TEST_FLAGS ?= --kills 5 --pg-kills 1 --duration 12s --lock-ttl 5s --seed 3
CHAOS_TEST_FAILOVER_FLAGS ?= --instances 2 --kills 5 --pauses 1 --pg-kills 1 --duration 12s --lease-ttl 3s --lock-ttl 5s --seed 3
CHAOS_FAILOVER_FLAGS ?= --instances 2 --kills 20 --pauses 5 --lease-ttl 3s --seed 1

.PHONY: chaos test-chaos chaos-failover soak

chaos: build-standin postgres
	@mkdir -p var/chaos; start=$$(date +%s); \
	for seed in $(CHAOS_SEEDS); do \
		( $(STANDIN_BIN) chaos $(CHAOS_FLAGS) --seed $$seed --json 2>var/chaos/seed-$$seed.log >var/chaos/seed-$$seed.json; \
		  echo $$? >var/chaos/seed-$$seed.rc ) & \
	done; wait; rc=0; \
	for seed in $(CHAOS_SEEDS); do \
		tail -n 1 var/chaos/seed-$$seed.json; \
		if [ "$$(cat var/chaos/seed-$$seed.rc)" != 0 ]; then \
			echo "chaos seed $$seed: FAILED (var/chaos/seed-$$seed/, var/chaos/seed-$$seed.log)"; rc=1; fi; \
	done; \
	echo "chaos: seeds $(CHAOS_SEEDS) in $$(( $$(date +%s) - start ))s"; exit $$rc

test-chaos: build-standin postgres
	@mkdir -p var/chaos; \
	( $(STANDIN_BIN) chaos $(CHAOS_TEST_FLAGS) --dir var/chaos/test >var/chaos/test.out 2>&1; \
	  echo $$? >var/chaos/test.rc ) & \
	( $(STANDIN_BIN) chaos $(CHAOS_TEST_FAILOVER_FLAGS) --dir var/chaos/test-failover >var/chaos/test-failover.out 2>&1; \
	  echo $$? >var/chaos/test-failover.rc ) & \
	wait; rc=0; \
	for run in test test-failover; do \
		cat var/chaos/$$run.out; \
		if [ "$$(cat var/chaos/$$run.rc)" != 0 ]; then echo "test-chaos $$run: FAILED (var/chaos/$$run/)"; rc=1; fi; \
	done; exit $$rc

chaos-failover: build-standin postgres
	@mkdir -p var/chaos; \
	$(STANDIN_BIN) chaos $(CHAOS_FAILOVER_FLAGS) --dir var/chaos/failover --json 2>var/chaos/failover.log >var/chaos/failover.json; \
	rc=$$?; tail -n 1 var/chaos/failover.json; \
	if [ $$rc != 0 ]; then echo "chaos-failover: FAILED (var/chaos/failover/, var/chaos/failover.log)"; fi; exit $$rc

soak: deps postgres
	STASHD_NOLOSS_SEEDS=$(SOAK_SEEDS) $(GO) test -race -count=1 -timeout 60m -run 'TestNoLossUnderFaults$$' ./harness/demo/
