#!/usr/bin/env python3
"""mk/links.py: the documentation's link check, run by `make vet`.

Every relative link in README.md, docs/*.md and dashboards/README.md (or the
Markdown files given as arguments) must name a file or directory of the
repository, and every #anchor a heading of the target file, with GitHub's
rules for heading anchors: lower case, markup dropped, punctuation dropped,
spaces to '-', a repeated heading suffixed -1, -2, ... Links inside code
(fenced blocks and `spans`) and links with a scheme (https:, mailto:) are
not checked.

With the default files it also checks that the pages say what the code has:
docs/operations.md has a heading per alert of dashboards/alerts.yml (so an
alert's runbook_url can be docs/operations.md#<alert in lower case>), and
docs/configuration.md documents every key of internal/config and lists no
setting that is not one, each with its STASHD_* variable and its flag.

Prints one line per problem and exits 1 when there is one.
"""

import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\".*\")?\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text):
    """Yields (line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w is Unicode: letters, digits, '_'
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen, found = {}, set()
        for _, line in prose_lines(text):
            for a in HTML_ANCHOR.findall(line):
                found.add(a)
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check_links(path):
    problems = []
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in prose_lines(text):
        line = CODE_SPAN.sub("", line)
        targets = LINK.findall(line)
        m = REF_DEF.match(line)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if not target or SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if file_part == "" else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            where = f"{rel}:{n}: {target}"
            if not (dest == ROOT or dest.startswith(ROOT + os.sep)):
                problems.append(f"{where}: points outside the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{where}: no such file {os.path.relpath(dest, ROOT)}")
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                elif anchor not in anchors(dest):
                    problems.append(f"{where}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
    return problems


def check_alerts():
    """One heading per alert of dashboards/alerts.yml in docs/operations.md."""
    with open(os.path.join(ROOT, "dashboards/alerts.yml"), encoding="utf-8") as f:
        alerts = re.findall(r"^\s*-\s*alert:\s*(\S+)", f.read(), re.M)
    have = anchors(os.path.join(ROOT, "docs/operations.md"))
    return [f"docs/operations.md: no heading for alert {a} (#{a.lower()})" for a in alerts if a.lower() not in have]


def check_settings():
    """docs/configuration.md against the keys of internal/config."""
    keys, scalar = set(), []
    for go in sorted(glob.glob(os.path.join(ROOT, "internal/config/*.go"))):
        if go.endswith("_test.go"):
            continue
        with open(go, encoding="utf-8") as f:
            src = f.read()
        keys |= set(re.findall(r'toml:"([a-z_]+)"', src))
        m = re.search(r"var Settings = \[\]struct.*?\n}\n", src, re.S)
        if m:
            scalar += re.findall(r'^\s*\{"([a-z_]+)",', m.group(0), re.M)
    if not keys or not scalar:
        return ["internal/config: found no toml keys or no Settings list (has the package moved?)"]
    with open(os.path.join(ROOT, "docs/configuration.md"), encoding="utf-8") as f:
        doc = f.read()
    problems = []
    for k in sorted(keys):
        if f"`{k}`" not in doc and f"[[{k}]]" not in doc:
            problems.append(f"docs/configuration.md: internal/config key {k} is not documented")
    rows = {}
    for line in doc.split("\n"):
        m = re.match(r"^\|\s*`([a-z_]+)`\s*\|\s*`?([A-Z_]*)`?\s*\|\s*`?([a-z-]*)`?\s*\|", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    for name in scalar:
        env, flag = "STASHD_" + name.upper(), "--" + name.replace("_", "-")
        if name not in rows:
            problems.append(f"docs/configuration.md: setting {name} has no row in the settings table")
        elif rows[name] != (env, flag):
            problems.append(f"docs/configuration.md: setting {name} should name {env} and {flag}, not {rows[name]}")
    for name in sorted(set(rows) - set(scalar)):
        problems.append(f"docs/configuration.md: {name} is in the settings table but is not a setting of internal/config")
    return problems


def main(args):
    if args:
        files = [os.path.abspath(a) for a in args]
    else:
        files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "dashboards/README.md")]
        files += sorted(glob.glob(os.path.join(ROOT, "docs/*.md")))
    problems = []
    for path in files:
        problems += check_links(path)
    if not args:
        problems += check_alerts() + check_settings()
    for p in problems:
        print(p)
    if problems:
        print(f"mk/links.py: {len(problems)} problem(s) in the documentation")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
