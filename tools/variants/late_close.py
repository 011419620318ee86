#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Closing the boundary window later"): writes to stdout a
copy of backend/kernels/mkc.cu whose persistent boundary window (at most
PERSISTENT_BOUNDARY_INFLIGHT pages in flight) closes later in a streaming instruction than at
its MARK_PREPARED point: `landed`, once a consumer warp's first page has landed; `products`,
once a consumer warp has handed its first page's row sums to the epilogue. The O-projection's
and down's first reads of their input from L2 (load_x, after the staging) then wait behind fewer
copies too, at the price of a later refill of the ring. Attention still closes it at its
MARK_PREPARED point. The chain kernels are main's (the flag is compiled into the persistent
build only).

usage: python3 tools/variants/late_close.py landed|products > v_close_X.cu
"""
import pathlib
import sys

where = sys.argv[1]
assert where in ("landed", "products"), __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
clear = "        if (lane == 0 && first_page) {\n            first_page = false;\n            boundary_clear();\n        }\n"
edits = [
    # The flag at file scope (persistent build only), so that the page loop may clear it.
    ("typedef unsigned long long u64;\n",
     """typedef unsigned long long u64;
#ifdef MKC_PERSISTENT
__shared__ int boundary_s;  // the consumers are between two instructions (see k_persistent)
__device__ __forceinline__ void boundary_clear() { *(volatile int*)&boundary_s = 0; }
#else
__device__ __forceinline__ void boundary_clear() {}
#endif
"""),
    ("    __shared__ int boundary_s;   // the consumers are between two instructions (CounterDeps)\n", ""),
    # run_stream no longer closes the window at MARK_PREPARED.
    ("""    mark(MARK_PREPARED);
    deps.prepared();
    // One page loop per operator""",
     """    mark(MARK_PREPARED);
    // One page loop per operator"""),
    ("    bool landed_marked = false;\n", "    bool landed_marked = false, first_page = true;\n"),
]
if where == "landed":
    edits.append(("""            mark(MARK_LANDED);
            landed_marked = true;
        }
""", """            mark(MARK_LANDED);
            landed_marked = true;
        }
""" + clear))
else:
    edits.append(("""        if (lane == 0) mbar_arrive(&s.empty[slot]);
        epilogue(chunk, row0, sums);
""", """        if (lane == 0) mbar_arrive(&s.empty[slot]);
        epilogue(chunk, row0, sums);
""" + clear))
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
