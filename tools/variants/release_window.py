#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The hold around the release only"): writes to stdout a
copy of backend/kernels/mkc.cu whose persistent boundary window covers the release only: it
opens at the end barrier as main's does and closes once thread 0 has issued the instruction's
signals (its `red.release` done), instead of at the next instruction's staged inputs; the
counter wait no longer opens it. Lease O's trace put most of the hold's gain on an H100 in
the release (`finish` -72 µs per SM) and its cost in down's compute (+30: the ring refills
later); this keeps the first and drops most of the second. The chain kernels are main's.

With the argument `short`, the window opens only at the end of a QKV or O-projection
instruction: the short instructions whose release is the last step of a layer's critical edges
on the H200 (QKV 1.54 and the O-projection 2.05 µs of release against pdl's 0.26 and 0,
nineteenth session's trace), so up/gate's and down's refill is never held.

usage: python3 tools/variants/release_window.py [short] > v_release_window.cu   (with persistent_boundary_inflight K)
"""
import pathlib
import sys

short = sys.argv[1:] == ["short"]
assert sys.argv[1:] in ([], ["short"]), __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("            *(volatile int*)boundary = 1;  // already set, except before the SM's first instruction\n", ""),
    ("            if (normed) mbar_arrive(persistent_norm_empty(norm_s++));\n",
     "            *(volatile int*)&boundary_s = 0;  // the release is issued: the window closes (variant)\n"
     "            if (normed) mbar_arrive(persistent_norm_empty(norm_s++));\n"),
]
if short:
    edits.append(("            *(volatile int*)&boundary_s = 1;  // until the next instruction's inputs are staged\n",
                  "            if (op == OP_QKV_ROPE || op == OP_O_PROJ) *(volatile int*)&boundary_s = 1;  // (variant)\n"))
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
