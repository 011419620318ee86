// Co-residency probe (`mkc occupancy --probe`): kernels that hold a chosen number of registers
// while they spin for a given time, recording where and when each CTA ran. Launching a long
// "resident" grid and then a short "visitor" grid on another stream shows whether the visitor's
// CTAs are admitted beside the resident ones, for any pair of register counts and warp counts.

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
