#!/usr/bin/env python3
"""Static checks for stashd's Grafana dashboard and Prometheus rules.

Run by `make test-dashboards` (mk/promtool.mk); standard library only. It checks:

1. the dashboard is valid JSON with the shape provisioning and import rely on: stable
   uid, a `datasource` variable of type prometheus that every panel and query uses,
   `account` and `source` variables from label_values(), unique panel ids and refIds,
   panels inside the 24-column grid without overlap, only defined variables used;
2. every stashd_* name in the dashboard and in the rule files is listed in metrics.txt
   (the daemon's observability contract; a histogram may also be named with its
   _bucket, _sum and _count series), and every name in metrics.txt appears on the
   dashboard, so nothing the daemon exports goes unseen;
3. every dashboard query and variable selector parses as PromQL: they are written,
   with Grafana's variables replaced by sample values, as recording rules into a
   temporary file that `promtool check rules` must accept;
4. every alert has a runbook_url pointing at its section of docs/operations.md
   (docs/operations.md#<alert name in lower case>), every alert is listed in the
   README (--readme), and every file the README's file table names exists.

Exit status 0 when every check passes, 1 otherwise (each failure is printed).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

METRIC_RE = re.compile(r"\bstashd_[A-Za-z0-9_]+")
NAME_RE = re.compile(r"^stashd_[a-z0-9_]+$")
# $name, ${name} and ${name:format}; Grafana's own variables start with "__".
VAR_RE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Values that make Grafana's built-in interval variables parse as PromQL durations.
BUILTIN_VALUES = {
    "__rate_interval": "5m",
    "__interval": "1m",
    "__range": "6h",
    "__interval_ms": "60000",
    "__range_s": "21600",
    "__range_ms": "21600000",
}
PANEL_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


class Checker:
    """Collects failures so that one run reports all of them."""

    def __init__(self):
        self.failures = []

    def fail(self, where, msg):
        self.failures.append(f"{where}: {msg}")

    def check(self, ok, where, msg):
        if not ok:
            self.fail(where, msg)
        return ok


def load_metrics(path, c):
    names = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            name = line.strip()
            if c.check(NAME_RE.match(name), f"{path}:{n}", f"not a stashd metric name: {line!r}"):
                names.append(name)
    c.check(len(names) == len(set(names)), path, "duplicate names")
    return set(names)


def allowed_names(metrics, histograms, c):
    allowed = set(metrics)
    for h in histograms:
        c.check(h in metrics, "--histogram", f"{h} is not in metrics.txt")
        allowed.update(h + s for s in HISTOGRAM_SUFFIXES)
    return allowed


def base_name(name, histograms):
    for s in HISTOGRAM_SUFFIXES:
        if name.endswith(s) and name[: -len(s)] in histograms:
            return name[: -len(s)]
    return name


def panels_of(dash):
    """Yields every panel, including those nested in collapsed rows."""
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])


def query_of(variable):
    """Returns a query variable's query text (a string, or an object since Grafana 10)."""
    q = variable.get("query", "")
    return q.get("query", "") if isinstance(q, dict) else q


def label_values_selector(query):
    """Returns the series selector of label_values(selector, label), or None."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S)
    return m.group(1) if m else None


def check_dashboard(path, c):
    """Checks the dashboard's shape; returns (queries, variables, text to scan), or
    None when the file is not JSON."""
    with open(path, encoding="utf-8") as f:
        try:
            dash = json.load(f)
        except json.JSONDecodeError as e:
            c.fail(path, f"invalid JSON: {e}")
            return None
    c.check(dash.get("uid") == "stashd-overview", path, "uid must stay stashd-overview")
    c.check(isinstance(dash.get("schemaVersion"), int) and dash["schemaVersion"] >= 36,
            path, "schemaVersion missing or older than 36")
    c.check(dash.get("id") is None, path, "id must be null so that import and provisioning assign one")

    variables = {}
    queries = []  # (where, expr)
    for v in dash.get("templating", {}).get("list", []):
        variables[v.get("name")] = v
    ds = variables.get("datasource")
    c.check(ds is not None and ds.get("type") == "datasource" and ds.get("query") == "prometheus",
            path, "needs a `datasource` variable of type datasource, query prometheus")
    for name in ("account", "source"):
        v = variables.get(name, {})
        c.check(v.get("type") == "query" and re.search(rf",\s*{name}\s*\)\s*$", query_of(v)),
                path, f"needs a query variable `{name}` = label_values(..., {name})")
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        c.check(v.get("datasource") == PANEL_DATASOURCE, path,
                f"variable {name} must use ${{datasource}}")
        sel = label_values_selector(query_of(v))
        if c.check(sel is not None, path, f"variable {name}: expected label_values(selector, label)"):
            queries.append((f"variable {name}", sel))

    ids = set()
    cells = {}
    text = []
    for p in panels_of(dash):
        where = f"{path}: panel {p.get('id')} {p.get('title')!r}"
        c.check(isinstance(p.get("id"), int) and p["id"] not in ids, where, "missing or duplicate id")
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        x, y, w, h = (g.get(k) for k in ("x", "y", "w", "h"))
        if c.check(all(isinstance(n, int) for n in (x, y, w, h)) and x >= 0 and w > 0
                   and h > 0 and x + w <= 24, where, f"bad gridPos {g}"):
            for cx in range(x, x + w):
                for cy in range(y, y + h):
                    other = cells.setdefault((cx, cy), p.get("id"))
                    if other != p.get("id"):
                        c.fail(where, f"overlaps panel {other}")
                        break
                else:
                    continue
                break
        text.append(p.get("title", ""))
        if p.get("type") == "row":
            continue
        c.check(p.get("datasource") == PANEL_DATASOURCE, where, "datasource must be ${datasource}")
        targets = p.get("targets") or []
        c.check(targets, where, "no queries")
        refs = set()
        for t in targets:
            ref = t.get("refId")
            c.check(ref and ref not in refs, where, f"missing or duplicate refId {ref!r}")
            refs.add(ref)
            c.check(t.get("datasource") == PANEL_DATASOURCE, where,
                    f"query {ref} datasource must be ${{datasource}}")
            expr = t.get("expr", "")
            if c.check(expr.strip(), where, f"query {ref} has no expr"):
                queries.append((f"panel {p['id']} {p.get('title')!r} query {ref}", expr))
    for where, expr in queries:
        text.append(expr)
    scanned = "\n".join(text)
    for m in VAR_RE.finditer(scanned):
        name = m.group(1) or m.group(2)
        c.check(name in variables or name in BUILTIN_VALUES, path, f"undefined variable ${name}")
    return queries, variables, scanned


def substitute(expr, variables):
    """Replaces Grafana variables with values that keep the PromQL parseable."""

    def value(m):
        name = m.group(1) or m.group(2)
        if name in BUILTIN_VALUES:
            return BUILTIN_VALUES[name]
        v = variables.get(name, {})
        if v.get("type") == "custom":
            return str(v.get("current", {}).get("value", ""))
        return ".*"  # query variables appear inside =~"..." matchers

    return VAR_RE.sub(value, expr)


def check_promql(queries, variables, promtool, c):
    if not queries:
        return
    lines = ["groups:", "  - name: stashd_dashboard_queries", "    rules:"]
    for i, (where, expr) in enumerate(queries):
        lines.append(f"      # {where}")
        lines.append(f"      - record: stashd_dashboard_query:{i}")
        lines.append(f"        expr: {json.dumps(substitute(expr, variables))}")
    with tempfile.TemporaryDirectory() as d:
        rules = os.path.join(d, "dashboard_queries.yml")
        with open(rules, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
        if r.returncode != 0:
            c.fail("dashboard queries", "promtool rejects a query:\n" + r.stdout + r.stderr
                   + "\n(query i is the i-th of:\n"
                   + "\n".join(f"  {i}: {w}" for i, (w, _) in enumerate(queries)) + ")")


def check_names(path, text, allowed, c):
    used = set(METRIC_RE.findall(text))
    for name in sorted(used - allowed):
        c.fail(path, f"{name} is not a metric the daemon exports (dashboards/metrics.txt)")
    return used


ALERT_RE = re.compile(r"^\s*- alert: (\w+)\s*$", re.M)
RUNBOOK_RE = re.compile(r'^\s*runbook_url: "([^"]*)"\s*$')


def check_alerts(path, text, c):
    """Every alert of a rule file carries its runbook_url; returns the alert names."""
    alerts = []
    current = None
    for line in text.split("\n"):
        m = ALERT_RE.match(line)
        if m:
            if current:
                c.fail(path, f"alert {current} has no runbook_url")
            current = m.group(1)
            alerts.append(current)
            continue
        m = RUNBOOK_RE.match(line)
        if m and current:
            want = f"docs/operations.md#{current.lower()}"
            c.check(m.group(1) == want, path, f"alert {current}: runbook_url {m.group(1)!r}, want {want!r}")
            current = None
    if current:
        c.fail(path, f"alert {current} has no runbook_url")
    return alerts


def check_readme(path, alerts, c):
    """The README lists every alert and names only files that exist."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for name in alerts:
        c.check(re.search(r"\b%s\b" % name, text) is not None, path, f"alert {name} is not listed")
    here = os.path.dirname(os.path.abspath(path))
    for name in re.findall(r"^\| `([^`]+)` \|", text, re.M):
        c.check(os.path.exists(os.path.join(here, name)), path, f"names {name}, which does not exist")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--metrics", required=True, help="metrics.txt: one exported stashd_* name a line")
    ap.add_argument("--histogram", action="append", default=[],
                    help="a histogram in metrics.txt whose _bucket/_sum/_count may be queried")
    ap.add_argument("--rules", action="append", default=[], help="rule or rule test file to scan")
    ap.add_argument("--promtool", help="promtool binary for the PromQL syntax check")
    ap.add_argument("--readme", help="README that must list every alert of the --rules files")
    args = ap.parse_args()

    c = Checker()
    metrics = load_metrics(args.metrics, c)
    allowed = allowed_names(metrics, set(args.histogram), c)
    queries, variables, used = [], {}, set()
    checked = check_dashboard(args.dashboard, c)
    if checked is not None:  # invalid JSON: the name checks would only add noise
        queries, variables, scanned = checked
        used = check_names(args.dashboard, scanned, allowed, c)
        shown = {base_name(n, set(args.histogram)) for n in used}
        for name in sorted(metrics - shown):
            c.fail(args.dashboard, f"{name} (metrics.txt) is shown on no panel")
    alerts = []
    for path in args.rules:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        check_names(path, text, allowed, c)
        alerts += check_alerts(path, text, c)
    if args.readme:
        check_readme(args.readme, alerts, c)
    if args.promtool:
        check_promql(queries, variables, args.promtool, c)

    for failure in c.failures:
        print("FAIL", failure, file=sys.stderr)
    if c.failures:
        print(f"check_dashboard: {len(c.failures)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_dashboard: OK ({len(queries)} queries, {len(used)} stashd metric names, "
          f"{len(args.rules)} rule files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
