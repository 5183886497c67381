#!/usr/bin/env python3
"""Every metric name the alert rules and the Grafana dashboard query must be
one boxkite exports.

  metric_names.py [--scrape FILE]... RULES.yaml... DASHBOARD.json...

Exported names come from the source (the "# TYPE name type" lines
agent/observe/metrics.c and sidecar-shim/http.c print; a histogram adds
_bucket, _sum and _count) or, with --scrape, from scraped Prometheus text
(live /metrics answers). Referenced names come from every PromQL expression:
the rules' `expr`, the dashboard's targets' `expr` and its variables'
queries. Prints one line per file and per unknown name; exit 1 if any name
is unknown or a file has no expression at all."""
import json
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SOURCES = ["agent/observe/metrics.c", "sidecar-shim/http.c"]
TYPE_RE = re.compile(r"# TYPE (boxkite_[a-zA-Z0-9_]+) (counter|gauge|histogram|summary|untyped)")

# PromQL words that are not metric names
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "inf", "nan", "atan2", "start", "end"}


def exported_from_text(text):
    names = set()
    for name, typ in TYPE_RE.findall(text):
        names.add(name)
        if typ == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
        if typ == "summary":
            names |= {name + "_sum", name + "_count"}
    return names


def sample_names(text):
    """Sample lines of scraped text: names that carry values."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", line)
        if m and not line.startswith("#"):
            out.add(m.group(1))
    return out


def metric_names(expr):
    """Metric names in one PromQL expression (a lexical pass: enough for the
    expressions we write; it errs towards reporting a name)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)  # string literals
    e = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*", "1", e)  # Grafana variables
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)  # label lists
    e = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", e)
    # label_values(metric, label): only the metric is a name
    e = re.sub(r"\blabel_values\s*\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)", r"\1", e)
    # label_replace(v, "dst", "repl", "src", "re"): the strings are gone already
    names = set()
    for m in re.finditer(r"(?<![0-9.a-zA-Z_:])([a-zA-Z_:][a-zA-Z0-9_:]*)", e):
        word = m.group(1)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or an aggregation
        if word.lower() in KEYWORDS:
            continue
        if re.fullmatch(r"[0-9]+[smhdwy]|e[0-9]+", word):
            continue
        names.add(word)
    return names


def rule_exprs(path):
    # the rules files are YAML; a line scan keeps this free of a YAML
    # module: "expr: ..." on one line or a block ("expr: |" + indented lines)
    exprs, lines = [], open(path).read().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        ind, val = len(m.group(1)), m.group(2).strip()
        if val in ("|", ">", "|-", ">-"):
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > ind):
                block.append(lines[i].strip())
                i += 1
            exprs.append(" ".join(block))
            continue
        exprs.append(val.strip("'\""))
        i += 1
    return exprs


def dashboard_exprs(path):
    d = json.load(open(path))
    out = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "expr" and isinstance(v, str):
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(d.get("panels", []))
    for var in d.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        q = var.get("query")
        out.append(q.get("query", "") if isinstance(q, dict) else q or "")
        if var.get("definition"):
            out.append(var["definition"])
    return out


def main(argv):
    scrapes, files = [], []
    it = iter(argv)
    for a in it:
        if a == "--scrape":
            scrapes.append(next(it))
        else:
            files.append(a)
    if scrapes:
        known = set()
        for s in scrapes:
            t = open(s).read()
            known |= exported_from_text(t) | sample_names(t)
        origin = "scrape of " + ", ".join(scrapes)
    else:
        known = set()
        for s in SOURCES:
            known |= exported_from_text(open(os.path.join(ROOT, s)).read())
        origin = "the source (" + ", ".join(SOURCES) + ")"
    if not known:
        print(f"no exported metric names found in {origin}")
        return 1
    bad = 0
    for f in files:
        exprs = dashboard_exprs(f) if f.endswith(".json") else rule_exprs(f)
        used = set()
        for e in exprs:
            used |= metric_names(e)
        unknown = sorted(used - known)
        for u in unknown:
            print(f"{os.path.basename(f)}: {u} is not a metric boxkite exports (per {origin})")
        if not exprs:
            print(f"{os.path.basename(f)}: no expressions found")
            bad += 1
        bad += len(unknown)
        print(f"{os.path.basename(f)}: {len(exprs)} expressions, {len(used)} metric names, {len(unknown)} unknown")
    print(f"{len(known)} names exported per {origin}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
