//! How long a dependent chain of L2 hits takes per link, idle and while HBM streams from the
//! other SMs or from its own: the latency an activation load on a chain's critical path pays;
//! and, in the same conditions, how long a thread waits in a signal's release (`red.release`),
//! which the persistent kernel pays after every instruction (`latencies.release_ns`).

use std::ffi::c_void;

use super::super::device::{upload, DevBuf, Gpu};
use super::super::launch::arg;
use super::{launch, read_u64s, ProbeModule, StreamPair, MAX_PROBE_SMEM, RESIDENT_SMEM};
use crate::error::BackendError;

/// How long a dependent chain of L2 hits takes per link, idle and while HBM streams: the
/// latency an activation load on a chain's critical path pays (the simulator's
/// `signal_visible_ns` stands for it).
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyProbe {
    /// ns per link with the GPU otherwise idle.
    pub idle_ns: f64,
    /// The release's cost with the GPU otherwise idle.
    pub idle_release: ReleaseCost,
    /// The loaded cases, in [`LOADED_CASES`] order.
    pub loaded: Vec<LoadedLatency>,
}

/// The chain's latency under one kind of concurrent stream.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedLatency {
    /// What streams, and where the chain runs.
    pub case: &'static str,
    /// How the streaming grid kept HBM busy.
    pub stream: StreamKind,
    /// Whether the chain's own SM streamed too.
    pub own_sm: bool,
    /// ns per link.
    pub ns: f64,
    /// The release's cost beside the same stream.
    pub release: ReleaseCost,
    /// Read bandwidth the stream reached (GB/s).
    pub stream_gbps: f64,
    /// The chain and the releases ran where the case needs them (an SM of their own, or beside
    /// a streamer).
    pub placed_as_intended: bool,
}

/// A device-profile latency this probe measures: the field, its value, and the case it is read
/// from, so that a profile's figure and the probe's are one fact.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileTerm {
    /// The field of the profile's `latencies`.
    pub field: &'static str,
    /// What the probe measured for it, ns.
    pub ns: f64,
    /// Which measurement it is.
    pub from: &'static str,
}

impl LatencyProbe {
    /// The profile latencies read off this probe: `load_latency_ns` (an L2 hit while every
    /// other SM keeps 8 bulk copies in flight, as the operators' rings do) and
    /// `release_held_ns` (a release after a store beside 1 copy per SM, the queue a held
    /// boundary leaves); a case the probe did not run gives none.
    pub fn profile_terms(&self) -> Vec<ProfileTerm> {
        let case = |copies| {
            self.loaded
                .iter()
                .find(|c| c.stream == StreamKind::Bulk(copies) && !c.own_sm)
        };
        let mut terms = Vec::new();
        if let Some(c) = case(mkc_ir::device::FULL_QUEUE_COPIES as i32) {
            terms.push(ProfileTerm {
                field: "load_latency_ns",
                ns: c.ns,
                from: "an L2 hit beside 8 bulk copies per SM",
            });
        }
        if let Some(c) = case(1) {
            terms.push(ProfileTerm {
                field: "release_held_ns",
                ns: c.release.after_store_ns,
                from: "a release after a store beside 1 bulk copy per SM",
            });
            terms.push(ProfileTerm {
                field: "load_latency_held_ns",
                ns: c.ns,
                from: "an L2 hit beside 1 bulk copy per SM",
            });
        }
        terms
    }
}

/// What a thread waits in `red.release.gpu` (the fence before the reduction), per release.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReleaseCost {
    /// ns per release after one store to global memory (a signal after an operator's stores).
    pub after_store_ns: f64,
    /// ns per release with no store since the previous one.
    pub alone_ns: f64,
}

/// Releases timed per measurement.
const RELEASES: i32 = 400;

/// How the streaming grid keeps HBM busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// 512 threads, each with this many 16-byte loads in flight (8 or 16).
    Loads(u32),
    /// One thread keeping this many bulk copies (`cp.async.bulk`) of 16 KiB in flight, as the
    /// operators' producers do.
    Bulk(i32),
    /// One warp keeping this many 16 KiB pages in flight as 16-byte `cp.async` (LDGSTS).
    Async(i32),
}

/// The loaded cases: (description, the stream, the chain's SM streams too).
pub const LOADED_CASES: [(&str, StreamKind, bool); 14] = [
    (
        "every other SM streams, 16-byte loads",
        StreamKind::Loads(8),
        false,
    ),
    (
        "its own SM streams too, 16-byte loads",
        StreamKind::Loads(8),
        true,
    ),
    (
        "every other SM streams, 16-byte loads, 16 in flight per thread",
        StreamKind::Loads(16),
        false,
    ),
    (
        "every other SM streams, 1 bulk copy of 16 KiB in flight",
        StreamKind::Bulk(1),
        false,
    ),
    (
        "every other SM streams, 2 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(2),
        false,
    ),
    (
        "every other SM streams, 3 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(3),
        false,
    ),
    (
        "every other SM streams, 4 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(4),
        false,
    ),
    (
        "every other SM streams, 6 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(6),
        false,
    ),
    (
        "every other SM streams, 8 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(8),
        false,
    ),
    (
        "its own SM streams too, 4 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(4),
        true,
    ),
    (
        "its own SM streams too, 8 bulk copies of 16 KiB in flight",
        StreamKind::Bulk(8),
        true,
    ),
    (
        "every other SM streams, 4 pages of 16-byte cp.async in flight",
        StreamKind::Async(4),
        false,
    ),
    (
        "every other SM streams, 8 pages of 16-byte cp.async in flight",
        StreamKind::Async(8),
        false,
    ),
    (
        "its own SM streams too, 8 pages of 16-byte cp.async in flight",
        StreamKind::Async(8),
        true,
    ),
];

/// Links of the chase: 128-byte lines of a 64 KiB buffer, visited in a random cycle.
const CHASE_LINES: usize = 512;

/// The links of the chase: a buffer of `lines` lines of `words` u32 whose first word holds the
/// index of the next line's first word, in one random cycle through every line (xorshift
/// shuffle: reproducible, no dependency). Other words are 0 and never read.
pub fn chase_cycle(lines: usize, words: usize) -> Vec<u32> {
    let mut order: Vec<usize> = (1..lines).collect();
    let mut x = 0x9E37_79B9u32;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        order.swap(i, x as usize % (i + 1));
    }
    let mut next = vec![0u32; lines * words];
    let mut at = 0usize;
    for &line in &order {
        next[at * words] = (line * words) as u32;
        at = line;
    }
    next[at * words] = 0;
    next
}

/// Runs the latency probe (kernels `k_chase`, `k_stream`, `k_stream_u16`, `k_stream_tma` and
/// `k_stream_async` of the compiled probe `cubin`).
pub fn probe_latency(gpu: &Gpu, cubin: &[u8]) -> Result<LatencyProbe, BackendError> {
    let module = ProbeModule::load(cubin)?;
    let chase = module.kernel("k_chase")?;
    let (plain, plain16) = (module.kernel("k_stream")?, module.kernel("k_stream_u16")?);
    let (tma, ldgsts) = (
        module.kernel("k_stream_tma")?,
        module.kernel("k_stream_async")?,
    );
    let streams = StreamPair::new()?;
    let next = chase_cycle(CHASE_LINES, 32);
    let chain = DevBuf::new(next.len() * 4, "chase buffer")?;
    upload(chain.ptr, &next, "chase buffer")?;
    let stream_bytes = 1usize << 30;
    let big = DevBuf::new(stream_bytes, "stream buffer")?;
    let out = DevBuf::new(3 * 8, "chase result")?;
    let sms = gpu.sms as u32;
    let rec = DevBuf::new(sms as usize * 3 * 8, "stream records")?;
    let sink = DevBuf::new(16, "probe sink")?;
    let release = module.kernel("k_release")?;
    let words = DevBuf::new(32 * 32 * 4, "release words")?;
    let counter = DevBuf::new(4, "release counter")?;
    let release_out = DevBuf::new(3 * 8, "release result")?;
    // k_release(words, counter, reps, out) on one CTA, after the chase on its stream (so it runs
    // where and while the chase did).
    let run_release = |smem: u32| -> Result<(), BackendError> {
        let (mut w, mut c, mut n, mut o) = (words.ptr, counter.ptr, RELEASES, release_out.ptr);
        let mut args: Vec<*mut c_void> = vec![arg(&mut w), arg(&mut c), arg(&mut n), arg(&mut o)];
        launch(release, (1, 32, smem), streams.1, &mut args)
    };
    let release_cost = |what: &str| -> Result<(ReleaseCost, u64), BackendError> {
        let o = read_u64s(release_out.ptr, 3, what)?;
        let cost = ReleaseCost {
            after_store_ns: o[1] as f64 / 1000.0,
            alone_ns: o[2] as f64 / 1000.0,
        };
        Ok((cost, o[0]))
    };
    // k_chase(next, hops, out) on one CTA; `smem` decides where it may run.
    let run_chase = |hops: i32, smem: u32| -> Result<(), BackendError> {
        let (mut p, mut h, mut o) = (chain.ptr, hops, out.ptr);
        let mut args: Vec<*mut c_void> = vec![arg(&mut p), arg(&mut h), arg(&mut o)];
        launch(chase, (1, 32, smem), streams.1, &mut args)
    };
    // Streams for 3 ms on `ctas` CTAs, one per SM (their shared memory keeps a second out).
    let run_stream = |kind: StreamKind, ctas: u32| -> Result<(), BackendError> {
        let (mut p, mut r, mut k) = (big.ptr, rec.ptr, sink.ptr);
        let mut d = 3_000_000u64;
        let mut n = match kind {
            StreamKind::Loads(_) => stream_bytes / 16,
            _ => stream_bytes,
        } as u64;
        let mut args: Vec<*mut c_void> = vec![arg(&mut p), arg(&mut n), arg(&mut d), arg(&mut r)];
        match kind {
            StreamKind::Loads(per_thread) => {
                args.push(arg(&mut k));
                let f = if per_thread == 16 { plain16 } else { plain };
                launch(f, (ctas, 512, RESIDENT_SMEM), streams.0, &mut args)
            }
            StreamKind::Bulk(mut slots) | StreamKind::Async(mut slots) => {
                args.push(arg(&mut slots));
                let f = if matches!(kind, StreamKind::Bulk(_)) {
                    tma
                } else {
                    ldgsts
                };
                launch(f, (ctas, 32, MAX_PROBE_SMEM), streams.0, &mut args)
            }
        }
    };
    // The chase's (sm, ps per link, end of chain) and the streamers' (sm, bytes, ns).
    let finish = |what: &str| -> Result<(Vec<u64>, Vec<u64>), BackendError> {
        streams.sync(what)?;
        Ok((
            read_u64s(out.ptr, 3, what)?,
            read_u64s(rec.ptr, sms as usize * 3, what)?,
        ))
    };
    let ns = |o: &[u64]| o[1] as f64 / 1000.0;
    run_chase(2000, 0)?;
    run_release(0)?;
    let (idle, _) = finish("idle chase")?;
    let (idle_release, _) = release_cost("idle release")?;
    let mut loaded = Vec::with_capacity(LOADED_CASES.len());
    for (case, kind, own) in LOADED_CASES {
        // With every other SM streaming, the chain's shared memory keeps it off their SMs;
        // with every SM streaming, it has none and runs beside a streamer.
        let ctas = if own { sms } else { sms - 1 };
        run_stream(kind, ctas)?;
        let smem = if own { 0 } else { RESIDENT_SMEM };
        run_chase(500, smem)?;
        run_release(smem)?;
        let (o, r) = finish(case)?;
        let (release, release_sm) = release_cost(case)?;
        let cta = r.chunks(3).take(ctas as usize);
        let on_streamer = |sm: u64| cta.clone().any(|c| c[0] == sm);
        let placed_as_intended = on_streamer(o[0]) == own && on_streamer(release_sm) == own;
        let bytes: u64 = cta.clone().map(|c| c[1]).sum();
        let span = cta.map(|c| c[2]).max().unwrap_or(1).max(1);
        loaded.push(LoadedLatency {
            case,
            stream: kind,
            own_sm: own,
            ns: ns(&o),
            release,
            stream_gbps: bytes as f64 / span as f64,
            placed_as_intended,
        });
    }
    Ok(LatencyProbe {
        idle_ns: ns(&idle),
        idle_release,
        loaded,
    })
}
