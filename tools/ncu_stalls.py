#!/usr/bin/env python3
"""Summarises Nsight Compute's source page, for reading where a kernel's warps stall on the GPU
machine (docs/perf.md): warp-stall samples per SASS opcode, per reason column, and the hottest
instructions, for each kernel table in each file given. Export the page with
`ncu -i REPORT.ncu-rep --page source --csv --print-source sass > FILE.csv`. Tolerant of the
column names, which differ between ncu versions: it prints the header it found.

usage: python3 tools/ncu_stalls.py FILE.csv [FILE.csv ...]
"""
import csv
import re
import sys
from collections import defaultdict


def sections(path):
    """Yield (kernel title, header, rows) for every table in the file."""
    title, header, rows = "", None, []
    with open(path, newline="", errors="replace") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if any(c.strip() == "Source" for c in rec) and any("Address" in c for c in rec):
                if header is not None:
                    yield title, header, rows
                header, rows = [c.strip() for c in rec], []
                continue
            if header is None or len(rec) < len(header) - 1:
                if len(rec) == 1 and rec[0].strip():
                    title = rec[0].strip()
                continue
            rows.append(rec)
    if header is not None:
        yield title, header, rows


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def opcode(sass):
    s = re.sub(r"^@!?U?P\w+\s+", "", sass.strip())
    return s.split(" ")[0] if s else "?"


def main():
    for path in sys.argv[1:]:
        try:
            tables = list(sections(path))
        except OSError as e:
            print(f"{path}: {e}")
            continue
        if not tables:
            print(f"{path}: no source table found; first lines:")
            with open(path, errors="replace") as f:
                for _ in range(8):
                    print("   ", f.readline().rstrip()[:200])
            continue
        for title, header, rows in tables:
            src = header.index("Source")
            samp = [i for i, h in enumerate(header) if "Sampling" in h and "All" in h]
            if not samp:
                samp = [i for i, h in enumerate(header) if "Sampl" in h]
            reasons = [i for i, h in enumerate(header) if h.lower().startswith("stall") or "stall_" in h.lower()]
            print(f"== {path} {title[:100]}: {len(rows)} instructions")
            print("   columns:", " | ".join(header)[:1500])
            if not samp:
                continue
            key = samp[0]
            total = sum(num(r[key]) or 0 for r in rows)
            print(f"   samples ({header[key]}): {total:.0f}")
            by_op = defaultdict(float)
            for r in rows:
                by_op[opcode(r[src])] += num(r[key]) or 0
            print("   by opcode:", ", ".join(f"{o} {v / max(total, 1) * 100:.1f}%" for o, v in
                                            sorted(by_op.items(), key=lambda kv: -kv[1])[:25]))
            if reasons:
                tot = {header[i]: sum(num(r[i]) or 0 for r in rows) for i in reasons}
                print("   by reason:", ", ".join(f"{h} {v / max(total, 1) * 100:.1f}%" for h, v in
                                               sorted(tot.items(), key=lambda kv: -kv[1])[:20] if v))
            hot = sorted(rows, key=lambda r: -(num(r[key]) or 0))[:45]
            for r in hot:
                extra = ""
                if reasons:
                    top = sorted(((num(r[i]) or 0, header[i]) for i in reasons), reverse=True)[:3]
                    extra = "  " + ", ".join(f"{h}={v:.0f}" for v, h in top if v)
                print(f"   {r[0][:8]:>8} {num(r[key]) or 0:>8.0f} {r[src].strip()[:70]:<70}{extra}")


if __name__ == "__main__":
    main()
