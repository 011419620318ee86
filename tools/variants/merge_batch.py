#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Split-KV's merge in one round trip"): writes to stdout a
copy of backend/kernels/mkc.cu whose `merge_parts` (the O-projection staging split-KV attention's
partial records) issues every load of a thread's float4 groups before its first use. Main's loop
takes one group at a time (three per thread for 2,048 columns on 224 threads), and each group's
weights need its parts' maxima first, so the staging pays three dependent L2 round trips inside
the held window where the model charges one. Here a thread loads up to 12 / parts groups' records
(maxima, sums and outputs of every part) at once, then merges them: one round trip for 2 to 4
parts at 2,048 columns, the same arithmetic in the same order. Over 4
parts it keeps main's one group at a time (the registers: groups x parts x 6 floats).

usage: python3 tools/variants/merge_batch.py > v_merge_batch.cu
"""
import pathlib
import re
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

NEW = r'''__device__ void merge_parts(const Stream& s, const Work& work, const Matvec& v, const float* records, int hd) {
    int first, count, c0, c1, row;
    page_range(work, v, first, count);
    page_coords(v, first, c0, row);
    page_coords(v, first + count - 1, c1, row);
    // Variant merge_batch: B float4 groups per thread, every record loaded before the first add.
    constexpr int B = ATT_KV_SPLIT <= 4 ? 12 / ATT_KV_SPLIT : 1;
    const int lo = c0 * v.k, hi = (c1 + 1) * v.k;
    for (int e0 = lo + threadIdx.x * 4; e0 < hi; e0 += B * CONSUMER_THREADS * 4) {
        float2 st[B][ATT_KV_SPLIT];  // each part's (maximum, sum)
        float4 o[B][ATT_KV_SPLIT];
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int e = e0 + b * CONSUMER_THREADS * 4;
            if (e >= hi) continue;
            const float* r = records + (long)(e / hd) * ATT_HEAD_RECORDS;
#pragma unroll
            for (int q = 0; q < ATT_KV_SPLIT; ++q) {
                st[b][q] = *reinterpret_cast<const float2*>(r + q * ATT_PART_RECORD + hd);
                o[b][q] = *reinterpret_cast<const float4*>(r + q * ATT_PART_RECORD + e % hd);
            }
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int e = e0 + b * CONSUMER_THREADS * 4;
            if (e >= hi) continue;
            float mx = -3.0e38f;
#pragma unroll
            for (int q = 0; q < ATT_KV_SPLIT; ++q) mx = fmaxf(mx, st[b][q].x);
            float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
            float total = 0.f;
#pragma unroll
            for (int q = 0; q < ATT_KV_SPLIT; ++q) {
                const float w = st[b][q].y * __expf(st[b][q].x - mx);
                const float4 p = o[b][q];
                acc.x += w * p.x, acc.y += w * p.y, acc.z += w * p.z, acc.w += w * p.w;
                total += w;
            }
            const float inv = total > 0.f ? 1.f / total : 0.f;  // an ablated build's zero records
            *reinterpret_cast<float4*>(s.x + e) = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
        }
    }
}
'''

start = src.index("__device__ void merge_parts(")
end = src.index("\n}\n", start) + 3
assert src.count("__device__ void merge_parts(") == 1
src = src[:start] + NEW + src[end:]
sys.stdout.write(src)
