#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Several pollers per wait"): writes to stdout a copy of
backend/kernels/mkc.cu in which a persistent instruction's counter wait is polled by lane 0 of
the first P consumer warps instead of thread 0 alone, each starting `stagger` ns after the
previous, so that a poll reaches L2 every round trip / P instead of every round trip: the
signal is seen ~(1 - 1/P) / 2 of a loaded round trip sooner. The poller that sees the target
raises a shared flag (zeroed in the kernel's prologue, reset after each wait's barrier) the
others read between their polls; its acquire load and the barrier
after the wait order every consumer's later reads, as main's single poller does. The watchdog
and the stall flag stay with thread 0. The chain kernels are main's.

usage: python3 tools/variants/poll_many.py P STAGGER_NS > v_poll_P.cu
"""
import pathlib
import sys

pollers, stagger = int(sys.argv[1]), int(sys.argv[2])
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old = """    __device__ void wait() const {
#ifndef MKC_ABLATE_WAITS
        if (threadIdx.x == 0) {"""
new = f"""    __device__ void wait() const {{
#ifndef MKC_ABLATE_WAITS
        const int warp = (int)threadIdx.x / 32;
        if (threadIdx.x % 32 == 0 && warp > 0 && warp < {pollers}) {{
            __nanosleep((unsigned)(warp * {stagger}));
            for (int i = 0; i < ins.waits; ++i) {{
                const CounterRef w = refs[i];
                const unsigned target = (unsigned)w.amount * step;
                const unsigned* c = p.counters + w.counter;
                while (*(volatile int*)&seen_s <= i && !*(volatile int*)stop) {{
                    if ((int)(load_acquire(c) - target) >= 0) {{
                        atomicMax(&seen_s, i + 1);
                        break;
                    }}
                }}
            }}
        }}
        if (threadIdx.x == 0) {{"""
assert src.count(old) == 1, "CounterDeps::wait moved"
src = src.replace(old, new)
# The flag: waits seen so far by any poller of the current instruction, at file scope so that
# the kernel's prologue zeroes it before the first wait (thread 0 resets it after each wait's
# barrier).
old = """struct CounterDeps {"""
new = """__shared__ int seen_s;

struct CounterDeps {"""
assert src.count(old) == 1, "CounterDeps moved"
src = src.replace(old, new)
old = """        left_s = 0;
        stop_s = 0;"""
new = """        left_s = 0;
        stop_s = 0;
        seen_s = 0;"""
assert src.count(old) == 1, "the kernel's prologue moved"
src = src.replace(old, new)
old = """                for (int n = 1; (int)((v = load_acquire(c)) - target) < 0; ++n) {
                    if (n % 16) continue;"""
new = """                for (int n = 1; (int)((v = load_acquire(c)) - target) < 0; ++n) {
                    if (*(volatile int*)&seen_s > i) break;
                    if (n % 16) continue;"""
assert src.count(old) == 1, "the poll loop moved"
src = src.replace(old, new)
old = """                        *stop = 1;
                        break;
                    }
                }
            }
        }
#endif
        // The acquire loads order this thread's later reads; the barrier orders the others'.
        consumers_sync();"""
new = """                        *stop = 1;
                        break;
                    }
                }
                atomicMax(&seen_s, i + 1);
            }
        }
#endif
        // The acquire loads order this thread's later reads; the barrier orders the others'.
        consumers_sync();
#ifndef MKC_ABLATE_WAITS
        if (threadIdx.x == 0) seen_s = 0;  // read again only after the next instruction's barrier
#endif"""
assert src.count(old) == 1, "the wait's end moved"
src = src.replace(old, new)
sys.stdout.write(src)
