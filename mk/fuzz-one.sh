#!/usr/bin/env bash
# mk/fuzz-one.sh PKG TARGET FUZZTIME [go test flags...]
#
# Runs one fuzz target for a wall-clock budget and fails on anything the
# target finds. Go's fuzzing coordinator applies -fuzztime as a context
# deadline and, on a loaded machine, sometimes reports that deadline as a
# failure of its own ("context deadline exceeded", no input written): it
# compares its context's error with its workers' context's before the
# cancel has reached the latter (go.dev/issue/75804, fixed in Go 1.27;
# this module is on 1.26). That one outcome is told apart and passes:
# besides the progress lines the output must hold nothing but that message,
# and no file may have appeared in the target's corpus directory. Every other
# failure (a crash, a failing input, a build error) fails the run.
set -u -o pipefail
pkg=$1 name=$2 budget=$3
shift 3
corpus="$pkg/testdata/fuzz/$name"
before=$(ls "$corpus" 2>/dev/null | sort)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"${GO:-go}" test -run '^$' -fuzz "^$name\$" -fuzztime "$budget" "$@" "$pkg" 2>&1 | tee "$out"
rc=$?
[ "$rc" -eq 0 ] && exit 0

after=$(ls "$corpus" 2>/dev/null | sort)
# Lines other than the coordinator's progress, the bare deadline and go
# test's own FAIL summary.
other=$(grep -vE '^(fuzz: elapsed: |--- FAIL: '"$name"' \(|    context deadline exceeded$|FAIL$|exit status 1$|FAIL	)' "$out")
if [ "$before" = "$after" ] && grep -qx '    context deadline exceeded' "$out" && [ -z "$other" ]; then
	echo "fuzz $pkg $name: Go's coordinator reported its own -fuzztime deadline (go.dev/issue/75804); no failing input was found or written"
	exit 0
fi
exit "$rc"
