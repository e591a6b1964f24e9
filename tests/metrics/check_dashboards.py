#!/usr/bin/env python3
"""Evaluates every query of dashboards/*.json against a live Prometheus, as
Grafana would with its variables substituted, for prometheus_e2e.sh:

- every panel target (a range query over [--start, --end], step 1 s) must
  return a finite value, unless ALLOWED names it with its reason;
- every variable's label_values(...) must list values (run: the run itself);
- each --expect "UID|TITLE|REF|LABELS|VALUE" evaluates that panel target
  instantly at --end: the series whose labels include LABELS ("k=v,..."; empty:
  the only series) must equal VALUE (to 0.1%); --expect-seen, same form, for a
  series that may have ended: over [--start, --end] it must exist, and every
  value it had must equal VALUE;
- every family the controller and the worker export (--exposition files) is
  queried by some panel or variable, or listed in the README's section
  "Exported but on no panel"; every trellis_ name a query uses is exported.

Prints one line per check; exit 1 when any fails."""
import argparse
import glob
import json
import math
import os
import re
import sys
import urllib.parse
import urllib.request

# Panel targets that may lack data in this test: (dashboard uid, panel title,
# refId) -> why the test does not cause what they show. Empty today: the test
# run causes every event the dashboards show.
ALLOWED = {}

RATE_INTERVAL = "5s"  # Grafana: max(4 x scrape interval, interval + scrape interval); 1 s scrapes


def prom(base, path, params):
    url = f"{base}{path}?{urllib.parse.urlencode(params, doseq=True)}"
    with urllib.request.urlopen(url, timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def substitute(expr, run, range_s):
    # As Grafana formats a multi-value variable for Prometheus: regex-escaped,
    # the backslashes doubled for PromQL's string.
    escaped = re.sub(r"([\\.+*?^$()\[\]{}|])", r"\\\\\1", run)
    values = {"run": escaped, "node": ".*", "__rate_interval": RATE_INTERVAL,
              "__range": f"{range_s}s", "__interval": "1s"}

    def repl(m):
        name = m.group(1) or m.group(2)
        if name not in values:
            raise ValueError(f"unknown variable ${name} in {expr}")
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


def panels(d):
    for p in d.get("panels", []):
        if p["type"] == "row":
            yield from p.get("panels", [])
        else:
            yield p


def finite(v):
    return v is not None and math.isfinite(float(v))


def exposition_families(path):
    fams = {}
    for line in open(path):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            fams[m.group(1)] = m.group(2)
    return fams


def readme_not_shown(path):
    text = open(path).read()
    m = re.search(r"^## Exported but on no panel\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        return None
    return set(re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)`", m.group(1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--dashboards", required=True)
    ap.add_argument("--readme", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--start", type=float, required=True)
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--exposition", action="append", default=[])
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--expect-seen", action="append", default=[])
    a = ap.parse_args()
    range_s = int(math.ceil(a.end - a.start))
    failures = []

    def check(ok, line):
        print(("ok   " if ok else "FAIL ") + line)
        if not ok:
            failures.append(line)

    dashboards = {}
    for path in sorted(glob.glob(os.path.join(a.dashboards, "*.json"))):
        d = json.load(open(path))
        dashboards[d["uid"]] = d
    queried = []  # every expression, for the family check

    for uid, d in dashboards.items():
        for v in d["templating"]["list"]:
            if v["type"] != "query":
                continue
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            queried.append(q)
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
            if not m:
                check(False, f"{uid} ${v['name']}: not label_values(...): {q}")
                continue
            series = prom(a.prom, "/api/v1/series",
                          {"match[]": substitute(m.group(1), a.run, range_s),
                           "start": a.start, "end": a.end})
            values = sorted({s[m.group(2)] for s in series if m.group(2) in s})
            ok = bool(values) and (v["name"] != "run" or a.run in values)
            check(ok, f"{uid} ${v['name']} = {values}")
        for p in panels(d):
            for t in p["targets"]:
                queried.append(t["expr"])
                expr = substitute(t["expr"], a.run, range_s)
                data = prom(a.prom, "/api/v1/query_range",
                            {"query": expr, "start": a.start, "end": a.end, "step": 1})
                points = sum(1 for s in data["result"] for _, v in s["values"] if finite(v))
                key = (uid, p["title"], t["refId"])
                what = f"{uid} / {p['title']} / {t['refId']}: {len(data['result'])} series, {points} points"
                if points == 0 and key in ALLOWED:
                    print(f"skip {what} (allowed: {ALLOWED[key]})")
                    continue
                check(points > 0, what + ("" if points else f"  [{expr}]"))

    def expect(spec, seen):
        uid, title, ref, labels, want = spec.split("|")
        target = [t for p in panels(dashboards[uid]) if p["title"] == title
                  for t in p["targets"] if t["refId"] == ref]
        if len(target) != 1:
            check(False, f"{spec}: no single panel target {uid} / {title} / {ref}")
            return
        expr = substitute(target[0]["expr"], a.run, range_s)
        if seen:
            result = prom(a.prom, "/api/v1/query_range",
                          {"query": expr, "start": a.start, "end": a.end, "step": 1})["result"]
        else:
            result = prom(a.prom, "/api/v1/query", {"query": expr, "time": a.end})["result"]
        match = dict(kv.split("=", 1) for kv in labels.split(",") if kv)
        series = [s for s in result if all(s["metric"].get(k) == v for k, v in match.items())]
        if seen:
            got = sorted({float(v) for s in series for _, v in s["values"]})
        else:
            got = [float(s["value"][1]) for s in series]
        ok = len(got) == 1 and math.isclose(got[0], float(want), rel_tol=1e-3)
        check(ok, f"{uid} / {title} / {ref} {{{labels}}} {'was' if seen else '='} {got}, "
                  f"expected {want}")

    for spec in a.expect:
        expect(spec, seen=False)
    for spec in a.expect_seen:
        expect(spec, seen=True)

    exported = {}
    for path in a.exposition:
        exported.update(exposition_families(path))
    not_shown = readme_not_shown(a.readme)
    check(not_shown is not None, f"{a.readme} has a section '## Exported but on no panel'")
    not_shown = not_shown or set()
    used = set()
    for expr in queried:
        for name in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            if name in exported:
                used.add(name)
            elif base in exported and exported[base] in ("histogram", "summary"):
                used.add(base)
            elif name.startswith("trellis_"):
                check(False, f"a query uses {name}, which neither /metrics exports")
    for fam in sorted(exported):
        if fam in used and fam in not_shown:
            check(False, f"{fam}: on a panel, yet listed in the README as on no panel")
        else:
            check(fam in used or fam in not_shown,
                  f"{fam}: " + ("on a panel" if fam in used else
                                "listed in the README" if fam in not_shown else
                                "exported, on no panel and not in the README"))
    for fam in sorted(not_shown - set(exported)):
        check(False, f"{fam}: listed in the README as on no panel, but not exported")

    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
