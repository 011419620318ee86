//! Is a CTA of one kernel admitted on an SM beside a running CTA of another?
//! `cuOccupancyMaxActiveBlocksPerMultiprocessor` answers only for one kernel, so the
//! simulator's rule for two different kernels sharing an SM (a PDL successor entering beside
//! its predecessor) is checked here against the hardware.
//!
//! A "resident" grid of one CTA per SM (its shared memory keeps a second one out) spins long;
//! a "visitor" grid launched at once on another stream spins briefly. A visitor CTA that
//! entered an SM before the resident CTA there left was admitted beside it.

use std::collections::HashMap;
use std::ffi::c_void;

use cudarc::driver::sys;

use super::super::device::{DevBuf, Gpu};
use super::super::launch::arg;
use super::super::setup::func_attribute;
use super::{launch, read_u64s, ProbeModule, StreamPair, RESIDENT_SMEM};
use crate::error::BackendError;

/// How long a resident CTA spins (ns): far longer than the visitor's launch takes.
const RESIDENT_SPIN_NS: u64 = 60_000;

/// How long a visitor CTA spins (ns).
const VISITOR_SPIN_NS: u64 = 2_000;

/// Registers per thread of the probe's kernels: `k_hold_<R>` holds exactly R (the source's
/// `HOLD` list).
pub const PROBE_REGISTERS: [u32; 12] = [32, 48, 64, 72, 80, 88, 96, 104, 112, 120, 128, 168];

/// One side of a probed pair: a `k_hold_<K>` kernel and the threads it is launched with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSide {
    /// Kernel entry point.
    pub name: String,
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread (from ptxas).
    pub registers: u32,
}

/// What one pair did on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairProbe {
    /// The long-running kernel, one CTA per SM with [`RESIDENT_SMEM`] of shared memory.
    pub resident: ProbeSide,
    /// The kernel launched beside it, no shared memory.
    pub visitor: ProbeSide,
    /// Visitor CTAs that entered an SM while its resident CTA was still there.
    pub admitted: u32,
    /// Visitor CTAs launched (one per SM).
    pub visitors: u32,
}

/// A kernel to launch: entry point and threads per CTA.
pub type Launch = (String, u32);

impl PairProbe {
    /// Whether the visitor was admitted beside the resident: on at least 90% of the SMs (yes)
    /// or on at most 10% (no: a visitor may slip in where a resident CTA started late or left
    /// early); `None` in between.
    pub fn admitted_beside(&self) -> Option<bool> {
        if self.admitted * 10 >= self.visitors * 9 {
            Some(true)
        } else if self.admitted * 10 <= self.visitors {
            Some(false)
        } else {
            None
        }
    }
}

/// Runs every `(resident, visitor)` pair of `pairs` (kernels of the compiled probe `cubin`,
/// with their threads) on `gpu`; registers are the driver's figures for the loaded kernels.
pub fn probe_coresidency(
    gpu: &Gpu,
    cubin: &[u8],
    pairs: &[(Launch, Launch)],
) -> Result<Vec<PairProbe>, BackendError> {
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    let module = ProbeModule::load(cubin)?;
    let streams = StreamPair::new()?;
    let sms = gpu.sms as usize;
    let rec_a = DevBuf::new(sms * 3 * 8, "probe records")?;
    let rec_b = DevBuf::new(sms * 3 * 8, "probe records")?;
    let sink = DevBuf::new(1024 * 4, "probe sink")?;
    // Every kernel is resolved (and so loaded) before any pair runs: loading a visitor's code
    // after its resident was launched could outlast the resident's spin.
    let mut kernels = HashMap::new();
    for (a, b) in pairs {
        for (name, _) in [a, b] {
            if !kernels.contains_key(name) {
                kernels.insert(name.clone(), module.kernel(name)?);
            }
        }
    }
    let side = |(name, threads): &Launch| -> Result<ProbeSide, BackendError> {
        let registers = func_attribute(
            kernels[name],
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
            name,
        )? as u32;
        Ok(ProbeSide {
            name: name.clone(),
            threads: *threads,
            registers,
        })
    };
    // k_hold_<R>(rec, spin_ns, sink) on one CTA per SM.
    let hold = |(name, threads): &Launch, smem, stream, rec: u64, spin: u64| {
        let (mut rec, mut spin, mut sink) = (rec, spin, sink.ptr);
        let mut args: Vec<*mut c_void> = vec![arg(&mut rec), arg(&mut spin), arg(&mut sink)];
        launch(
            module.kernel(name)?,
            (sms as u32, *threads, smem),
            stream,
            &mut args,
        )
    };
    let mut out = Vec::with_capacity(pairs.len());
    // The first pair runs twice: its first run also warms the launch path.
    for (i, (a, b)) in std::iter::once(&pairs[0]).chain(pairs).enumerate() {
        hold(a, RESIDENT_SMEM, streams.0, rec_a.ptr, RESIDENT_SPIN_NS)?;
        hold(b, 0, streams.1, rec_b.ptr, VISITOR_SPIN_NS)?;
        streams.sync("co-residency probe")?;
        // (sm, entry ns, exit ns) of each CTA.
        let ra = read_u64s(rec_a.ptr, sms * 3, "probe records")?;
        let rb = read_u64s(rec_b.ptr, sms * 3, "probe records")?;
        let resident_exit: HashMap<u64, u64> = ra.chunks(3).map(|c| (c[0], c[2])).collect();
        let admitted = rb
            .chunks(3)
            .filter(|c| resident_exit.get(&c[0]).is_some_and(|&x| c[1] < x))
            .count() as u32;
        if i > 0 {
            out.push(PairProbe {
                resident: side(a)?,
                visitor: side(b)?,
                admitted,
                visitors: sms as u32,
            });
        }
    }
    Ok(out)
}
