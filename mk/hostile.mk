# mk/hostile.mk: the hostile corpus through the whole pipeline.
#
# Targets
#   hostile        Builds the corpus (scripts/hostile-corpus.py: real and
#                  hostile archives made with zip, 7z, tar and the
#                  compressors, plus expect.toml) into HOSTILE_DIR, then runs
#                  `stashd demo --post-dir HOSTILE_DIR --json` with
#                  HOSTILE_FLAGS. The demo's audit judges every file against
#                  the manifest (docs/hostile.md); the last line printed is
#                  the audit's JSON, and the target fails when any file
#                  (post_dir_wrong) or the rest of the audit is wrong.
#   hostile-tools  Installs the Debian packages of the tools the corpus
#                  needs when one is missing (p7zip-full, zip, zstd, lz4,
#                  xz-utils, bzip2).

HOSTILE_DIR      ?= var/hostile
HOSTILE_DATA_DIR ?= var/hostile-demo
HOSTILE_FLAGS    ?= --duration 1s --seed 7 --dead-letter-broken

.PHONY: hostile hostile-tools

hostile-tools:
	@missing=; \
	for pair in 7z:p7zip-full zip:zip zstd:zstd lz4:lz4 xz:xz-utils bzip2:bzip2 python3:python3; do \
		tool=$${pair%%:*}; pkg=$${pair#*:}; \
		command -v $$tool >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "hostile: installing$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

hostile: build postgres hostile-tools
	python3 scripts/hostile-corpus.py $(HOSTILE_DIR)
	bin/stashd demo --post-dir $(HOSTILE_DIR) --data-dir $(HOSTILE_DATA_DIR) $(HOSTILE_FLAGS) --json
