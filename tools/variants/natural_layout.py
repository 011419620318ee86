#!/usr/bin/env python3
"""Variant: one kind of matrix kept row-major (as before page-major weights) and copied as it
was: `down` (split-K pages as one row copy each; every split-K matrix) or `up_gate` (the gate
and up halves of a page, two copies from the two matrices, kept one after the other in
`w_gate_up`). k_page_major then copies that kind unchanged. To learn which part of page-major
weights the H200's persistent step lost 17 µs to (docs/perf.md lease Y). Usage:
natural_layout.py down|up_gate > v.cu"""
import pathlib, sys

which = sys.argv[1] if len(sys.argv) > 1 else ""
if which not in ("down", "up_gate"):
    sys.exit("usage: natural_layout.py down|up_gate")
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()


def rep(old, new):
    global src
    if src.count(old) != 1:
        sys.exit(f"natural_layout.py: expected one {old!r}")
    src = src.replace(old, new)


cond = "!paired && splits > 1" if which == "down" else "paired"
rep("""        int chunk, row0;
        page_coords(v, (int)(e / per_page), chunk, row0);
        const int r = (int)(e % per_page / k), col = (int)(e % k);""",
    f"""        if ({cond}) {{
            out[e] = paired && e >= n / 2 ? b[e - n / 2] : a[e];
            continue;
        }}
        int chunk, row0;
        page_coords(v, (int)(e / per_page), chunk, row0);
        const int r = (int)(e % per_page / k), col = (int)(e % k);""")
if which == "down":
    copy = """        if (v.splits > 1) {
            int chunk, row0;
            page_coords(v, first + i, chunk, row0);
            for (int r = 0; r < v.page_rows; ++r)
                bulk_copy_hinted(dst + (long)r * v.k, v.w + (long)(row0 + r) * v.k * v.splits + (long)chunk * v.k, (unsigned)(v.k * 2), &s.full[slot], policy);
        } else {
            bulk_copy_hinted(dst, v.w + (long)(first + i) * (bytes / 2), bytes, &s.full[slot], policy);
        }"""
else:
    copy = """        if (v.page_out != v.page_rows) {
            int chunk, row0;
            page_coords(v, first + i, chunk, row0);
            const unsigned half = bytes / 2;
            bulk_copy_hinted(dst, v.w + (long)row0 * v.k, half, &s.full[slot], policy);
            bulk_copy_hinted(dst + half / 2, v.w + (long)v.out_rows * v.k + (long)row0 * v.k, half, &s.full[slot], policy);
        } else {
            bulk_copy_hinted(dst, v.w + (long)(first + i) * (bytes / 2), bytes, &s.full[slot], policy);
        }"""
    rep("""        const unsigned bytes = (unsigned)(u.page_rows * u.k * 2);
        mbar_expect_tx(&s.full[slot], bytes);
        bulk_copy(dst, u.w + (long)(f + j) * (bytes / 2), bytes, &s.full[slot]);""",
        """        const unsigned bytes = (unsigned)(u.page_rows * u.k * 2), half = bytes / 2;
        int chunk, row0;
        page_coords(u, f + j, chunk, row0);
        mbar_expect_tx(&s.full[slot], bytes);
        bulk_copy(dst, u.w + (long)row0 * u.k, half, &s.full[slot]);
        bulk_copy(dst + half / 2, u.w + (long)u.out_rows * u.k + (long)row0 * u.k, half, &s.full[slot]);""")
rep("""        bulk_copy_hinted(dst, v.w + (long)(first + i) * (bytes / 2), bytes, &s.full[slot], policy);
    }
    return count;""", copy + """
    }
    return count;""")
sys.stdout.write(src)
