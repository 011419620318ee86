#!/usr/bin/env python3
"""One layer of a traced step (`mkc run|bench --timeline FILE.json`): for each operator of
layer L, the min / median / max over its units of when its wait was over ("released"), its
inputs staged, its warp 0's last page computed and its unit ended (after the signal), in µs
from the step's start (docs/perf.md, lease AF); "landed" (warp 0's first page landed), and for
attention "sub1" (its scores done) and "sub2" (its first head's softmax done), "barrier" (a
persistent instruction's end barrier passed), where the trace has them
(`tools/variants/end_marks.py` gives three of them other meanings); and "release", the median
over units of barrier → end: thread 0's signals (docs/perf.md, lease AN).

usage: python3 tools/layer_table.py TRACE.json [LAYER]   (LAYER: default 8)
"""
import collections
import json
import sys


def spread(values):
    v = sorted(x for x in values if x is not None)
    return " / ".join(f"{x:.1f}" for x in (v[0], v[len(v) // 2], v[-1])) if v else "-"


KEYS = ("released_us", "prepared_us", "landed_us", "computed_us", "sub1_us", "sub2_us", "ended_us", "end")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    layer = int(sys.argv[2]) if len(sys.argv) == 3 else 8
    events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
    marks = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in events:
        if e["cat"] == "load":
            op, args, start = e["name"][: -len(" load")], e["args"], e["ts"]
            for key in KEYS[:-1]:
                marks[op][key].append(start + args[key] if args.get(key) is not None else None)
        elif e["cat"] == "compute":
            args = e["args"]
            marks[e["name"]]["end"].append(e["ts"] + e["dur"])
            # The dependent slice starts at the release (its args count from the unit's entry),
            # so the barrier → end is its length less the barrier's distance from the release.
            if args.get("ended_us") is not None:
                release_at = args.get("released_us") or 0.0
                marks[e["name"]]["release"].append(e["dur"] - (args["ended_us"] - release_at))
    ops = [op for op in marks if op.startswith(f"L{layer}.")]
    if not ops:
        sys.exit(f"{sys.argv[1]}: no operator of layer {layer} (a --timeline trace?)")
    print("| operator | units | released | inputs staged | landed | computed | sub1 | sub2 | barrier | end | release |")
    print("| --- | ---: | --- | --- | --- | --- | --- | --- | --- | --- | ---: |")
    for op in sorted(ops, key=lambda o: min(x for x in marks[o]["end"])):
        m = marks[op]
        cells = [spread(m[k]) for k in KEYS]
        rel = sorted(m["release"])
        cells.append(f"{rel[len(rel) // 2]:.2f}" if rel else "-")
        print(f"| {op} | {len(m['end'])} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
