#!/usr/bin/env bash
# mk/fuzz-all.sh FUZZTIME "GO TEST FLAGS" PKG:TARGET...
#
# Runs each fuzz target with mk/fuzz-one.sh for FUZZTIME, FUZZ_JOBS of them
# at a time (default 2: each fuzzes with one worker, so two share a
# two-core machine). Each target's output is printed whole when it ends,
# in the order given; the run fails when any target fails.
set -u
budget=$1 flags=$2
shift 2
jobs=${FUZZ_JOBS:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

one() {
	local pkg=${1%%:*} name=${1##*:}
	echo "fuzz $pkg $name for $budget"
	# shellcheck disable=SC2086 # flags are words
	GO=${GO:-go} mk/fuzz-one.sh "$pkg" "$name" "$budget" $flags
}

n=0
for t in "$@"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	( one "$t" >"$dir/$n.out" 2>&1; echo $? >"$dir/$n.rc" ) &
	n=$((n + 1))
done
wait

rc=0
for ((i = 0; i < n; i++)); do
	cat "$dir/$i.out"
	if [ "$(cat "$dir/$i.rc")" != 0 ]; then
		echo "$(sed -n 1p "$dir/$i.out"): FAILED"
		rc=1
	fi
done
exit $rc
