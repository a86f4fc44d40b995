#!/bin/sh
# console-search-latency.sh BASE_URL [SECONDS] [QUERIES...]
#
# Measures the web console's search latency against a running stashd (serve,
# demo, or a chaos daemon): it searches BASE_URL/console/?q= for each
# query in turn, one request at a time, for SECONDS (default 60), and prints
# the count and the 50th, 95th and 99th percentile and the worst latency in
# milliseconds, and how many answers were not 200. Loopback only: the console
# answers 127.0.0.1 without a token.
#
#   scripts/console-search-latency.sh http://127.0.0.1:9464 300
set -eu
base=${1:?usage: console-search-latency.sh BASE_URL [SECONDS] [QUERIES...]}
secs=${2:-60}
[ $# -ge 2 ] && shift 2 || shift $#
[ $# -gt 0 ] || set -- backup photos dataset notes zip rar 7z part1 final 2024 export raw report
out=$(mktemp)
trap 'rm -f "$out"' EXIT
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
	for q in "$@"; do
		curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 30 \
			"$base/console/?q=$q" >>"$out" || echo "000 30" >>"$out"
	done
done
sort -k2 -n "$out" | awk '
	{ code[NR] = $1; t[NR] = $2 * 1000; if ($1 != 200) bad++ }
	END {
		if (NR == 0) { print "no requests"; exit 1 }
		i50 = int(NR * 0.50 + 0.999); i95 = int(NR * 0.95 + 0.999); i99 = int(NR * 0.99 + 0.999)
		printf "requests %d  p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms  not-200 %d\n",
			NR, t[i50], t[i95], t[i99], t[NR], bad + 0
	}'
