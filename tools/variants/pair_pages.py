#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Two landed pages at once"): writes to stdout a copy of
backend/kernels/mkc.cu whose consumer warp, when the next page it owns has landed already (all
its lanes see the slot's phase complete) and shares the current page's K chunk, computes both
pages' dot products in one interleaved loop (page_dots_pair: eight independent FMA chains
where one page has four, and both pages' loads in flight), then frees both slots and runs both
epilogues. Lease AW found the page loop's latency on the path (a loop 22% faster took ~15 µs
off the H100's persistent step), and after a wait the ring holds several landed pages per
warp. The register loop only (NJ <= 8); both targets take it (the chain kernels share
consume).

usage: python3 tools/variants/pair_pages.py > v_pair.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

pair = """// The lane's parts of two pages' dot products (page_dots_partial for pages a and b at once:
// twice the independent accumulator chains, both pages' words in flight).
template <int NJ, int R, int K>
__device__ __forceinline__ void page_dots_partial2(const bf16* pa, const bf16* pb, const float (&xr)[NJ][8],
                                                   float (&oa)[R], float (&ob)[R]) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < R; ++r) oa[r] = ob[r] = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        uint4 wa[R], wb[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            wa[r] = *reinterpret_cast<const uint4*>(pa + r * K + (lane + 32 * j) * 8);
            wb[r] = *reinterpret_cast<const uint4*>(pb + r * K + (lane + 32 * j) * 8);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            unsigned a4[4] = {wa[r].x, wa[r].y, wa[r].z, wa[r].w};
            unsigned b4[4] = {wb[r].x, wb[r].y, wb[r].z, wb[r].w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                oa[r] += __uint_as_float(a4[q] << 16) * xr[j][2 * q];
                ob[r] += __uint_as_float(b4[q] << 16) * xr[j][2 * q];
                oa[r] += __uint_as_float(a4[q] & 0xFFFF0000u) * xr[j][2 * q + 1];
                ob[r] += __uint_as_float(b4[q] & 0xFFFF0000u) * xr[j][2 * q + 1];
            }
        }
    }
}

// page_dots for two pages at once; every lane returns every row's full sums.
template <int NJ, int R>
__device__ __forceinline__ void page_dots_pair(const bf16* pa, const bf16* pb, const float (&xr)[NJ][8],
                                               float (&oa)[R], float (&ob)[R]) {
    page_dots_partial2<NJ, R, 256 * NJ>(pa, pb, xr, oa, ob);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        oa[r] = warp_sum(oa[r]);
        ob[r] = warp_sum(ob[r]);
    }
}

// Whether phase `parity` of `bar` is complete, without waiting (mbarrier.test_wait).
__device__ __forceinline__ bool mbar_test(u64* bar, unsigned parity) {
    unsigned done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
    return done;
}

// Adds this lane's part of the dot products of block"""

edits = [
    ("// Adds this lane's part of the dot products of block", pair),
    ("""        float sums[R];
#ifdef MKC_ABLATE_COMPUTE
        // The rung removes the dot products, not the input's loads""",
     """#ifndef MKC_ABLATE_COMPUTE
        if constexpr (!BLOCKED) {
            // The warp's next page, if every lane sees it landed and it shares this K chunk:
            // both pages at once (variant).
            const int i2 = even ? i + CONSUMER_WARPS : ring_next_of(s.page0 + i + 1, s.slots, warp) - s.page0;
            if (i2 < count) {
                int chunk2, row02, slot2, lap2;
                page_coords(v, first + i2, chunk2, row02);
                ring_slot(s, s.page0 + i2, slot2, lap2);
                if (__all_sync(0xffffffffu, chunk2 == chunk && mbar_test(&s.full[slot2], lap2 & 1))) {
                    float sa[R], sb[R];
                    page_dots_pair<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), s.ring + (long)slot2 * (PAGE_BYTES / 2),
                                          xr, sa, sb);
                    __syncwarp();
                    if (lane == 0) {
                        mbar_arrive(&s.empty[slot]);
                        mbar_arrive(&s.empty[slot2]);
                    }
                    epilogue(chunk, row0, sa);
                    epilogue(chunk2, row02, sb);
                    i = i2;
                    continue;
                }
            }
        }
#endif
        float sums[R];
#ifdef MKC_ABLATE_COMPUTE
        // The rung removes the dot products, not the input's loads"""),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new, 1)
sys.stdout.write(src)
