#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AQ"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer keeps at most C pages in flight outside the
boundary window too (main: the ring's full depth there, K = 1 inside it).

Why: lease AP's trace puts the signals' release after up/gate and down at 1.8-2.8 µs against
0.5-1.3 after the short instructions. At those two instructions' ends every SM has its ring's
next pages in flight at full depth, and `mkc probe latency` ties a release's cost to the
copies in flight on the other SMs: 0.36 µs beside one per SM, 1.2 beside four, 3.7 beside
eight. The always-on caps of lease H (K = 3 and 4, -27 and -20 µs against an unheld
producer) came before the boundary hold; this is the two together.

usage: python3 tools/variants/cap.py C > v_cap.cu   (C: 2-12)
"""
import pathlib
import sys

assert len(sys.argv) == 2 and sys.argv[1].isdigit() and 2 <= int(sys.argv[1]) <= 12, __doc__
cap = int(sys.argv[1])
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old = "        if (boundary && *boundary && !throttled_issue(s, s.page0 + i, held, boundary, left)) return i;\n"
new = (f"        if (boundary && !*boundary && s.page0 + i >= {cap}) {{  // variant: at most {cap} in flight outside the window\n"
       "            int cs, cl;\n"
       f"            ring_slot(s, s.page0 + i - {cap}, cs, cl);\n"
       "            while (!*boundary && !mbar_try(&s.full[cs], (unsigned)cl & 1))\n"
       "                if (*left) return i;\n"
       "        }\n" + old)
assert src.count(old) == 1, old
sys.stdout.write(src.replace(old, new))
