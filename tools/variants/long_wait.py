#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AG"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer holds fewer copies back while its consumers
wait for attention. Main holds the producer to K copies in flight (the profile's 1) from an
instruction's end barrier until the next one's inputs are staged, the counter wait included;
the O-projection's wait is attention's whole task (4.1 µs per layer on the H200, lease AF),
during which the 100 SMs that run no attention stream one page at a time. Here an
O-projection's wait marks the window (boundary flag 2) and the producer then keeps `L` copies
in flight instead of K. The chain kernels are main's.

usage: python3 tools/variants/long_wait.py L > v_long_wait.cu   (L: 2-16)
"""
import pathlib
import sys

assert len(sys.argv) == 2 and sys.argv[1].isdigit() and 2 <= int(sys.argv[1]) <= 16, __doc__
limit = int(sys.argv[1])
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("            *(volatile int*)boundary = 1;  // already set, except before the SM's first instruction\n",
     "            *(volatile int*)boundary = ins.op == OP_O_PROJ ? 2 : 1;  // variant: 2 marks attention's wait\n"),
    ("        if (boundary && !gated_issue(s, s.page0 + i, held, cap, boundary, left)) return i;\n",
     f"        if (boundary && !gated_issue(s, s.page0 + i, *boundary == 2 ? {limit} : held, cap, boundary, left)) return i;\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
