#!/usr/bin/env python3
"""Ablation (timing only: the pages hold the wrong weights, run with --no-check): every page
of `down` (split-K: four 4 KiB row copies per page) or `up_gate` (two 8 KiB halves) is one 16 KiB
bulk copy, from the bytes a page-tiled weight layout would hold (page i at i x 16 KiB of its
matrix; up/gate's pages alternate between the gate and up matrices, so no page is read twice). What a tiled layout would save in copies issued, before it is built. docs/perf.md
"Copies per page". Usage: one_copy_pages.py down|up_gate > v.cu"""
import pathlib, sys

which = sys.argv[1] if len(sys.argv) > 1 else ""
if which not in ("down", "up_gate"):
    sys.exit("usage: one_copy_pages.py down|up_gate")
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()


def rep(old, new):
    global src
    if src.count(old) != 1:
        sys.exit(f"one_copy_pages.py: expected one {old!r}")
    src = src.replace(old, new)


if which == "down":
    rep("""            for (int r = 0; r < v.page_rows; ++r)
                bulk_copy_hinted(dst + (long)r * v.k, v.w0 + (long)(row0 + r) * v.ld + col0, (unsigned)(v.k * 2), &s.full[slot], policy);""",
        """            bulk_copy_hinted(dst, v.w0 + (long)(first + i) * (bytes / 2), bytes, &s.full[slot], policy);""")
else:
    rep("""            unsigned half = bytes / 2;
            bulk_copy_hinted(dst, v.w0 + (long)row0 * v.ld + col0, half, &s.full[slot], policy);
            bulk_copy_hinted(dst + half / 2, v.w1 + (long)row0 * v.ld + col0, half, &s.full[slot], policy);""",
        """            (void)col0;
            bulk_copy_hinted(dst, ((first + i) % 2 ? v.w1 : v.w0) + (long)((first + i) / 2) * (bytes / 2), bytes, &s.full[slot], policy);""")
sys.stdout.write(src)
