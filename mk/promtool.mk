# mk/promtool.mk: checks for stashd's Grafana dashboard and Prometheus alert rules.
#
# Included by the main Makefile, or run alone from the repository root:
#     make -f mk/promtool.mk test-dashboards
#
# Targets
#   promtool          Make $(PROMTOOL) available. Debian's `prometheus` package ships
#                     promtool; it is fetched with `apt-get download` and unpacked with
#                     `dpkg-deb -x` into $(PROMTOOL_CACHE), so nothing is installed
#                     system-wide and no service is started. Idempotent: does nothing
#                     when $(PROMTOOL) exists, and runs `apt-get update` only when the
#                     first download fails (a fresh machine has no package lists).
#   test-dashboards   Depends on promtool, then:
#                     - promtool check rules dashboards/alerts.yml
#                     - promtool test rules dashboards/alerts_test.yml (each alert has a
#                       firing and a quiet case)
#                     - $(PYTHON) -m json.tool dashboards/stashd.json (valid JSON)
#                     - dashboards/check_dashboard.py: dashboard shape (uid, datasource
#                       and template variables, ids, grid), every stashd_* name in
#                       stashd.json, alerts.yml and alerts_test.yml is listed in
#                       dashboards/metrics.txt, every listed metric is on a panel, and
#                       every dashboard query parses as PromQL (via promtool).
#
# Variables (set on the command line or before the include)
#   PROMTOOL         promtool binary. Default: the unpacked $(PROMTOOL_CACHE)/usr/bin/promtool.
#                    Set it to use another one, e.g. PROMTOOL=/usr/bin/promtool.
#   PROMTOOL_CACHE   where the Debian package is unpacked. Default: .cache/promtool
#                    under the repository root (git-ignored).
#   PYTHON           Python 3 for the JSON and metric-name checks. Default: python3.
#   DASHBOARDS_DIR   the dashboards directory. Default: dashboards under the root.
#
# The histograms in dashboards/metrics.txt are listed in DASHBOARDS_HISTOGRAMS below:
# their _bucket, _sum and _count series may be queried too.

# Where this fragment lives, taken before any other include extends MAKEFILE_LIST.
PROMTOOL_MK_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
# Run alone (`make -f mk/promtool.mk`), test-dashboards is the default goal; included,
# the includer's default goal is left alone (see the end of this file).
PROMTOOL_MK_ALONE := $(if $(filter 1,$(words $(MAKEFILE_LIST))),yes,)
PROMTOOL_MK_SAVED_GOAL := $(.DEFAULT_GOAL)

PROMTOOL_CACHE ?= $(PROMTOOL_MK_ROOT)/.cache/promtool
PROMTOOL ?= $(PROMTOOL_CACHE)/usr/bin/promtool
PYTHON ?= python3
DASHBOARDS_DIR ?= $(PROMTOOL_MK_ROOT)/dashboards
DASHBOARDS_HISTOGRAMS := stashd_ingest_stage_seconds stashd_update_age_seconds

.PHONY: promtool test-dashboards

promtool: $(PROMTOOL)

# The package's file name carries its version, so the download goes to a directory of
# its own and the glob picks whatever apt fetched. The directory is world-writable so
# that apt's unprivileged _apt user can write there (otherwise apt warns that it
# downloads unsandboxed); it is removed once the package is unpacked.
$(PROMTOOL_CACHE)/usr/bin/promtool:
	@mkdir -p '$(PROMTOOL_CACHE)/deb'
	@chmod 0777 '$(PROMTOOL_CACHE)/deb'
	@rm -f '$(PROMTOOL_CACHE)'/deb/prometheus_*.deb
	cd '$(PROMTOOL_CACHE)/deb' && { apt-get download prometheus || \
	  { apt-get update && apt-get download prometheus; }; }
	dpkg-deb -x '$(PROMTOOL_CACHE)'/deb/prometheus_*.deb '$(PROMTOOL_CACHE)'
	@rm -rf '$(PROMTOOL_CACHE)/deb'
	@touch '$@'
	@'$@' --version 2>&1 | head -n 1

test-dashboards: promtool
	'$(PROMTOOL)' check rules '$(DASHBOARDS_DIR)/alerts.yml'
	'$(PROMTOOL)' test rules '$(DASHBOARDS_DIR)/alerts_test.yml'
	$(PYTHON) -m json.tool '$(DASHBOARDS_DIR)/stashd.json' > /dev/null
	$(PYTHON) '$(DASHBOARDS_DIR)/check_dashboard.py' \
	  --dashboard '$(DASHBOARDS_DIR)/stashd.json' \
	  --metrics '$(DASHBOARDS_DIR)/metrics.txt' \
	  $(foreach h,$(DASHBOARDS_HISTOGRAMS),--histogram $(h)) \
	  --rules '$(DASHBOARDS_DIR)/alerts.yml' \
	  --rules '$(DASHBOARDS_DIR)/alerts_test.yml' \
	  --readme '$(DASHBOARDS_DIR)/README.md' \
	  --promtool '$(PROMTOOL)'

# Restore the includer's default goal: rules above must not become its default.
ifeq ($(PROMTOOL_MK_ALONE),yes)
.DEFAULT_GOAL := test-dashboards
else
.DEFAULT_GOAL := $(PROMTOOL_MK_SAVED_GOAL)
endif
