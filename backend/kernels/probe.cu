// Probes of hardware facts the simulator assumes (`mkc probe`), compiled at run time by NVRTC.
//
// Co-residency (`mkc probe coresidency`): kernels that hold a chosen number of registers while
// they spin for a given time, recording where and when each CTA ran. Launching a long
// "resident" grid and then a short "visitor" grid on another stream shows whether the visitor's
// CTAs are admitted beside the resident ones, for any pair of register counts and warp counts.
// Latency under load (`mkc probe latency`: an L2 hit, and a signal's release) and L2 as a
// weight source (`mkc probe l2`): below.

typedef unsigned long long u64;

__device__ __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// K accumulators stay live through the spin (each update reads its neighbour); the kernel's real
// register count is read from ptxas, not assumed.
template <int K>
__device__ void hold(u64* rec, u64 spin_ns, float* sink) {
    u64 t0 = now_ns();
    float a[K];
#pragma unroll
    for (int i = 0; i < K; ++i) a[i] = (threadIdx.x + 1) * (i + 1) * 1e-3f;
    const float m = 0.999f + threadIdx.x * 1e-7f;
    do {
#pragma unroll
        for (int i = 0; i < K; ++i) a[i] = fmaf(a[i], m, a[(i + 1) % K] * 1e-3f);
    } while (now_ns() - t0 < spin_ns);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < K; ++i) s += a[i];
    if (s == 12345.f) sink[threadIdx.x] = s;  // keeps every accumulator live
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        rec[3 * blockIdx.x] = sm;
        rec[3 * blockIdx.x + 1] = t0;
        rec[3 * blockIdx.x + 2] = now_ns();
    }
}

// k_hold_<R>: R registers per thread exactly (__maxnreg__ caps what R live accumulators need;
// the spills that costs do not matter here).
#define HOLD(R) \
    extern "C" __global__ void __maxnreg__(R) k_hold_##R(u64* rec, u64 spin_ns, float* sink) { hold<R>(rec, spin_ns, sink); }
HOLD(32)
HOLD(48)
HOLD(64)
HOLD(72)
HOLD(80)
HOLD(88)
HOLD(96)
HOLD(104)
HOLD(112)
HOLD(120)
HOLD(128)
HOLD(168)
// Further register counts and static shared memory for the occupancy probe only.
HOLD(24)
HOLD(40)
HOLD(56)
HOLD(136)
HOLD(152)
HOLD(184)
HOLD(200)
HOLD(216)
HOLD(232)
HOLD(255)
#define HOLD_STATIC(R, B) \
    extern "C" __global__ void __maxnreg__(R) k_hold_s##B##_##R(u64* rec, u64 spin_ns, float* sink) { \
        __shared__ float buf[B / 4];                                                               \
        buf[threadIdx.x % (B / 4)] = (float)spin_ns;                                               \
        __syncthreads();                                                                           \
        if (buf[(threadIdx.x + 1) % (B / 4)] == 12345.f) sink[0] = 1.f;                            \
        hold<R>(rec, spin_ns, sink);                                                               \
    }
HOLD_STATIC(64, 4096)
HOLD_STATIC(96, 20000)
HOLD_STATIC(128, 40960)

// ---- latency under load -------------------------------------------------------------------
//
// k_chase: one thread follows `hops` links of a cycle of indices (`next`, a small buffer that
// stays in L2; .cg loads skip L1), recording its SM and the mean time per hop. k_stream keeps
// HBM busy for `dur_ns` by reading a large buffer with 16-byte loads (eight in flight per
// thread; sixteen in k_stream_u16), the way the operators' weight pages keep it busy; each CTA
// records its SM, bytes and time.

__device__ __forceinline__ unsigned smid() {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    return sm;
}

extern "C" __global__ void k_chase(const unsigned* next, int hops, u64* out) {
    if (threadIdx.x != 0) return;
    unsigned p = 0;
    for (int i = 0; i < 64; ++i) p = __ldcg(next + p);  // warm the path
    u64 t0 = now_ns();
    for (int i = 0; i < hops; ++i) p = __ldcg(next + p);
    u64 t1 = now_ns();
    out[0] = smid();
    out[1] = (t1 - t0) * 1000 / (u64)hops;  // picoseconds per hop
    out[2] = p;                             // keeps the chain live
}

// k_release: what a signal's release costs the thread that issues it: `red.release.gpu`, as
// the persistent kernel signals a counter after its stores (its SASS: MEMBAR.ALL.GPU before
// the RED, so the thread waits until its earlier memory operations are performed). Thread 0
// stores a word and then releases an increment of `counter`, `reps` times, then releases
// `reps` times with no store between; out = its SM, ps per store-and-release, ps per release.
extern "C" __global__ void k_release(unsigned* words, unsigned* counter, int reps, u64* out) {
    if (threadIdx.x != 0) return;
    auto release = [&] { asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory"); };
    for (int i = 0; i < 16; ++i) release();  // warm the path
    const u64 t0 = now_ns();
    for (int i = 0; i < reps; ++i) {
        words[(i % 32) * 32] = (unsigned)i;  // one word in each of 32 lines
        release();
    }
    const u64 t1 = now_ns();
    for (int i = 0; i < reps; ++i) release();
    const u64 t2 = now_ns();
    out[0] = smid();
    out[1] = (t1 - t0) * 1000 / (u64)reps;
    out[2] = (t2 - t1) * 1000 / (u64)reps;
}

template <int U>
__device__ void stream_loads(const uint4* p, u64 n, u64 dur_ns, u64* rec, unsigned* sink) {
    const u64 t0 = now_ns(), until_ns = t0 + dur_ns;
    uint4 acc = make_uint4(0, 0, 0, 0);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 loads = 0;
    do {
        // U independent 16-byte loads per thread in flight per step.
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i + (U - 1) * stride < n; i += U * stride) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                acc.x ^= v[u].x;
                acc.y ^= v[u].y;
                acc.z ^= v[u].z;
                acc.w ^= v[u].w;
            }
            loads += U;
        }
    } while (now_ns() < until_ns);
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678u) sink[0] = acc.x;
    // Per CTA: its SM, bytes read (thread 0's count times the threads) and ns streamed.
    if (threadIdx.x == 0) {
        rec[3 * blockIdx.x] = smid();
        rec[3 * blockIdx.x + 1] = loads * 16 * blockDim.x;
        rec[3 * blockIdx.x + 2] = now_ns() - t0;
    }
}

extern "C" __global__ void k_stream(const uint4* p, u64 n, u64 dur_ns, u64* rec, unsigned* sink) {
    stream_loads<8>(p, n, dur_ns, rec, sink);
}

// k_stream_u16: sixteen loads in flight per thread.
extern "C" __global__ void k_stream_u16(const uint4* p, u64 n, u64 dur_ns, u64* rec, unsigned* sink) {
    stream_loads<16>(p, n, dur_ns, rec, sink);
}

__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

// Initialises `n` mbarriers at shared addresses bars, bars + 8, ... with `count` arrivals each.
__device__ __forceinline__ void init_bars(unsigned bars, int n, unsigned count) {
    for (int s = 0; s < n; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bars + 8 * s), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One bulk copy of `bytes` from global `src` to shared `dst`, completing on mbarrier `bar`.
__device__ __forceinline__ void bulk_page(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// A ring of `slots` 16 KiB pages kept in flight into shared memory by LANES threads for
// `dur_ns`, each slot's mbarrier (LANES arrivals per phase) awaited before its reuse; `issue(dst,
// src, bar)` requests one page. Records the CTA's SM, bytes and ns.
template <int LANES, typename Issue>
__device__ void stream_ring(const unsigned char* p, u64 n_bytes, u64 dur_ns, u64* rec, int slots, Issue issue) {
    extern __shared__ __align__(128) unsigned char pages_smem[];
    __shared__ __align__(8) u64 bar[16];
    if (threadIdx.x >= LANES) return;
    const unsigned mask = LANES == 32 ? 0xffffffffu : 1u;
    const u64 t0 = now_ns(), until_ns = t0 + dur_ns;
    const unsigned page = 16384;
    const u64 pages = n_bytes / page;
    auto bar_of = [&](int s) { return (unsigned)__cvta_generic_to_shared(&bar[s]); };
    if (threadIdx.x == 0) init_bars(bar_of(0), slots, LANES);
    __syncwarp(mask);
    u64 bytes = 0, i = 0;
    for (;; ++i) {
        int s = (int)(i % slots);
        if (i >= (u64)slots) {
            wait_parity(bar_of(s), (unsigned)((i / slots - 1) & 1));  // the copy of iteration i - slots
            bytes += page;
            if (__shfl_sync(mask, now_ns() >= until_ns ? 1 : 0, 0)) break;  // one decision per warp
        }
        u64 pg = (blockIdx.x + i * gridDim.x) % pages;
        issue((unsigned)__cvta_generic_to_shared(pages_smem + (u64)s * page), p + pg * page, bar_of(s));
    }
    // Drain the copies still in flight (iterations i - slots + 1 .. i - 1) before the CTA's
    // shared memory can be handed to another.
    for (u64 j = i + 1 - slots; j < i; ++j) {
        wait_parity(bar_of((int)(j % slots)), (unsigned)((j / slots) & 1));
        bytes += page;
    }
    if (threadIdx.x == 0) {
        rec[3 * blockIdx.x] = smid();
        rec[3 * blockIdx.x + 1] = bytes;
        rec[3 * blockIdx.x + 2] = now_ns() - t0;
    }
}

// k_stream_tma: like k_stream, but one thread per CTA keeps `slots` 16 KiB bulk copies
// (cp.async.bulk, as the operators' producers issue their weight pages) in flight.
extern "C" __global__ void k_stream_tma(const unsigned char* p, u64 n_bytes, u64 dur_ns, u64* rec, int slots) {
    stream_ring<1>(p, n_bytes, dur_ns, rec, slots,
                   [](unsigned dst, const unsigned char* src, unsigned bar) { bulk_page(dst, src, 16384u, bar); });
}

// k_stream_async: the same with one warp copying each page by 16-byte cp.async (LDGSTS: 32 per
// lane), each lane's completion counted on the slot's mbarrier (cp.async.mbarrier.arrive.noinc).
extern "C" __global__ void k_stream_async(const unsigned char* p, u64 n_bytes, u64 dur_ns, u64* rec, int slots) {
    stream_ring<32>(p, n_bytes, dur_ns, rec, slots, [](unsigned dst, const unsigned char* src, unsigned bar) {
#pragma unroll 8
        for (int q = 0; q < 32; ++q) {
            unsigned off = (q * 32 + threadIdx.x) * 16;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + off), "l"(src + off) : "memory");
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
    });
}

// ---- L2 as a weight source ----------------------------------------------------------------
//
// k_read_pages reads the first `n_bytes` of `p` once, as a streaming operator reads its weight
// pages: CTA b takes pages b, b + grid, ..., thread 0 keeping `slots` bulk copies of 16 KiB in
// flight into shared memory (with `shift`, CTA b reads CTA b + shift's pages: another SM's;
// with `contiguous`, CTA b takes one run of consecutive pages, as mkc's plans deal them).
// Each CTA records its SM and when it issued its first copy and saw
// its last land. k_prefetch_pages asks L2 for the same pages (cp.async.bulk.prefetch.L2, no data
// to the SM), as a predecessor would for its successor's weights. Comparing a read of pages
// evicted from L2, pages read just before, and pages prefetched tells whether L2 can hold a
// successor's weights and deliver them faster than HBM.

extern "C" __global__ void k_read_pages(const unsigned char* p, u64 n_bytes, u64* rec, int slots, unsigned shift,
                                        int contiguous) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) u64 bar[16];
    if (threadIdx.x != 0) return;
    const unsigned page = 16384;
    const unsigned b = (blockIdx.x + shift) % gridDim.x;  // whose pages this CTA reads
    const u64 pages = n_bytes / page, per = (pages + gridDim.x - 1) / gridDim.x;
    // Dealt in turn (page b + i grid), or as one contiguous run per CTA (pages b per ..).
    const u64 mine = contiguous ? (b * per < pages ? (pages - b * per < per ? pages - b * per : per) : 0)
                                : (pages + gridDim.x - 1 - b) / gridDim.x;
    auto bar_of = [&](int s) { return (unsigned)__cvta_generic_to_shared(&bar[s]); };
    init_bars(bar_of(0), slots, 1);
    const u64 t0 = now_ns();
    for (u64 i = 0; i < mine + slots; ++i) {
        int s = (int)(i % slots);
        if (i >= (u64)slots) wait_parity(bar_of(s), (unsigned)((i / slots - 1) & 1));  // copy i - slots
        if (i >= mine) continue;
        u64 pg = contiguous ? b * per + i : b + i * gridDim.x;
        unsigned dst = (unsigned)__cvta_generic_to_shared(ring + (u64)s * page);
        bulk_page(dst, p + pg * page, page, bar_of(s));
    }
    rec[3 * blockIdx.x] = smid();
    rec[3 * blockIdx.x + 1] = t0;
    rec[3 * blockIdx.x + 2] = now_ns();
}

// How k_prefetch_pages warms L2 (`how`): 0 one cp.async.bulk.prefetch.L2 per page; 1 the same
// with an evict_last policy; 2 four bulk prefetches of 4 KiB per page; 3 prefetch.global.L2 per
// 128-byte line by 32 threads; 4 the same, evict_last; 5 16-byte loads by 32 threads (the data
// comes to the SM and is dropped). Only every `stride`-th page of each CTA's share is warmed.
extern "C" __global__ void k_prefetch_pages(const unsigned char* p, u64 n_bytes, int how, unsigned* sink, unsigned stride) {
    const unsigned page = 16384;
    u64 policy;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (u64 pg = blockIdx.x; pg < n_bytes / page; pg += gridDim.x) {
        if ((pg / gridDim.x) % stride) continue;  // only every stride-th page of each CTA's share
        const unsigned char* a = p + pg * page;
        if (how <= 2) {
            if (threadIdx.x != 0) continue;
            if (how == 0)
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(page) : "memory");
            else if (how == 1)
                asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(a), "r"(page), "l"(policy)
                             : "memory");
            else
                for (int q = 0; q < 4; ++q)
                    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a + q * 4096), "r"(4096u) : "memory");
        } else if (how <= 4) {
            for (int l = threadIdx.x; l < 128; l += 32) {
                if (how == 3)
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(a + l * 128) : "memory");
                else
                    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(a + l * 128) : "memory");
            }
        } else {
            const uint4* v = reinterpret_cast<const uint4*>(a);
            uint4 x[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) x[u] = __ldcg(v + threadIdx.x + 32 * (u + 0));
#pragma unroll
            for (int u = 0; u < 8; ++u) acc.x ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
#pragma unroll
            for (int u = 0; u < 8; ++u) x[u] = __ldcg(v + threadIdx.x + 32 * (u + 8));
#pragma unroll
            for (int u = 0; u < 8; ++u) acc.x ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
            // 16 loads x 32 threads x 16 B = 8 KiB; the page's second half:
#pragma unroll
            for (int u = 0; u < 8; ++u) x[u] = __ldcg(v + 512 + threadIdx.x + 32 * u);
#pragma unroll
            for (int u = 0; u < 8; ++u) acc.x ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
#pragma unroll
            for (int u = 0; u < 8; ++u) x[u] = __ldcg(v + 768 + threadIdx.x + 32 * u);
#pragma unroll
            for (int u = 0; u < 8; ++u) acc.x ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
        }
    }
    if (acc.x == 0x12345678u) sink[0] = acc.x;
}

// ---- two matvec engines, alone --------------------------------------------------------------
//
// y = W x for W bf16 [rows][K] (row-major) and x f32 [K], one CTA per SM, each CTA recording
// its SM, start and end. k_mv_loads_K: 16 warps load their rows' 16-byte pieces straight into
// registers (16 loads in flight per lane), x staged in shared memory. k_mv_bulk_K: the
// operators' engine in miniature: a producer lane streams the CTA's contiguous range of 16 KiB
// pages with bulk copies into an 8-slot ring, eight consumer warps each take every 8th page.
// The same shapes side by side say what a loads-based engine costs or saves alone.

typedef unsigned short bf16;

__device__ __forceinline__ float dot8(uint4 w, const float* x) {
    float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
    auto lo = [](unsigned v) { return __uint_as_float(v << 16); };
    auto hi = [](unsigned v) { return __uint_as_float(v & 0xFFFF0000u); };
    return lo(w.x) * a.x + hi(w.x) * a.y + lo(w.y) * a.z + hi(w.y) * a.w + lo(w.z) * b.x + hi(w.z) * b.y +
           lo(w.w) * b.z + hi(w.w) * b.w;
}

__device__ __forceinline__ float warp_total(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ void record(u64* rec, u64 t0) {
    rec[3 * blockIdx.x] = smid();
    rec[3 * blockIdx.x + 1] = t0;
    rec[3 * blockIdx.x + 2] = now_ns();
}

template <int K>
__device__ void mv_loads(const bf16* W, const float* x, float* y, int rows, u64* rec) {
    extern __shared__ __align__(16) float xs[];
    const u64 t0 = now_ns();
    for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    constexpr int PER_ROW = K / 256;                       // 16-byte loads per lane per row
    constexpr int ROWS = PER_ROW >= 16 ? 1 : 16 / PER_ROW;  // rows per step (16 loads in flight)
    constexpr int BATCH = PER_ROW >= 16 ? 16 : PER_ROW;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int r0 = (blockIdx.x * warps + warp) * ROWS; r0 < rows; r0 += gridDim.x * warps * ROWS) {
        float acc[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) acc[r] = 0.f;
        for (int b = 0; b < PER_ROW; b += BATCH) {
            uint4 w[ROWS][BATCH];
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int j = 0; j < BATCH; ++j)
                    w[r][j] = r0 + r < rows ? __ldcs(reinterpret_cast<const uint4*>(W + (long)(r0 + r) * K) + (b + j) * 32 + lane)
                                            : zero;
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int j = 0; j < BATCH; ++j) acc[r] += dot8(w[r][j], xs + ((b + j) * 32 + lane) * 8);
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            float t = warp_total(acc[r]);
            if (lane == 0 && r0 + r < rows) y[r0 + r] = t;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) record(rec, t0);
}

template <int K>
__device__ void mv_bulk(const bf16* W, const float* x, float* y, int rows, u64* rec) {
    extern __shared__ __align__(128) unsigned char mv_smem[];
    u64* full = reinterpret_cast<u64*>(mv_smem);
    u64* empty = full + 8;
    float* xs = reinterpret_cast<float*>(mv_smem + 128);
    unsigned char* ring = mv_smem + 128 + K * 4;
    const u64 t0 = now_ns();
    constexpr int PAGE = 16384, RPP = PAGE / (2 * K);  // rows per page
    const int pages = rows / RPP;
    const int first = (int)((long)blockIdx.x * pages / gridDim.x);
    const int count = (int)((long)(blockIdx.x + 1) * pages / gridDim.x) - first;
    auto sh = [](const void* p) { return (unsigned)__cvta_generic_to_shared(p); };
    if (threadIdx.x == 256) init_bars(sh(full), 16, 1);
    __syncthreads();
    if (threadIdx.x >= 256) {
        if (threadIdx.x == 256)
            for (int i = 0; i < count; ++i) {
                int s = i % 8, lap = i / 8;
                if (lap > 0) wait_parity(sh(empty + s), (lap - 1) & 1);
                bulk_page(sh(ring + s * PAGE), W + (long)(first + i) * RPP * K, PAGE, sh(full + s));
            }
        return;
    }
    for (int i = threadIdx.x; i < K; i += 256) xs[i] = x[i];
    asm volatile("bar.sync 1, 256;" ::: "memory");
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int i = warp; i < count; i += 8) {
        int s = i % 8, lap = i / 8;
        wait_parity(sh(full + s), lap & 1);
        const uint4* pg = reinterpret_cast<const uint4*>(ring + s * PAGE);
#pragma unroll
        for (int r = 0; r < RPP; ++r) {
            float acc = 0.f;
#pragma unroll 8
            for (int j = 0; j < K / 256; ++j) acc += dot8(pg[r * (K / 8) + j * 32 + lane], xs + (j * 32 + lane) * 8);
            acc = warp_total(acc);
            if (lane == 0) y[(long)(first + i) * RPP + r] = acc;
        }
        __syncwarp();
        if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sh(empty + s)) : "memory");
    }
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if (threadIdx.x == 0) record(rec, t0);
}

#define MV(K)                                                                                       \
    extern "C" __global__ void k_mv_loads_##K(const bf16* W, const float* x, float* y, int rows, u64* rec) { \
        mv_loads<K>(W, x, y, rows, rec);                                                            \
    }                                                                                               \
    extern "C" __global__ void k_mv_bulk_##K(const bf16* W, const float* x, float* y, int rows, u64* rec) {  \
        mv_bulk<K>(W, x, y, rows, rec);                                                             \
    }
MV(2048)
MV(8192)
