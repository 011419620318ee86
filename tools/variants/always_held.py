#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease L"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent boundary window never closes: CounterDeps::prepared no
longer clears the flag, so the producer keeps at most PERSISTENT_BOUNDARY_INFLIGHT pages in
flight at all times after the SM's first instruction ends. With the limit one below the ring's
slots (K = 9 of 10), it holds a page back only while the page the consumers take next has not
landed: the always-on form of that rule. The chain kernels are main's.

usage: python3 tools/variants/always_held.py > v_always_held.cu   (build with persistent_boundary_inflight K)
"""
import pathlib
import sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old = "        if (threadIdx.x == 0) *(volatile int*)boundary = 0;\n"
assert src.count(old) == 1, old
sys.stdout.write(src.replace(old, "        (void)boundary;  // the window stays open (variant)\n"))
