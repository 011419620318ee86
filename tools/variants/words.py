#!/usr/bin/env python3
"""Variants of the activation-word reads (docs/perf.md "Activation words"), printed to stdout
as a whole mkc.cu for `tuning.kernels_cu`:
  noclobber  the fetches' asm without the "memory" clobber (still strong, relaxed.gpu loads)
  weak       the batch fetches as weak L2 loads (__ldcg), the polls still relaxed.gpu
  nocheck    every fetch taken as it lands: no flag checked (a timing bound, outputs unchecked)
  l1         the batch fetches as weak loads that L1 may cache (as the counters' build reads),
             a fence.acq_rel.gpu after each spin so that the fetch after it misses L1
  release    the signal red.release and the counter poll ld.acquire again (the words then
             carry the step whenever the counter says so)
  release_l1 both
"""
import sys

SRC = "backend/kernels/mkc.cu"
mode = sys.argv[1]
s = open(SRC).read()


def rep(old, new):
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, new)


if mode == "noclobber":
    rep('asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");',
        'asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p));')
elif mode == "weak":
    rep("""    act_load_pair(p, r.w[0], r.w[1]);
    act_load_pair(p + 2, r.w[2], r.w[3]);""", """    const ulonglong2 a = __ldcg((const ulonglong2*)p), b = __ldcg((const ulonglong2*)(p + 2));
    r.w[0] = a.x, r.w[1] = a.y, r.w[2] = b.x, r.w[3] = b.y;""")
elif mode == "nocheck":
    rep("""__device__ __forceinline__ const u64* act_missing(const ActRaw4& r, const float* buf, long i) {
#ifndef MKC_ABLATE_WAITS""", """__device__ __forceinline__ const u64* act_missing(const ActRaw4& r, const float* buf, long i) {
#if 0""")
if mode in ("l1", "release_l1"):
    rep("""    act_load_pair(p, r.w[0], r.w[1]);
    act_load_pair(p + 2, r.w[2], r.w[3]);""", """    const ulonglong2 a = *(const ulonglong2*)p, b = *(const ulonglong2*)(p + 2);
    r.w[0] = a.x, r.w[1] = a.y, r.w[2] = b.x, r.w[3] = b.y;""")
    rep("""    act_poll_pair(p);
    return""", """    act_poll_pair(p);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    return""")
if mode in ("release", "release_l1"):
    rep('red.relaxed.gpu.global.add.u32', 'red.release.gpu.global.add.u32')
    rep('asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];"', 'asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"')
if mode not in ("noclobber", "weak", "nocheck", "l1", "release", "release_l1"):
    sys.exit(f"unknown mode {mode}")
sys.stdout.write(s)
