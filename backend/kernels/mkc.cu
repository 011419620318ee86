// mkc's decode operators for Llama-style models, bf16 weights, batch 1.
//
// One device function per operator kind (qkv_rope, attention, o_proj / down (split-K matvec
// with residual), up_gate, lm_head); each `extern "C"` kernel is a thin grid wrapper around it so
// that a persistent interpreter can call the same bodies. The matvec operators share one
// streaming engine (below): a producer warp feeding a ring of weight pages, consumer warps
// computing whole rows. Compiled at run time by NVRTC for
// sm_90a; no CUDA headers are needed (bf16 is handled as raw 16-bit values).
//
// Split-K operators (O-projection, down) only store partial sums, one block per K chunk (VTP
// shard); the next operator that stages the residual stream sums them with the residual in
// chunk order (deterministic) and writes its CTA's slice of the sum for later readers. No
// counters, fences or last-arriver reads: the grid-dependency wait already orders them.
//
// Dependency protocol inside a chain (PDL): every kernel first issues its independent loads
// (its weight pages, with bulk copies into shared memory; KV history prefetches), then triggers its
// successor if the schedule says `early`, then waits (griddepcontrol.wait) before its first read
// of anything the step produced. Buffers the predecessor writes are read with plain (coherent)
// loads, never through `const __restrict__` pointers.

typedef unsigned short bf16;
typedef unsigned long long u64;

// Streaming kernels: 8 consumer warps (the host may pass another count) and one producer warp.
#ifndef CONSUMER_WARPS
#define CONSUMER_WARPS 8
#endif
#define CONSUMER_THREADS (CONSUMER_WARPS * 32)
#define THREADS (CONSUMER_THREADS + 32)
// Attention kernel threads.
#ifndef ATT_THREADS
#define ATT_THREADS 512
#endif
// The attention kernel's bounds: its thread count, or a register cap the host passes with
// another thread count (so that the CTA fits beside a streaming one).
#ifdef ATT_MAXNREG
#define ATT_BOUNDS __maxnreg__(ATT_MAXNREG)
#else
#define ATT_BOUNDS __launch_bounds__(ATT_THREADS)
#endif
// Weight pages (the host passes its PAGE_BYTES with -D so the two cannot disagree) and the most
// ring slots a streaming kernel may use.
#ifndef PAGE_BYTES
#define PAGE_BYTES 16384
#endif
#define MAX_SLOTS 16

struct Model {
    int hidden, inter, q_dim, kv_dim, heads, kv_heads, head_dim, vocab, layers;
    int attn_split, s_attn, s_down, max_seq;
    float eps, log2_theta;
    int ring[6];  // ring slots per consumer warp, per operator kind in ENTRY_POINTS order
    int fold_chunk;  // KV positions staged per chunk by the folded attention + O-projection grid
};

struct Globals {
    const bf16* embed;      // [vocab][hidden]
    const bf16* lm_head;    // [vocab][hidden] (== embed when tied)
    const bf16* final_norm; // [hidden]
    u64* tokens;            // packed (key, ~index) per position; tokens[pos] is the input token
    const int* pos;         // current position
    float* logits;          // [vocab] of the current step
    const float* final_mid; // the last layer's x_mid and down partials: the LM head's input is
    const float* final_part;// their sum
};

struct Layer {
    const bf16* w_qkv;  // [q_dim + 2 kv_dim][hidden], q and k rows pair-interleaved per head
    const bf16* w_o;    // [hidden][q_dim]
    const bf16* w_gate; // [inter][hidden]
    const bf16* w_up;   // [inter][hidden]
    const bf16* w_down; // [hidden][inter]
    const bf16* norm1;  // [hidden]
    const bf16* norm2;  // [hidden]
    bf16* k_cache;      // [kv_heads][max_seq][head_dim]
    bf16* v_cache;      // [kv_heads][max_seq][head_dim]
    const float* prev_mid;  // the previous layer's x_mid, null for layer 0 (the embedding row)
    const float* prev_part; // the previous layer's down partials [s_down][hidden]
    float* x_in;        // [hidden] residual entering the layer: prev_mid + sum of prev_part
    float* qkv;         // [q_dim + 2 kv_dim]
    float* attn;        // [q_dim]
    float* o_part;      // [s_attn][hidden] O-projection partial sums, one row block per K chunk
    float* x_mid;       // [hidden] x_in + sum of o_part
    float* h;           // [inter]
    float* d_part;      // [s_down][hidden] down-projection partial sums
};

// ---- small helpers ---------------------------------------------------------------------

__device__ __forceinline__ float bf2f(bf16 h) { return __uint_as_float(((unsigned)h) << 16); }

__device__ __forceinline__ bf16 f2bf(float f) {
    unsigned u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

// Ablation builds (`mkc bench --ablate`, kernels::Ablation) remove one kind of dependent work
// from the per-op chain to measure what it costs; their results are meaningless by design, but
// finite: computing on NaN measured ~20 µs slower per step (docs/perf.md), so no ablation may
// leave NaN behind. MKC_ABLATE_WAITS: no grid waits for its predecessor; MKC_ABLATE_LOADS: the
// streaming operators skip their prepare and multiply by a constant input vector instead of
// reading one; MKC_ABLATE_ATTENTION: attention waits, writes zeros and exits. The default build
// contains none of them.
#ifdef MKC_ABLATE_WAITS
__device__ __forceinline__ void pdl_wait() {}
#else
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#endif
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// CTA phase tracing (mkc bench --cta-phases), compiled in only with -DMKC_TRACE: the marks cost
// ~8% of the step even when no trace buffer is given. Thread 0 of each CTA records clock64() at
// the phase marks below (slots 0-6), its SM (slot 7), %globaltimer at entry and exit
// (slots 8, 9) and clock64() at two finer marks inside a phase (slots 10, 11: where the
// normalised operators' partial sums have landed and been normalised; attention's scores and
// softmax done) and, in a fused grid, clock64 where the first operator's work is done and the
// grid barrier is entered (12) and passed (13).
#define TRACE_SLOTS 14
enum { MARK_ENTRY = 0, MARK_ISSUED = 1, MARK_RELEASED = 2, MARK_PREPARED = 3, MARK_LANDED = 4,
       MARK_COMPUTED = 5, MARK_EXIT = 6, MARK_SUB1 = 10, MARK_SUB2 = 11, MARK_ARRIVED = 12,
       MARK_PASSED = 13 };
#ifdef MKC_TRACE
__shared__ u64* trace_ptr;

__device__ __forceinline__ u64 globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void mark(int slot) {
    if (threadIdx.x == 0 && trace_ptr) trace_ptr[blockIdx.x * TRACE_SLOTS + slot] = (u64)clock64();
}

__device__ __forceinline__ void trace_begin(u64* trace) {
    if (threadIdx.x == 0) {
        trace_ptr = trace;
        if (trace) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            trace[blockIdx.x * TRACE_SLOTS + 7] = sm;
            trace[blockIdx.x * TRACE_SLOTS + 8] = globaltimer();
            trace[blockIdx.x * TRACE_SLOTS + MARK_ENTRY] = (u64)clock64();
        }
    }
}

__device__ __forceinline__ void trace_end() {
    if (threadIdx.x == 0 && trace_ptr) {
        trace_ptr[blockIdx.x * TRACE_SLOTS + MARK_EXIT] = (u64)clock64();
        trace_ptr[blockIdx.x * TRACE_SLOTS + 9] = globaltimer();
    }
}
#else
__device__ __forceinline__ void mark(int) {}
__device__ __forceinline__ void trace_begin(u64*) {}
__device__ __forceinline__ void trace_end() {}
#endif

// Bytes of dynamic shared memory this CTA was launched with.
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
    unsigned n;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Token id held in a packed argmax value.
__device__ __forceinline__ unsigned token_of(u64 packed) {
    return 0xFFFFFFFFu - (unsigned)(packed & 0xFFFFFFFFull);
}

extern __shared__ __align__(128) unsigned char smem_raw[];

// ---- the streaming matvec engine ---------------------------------------------------------
//
// Every matvec operator runs on one resident CTA per SM that walks a contiguous range of
// 16 KiB weight pages. Warp 8 is the producer: one lane issues bulk asynchronous copies (TMA,
// cp.async.bulk) of each page into a ring of shared-memory slots, each slot guarded by a `full`
// and an `empty` mbarrier. The producer never waits on the predecessor grid, so weights stream
// from the moment the CTA is resident. Warps 0-7 are consumers: after griddepcontrol.wait the
// normalised operators stage their input vector in shared memory (summed from split-K partials
// and RMS-normalised in one pass), while the O-projection and down read theirs straight from
// global memory; each warp then takes every eighth page of the CTA, holds its slice of the
// input vector in registers, computes the page's rows
// (a page holds whole rows of one K chunk, so a row's sum never crosses warps), releases the
// slot, and applies the operator's epilogue to those rows. One such CTA fills an SM (registers
// and shared memory): smaller CTAs that let a successor grid's CTA be resident early, pages of
// 8 KiB, and pages claimed dynamically were all measured slower on the H200 (docs/perf.md).

// Issues cp.async copies of rows [from, to) of a [pos][hd] bf16 cache into `dst`, whose rows
// are `stride` elements apart (padding keeps per-thread row reads free of bank conflicts), over
// threads 0 .. NT - 1.
template <int NT = ATT_THREADS>
__device__ void load_kv_rows(bf16* dst, const bf16* cache, int from, int to, int hd, int base, int stride) {
    int chunks = hd / 8;
    int total = (to - from) * chunks;
    for (int i = threadIdx.x; i < total; i += NT) {
        int r = from + i / chunks, c = i % chunks;
        cp_async16(dst + (long)(r - base) * stride + c * 8, cache + (long)r * hd + c * 8);
    }
    cp_async_commit();
}

__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u64* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u64* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// Bulk copy of `bytes` (multiple of 16, both addresses 16-byte aligned) that completes on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, u64* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

// Bulk copy like `bulk_copy` with an L2 eviction-priority hint (`policy` from createpolicy).
__device__ __forceinline__ void bulk_copy_hinted(void* dst, const void* src, unsigned bytes, u64* bar, u64 policy) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
                 : "memory");
}

// L2 policy for weight pages: each is read once per step, so it goes first when L2 evicts,
// keeping the KV cache, activations and norm weights (re-read every step) resident.
__device__ __forceinline__ u64 evict_first_policy() {
    u64 p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

// Barrier among the consumer warps only (the producer never joins).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory"); }

// Exit mark of a streaming CTA: after its last consumer warp (thread 0's warp may be done with
// its pages microseconds before the others; the CTA ends with the last).
__device__ __forceinline__ void trace_end_stream() {
#ifdef MKC_TRACE
    if (threadIdx.x < CONSUMER_THREADS) consumers_sync();
#endif
    trace_end();
}

// Which pages an operator streams. A page holds `page_rows` rows of `k` columns: either rows
// [row0, row0 + page_rows) of `w0`, or, when `w1` is set (gate/up), page_rows / 2 rows of each.
struct Matvec {
    const bf16* w0;
    const bf16* w1;
    long ld;         // row stride of the matrices (elements)
    int k;           // columns per page row: the K chunk
    int splits;      // K chunks (split-K); chunk c covers columns [c k, (c + 1) k)
    int out_rows;    // output rows per chunk
    int page_rows;   // matrix rows held by one page
    int page_out;    // output rows per page (page_rows, or page_rows / 2 with w1)
    int pages;       // splits * out_rows / page_out
};

__device__ Matvec matvec(const bf16* w0, const bf16* w1, long ld, int k, int splits, int out_rows) {
    Matvec v;
    v.w0 = w0;
    v.w1 = w1;
    v.ld = ld;
    v.k = k;
    v.splits = splits;
    v.out_rows = out_rows;
    v.page_rows = PAGE_BYTES / (2 * k);
    v.page_out = w1 ? v.page_rows / 2 : v.page_rows;
    v.pages = splits * (out_rows / v.page_out);
    return v;
}

// The gate/up pages of layer L (a page holds matching rows of both): streamed by up/gate, and
// warmed into L2 by QKV and the O-projection.
__device__ __forceinline__ Matvec up_gate_matvec(const Model& m, const Layer& L) {
    return matvec(L.w_gate, L.w_up, m.hidden, m.hidden, 1, m.inter);
}

// The first page and page count of this CTA: contiguous, balanced to within one page.
__device__ __forceinline__ void page_range(int pages, int& first, int& count) {
    long b = blockIdx.x, g = gridDim.x;
    first = (int)(b * pages / g);
    count = (int)((b + 1) * pages / g) - first;
}

// Chunk and first output row of page p.
__device__ __forceinline__ void page_coords(const Matvec& v, int p, int& chunk, int& row0) {
    int per_chunk = v.out_rows / v.page_out;
    chunk = p / per_chunk;
    row0 = (p % per_chunk) * v.page_out;
}

// Shared memory of a streaming kernel: [full mbarriers | empty mbarriers | norm mbarrier (16 B) |
// input vector (x_len floats) | RMSNorm weights (norm_len bf16) | scratch | page ring].
struct Stream {
    u64* full;
    u64* empty;
    u64* norm_bar;   // completes when the norm weights have landed
    float* x;
    bf16* norm;
    float* scratch;  // 64 floats
    bf16* ring;
    int per_warp;  // ring slots per consumer warp
};

// Bytes before the ring (mirrored by the host's dynamic shared memory computation).
__device__ __forceinline__ int ring_offset(int x_len, int norm_len) {
    return (2 * MAX_SLOTS * 8 + 16 + x_len * 4 + norm_len * 2 + 64 * 4 + 127) / 128 * 128;
}

__device__ Stream carve_stream(int x_len, int norm_len, int per_warp) {
    Stream s;
    s.full = (u64*)smem_raw;
    s.empty = s.full + MAX_SLOTS;
    s.norm_bar = s.empty + MAX_SLOTS;
    s.x = (float*)(smem_raw + 2 * MAX_SLOTS * 8 + 16);
    s.norm = (bf16*)(s.x + x_len);
    s.scratch = (float*)(s.norm + norm_len);
    s.ring = (bf16*)(smem_raw + ring_offset(x_len, norm_len));
    s.per_warp = per_warp;
    return s;
}

// Initialises the ring's barriers (the producer lane, before any thread uses them).
__device__ void ring_init(const Stream& s) {
    for (int i = 0; i < CONSUMER_WARPS * s.per_warp; ++i) {
        mbar_init(&s.full[i], 1);
        mbar_init(&s.empty[i], 1);
    }
    mbar_init(s.norm_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void ring_ready_arrive() { asm volatile("bar.arrive 2, %0;" ::"n"(THREADS) : "memory"); }
__device__ __forceinline__ void ring_ready_wait() { asm volatile("bar.sync 2, %0;" ::"n"(THREADS) : "memory"); }

// Ring slot of the CTA's page i: page i belongs to consumer warp i % CONSUMER_WARPS, which
// owns `per_warp` slots and takes its pages in order, so every slot has one consumer and its
// mbarrier phases are awaited in order (a shared slot could let a fast warp wait on a parity
// one lap ahead and see a stale completed phase).
__device__ __forceinline__ void ring_slot(const Stream& s, int i, int& slot, int& lap) {
    int w = i % CONSUMER_WARPS, j = i / CONSUMER_WARPS;
    slot = w * s.per_warp + j % s.per_warp;
    lap = j / s.per_warp;
}

// Producer (one lane): streams `count` pages from `first` through the ring, as the CTA's ring
// pages `base`, `base` + 1, ... (a fused grid streams its second operator's pages after its
// first's, through the same ring).
__device__ void produce(const Stream& s, const Matvec& v, int first, int count, int base = 0) {
    const unsigned bytes = (unsigned)(v.page_rows * v.k * 2);
    const u64 policy = evict_first_policy();
    for (int i = 0; i < count; ++i) {
        int slot, lap;
        ring_slot(s, base + i, slot, lap);
        if (lap > 0) mbar_wait(&s.empty[slot], (lap - 1) & 1);
        int chunk, row0;
        page_coords(v, first + i, chunk, row0);
        bf16* dst = s.ring + (long)slot * (PAGE_BYTES / 2);
        long col0 = (long)chunk * v.k;
        mbar_expect_tx(&s.full[slot], bytes);
        if (v.w1) {
            unsigned half = bytes / 2;
            bulk_copy_hinted(dst, v.w0 + (long)row0 * v.ld + col0, half, &s.full[slot], policy);
            bulk_copy_hinted(dst + half / 2, v.w1 + (long)row0 * v.ld + col0, half, &s.full[slot], policy);
        } else if (v.k == v.ld) {
            bulk_copy_hinted(dst, v.w0 + (long)row0 * v.ld, bytes, &s.full[slot], policy);
        } else {
            for (int r = 0; r < v.page_rows; ++r)
                bulk_copy_hinted(dst + (long)r * v.k, v.w0 + (long)(row0 + r) * v.ld + col0, (unsigned)(v.k * 2), &s.full[slot], policy);
        }
    }
}

// Loads this lane's slice of input-vector chunk `chunk` (columns (lane + 32 j) * 8 .. + 8).
template <int NJ>
__device__ __forceinline__ void load_x(float (&xr)[NJ][8], const float* x, int k, int chunk) {
#ifdef MKC_ABLATE_LOADS
    (void)x, (void)k, (void)chunk;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int i = 0; i < 8; ++i) xr[j][i] = 1.0f / 64;
    return;
#endif
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        const float4* p = reinterpret_cast<const float4*>(x + (long)chunk * k + (lane + 32 * j) * 8);
        float4 a = p[0], b = p[1];
        xr[j][0] = a.x; xr[j][1] = a.y; xr[j][2] = a.z; xr[j][3] = a.w;
        xr[j][4] = b.x; xr[j][5] = b.y; xr[j][6] = b.z; xr[j][7] = b.w;
    }
}

// Dot products of the R rows of a page (row stride 256 * NJ elements) with the lane's x slice;
// every lane returns every row's full sum.
template <int NJ, int R>
__device__ __forceinline__ void page_dots(const bf16* page, const float (&xr)[NJ][8], float (&out)[R]) {
    int lane = threadIdx.x % 32;
    const int k = 256 * NJ;
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        uint4 w[R];
#pragma unroll
        for (int r = 0; r < R; ++r) w[r] = *reinterpret_cast<const uint4*>(page + r * k + (lane + 32 * j) * 8);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            unsigned words[4] = {w[r].x, w[r].y, w[r].z, w[r].w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                out[r] += __uint_as_float(words[q] << 16) * xr[j][2 * q];
                out[r] += __uint_as_float(words[q] & 0xFFFF0000u) * xr[j][2 * q + 1];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = warp_sum(out[r]);
}

// Consumer warp: computes its pages (every CONSUMER_WARPS-th of the CTA's range) with the input
// vector `x` (shared or global memory) and hands each page's row sums to
// `epilogue(chunk, row0, sums)`.
// The pages are the CTA's ring pages `base`, `base` + 1, ... (as the producer streamed them).
template <int NJ, typename Epilogue>
__device__ void consume(const Stream& s, const Matvec& v, const float* x, int first, int count, Epilogue& epilogue,
                        int base) {
    constexpr int R = PAGE_BYTES / (2 * 256 * NJ);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float xr[NJ][8];
    int loaded = -1;
    bool landed_marked = false;
    for (int i = (warp + CONSUMER_WARPS - base % CONSUMER_WARPS) % CONSUMER_WARPS; i < count; i += CONSUMER_WARPS) {
        int chunk, row0;
        page_coords(v, first + i, chunk, row0);
        if (chunk != loaded) {
            load_x<NJ>(xr, x, v.k, chunk);
            loaded = chunk;
        }
        int slot, lap;
        ring_slot(s, base + i, slot, lap);
        mbar_wait(&s.full[slot], lap & 1);
        if (!landed_marked) {
            mark(MARK_LANDED);
            landed_marked = true;
        }
        float sums[R];
        page_dots<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), xr, sums);
        __syncwarp();
        if (lane == 0) mbar_arrive(&s.empty[slot]);
        epilogue(chunk, row0, sums);
    }
}

// The producer warp's start: its first lane initialises the ring's barriers and requests the
// RMSNorm weights (`norm`, null for none) ahead of any page; then the warp arrives, without
// waiting, on named barrier 2, where the consumers synchronise before their first use of the
// ring, and its lane goes on to issue pages at once. A CTA-wide barrier here would hold the
// first weight request until every warp of the CTA had started (~0.7 µs per grid, measured).
__device__ __forceinline__ void start_producer(const Stream& s, const bf16* norm, int norm_len) {
    if (threadIdx.x == CONSUMER_THREADS) {
        ring_init(s);
        if (norm) {
            mbar_expect_tx(s.norm_bar, (unsigned)(norm_len * 2));
            bulk_copy(s.norm, norm, (unsigned)(norm_len * 2), s.norm_bar);
        }
    }
    __syncwarp();
    ring_ready_arrive();
}

// Warming L2 with a successor's weights (pdl only). While a CTA waits for its inputs, HBM has
// little to fetch; its successor's first pages stream as usual once it is admitted, but the
// rest could come from L2 if L2 held them. `cp.async.bulk.prefetch.L2` and `prefetch.global.L2`
// leave nothing in L2 that a later read finds (`mkc probe l2`); a real read does. So the
// producer lane copies successor pages into this CTA's idle ring slots (those of consumer warps
// with no page here) and drops them, at most WARM_DEPTH in flight: deeper queues inflate every
// critical load (docs/perf.md, latency under load). The O-projection warms up/gate's pages from
// page WARM_SKIP of the share of the up/gate CTA of its index until its consumers are released;
// QKV warms WARM_QKV pages from WARM_QKV_SKIP once its own pages have landed. Measured: pdl -13
// µs (tuned layout), -20 µs (anchors'); developers may change them with MKC_WARM_* (0: off).
#ifndef WARM_DEPTH
#define WARM_DEPTH 2
#endif
#ifndef WARM_SKIP
#define WARM_SKIP 16
#endif
#ifndef WARM_QKV
#define WARM_QKV 2
#endif
#ifndef WARM_O
#define WARM_O 1
#endif
#ifndef WARM_QKV_SKIP
#define WARM_QKV_SKIP 24
#endif

// The consumers' "released" flag in the stream's scratch, which stops the O-projection's warming.
__device__ __forceinline__ volatile int* warm_stop_flag(const Stream& s) { return (volatile int*)(s.scratch + 63); }

// Copies pages [skip, skip + limit) of this CTA's share of `u` through the idle ring slots (see
// above; the host's `kernels::warm_slot` mirrors the slot choice for its tests) and waits for
// them. `flagged`: stop when warm_stop_flag is set; otherwise start only once this CTA's own
// `count` pages have landed.
__device__ void warm_l2(const Stream& s, const Matvec& u, int count, int skip, int limit, bool flagged) {
    if (count >= CONSUMER_WARPS) return;
    if (!flagged) {
        int slot, lap;
        ring_slot(s, count - 1, slot, lap);
        mbar_wait(&s.full[slot], lap & 1);
    }
    const int nslots = min((CONSUMER_WARPS - count) * s.per_warp, WARM_DEPTH);
    int f, c;
    page_range(u.pages, f, c);
    const unsigned half = (unsigned)(u.page_rows * u.k);  // bytes of half a gate/up page
    int j = skip;
    for (; j < c && j < skip + limit && !(flagged && *warm_stop_flag(s)); ++j) {
        int n = j - skip, slot = count * s.per_warp + n % nslots, lap = n / nslots;
        if (lap > 0) mbar_wait(&s.full[slot], (lap - 1) & 1);
        int chunk, row0;
        page_coords(u, f + j, chunk, row0);
        bf16* dst = s.ring + (long)slot * (PAGE_BYTES / 2);
        mbar_expect_tx(&s.full[slot], 2 * half);
        bulk_copy(dst, u.w0 + (long)row0 * u.ld, half, &s.full[slot]);
        bulk_copy(dst + half / 2, u.w1 + (long)row0 * u.ld, half, &s.full[slot]);
    }
    for (int i = max(skip, j - nslots); i < j; ++i) {
        int n = i - skip;
        mbar_wait(&s.full[count * s.per_warp + n % nslots], (n / nslots) & 1);
    }
}

// Runs a streaming operator: barriers, producer, the grid-dependency wait, `prepare` (stages the
// input vector in s.x; consumers only), the consumers (reading x_global instead of s.x where it
// is set), then `finish` (consumers only). The
// producer's first request is the operator's RMSNorm weights (`norm`, norm_len bf16; null for
// none), ahead of its pages: loaded after the wait instead, they queued behind every CTA's ring
// fill and held the normalisation ~2-3 µs (docs/perf.md). `warm`: gate/up pages to warm L2 with
// (null w0: none), until released or, with `warm_limit`, that many after the own pages landed.
template <typename Prepare, typename Epilogue, typename Finish>
__device__ void run_stream(const Matvec& v, int x_len, const float* x_global, const bf16* norm, int norm_len,
                           int per_warp, int pdl, int early, Prepare prepare, Epilogue& epilogue, Finish finish,
                           Matvec warm = Matvec{}, int warm_limit = 0) {
    const bool warming = WARM_DEPTH > 0 && pdl && warm.w0, flagged = warming && !warm_limit;
    Stream s = carve_stream(x_len, norm ? norm_len : 0, per_warp);
    int first, count;
    page_range(v.pages, first, count);
    if (pdl && early) pdl_trigger();
    if (threadIdx.x >= CONSUMER_THREADS) {
        // The stop flag, cleared before the ring barrier orders it before the consumers' use.
        if (flagged && threadIdx.x == CONSUMER_THREADS) *warm_stop_flag(s) = 0;
        start_producer(s, norm, norm_len);
        if (threadIdx.x == CONSUMER_THREADS) produce(s, v, first, count);
        if (warming && threadIdx.x == CONSUMER_THREADS)
            warm_l2(s, warm, count, flagged ? WARM_SKIP : WARM_QKV_SKIP, flagged ? 1 << 30 : warm_limit, flagged);
        return;
    }
    mark(MARK_ISSUED);
    ring_ready_wait();  // the ring's barriers are initialised (the producer arrives at once)
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    if (flagged && threadIdx.x == 0) *warm_stop_flag(s) = 1;
#ifdef MKC_ABLATE_LOADS
    (void)prepare;
    if (norm) mbar_wait(s.norm_bar, 0);  // the norm weights' copy lands before the CTA may exit
#else
    prepare(s);
#endif
    consumers_sync();  // prepare's shared-memory writes before the dot products
    mark(MARK_PREPARED);
    int nj = v.k / 256;
    // Spelled out per source so that each inlined copy knows which memory its x lives in (a
    // helper taking the pointer changed three kernels' code: keep A/B-measured code as it is).
    if (x_global) {
        if (nj == 8) consume<8>(s, v, x_global, first, count, epilogue, 0);
        else if (nj == 4) consume<4>(s, v, x_global, first, count, epilogue, 0);
        else consume<2>(s, v, x_global, first, count, epilogue, 0);
    } else {
        if (nj == 8) consume<8>(s, v, s.x, first, count, epilogue, 0);
        else if (nj == 4) consume<4>(s, v, s.x, first, count, epilogue, 0);
        else consume<2>(s, v, s.x, first, count, epilogue, 0);
    }
    mark(MARK_COMPUTED);
    finish(s);
}

// rsqrt(mean(x^2) + eps) of a vector of n floats, from each consumer thread's partial sum of
// squares `ss`; returns once the producer's norm weights (s.norm) have landed too.
__device__ __forceinline__ float rms_inverse(const Stream& s, float ss, int n, float eps) {
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) s.scratch[threadIdx.x / 32] = ss;
    consumers_sync();
    float total = 0.f;
    for (int i = 0; i < CONSUMER_WARPS; ++i) total += s.scratch[i];
    float inv = rsqrtf(total / n + eps);
    mbar_wait(s.norm_bar, 0);
    return inv;
}

// s.x (length n) <- x * rsqrt(mean(x^2) + eps) * w over the consumer threads, with w the norm
// weights the producer copies into s.norm.
__device__ void rmsnorm_consumers(const Stream& s, int n, float eps) {
    float* x = s.x;
    float ss = 0.f;
    for (int i = threadIdx.x; i < n; i += CONSUMER_THREADS) ss += x[i] * x[i];
    float inv = rms_inverse(s, ss, n, eps);
    for (int i = threadIdx.x; i < n; i += CONSUMER_THREADS) x[i] = x[i] * inv * bf2f(s.norm[i]);
}

// dst <- base + parts[0] + ... + parts[splits - 1] (n <= 2048 floats each,
// added in that order): the residual stream, reduced from the split-K partials that produced
// it. A thread issues the loads of up to SUM_BATCH chunks before its first add: one L2 round
// trip per batch (a loop of dependent load-add steps made this prepare ~2 µs slower). This CTA
// also writes its share of the float4 groups of the sum to `out` (null: none), for the
// operators that read the residual later. With `norm` (the stream whose producer loads the
// RMSNorm weights) the sum is normalised in registers before it is stored: one pass over the
// vector and one barrier, where staging and then `rmsnorm_consumers` took three and two.
#define SUM_BATCH 4
__device__ void stage_sum(float* dst, const float* base, const float* parts, int splits, int n, float* out,
                          const Stream* norm, float eps) {
    constexpr int G = (2048 + 4 * CONSUMER_THREADS - 1) / (4 * CONSUMER_THREADS);  // float4s per thread
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    int at[G];
    float4 acc[G];
#pragma unroll
    for (int q = 0; q < G; ++q) {
        at[q] = (threadIdx.x + q * CONSUMER_THREADS) * 4;
        acc[q] = at[q] < n ? *reinterpret_cast<const float4*>(base + at[q]) : zero;
    }
    for (int c0 = 0; c0 < splits; c0 += SUM_BATCH) {
        float4 p[G][SUM_BATCH];
#pragma unroll
        for (int q = 0; q < G; ++q)
#pragma unroll
            for (int c = 0; c < SUM_BATCH; ++c)
                p[q][c] = at[q] < n && c0 + c < splits
                              ? *reinterpret_cast<const float4*>(parts + (long)(c0 + c) * n + at[q])
                              : zero;
#pragma unroll
        for (int q = 0; q < G; ++q)
#pragma unroll
            for (int c = 0; c < SUM_BATCH; ++c) {
                if (c0 + c >= splits) continue;
                acc[q].x += p[q][c].x;
                acc[q].y += p[q][c].y;
                acc[q].z += p[q][c].z;
                acc[q].w += p[q][c].w;
            }
    }
    mark(MARK_SUB1);
#pragma unroll
    for (int q = 0; q < G; ++q)
        if (out && at[q] < n && (at[q] / 4) % gridDim.x == blockIdx.x) *reinterpret_cast<float4*>(out + at[q]) = acc[q];
    if (norm) {
        float ss = 0.f;
#pragma unroll
        for (int q = 0; q < G; ++q) ss += acc[q].x * acc[q].x + acc[q].y * acc[q].y + acc[q].z * acc[q].z + acc[q].w * acc[q].w;
        float inv = rms_inverse(*norm, ss, n, eps);
        mark(MARK_SUB2);
#pragma unroll
        for (int q = 0; q < G; ++q) {
            if (at[q] >= n) continue;
            const bf16* w = norm->norm + at[q];
            acc[q].x = acc[q].x * inv * bf2f(w[0]);
            acc[q].y = acc[q].y * inv * bf2f(w[1]);
            acc[q].z = acc[q].z * inv * bf2f(w[2]);
            acc[q].w = acc[q].w * inv * bf2f(w[3]);
        }
    }
#pragma unroll
    for (int q = 0; q < G; ++q)
        if (at[q] < n) *reinterpret_cast<float4*>(dst + at[q]) = acc[q];
}

// The RMS-normalised residual stream entering a layer, staged in s.x: the embedding row of the
// current token for layer 0, else the previous layer's x_mid plus its down partials. The
// un-normalised stream is written to L.x_in as well.
__device__ void stage_layer_input(const Stream& s, const Model& m, const Globals& g, const Layer& L) {
    if (L.prev_mid) {
        stage_sum(s.x, L.prev_mid, L.prev_part, m.s_down, m.hidden, L.x_in, &s, m.eps);
        return;
    }
    unsigned tok = token_of(g.tokens[*g.pos]);
    const bf16* row = g.embed + (long)tok * m.hidden;
    for (int i = threadIdx.x; i < m.hidden; i += CONSUMER_THREADS) {
        s.x[i] = bf2f(row[i]);
        if (blockIdx.x == 0) L.x_in[i] = s.x[i];
    }
    consumers_sync();
    rmsnorm_consumers(s, m.hidden, m.eps);
}

struct NoFinish {
    __device__ void operator()(const Stream&) const {}
};

// ---- operator bodies ---------------------------------------------------------------------

// (1) RMSNorm + QKV + RoPE + KV append (layer 0: embedding gather). Pages hold pair-interleaved
// q/k rows, so a RoPE pair never straddles two pages.
struct QkvEpilogue {
    const Model& m;
    const Globals& g;
    const Layer& L;
    int p;
    template <int R>
    __device__ void operator()(int, int row0, const float (&v)[R]) {
        int lane = threadIdx.x % 32;
        if (lane >= R) return;
        int r = row0 + lane;
        float val = v[lane];
        if (r < m.q_dim + m.kv_dim) {
            float a = v[lane & ~1], b = v[lane | 1];
            int pair = (r % m.head_dim) / 2;
            float freq = exp2f(-2.0f * pair / m.head_dim * m.log2_theta);
            float sn, cs;
            // sin/cos of pi * (angle / pi): sincospif reduces its argument without the local-memory
            // table sincosf needs for large angles (QKV had a stack frame; graph -6 µs, perf.md).
            sincospif((float)p * freq * 0.31830988618379067f, &sn, &cs);
            val = (lane & 1) ? a * sn + b * cs : a * cs - b * sn;
        }
        L.qkv[r] = val;
        if (r >= m.q_dim) {
            int kr = r - m.q_dim;
            bool is_v = kr >= m.kv_dim;
            if (is_v) kr -= m.kv_dim;
            int head = kr / m.head_dim, d = kr % m.head_dim;
            bf16* cache = is_v ? L.v_cache : L.k_cache;
            cache[((long)head * m.max_seq + p) * m.head_dim + d] = f2bf(val);
        }
    }
};

__device__ void qkv_rope_body(const Model& m, const Globals& g, const Layer& L, int pdl, int early) {
    Matvec v = matvec(L.w_qkv, 0, m.hidden, m.hidden, 1, m.q_dim + 2 * m.kv_dim);
    QkvEpilogue ep{m, g, L, *g.pos};
    auto prepare = [&](const Stream& s) { stage_layer_input(s, m, g, L); };
    Matvec up_gate = up_gate_matvec(m, L);
    if (!WARM_QKV) up_gate.w0 = nullptr;
    run_stream(v, m.hidden, nullptr, L.norm1, m.hidden, m.ring[0], pdl, early, prepare, ep, NoFinish{}, up_gate,
               WARM_QKV);
}

// (3)/(5) Split-K matvec: each page's rows go to its K chunk's block of partial sums (with one
// chunk, the product itself); the next operator adds them to the residual (`stage_sum`).
struct PartialEpilogue {
    float* part;
    int n;  // rows per chunk block
    template <int R>
    __device__ void operator()(int chunk, int row0, const float (&v)[R]) {
        int lane = threadIdx.x % 32;
        if (lane < R) part[(long)chunk * n + row0 + lane] = v[lane];
    }
};

__device__ void o_proj_body(const Model& m, const Globals& g, const Layer& L, int pdl, int early) {
    (void)g;
    Matvec v = matvec(L.w_o, 0, m.q_dim, m.q_dim / m.s_attn, m.s_attn, m.hidden);
    PartialEpilogue ep{L.o_part, m.hidden};
    // Like down, the consumers load their slices of the attention output from global memory.
    auto prepare = [](const Stream&) {};
    Matvec up_gate = up_gate_matvec(m, L);
    if (!WARM_O) up_gate.w0 = nullptr;
    run_stream(v, 0, L.attn, nullptr, 0, m.ring[2], pdl, early, prepare, ep, NoFinish{}, up_gate);
}

__device__ void down_body(const Model& m, const Globals& g, const Layer& L, int pdl, int early) {
    (void)g;
    Matvec v = matvec(L.w_down, 0, m.inter, m.inter / m.s_down, m.s_down, m.hidden);
    PartialEpilogue ep{L.d_part, m.hidden};
    // The consumers load their slices of h straight from global memory (L2) into registers:
    // no staging pass and barrier before the first page (pdl -9 µs per step, docs/perf.md).
    auto prepare = [](const Stream&) {};
    run_stream(v, 0, L.h, nullptr, 0, m.ring[4], pdl, early, prepare, ep, NoFinish{});
}

// (4) RMSNorm + gate/up matvecs + SiLU(gate) * up: a page holds matching gate and up rows.
struct UpGateEpilogue {
    const Layer& L;
    template <int R>
    __device__ void operator()(int, int row0, const float (&v)[R]) {
        int lane = threadIdx.x % 32;
        if (lane < R / 2) {
            float gt = v[lane], up = v[R / 2 + lane];
            L.h[row0 + lane] = gt / (1.f + __expf(-gt)) * up;
        }
    }
};

__device__ void up_gate_body(const Model& m, const Globals& g, const Layer& L, int pdl, int early) {
    (void)g;
    Matvec v = up_gate_matvec(m, L);
    UpGateEpilogue ep{L};
    auto prepare = [&](const Stream& s) { stage_sum(s.x, L.x_in, L.o_part, m.s_attn, m.hidden, L.x_mid, &s, m.eps); };
    run_stream(v, m.hidden, nullptr, L.norm2, m.hidden, m.ring[3], pdl, early, prepare, ep, NoFinish{});
}

// (6) Final RMSNorm + LM head + fused argmax into tokens[pos + 1]: each warp keeps its best
// (logit, index) packed in a u64 and publishes it with one atomicMax.
struct LmHeadEpilogue {
    const Globals& g;
    u64 best;
    template <int R>
    __device__ void operator()(int, int row0, const float (&v)[R]) {
        int lane = threadIdx.x % 32;
        if (lane < R) g.logits[row0 + lane] = v[lane];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            unsigned u = __float_as_uint(v[r]);
            unsigned key = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
            u64 packed = ((u64)key << 32) | (u64)(0xFFFFFFFFu - (unsigned)(row0 + r));
            best = packed > best ? packed : best;
        }
    }
};

__device__ void lm_head_body(const Model& m, const Globals& g, int pdl, int early) {
    Matvec v = matvec(g.lm_head, 0, m.hidden, m.hidden, 1, m.vocab);
    LmHeadEpilogue ep{g, 0};
    auto prepare = [&](const Stream& s) {
        stage_sum(s.x, g.final_mid, g.final_part, m.s_down, m.hidden, nullptr, &s, m.eps);
    };
    auto finish = [&](const Stream&) {
        if (threadIdx.x % 32 == 0 && ep.best) atomicMax(&g.tokens[*g.pos + 1], ep.best);
    };
    run_stream(v, m.hidden, nullptr, g.final_norm, m.hidden, m.ring[5], pdl, early, prepare, ep, finish);
}

// ---- fused grids: two streaming operators in one grid ------------------------------------
//
// A matvec whose output every CTA of its successor reads in full (the O-projection's and down's
// partial sums, read by the next RMSNorm) ends its grid in a chain: the successor's weights can
// only start streaming as its CTAs leave. A fused grid runs both operators: its producer streams
// the second operator's pages right after the first's, through the same ring, while the
// consumers finish the first operator, meet at a grid barrier, and go on to the second. The
// barrier is sound because a fused grid has at most one CTA per SM (its shared memory) and no
// more CTAs than SMs, so every CTA becomes resident once the predecessor's CTAs retire, and a
// successor grid is admitted only after every CTA of this one has started (PDL's trigger).

// Grid-wide barrier of the consumer warps on a monotonic counter (never reset: each pass adds
// gridDim.x arrivals, and a CTA waits for the end of its own pass).
__device__ void grid_barrier(u64* counter) {
    consumers_sync();  // every consumer's stores of the first operator are issued
    mark(MARK_ARRIVED);
    if (threadIdx.x == 0) {
        __threadfence();
        u64 old = atomicAdd(counter, 1ull);
        u64 target = (old / gridDim.x + 1) * gridDim.x;
        u64 seen;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(counter) : "memory");
        } while (seen < target);
        __threadfence();
    }
    consumers_sync();
}

// Consumers of one operator whose input vector is `x` (global or shared memory), with the
// page kernel its chunk width needs. run_stream spells the same dispatch out per source: routing
// it through this helper changed the machine code of QKV, up/gate and the LM head (code hashes),
// which were measured as they are.
template <typename Epilogue>
__device__ void consume_pages(const Stream& s, const Matvec& v, const float* x, int first, int count, Epilogue& ep, int base) {
    int nj = v.k / 256;
    if (nj == 8) consume<8>(s, v, x, first, count, ep, base);
    else if (nj == 4) consume<4>(s, v, x, first, count, ep, base);
    else consume<2>(s, v, x, first, count, ep, base);
}

// Runs operator A (input `xa` read from global memory, no staged vector) then, after a grid
// barrier, operator B (its input staged by `prepare_b` in s.x, normalised with `norm`), both
// streamed through one ring.
template <typename EpilogueA, typename PrepareB, typename EpilogueB, typename FinishB>
__device__ void run_fused(const Matvec& va, const float* xa, EpilogueA& epilogue_a, const Matvec& vb, int x_len,
                          const bf16* norm, int norm_len, PrepareB prepare_b, EpilogueB& epilogue_b, FinishB finish_b,
                          int per_warp, u64* barrier, int pdl, int early) {
    Stream s = carve_stream(x_len, norm ? norm_len : 0, per_warp);
    int first_a, count_a, first_b, count_b;
    page_range(va.pages, first_a, count_a);
    page_range(vb.pages, first_b, count_b);
    if (pdl && early) pdl_trigger();
    if (threadIdx.x >= CONSUMER_THREADS) {
        start_producer(s, norm, norm_len);
        if (threadIdx.x == CONSUMER_THREADS) {
            produce(s, va, first_a, count_a, 0);
            produce(s, vb, first_b, count_b, count_a);
        }
        return;
    }
    mark(MARK_ISSUED);
    ring_ready_wait();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    consume_pages(s, va, xa, first_a, count_a, epilogue_a, 0);
    grid_barrier(barrier);
    mark(MARK_PASSED);
    prepare_b(s);
    consumers_sync();
    mark(MARK_PREPARED);
    consume_pages(s, vb, s.x, first_b, count_b, epilogue_b, count_a);
    mark(MARK_COMPUTED);
    finish_b(s);
}

// O-projection, then RMSNorm + up/gate of the same layer.
__device__ void o_up_gate_body(const Model& m, const Layer& L, u64* barrier, int pdl, int early) {
    Matvec vo = matvec(L.w_o, 0, m.q_dim, m.q_dim / m.s_attn, m.s_attn, m.hidden);
    PartialEpilogue epo{L.o_part, m.hidden};
    Matvec vu = up_gate_matvec(m, L);
    UpGateEpilogue epu{L};
    auto prepare = [&](const Stream& s) { stage_sum(s.x, L.x_in, L.o_part, m.s_attn, m.hidden, L.x_mid, &s, m.eps); };
    run_fused(vo, L.attn, epo, vu, m.hidden, L.norm2, m.hidden, prepare, epu, NoFinish{}, m.ring[3], barrier, pdl, early);
}

// Down of layer L, then RMSNorm + QKV + RoPE + KV append of the next layer N.
__device__ void down_qkv_body(const Model& m, const Globals& g, const Layer& L, const Layer& N, u64* barrier, int pdl,
                              int early) {
    Matvec vd = matvec(L.w_down, 0, m.inter, m.inter / m.s_down, m.s_down, m.hidden);
    PartialEpilogue epd{L.d_part, m.hidden};
    Matvec vq = matvec(N.w_qkv, 0, m.hidden, m.hidden, 1, m.q_dim + 2 * m.kv_dim);
    QkvEpilogue epq{m, g, N, *g.pos};
    auto prepare = [&](const Stream& s) { stage_layer_input(s, m, g, N); };
    run_fused(vd, L.h, epd, vq, m.hidden, N.norm1, m.hidden, prepare, epq, NoFinish{}, m.ring[0], barrier, pdl, early);
}

// Down of the last layer, then the final RMSNorm + LM head + argmax.
__device__ void down_lm_head_body(const Model& m, const Globals& g, const Layer& L, u64* barrier, int pdl, int early) {
    Matvec vd = matvec(L.w_down, 0, m.inter, m.inter / m.s_down, m.s_down, m.hidden);
    PartialEpilogue epd{L.d_part, m.hidden};
    Matvec vl = matvec(g.lm_head, 0, m.hidden, m.hidden, 1, m.vocab);
    LmHeadEpilogue epl{g, 0};
    auto prepare = [&](const Stream& s) {
        stage_sum(s.x, g.final_mid, g.final_part, m.s_down, m.hidden, nullptr, &s, m.eps);
    };
    auto finish = [&](const Stream&) {
        if (threadIdx.x % 32 == 0 && epl.best) atomicMax(&g.tokens[*g.pos + 1], epl.best);
    };
    run_fused(vd, L.h, epd, vl, m.hidden, g.final_norm, m.hidden, prepare, epl, finish, m.ring[5], barrier, pdl, early);
}

// Dot product of a bf16 K row (16-byte aligned) with a float query head, both in shared memory.
__device__ __forceinline__ float k_row_dot(const bf16* k, const float* qv, int hd) {
    const uint4* krow = reinterpret_cast<const uint4*>(k);
    const float4* qh = reinterpret_cast<const float4*>(qv);
    float acc = 0.f;
    for (int cc = 0; cc < hd / 8; ++cc) {
        uint4 w = krow[cc];
        float4 qa = qh[2 * cc], qb = qh[2 * cc + 1];
        acc += qa.x * __uint_as_float(w.x << 16) + qa.y * __uint_as_float(w.x & 0xFFFF0000u) +
               qa.z * __uint_as_float(w.y << 16) + qa.w * __uint_as_float(w.y & 0xFFFF0000u) +
               qb.x * __uint_as_float(w.z << 16) + qb.y * __uint_as_float(w.z & 0xFFFF0000u) +
               qb.z * __uint_as_float(w.w << 16) + qb.w * __uint_as_float(w.w & 0xFFFF0000u);
    }
    return acc;
}

// In-place softmax of `heads` rows of `len` scores (row stride len), one warp per row: the
// calling warp (`warp`, `lane`) takes rows warp, warp + warps, ...
__device__ __forceinline__ void softmax_rows(float* scores, int heads, int len, int warps, int warp, int lane) {
    for (int h = warp; h < heads; h += warps) {
        float mx = -3.0e38f;
        for (int i = lane; i < len; i += 32) mx = fmaxf(mx, scores[h * len + i]);
        mx = warp_max(mx);
        float sum = 0.f;
        for (int i = lane; i < len; i += 32) {
            float e = __expf(scores[h * len + i] - mx);
            scores[h * len + i] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        float inv = 1.f / sum;
        for (int i = lane; i < len; i += 32) scores[h * len + i] *= inv;
    }
}

// (2) Decode attention: task = (KV head, query-head group), ATT_THREADS threads. K and V rows
// are staged in shared memory by cp.async in chunks of C positions: the history of the
// first chunk is issued before the wait (earlier steps wrote it), the current position after.
// Scores: one thread per (head, position) (K rows padded so these reads are conflict-free);
// softmax: one warp per head; output: one thread per (head, dimension, position parity), the
// halves added through shared memory. The task's chain is latency, not bandwidth: more threads
// per CTA shortened it. The host gives each CTA more than half an SM's shared memory, so that
// two never share an SM (kernels::attention_chunk).
__device__ void attention_body(const Model& m, const Globals& g, const Layer& L, int t, int pdl, int early) {
    int gq = m.heads / m.kv_heads;
    int hp = gq / m.attn_split;
    int kvh = t / m.attn_split, split = t % m.attn_split;
    int qh0 = kvh * gq + split * hp;
    int hd = m.head_dim;
#ifdef MKC_ABLATE_ATTENTION
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    for (int i = threadIdx.x; i < hp * hd; i += blockDim.x) L.attn[qh0 * hd + i] = 0.f;
    return;
#endif
    // The chunk C is whatever the host's dynamic shared memory holds beside q and the scores
    // (kernels::attention_chunk sizes it to the SM), so no parameter of any kernel changes.
    const int C = (int)((dynamic_smem_bytes() - (unsigned)(hp * hd + hp * m.max_seq) * 4u) / ((2 * hd + 8) * 2));
    int ks = hd + 8;  // padded K row stride
    const bf16* kc = L.k_cache + (long)kvh * m.max_seq * hd;
    const bf16* vc = L.v_cache + (long)kvh * m.max_seq * hd;
    // Layout: [K chunk (padded) | V chunk | q (hp x hd floats) | scores (hp x max_seq)].
    bf16* kbuf = (bf16*)smem_raw;
    bf16* vbuf = kbuf + C * ks;
    float* q = (float*)(vbuf + C * hd);
    float* scores = q + hp * hd;
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    // The position is written by the host before the step, so it may be read before the wait.
    int p = *g.pos;
    int len = p + 1;
    int first = len < C ? len : C;
    int hist = p < first ? p : first;
    load_kv_rows(kbuf, kc, 0, hist, hd, 0, ks);
    load_kv_rows(vbuf, vc, 0, hist, hd, 0, hd);
    mark(MARK_ISSUED);
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    if (hist < first) {  // the current position, written by this step's QKV grid
        load_kv_rows(kbuf, kc, hist, first, hd, 0, ks);
        load_kv_rows(vbuf, vc, hist, first, hd, 0, hd);
    }
    for (int i = tid; i < hp * hd; i += ATT_THREADS) q[i] = L.qkv[qh0 * hd + i];
    float scale = rsqrtf((float)hd);
    for (int base = 0; base < len; base += C) {
        int end = base + C < len ? base + C : len;
        if (base > 0) {
            __syncthreads();
            load_kv_rows(kbuf, kc, base, end, hd, base, ks);
        }
        cp_async_wait_all();
        __syncthreads();
        if (base == 0) mark(MARK_PREPARED);
        // One thread per (head, position): a warp shares the head (q reads broadcast) and
        // takes consecutive positions (padded K rows: conflict-free).
        int c = end - base;
        for (int idx = tid; idx < hp * c; idx += ATT_THREADS) {
            int h = idx / c, i = idx % c;
            scores[h * len + base + i] = k_row_dot(kbuf + (long)i * ks, q + h * hd, hd) * scale;
        }
    }
    __syncthreads();
    mark(MARK_SUB1);
    softmax_rows(scores, hp, len, ATT_THREADS / 32, warp, lane);
    mark(MARK_SUB2);  // softmax of warp 0's head done
    // Output: thread (h, d, slice) sums p[h][pos] * V[pos][d] over the positions of its slice
    // (pos = slice mod slices); the slices are added through shared memory at the end.
    const int outs = hp * hd;
    const int slices = ATT_THREADS / outs > 0 ? ATT_THREADS / outs : 1;
    int idx0 = tid % outs, slice = tid / outs;
    bool active = slice < slices;
    float acc[2][4];
#pragma unroll
    for (int o = 0; o < 2; ++o)
#pragma unroll
        for (int u = 0; u < 4; ++u) acc[o][u] = 0.f;
    for (int base = 0; base < len; base += C) {
        int end = base + C < len ? base + C : len;
        if (base > 0) {
            __syncthreads();
            load_kv_rows(vbuf, vc, base, end, hd, base, hd);
        }
        cp_async_wait_all();
        __syncthreads();
        if (!active) continue;
#pragma unroll
        for (int o = 0; o < 2; ++o) {
            int idx = idx0 + o * ATT_THREADS;
            if (idx < outs) {
                int h = idx / hd, d = idx % hd;
                const float* ph = scores + h * len;
                int pos = base + slice;
                for (; pos + 3 * slices < end; pos += 4 * slices) {
#pragma unroll
                    for (int u = 0; u < 4; ++u)
                        acc[o][u] += ph[pos + u * slices] * bf2f(vbuf[(long)(pos + u * slices - base) * hd + d]);
                }
                for (; pos < end; pos += slices) acc[o][0] += ph[pos] * bf2f(vbuf[(long)(pos - base) * hd + d]);
            }
        }
    }
    __syncthreads();
    float* red = scores;  // the scores are consumed: [slices][outs] partial sums
#pragma unroll
    for (int o = 0; o < 2; ++o) {
        int idx = idx0 + o * ATT_THREADS;
        if (active && idx < outs) red[slice * outs + idx] = (acc[o][0] + acc[o][1]) + (acc[o][2] + acc[o][3]);
    }
    __syncthreads();
    for (int idx = tid; idx < outs; idx += ATT_THREADS) {
        float sum = 0.f;
        for (int sl = 0; sl < slices; ++sl) sum += red[sl * outs + idx];
        L.attn[qh0 * hd + idx] = sum;
    }
}

// (2+3) Attention folded into the O-projection (`--grids folded`): one grid, one CTA per SM, no
// attention grid between QKV and the O-projection. The O-projection is split-K by whole KV-head
// groups, and each CTA takes pages of one K chunk only, so the attention output it multiplies
// is that chunk's query heads: the CTA computes it itself (the chunk's KV heads, recomputed by
// every CTA of the chunk; ~1/33 of the step's attention each) into its staged input vector and
// never stores it. Before the wait the producer streams the CTA's O pages and the consumers
// issue the chunk's KV history; after it, only q and the current position's K/V are read from
// what QKV wrote. Shared memory: [stream header, x (q_dim floats) | K chunk (padded) | V chunk |
// q | scores (hq x max_seq) | page ring]; `fold_chunk` positions per KV chunk (host-sized).
__device__ __forceinline__ int fold_att_bytes(const Model& m, int hq, int kvn) {
    int hd = m.head_dim;
    int bytes = kvn * m.fold_chunk * (2 * hd + 8) * 2 + hq * hd * 4 + hq * m.max_seq * 4;
    return (bytes + 127) / 128 * 128;
}

__device__ void attention_o_proj_body(const Model& m, const Globals& g, const Layer& L, int pdl, int early) {
    Matvec v = matvec(L.w_o, 0, m.q_dim, m.q_dim / m.s_attn, m.s_attn, m.hidden);
    const int hd = m.head_dim, ks = hd + 8, gq = m.heads / m.kv_heads;
    const int hq = v.k / hd, kvn = hq / gq, C = m.fold_chunk;
    // The grid is s_attn x per_chunk CTAs (host); CTA b takes a balanced share of chunk
    // b / per_chunk's pages.
    int per_chunk = gridDim.x / v.splits;
    int chunk = blockIdx.x / per_chunk, sub = blockIdx.x % per_chunk;
    int chunk_pages = v.pages / v.splits;
    int first = chunk * chunk_pages + (int)((long)sub * chunk_pages / per_chunk);
    int count = chunk * chunk_pages + (int)((long)(sub + 1) * chunk_pages / per_chunk) - first;
    Stream s = carve_stream(m.q_dim, 0, 1);
    unsigned char* att = smem_raw + ring_offset(m.q_dim, 0);
    bf16* kbuf = (bf16*)att;                 // [kvn][C][ks]
    bf16* vbuf = kbuf + kvn * C * ks;        // [kvn][C][hd]
    float* q = (float*)(vbuf + kvn * C * hd);  // [hq][hd]
    float* scores = q + hq * hd;             // [hq][len]
    s.ring = (bf16*)(att + fold_att_bytes(m, hq, kvn));
    if (pdl && early) pdl_trigger();
    if (threadIdx.x >= CONSUMER_THREADS) {
        start_producer(s, nullptr, 0);
        if (threadIdx.x == CONSUMER_THREADS) produce(s, v, first, count);
        return;
    }
    mark(MARK_ISSUED);
    const int kv0 = chunk * kvn, qh0 = chunk * hq;
    const long head_rows = (long)m.max_seq * hd;
    // The position is written by the host before the step, so it may be read before the wait.
    int p = *g.pos;
    int len = p + 1;
    int first_end = len < C ? len : C;
    int hist = p < first_end ? p : first_end;
    for (int j = 0; j < kvn; ++j) {
        load_kv_rows<CONSUMER_THREADS>(kbuf + j * C * ks, L.k_cache + (kv0 + j) * head_rows, 0, hist, hd, 0, ks);
        load_kv_rows<CONSUMER_THREADS>(vbuf + j * C * hd, L.v_cache + (kv0 + j) * head_rows, 0, hist, hd, 0, hd);
    }
    ring_ready_wait();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (hist < first_end) {  // the current position, written by this step's QKV grid
        for (int j = 0; j < kvn; ++j) {
            load_kv_rows<CONSUMER_THREADS>(kbuf + j * C * ks, L.k_cache + (kv0 + j) * head_rows, hist, first_end, hd, 0, ks);
            load_kv_rows<CONSUMER_THREADS>(vbuf + j * C * hd, L.v_cache + (kv0 + j) * head_rows, hist, first_end, hd, 0, hd);
        }
    }
    for (int i = tid; i < hq * hd; i += CONSUMER_THREADS) q[i] = L.qkv[qh0 * hd + i];
    float scale = rsqrtf((float)hd);
    for (int base = 0; base < len; base += C) {
        int end = base + C < len ? base + C : len;
        if (base > 0) {
            consumers_sync();
            for (int j = 0; j < kvn; ++j)
                load_kv_rows<CONSUMER_THREADS>(kbuf + j * C * ks, L.k_cache + (kv0 + j) * head_rows, base, end, hd, base, ks);
        }
        cp_async_wait_all();
        consumers_sync();
        int c = end - base;
        for (int idx = tid; idx < hq * c; idx += CONSUMER_THREADS) {
            int h = idx / c, i = idx % c;
            scores[h * len + base + i] = k_row_dot(kbuf + ((long)(h / gq) * C + i) * ks, q + h * hd, hd) * scale;
        }
    }
    consumers_sync();
    mark(MARK_SUB1);
    softmax_rows(scores, hq, len, CONSUMER_WARPS, warp, lane);
    mark(MARK_SUB2);
    // Output: thread t sums p[h][pos] * V[pos][d] for outputs t and t + CONSUMER_THREADS
    // (hq * hd <= 2 * CONSUMER_THREADS, host-checked), four positions in flight.
    const int outs = hq * hd;
    float acc[2][4];
#pragma unroll
    for (int o = 0; o < 2; ++o)
#pragma unroll
        for (int u = 0; u < 4; ++u) acc[o][u] = 0.f;
    for (int base = 0; base < len; base += C) {
        int end = base + C < len ? base + C : len;
        if (base > 0) {
            consumers_sync();
            for (int j = 0; j < kvn; ++j)
                load_kv_rows<CONSUMER_THREADS>(vbuf + j * C * hd, L.v_cache + (kv0 + j) * head_rows, base, end, hd, base, hd);
        }
        cp_async_wait_all();
        consumers_sync();
#pragma unroll
        for (int o = 0; o < 2; ++o) {
            int idx = tid + o * CONSUMER_THREADS;
            if (idx < outs) {
                int h = idx / hd, d = idx % hd;
                const float* ph = scores + h * len;
                const bf16* vh = vbuf + (long)(h / gq) * C * hd + d;
                int pos = base;
                for (; pos + 3 < end; pos += 4) {
#pragma unroll
                    for (int u = 0; u < 4; ++u) acc[o][u] += ph[pos + u] * bf2f(vh[(long)(pos + u - base) * hd]);
                }
                for (; pos < end; ++pos) acc[o][0] += ph[pos] * bf2f(vh[(long)(pos - base) * hd]);
            }
        }
    }
#pragma unroll
    for (int o = 0; o < 2; ++o) {
        int idx = tid + o * CONSUMER_THREADS;
        if (idx < outs) s.x[qh0 * hd + idx] = (acc[o][0] + acc[o][1]) + (acc[o][2] + acc[o][3]);
    }
    consumers_sync();
    mark(MARK_PREPARED);
    PartialEpilogue ep{L.o_part, m.hidden};
    consume_pages(s, v, s.x, first, count, ep, 0);
    mark(MARK_COMPUTED);
}

// ---- grid wrappers -------------------------------------------------------------------------
// Streaming kernels run one CTA per SM (the host sizes the grid); attention one CTA per task.

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_qkv_rope(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    qkv_rope_body(m, g, L, pdl, early);
    trace_end_stream();
}

extern "C" __global__ void ATT_BOUNDS k_attention(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    attention_body(m, g, L, blockIdx.x, pdl, early);
    trace_end();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_o_proj(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    o_proj_body(m, g, L, pdl, early);
    trace_end_stream();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_up_gate(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    up_gate_body(m, g, L, pdl, early);
    trace_end_stream();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_down(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    down_body(m, g, L, pdl, early);
    trace_end_stream();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_lm_head(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    (void)L;
    lm_head_body(m, g, pdl, early);
    trace_end_stream();
}

// Fused grids (one CTA per SM, never more CTAs than SMs: see grid_barrier). `N` is the next
// layer (down_qkv only); `barrier` the grid's counter.
extern "C" __global__ void __launch_bounds__(THREADS, 1) k_o_up_gate(Model m, Globals g, Layer L, Layer N, int pdl, int early,
                                                                    u64* trace, u64* barrier) {
    trace_begin(trace);
    (void)g;
    (void)N;
    o_up_gate_body(m, L, barrier, pdl, early);
    trace_end_stream();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_down_qkv(Model m, Globals g, Layer L, Layer N, int pdl, int early,
                                                                   u64* trace, u64* barrier) {
    trace_begin(trace);
    down_qkv_body(m, g, L, N, barrier, pdl, early);
    trace_end_stream();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) k_down_lm_head(Model m, Globals g, Layer L, Layer N, int pdl,
                                                                       int early, u64* trace, u64* barrier) {
    trace_begin(trace);
    (void)N;
    down_lm_head_body(m, g, L, barrier, pdl, early);
    trace_end_stream();
}

// Attention folded into the O-projection (`--grids folded`); the fused grids' signature.
extern "C" __global__ void __launch_bounds__(THREADS, 1) k_attention_o_proj(Model m, Globals g, Layer L, Layer N, int pdl,
                                                                           int early, u64* trace, u64* barrier) {
    trace_begin(trace);
    (void)N;
    (void)barrier;
    attention_o_proj_body(m, g, L, pdl, early);
    trace_end_stream();
}

// Deterministic weights: a counter-based hash the CPU reproduces bit for bit.
__device__ __forceinline__ unsigned mix(unsigned x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

// out[i] = (byte - 128) * 2^-shift, byte = mix(seed ^ mix(stream) + i) & 255: exact in bf16.
extern "C" __global__ void k_fill_matrix(bf16* out, unsigned long long n, unsigned seed, unsigned stream, int shift) {
    unsigned base = mix(seed ^ mix(stream));
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        int byte = (int)(mix(base + (unsigned)i + (unsigned)(i >> 32) * 0x9e3779b9u) & 255u);
        out[i] = f2bf(ldexpf((float)(byte - 128), -shift));
    }
}

// Norm weights: 1 + (byte - 128) / 512, exact in bf16.
extern "C" __global__ void k_fill_norm(bf16* out, unsigned long long n, unsigned seed, unsigned stream) {
    unsigned base = mix(seed ^ mix(stream));
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        int byte = (int)(mix(base + (unsigned)i) & 255u);
        out[i] = f2bf(1.0f + (float)(byte - 128) / 512.0f);
    }
}

// Streaming-read probe for `mkc bench`: reads n 16-byte words, 4 loads in flight per thread.
extern "C" __global__ void k_read_bw(const uint4* p, unsigned long long n, unsigned* sink) {
    unsigned acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
        acc ^= a.x ^ b.y ^ c.z ^ d.w;
    }
    for (; i < n; i += stride) acc ^= __ldcs(p + i).x;
    if (acc == 0x12345678u) *sink = acc;
}
