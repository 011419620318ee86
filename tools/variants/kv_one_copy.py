#!/usr/bin/env python3
"""Variant: attention's K rows unpadded in shared memory, so that the persistent producer
copies a KV head's K history with one bulk copy (as it does V) instead of one 128-byte copy
per position (96 at the model's typical length); the score loop reads each thread's K row
from a chunk rotated by its position, conflict-free without the padding. The layout keeps
the padded size per position (the catalogue's chunk is unchanged), so only the kernel moves.
docs/perf.md "One copy of the K history". Writes the changed mkc.cu to stdout."""
import pathlib, sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()


def rep(old, new):
    global src
    if src.count(old) != 1:
        sys.exit(f"kv_one_copy.py: expected one {old!r}")
    src = src.replace(old, new)


rep("""__device__ __forceinline__ float k_row_dot(const bf16* k, const float* qv, int hd) {
    const uint4* krow = reinterpret_cast<const uint4*>(k);
    const float4* qh = reinterpret_cast<const float4*>(qv);
    float acc = 0.f;
    for (int cc = 0; cc < hd / 8; ++cc) {""", """__device__ __forceinline__ float k_row_dot(const bf16* k, const float* qv, int hd, int rot) {
    const uint4* krow = reinterpret_cast<const uint4*>(k);
    const float4* qh = reinterpret_cast<const float4*>(qv);
    float acc = 0.f;
    const int chunks = hd / 8;
    int cc = rot % chunks;
    for (int n = 0; n < chunks; ++n, cc = cc + 1 == chunks ? 0 : cc + 1) {""")
rep("""    int ks = hd + 8;  // padded K row stride""", """    int ks = hd;  // K row stride""")
rep("""            scores[h * len + base + i] = k_row_dot(kbuf + (long)i * ks, q + h * hd, hd) * scale;""",
    """            scores[h * len + base + i] = k_row_dot(kbuf + (long)i * ks, q + h * hd, hd, i) * scale;""")
rep("""            for (int r = 0; r < hist; ++r)
                bulk_copy(kbuf + (long)r * (hd + 8), L.k_cache + kv0 + (long)r * hd, (unsigned)(hd * 2), bar);""",
    """            if (hist > 0) bulk_copy(kbuf, L.k_cache + kv0, (unsigned)(hist * hd * 2), bar);""")
rep("""            bf16* vbuf = kbuf + C * (hd + 8);
            u64* bar = persistent_kv_full();""", """            bf16* vbuf = kbuf + C * hd;
            u64* bar = persistent_kv_full();""")
sys.stdout.write(src)
