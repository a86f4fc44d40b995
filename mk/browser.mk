# mk/browser.mk: the web console's browser test.
#
# Included by the main Makefile, or run alone from the repository root:
#     make -f mk/browser.mk test-browser
#
# Targets
#   chromium       Make $(CHROMIUM) available: when no chromium is found, Debian's
#                  `chromium` package is installed with apt-get (apt-get update
#                  first; sudo when not root). Idempotent.
#   test-browser   Depends on chromium, then runs web's TestBrowserConsole with
#                  STASHD_CHROMIUM pointing at it: a headless Chromium opens the
#                  console over a seeded catalogue, searches a file inside a
#                  package, opens the package, checks that hostile entry names
#                  render as text, retries a dead letter and takes screenshots
#                  (under the test's temporary directory; also copied to
#                  $(CONSOLE_SCREENSHOT) when that is set).
#
# `go test ./...` runs the same test when chromium is on PATH and skips it,
# saying so, when it is not.
#
# Variables
#   CHROMIUM            the browser. Default: chromium on PATH, else /usr/bin/chromium.
#   CONSOLE_SCREENSHOT  where to copy the search page's screenshot. Default: none.
#   UNIT_GO_ENV         environment prefix of the go test command; `make test`
#                       sets it to the cgo flags its other race builds use, so
#                       that the test reuses their compiled packages. Default: none.

BROWSER_MK_ALONE := $(if $(filter 1,$(words $(MAKEFILE_LIST))),yes,)
BROWSER_MK_SAVED_GOAL := $(.DEFAULT_GOAL)

GO ?= go
CHROMIUM ?= $(or $(shell command -v chromium 2>/dev/null),/usr/bin/chromium)
CONSOLE_SCREENSHOT ?=

.PHONY: chromium test-browser

chromium:
	@if [ -x '$(CHROMIUM)' ]; then true; else \
		echo "installing Debian's chromium for the browser test"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi
	@'$(CHROMIUM)' --version

test-browser: chromium
	STASHD_CHROMIUM='$(CHROMIUM)' STASHD_CONSOLE_SCREENSHOT='$(CONSOLE_SCREENSHOT)' \
	  $(UNIT_GO_ENV) $(GO) test -race -count=1 -run '^TestBrowserConsole$$' -v ./web/

ifeq ($(BROWSER_MK_ALONE),yes)
.DEFAULT_GOAL := test-browser
else
.DEFAULT_GOAL := $(BROWSER_MK_SAVED_GOAL)
endif
