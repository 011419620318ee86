#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Closing the window at the wait's end"): writes to stdout a
copy of backend/kernels/mkc.cu whose persistent boundary window closes once thread 0's counter
wait is over, before the staging, instead of once the next instruction's inputs are staged.
Lease O's trace put the hold's staging gain on an H100 at 5 µs per SM, while the held refill
cost down 32: this keeps the release's and the poll's gains and gives the staging's window
back to the stream. The chain kernels are main's. Lease Q measured it neutral on an H100
(-1.9 µs); restored for lease AG, the H200 with the hold on (its profile's K = 1 since lease AF).

usage: python3 tools/variants/early_close.py > v_early_close.cu   (with persistent_boundary_inflight K)
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("        }\n#endif\n        // The acquire loads order this thread's later reads; the barrier orders the others'.\n",
     "            *(volatile int*)boundary = 0;  // the wait is over: the window closes (variant)\n"
     "        }\n#endif\n        // The acquire loads order this thread's later reads; the barrier orders the others'.\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
