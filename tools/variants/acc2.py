#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Two accumulator chains per row"): writes to stdout a copy
of backend/kernels/mkc.cu whose page loop accumulates each row's high bf16 halves in a second
chain (same instruction count, half the dependent-FMA depth). Run it through
`tuning.kernels_cu`.

usage: python3 tools/variants/acc2.py > v_acc2.cu
"""
import pathlib
import sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

old_init = """#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        uint4 w[R];"""
new_init = """    float hi[R];
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = hi[r] = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        uint4 w[R];"""
old_fma = """                out[r] += __uint_as_float(words[q] & 0xFFFF0000u) * xr[j][2 * q + 1];
            }
        }
    }
}"""
new_fma = """                hi[r] += __uint_as_float(words[q] & 0xFFFF0000u) * xr[j][2 * q + 1];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] += hi[r];
}"""
for old, new in ((old_init, new_init), (old_fma, new_fma)):
    assert src.count(old) == 1, "page_dots_partial moved"
    src = src.replace(old, new)
sys.stdout.write(src)
