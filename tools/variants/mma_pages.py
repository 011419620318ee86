#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The page math on the tensor cores"): writes to stdout a
copy of backend/kernels/mkc.cu whose register page loop (page_dots: NJ <= 8 groups, an even
number of rows per page) runs on the tensor cores, `mma.sync.m16n8k16` bf16 with f32
accumulators, from the same shared-memory words as today's loop and with no change to the
weights' layout: one MMA takes a row pair and half of a group, its M-row g (g + 8) being the
first (second) row at the columns of input column n = g, which are lane 4g + t's elements, so
that A is what the lane loads and B the lane's own input slice, and the diagonal of D is the
dot product (mma_page_dots below). Both targets take it (the chain kernels share the loop).
Mode `hilo`: the input as two bf16 parts (the rounding and its residue: ~16 bits of each
float's mantissa); `hi`: the input rounded to bf16 once (as bf16 inference stacks hold their
activations; fewer registers: `hilo` spills in k_persistent); `hilo2`: `hi` in registers and
the residue recomputed for each page from the input where it lies (shared memory, or global
memory through L1), ~22 more instructions per group, no fragments beyond `hi`'s 32 registers.

usage: python3 tools/variants/mma_pages.py hilo|hi|hilo2 > v_mma.cu
"""
import pathlib
import sys

assert len(sys.argv) == 2 and sys.argv[1] in ("hilo", "hi", "hilo2"), __doc__
mode = sys.argv[1]
lo = mode == "hilo"
re_lo = mode == "hilo2"  # lo recomputed for every page from the input (x: shared or L1)
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

frag = """// The lane's input slice as the B operand of m16n8k16 bf16 MMAs (mma_page_dots): for group j
// and half h (its elements 4h .. 4h + 3), two bf16x2 registers of the slice rounded to bf16
// (`hi`) and, in `hilo`, two of what that rounding left (`lo`).
template <int NJ>
struct XFrag {
    unsigned hi[NJ][2][2];
""" + ("    unsigned lo[NJ][2][2];\n" if lo else "") + """};

// bf16x2 of (first, second): `first` in the low half, as two consecutive elements in memory.
__device__ __forceinline__ unsigned pack_bf16x2(float first, float second) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}

template <int NJ>
__device__ __forceinline__ void x_fragments(const float (&xr)[NJ][8], XFrag<NJ>& xf) {
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const float a = xr[j][4 * h + 2 * q], b = xr[j][4 * h + 2 * q + 1];
                const unsigned hi = pack_bf16x2(a, b);
                xf.hi[j][h][q] = hi;
""" + ("                xf.lo[j][h][q] = pack_bf16x2(a - __uint_as_float(hi << 16), b - __uint_as_float(hi & 0xFFFF0000u));\n" if lo else "") + """            }
}

// load_x and x_fragments in one pass, a group at a time, so that the floats of the whole slice
// are never live beside its fragments (in `hilo` they spilled k_persistent).
template <int NJ>
__device__ __forceinline__ void load_x_fragments(XFrag<NJ>& xf, const float* x, int k, int chunk) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        float xr[1][8];
        load_x<1>(xr, x + 256 * j, k, chunk);
        XFrag<1> one;
        x_fragments<1>(xr, one);
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                xf.hi[j][h][q] = one.hi[0][h][q];
""" + ("                xf.lo[j][h][q] = one.lo[0][h][q];\n" if lo else "") + """            }
    }
}

// d += A B for one m16n8k16 tile (bf16 in, f32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// This lane's part of the dot products of the R rows of a page (R even; row stride K) with
// the input, on the tensor cores, from the words page_dots_partial reads. The MMA of row pair
// (ra, rb) and half h of group j: A's M-row g (g + 8) is row ra (rb) at the columns of input
// column n = g, lane 4g + t's elements 4h .. 4h + 3 of the group (t: the lane's k pair), so
// A's registers are the lane's own words and B's its own slice; D[g][g] (D[g + 8][g]) sums row
// ra's (rb's) products over those 128 columns, held by lane 4g + g / 2. The lane returns its
// diagonal elements, zero elsewhere: the warp's sum is the dot product.
template <int NJ, int R, int K>
__device__ __forceinline__ void mma_page_dots(const bf16* page, const XFrag<NJ>& xf, float (&out)[R], const float* xs) {
    static_assert(R % 2 == 0, "row pairs");
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    float acc[R / 2][2][4];  // row pair, half: independent accumulator chains
#pragma unroll
    for (int p = 0; p < R / 2; ++p)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[p][h][e] = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
""" + ("""        unsigned lo_j[2][2];
        {
            const float4* px = reinterpret_cast<const float4*>(xs + (lane + 32 * j) * 8);
            const float4 u = px[0], v = px[1];
            const float f[8] = {u.x, u.y, u.z, u.w, v.x, v.y, v.z, v.w};
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    const unsigned hi = xf.hi[j][h][q];
                    lo_j[h][q] = pack_bf16x2(f[4 * h + 2 * q] - __uint_as_float(hi << 16),
                                             f[4 * h + 2 * q + 1] - __uint_as_float(hi & 0xFFFF0000u));
                }
        }
""" if re_lo else "") + """        uint4 w[R];
#pragma unroll
        for (int r = 0; r < R; ++r) w[r] = *reinterpret_cast<const uint4*>(page + r * K + (lane + 32 * j) * 8);
#pragma unroll
        for (int p = 0; p < R / 2; ++p) {
            const uint4 a = w[2 * p], b = w[2 * p + 1];
            mma_bf16(acc[p][0], a.x, b.x, a.y, b.y, xf.hi[j][0][0], xf.hi[j][0][1]);
            mma_bf16(acc[p][1], a.z, b.z, a.w, b.w, xf.hi[j][1][0], xf.hi[j][1][1]);
""" + ("""            mma_bf16(acc[p][0], a.x, b.x, a.y, b.y, lo_j[0][0], lo_j[0][1]);
            mma_bf16(acc[p][1], a.z, b.z, a.w, b.w, lo_j[1][0], lo_j[1][1]);
""" if re_lo else "") + ("""            mma_bf16(acc[p][0], a.x, b.x, a.y, b.y, xf.lo[j][0][0], xf.lo[j][0][1]);
            mma_bf16(acc[p][1], a.z, b.z, a.w, b.w, xf.lo[j][1][0], xf.lo[j][1][1]);
""" if lo else "") + """        }
    }
    const bool diagonal = t == g >> 1, odd = g & 1;
#pragma unroll
    for (int p = 0; p < R / 2; ++p) {
        float d[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) d[e] = acc[p][0][e] + acc[p][1][e];
        out[2 * p] = diagonal ? (odd ? d[1] : d[0]) : 0.f;
        out[2 * p + 1] = diagonal ? (odd ? d[3] : d[2]) : 0.f;
    }
}

// Dot products of the R rows of a page (row stride 256 * NJ elements) with the lane's input
// fragments; every lane returns every row's full sum.
template <int NJ, int R>
__device__ __forceinline__ void page_dots(const bf16* page, const XFrag<NJ>& xf, float (&out)[R], const float* xs) {
    mma_page_dots<NJ, R, 256 * NJ>(page, xf, out, xs);
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = warp_sum(out[r]);
}
"""
edits = [
    ("""// Dot products of the R rows of a page (row stride 256 * NJ elements) with the lane's x slice;
// every lane returns every row's full sum.
template <int NJ, int R>
__device__ __forceinline__ void page_dots(const bf16* page, const float (&xr)[NJ][8], float (&out)[R]) {
    page_dots_partial<NJ, R, 256 * NJ>(page, xr, out);
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = warp_sum(out[r]);
}
""", frag),
    ("""    float xr[NX][8];
    int loaded = -1;
    bool landed_marked = false;""", """    float xr[NX][8];
    XFrag<NX> xf;
    int loaded = -1;
    bool landed_marked = false;"""),
    ("""            load_x<NX>(xr, x, v.k, chunk);
            loaded = chunk;""", """            load_x_fragments<NX>(xf, x, v.k, chunk);
            loaded = chunk;"""),
    ("        else page_dots<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), xr, sums);",
     "        else page_dots<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), xf, sums, x + (long)chunk * v.k);"),
    ("""    if (!BLOCKED && x_in_span) load_x<NX>(xr, x, 0, 0);
    for (int i = warp; i < pages; i += warps) {""", """    if (!BLOCKED && x_in_span) load_x<NX>(xr, x, 0, 0);
    XFrag<NX> xf;
    if (!BLOCKED) x_fragments<NX>(xr, xf);
    for (int i = warp; i < pages; i += warps) {"""),
    ("        else page_dots<NJ, R>(page, xr, sums);", "        else page_dots<NJ, R>(page, xf, sums, x);"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
