#!/bin/sh
# mk/layers.sh: the import rules of the layout (docs/ARCHITECTURE.md). Prints
# each import that climbs back up the layers and exits 1 when there is one:
#   sim/      imported only by sim/, harness/ and cmd/ (tests aside)
#   harness/  imported only by harness/ and cmd/ (tests aside)
#   internal/ leaf helpers: none imports daemon, ingest, listener, catchup,
#             rescan, sim or harness
set -eu
cd "$(dirname "$0")/.."

go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... | awk '
{ pkg=$1; sub(":","",pkg);
  for(i=2;i<=NF;i++){ imp=$i;
    if (imp ~ /^stashd\/sim(\/|$)/ && pkg !~ /^stashd\/(sim|harness|cmd)(\/|$)/) print "sim imported by " pkg;
    if (imp ~ /^stashd\/harness(\/|$)/ && pkg !~ /^stashd\/(harness|cmd)(\/|$)/) print "harness imported by " pkg;
    if (pkg ~ /^stashd\/internal\// && imp ~ /^stashd\/(daemon|ingest|listener|catchup|rescan|sim|harness)(\/|$)/) print pkg " imports " imp;
  } }' | tee /dev/stderr | (! grep -q .)
