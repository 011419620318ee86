#!/usr/bin/env python3
"""Per-SM streaming speeds from a traced step (`mkc run|bench --timeline FILE.json`, the
persistent target): each SM's compute phase of one operator kind (default the LM head, which
every SM starts within a few µs of the others with an equal share of pages), summed over the
step, and its speed against the median SM's (median time / its time). Prints the spread, the
fastest and slowest SMs, and what a placement in proportion to speed would save on that
operator (docs/perf.md "Some SMs stream 24% faster") if each SM's rate were its own. It is not
where HBM is the limit: lease AK balanced the LM head with a pool and it ended at the same time
(the fast SMs' rate is their share of a saturated HBM), so that figure is an upper bound.

usage: python3 tools/sm_speeds.py TRACE.json [KIND]   (KIND: lm_head, up_gate, down, ...)
"""
import json
import statistics
import sys


def phase_per_sm(path, kind):
    events = json.load(open(path))["traceEvents"]
    per_sm = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "compute":
            continue
        if e["name"].split(".")[-1] != kind:
            continue
        per_sm[e["tid"]] = per_sm.get(e["tid"], 0.0) + e["dur"]
    return per_sm


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    kind = sys.argv[2] if len(sys.argv) == 3 else "lm_head"
    t = phase_per_sm(sys.argv[1], kind)
    if not t:
        sys.exit(f"{sys.argv[1]}: no compute slices of kind {kind} (a persistent --timeline trace?)")
    med = statistics.median(t.values())
    speed = {sm: med / us for sm, us in t.items()}
    order = sorted(t, key=lambda sm: t[sm])
    print(f"{kind}: {len(t)} SMs, compute µs min {t[order[0]]:.1f} median {med:.1f} max {t[order[-1]]:.1f}")
    print("fastest 12 (speed):", ", ".join(f"{sm} ({speed[sm]:.2f})" for sm in sorted(order[:12])))
    print("slowest 12 (speed):", ", ".join(f"{sm} ({speed[sm]:.2f})" for sm in sorted(order[-12:])))
    # Equal shares end with the slowest SM; shares in proportion to speed end together.
    total = sum(speed.values())
    balanced = med * len(t) / total
    print(f"equal shares end at {t[order[-1]]:.1f} µs of compute; shares by speed at {balanced:.1f} "
          f"({balanced - t[order[-1]]:+.1f}) if each SM's rate were its own (an upper bound where "
          "HBM is the limit: docs/perf.md, lease AK)")


if __name__ == "__main__":
    main()
