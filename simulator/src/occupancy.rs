//! CUDA occupancy: how many CTAs of a kernel fit on one SM, which resource binds, and whether
//! CTAs of two kernels can share an SM.
//!
//! The rule is `cuda_occupancy.h`'s, as written down and checked against the driver in
//! `shared/docs/gpu.md` (554,576 queries matched on sm_90): warps, registers allocated per warp
//! in units of 256 within four sub-partitions, shared memory in 128-byte units plus the 1 KiB
//! the driver reserves per CTA, against a carveout rounded up to a supported size.

use serde::Serialize;

use mkc_ir::device::{Arch, DeviceProfile};

/// Per-architecture occupancy constants (CUDA programming guide's compute-capability table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchRules {
    /// Architecture.
    pub arch: Arch,
    /// Resident warps per SM.
    pub warps_per_sm: u32,
    /// Resident CTAs per SM.
    pub ctas_per_sm: u32,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Threads per block.
    pub threads_per_block: u32,
    /// Shared memory a block may opt in to.
    pub smem_per_block_optin: u32,
    /// Shared memory reserved by the driver per CTA.
    pub smem_reserved_per_cta: u32,
    /// Supported carveouts (shared-memory capacities per SM), in KiB, ascending.
    pub carveouts_kib: &'static [u32],
}

/// Register allocation unit (registers per warp are rounded up to this).
const REG_ALLOC_UNIT: u32 = 256;
/// Register-file sub-partitions per SM.
const SUB_PARTITIONS: u32 = 4;
/// Shared-memory allocation granularity in bytes.
const SMEM_UNIT: u32 = 128;

impl ArchRules {
    /// The rules of `arch` with its datasheet limits (what `mkc occupancy --arch` uses).
    pub fn of(arch: Arch) -> ArchRules {
        let (warps, ctas, optin_kib) = match arch {
            Arch::Sm80 => (64, 32, 163),
            Arch::Sm86 => (48, 16, 99),
            Arch::Sm89 => (48, 24, 99),
            Arch::Sm90 | Arch::Sm100 => (64, 32, 227),
            Arch::Sm120 => (48, 32, 99),
        };
        ArchRules {
            arch,
            warps_per_sm: warps,
            ctas_per_sm: ctas,
            registers_per_sm: 65536,
            registers_per_thread: 255,
            threads_per_block: 1024,
            smem_per_block_optin: optin_kib * 1024,
            smem_reserved_per_cta: 1024,
            carveouts_kib: arch.carveouts_kib(),
        }
    }

    /// The rules of a device profile: its architecture's carveouts up to the profile's
    /// shared memory per SM, and the profile's own limits (so that every field of a profile
    /// decides something; the profile's validation keeps them consistent).
    pub fn for_device(device: &DeviceProfile) -> ArchRules {
        let l = &device.limits;
        let all = device.arch.carveouts_kib();
        let kept = all
            .iter()
            .take_while(|&&k| k as u64 * 1024 <= l.smem_per_sm as u64)
            .count();
        ArchRules {
            arch: device.arch,
            warps_per_sm: l.threads_per_sm / 32,
            ctas_per_sm: l.ctas_per_sm,
            registers_per_sm: l.registers_per_sm,
            registers_per_thread: l.registers_per_thread,
            threads_per_block: l.threads_per_block,
            smem_per_block_optin: l.smem_per_block_optin,
            smem_reserved_per_cta: l.smem_reserved_per_cta,
            carveouts_kib: &all[..kept.max(1)],
        }
    }

    /// Largest shared-memory capacity per SM.
    pub fn smem_per_sm(&self) -> u32 {
        self.carveouts_kib.last().copied().unwrap_or(0) * 1024
    }

    /// The SM's shared-memory capacity for a carveout preference in percent (`None`: the
    /// default preference, which is the full capacity) when its CTAs each allocate `alloc`
    /// bytes. The preference is a hint: where one CTA needs more than the preferred size, the
    /// driver takes the smallest carveout that holds one CTA instead (gpu.md, rule 3).
    pub fn smem_capacity(&self, carveout_pct: Option<u32>, alloc: u64) -> u64 {
        let Some(pct) = carveout_pct else {
            return self.smem_per_sm() as u64;
        };
        let wanted = (self.smem_per_sm() as u64 * pct.min(100) as u64 / 100).max(alloc);
        self.carveouts_kib
            .iter()
            .map(|&k| k as u64 * 1024)
            .find(|&c| c >= wanted)
            .unwrap_or(self.smem_per_sm() as u64)
    }
}

/// A kernel's per-CTA resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CtaResources {
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per CTA in bytes.
    pub static_smem: u32,
    /// Dynamic shared memory per CTA in bytes (the kernel opts in to the per-block maximum).
    pub dynamic_smem: u32,
}

/// The resource that limits occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    /// Register file.
    Registers,
    /// Shared memory.
    SharedMemory,
    /// Resident warps.
    Warps,
    /// Resident CTAs.
    Blocks,
}

impl Limiter {
    /// The JSON spelling.
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared_memory",
            Limiter::Warps => "warps",
            Limiter::Blocks => "blocks",
        }
    }
}

/// The CTA limit from each resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceLimits {
    /// From the register file.
    pub registers: u32,
    /// From shared memory.
    pub shared_memory: u32,
    /// From resident warps.
    pub warps: u32,
    /// From resident CTAs.
    pub blocks: u32,
}

/// How many CTAs fit on one SM and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    /// CTAs per SM.
    pub blocks_per_sm: u32,
    /// The binding resource (the first of registers, shared memory, warps, blocks to bind).
    pub limiter: Limiter,
    /// The limit from each resource.
    pub limits: ResourceLimits,
}

/// Why a kernel cannot launch at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CannotLaunch {
    /// Zero or more threads than a block may hold.
    Threads {
        /// Requested threads.
        threads: u32,
        /// The architecture's maximum.
        max: u32,
    },
    /// More registers per thread than the architecture allows, or zero.
    RegistersPerThread {
        /// Requested.
        registers: u32,
        /// Maximum.
        max: u32,
    },
    /// The CTA's registers do not fit in the register file.
    RegistersPerBlock {
        /// Registers the CTA needs after allocation rounding.
        needed: u32,
        /// Register file size.
        available: u32,
    },
    /// More shared memory than a block may opt in to.
    SharedMemory {
        /// Requested static + dynamic bytes.
        requested: u64,
        /// Per-block opt-in maximum.
        max: u32,
    },
    /// The SM holds less shared memory than one CTA needs.
    Carveout {
        /// Bytes one CTA allocates.
        needed: u64,
        /// The SM's largest capacity.
        capacity: u64,
    },
}

impl std::fmt::Display for CannotLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CannotLaunch::Threads { threads, max } => {
                write!(f, "{threads} threads per block: a block holds 1 to {max}")
            }
            CannotLaunch::RegistersPerThread { registers, max } => {
                write!(
                    f,
                    "{registers} registers per thread: the limit is 1 to {max}"
                )
            }
            CannotLaunch::RegistersPerBlock { needed, available } => write!(
                f,
                "the CTA needs {needed} registers after allocation rounding, the SM has \
                 {available}; use fewer threads or registers"
            ),
            CannotLaunch::SharedMemory { requested, max } => write!(
                f,
                "{requested} bytes of shared memory per block exceed the opt-in maximum of {max}"
            ),
            CannotLaunch::Carveout { needed, capacity } => write!(
                f,
                "one CTA allocates {needed} bytes of shared memory but an SM holds at most \
                 {capacity}; use less shared memory"
            ),
        }
    }
}

impl std::error::Error for CannotLaunch {}

fn round_up(x: u32, unit: u32) -> u32 {
    x.div_ceil(unit) * unit
}

/// Warps per CTA.
fn warps(threads: u32) -> u32 {
    threads.div_ceil(32)
}

/// Registers allocated per warp.
fn registers_per_warp(registers: u32) -> u32 {
    round_up(
        registers.saturating_mul(32).min(u32::MAX - REG_ALLOC_UNIT),
        REG_ALLOC_UNIT,
    )
}

/// Shared memory one CTA allocates (with the driver's reservation), in u64 so that no request
/// wraps.
pub fn smem_allocation(rules: &ArchRules, k: &CtaResources) -> u64 {
    let bytes = k.static_smem as u64 + k.dynamic_smem as u64 + rules.smem_reserved_per_cta as u64;
    bytes.div_ceil(SMEM_UNIT as u64) * SMEM_UNIT as u64
}

/// Occupancy of one kernel alone on an SM.
pub fn occupancy(
    rules: &ArchRules,
    k: &CtaResources,
    carveout_pct: Option<u32>,
) -> Result<Occupancy, CannotLaunch> {
    if k.threads == 0 || k.threads > rules.threads_per_block {
        return Err(CannotLaunch::Threads {
            threads: k.threads,
            max: rules.threads_per_block,
        });
    }
    if k.registers == 0 || k.registers > rules.registers_per_thread {
        return Err(CannotLaunch::RegistersPerThread {
            registers: k.registers,
            max: rules.registers_per_thread,
        });
    }
    let w = warps(k.threads);
    let rpw = registers_per_warp(k.registers);
    let block_regs = rpw * round_up(w, SUB_PARTITIONS);
    if block_regs > rules.registers_per_sm {
        return Err(CannotLaunch::RegistersPerBlock {
            needed: block_regs,
            available: rules.registers_per_sm,
        });
    }
    let requested = k.static_smem as u64 + k.dynamic_smem as u64;
    if requested > rules.smem_per_block_optin as u64 {
        return Err(CannotLaunch::SharedMemory {
            requested,
            max: rules.smem_per_block_optin,
        });
    }
    let alloc = smem_allocation(rules, k);
    let capacity = rules.smem_capacity(carveout_pct, alloc);
    if alloc > capacity {
        return Err(CannotLaunch::Carveout {
            needed: alloc,
            capacity,
        });
    }
    let per_sub = rules.registers_per_sm / SUB_PARTITIONS;
    let limits = ResourceLimits {
        registers: SUB_PARTITIONS * (per_sub / rpw) / w,
        // A kernel without shared memory still allocates the reserved 1 KiB per CTA, and the
        // driver counts it: under a small carveout preference such CTAs are limited by shared
        // memory too (`mkc probe occupancy` found 8 such cases among 12,000; docs/perf.md).
        shared_memory: (capacity / alloc).min(u32::MAX as u64) as u32,
        warps: rules.warps_per_sm / w,
        blocks: rules.ctas_per_sm,
    };
    let order = [
        (limits.registers, Limiter::Registers),
        (limits.shared_memory, Limiter::SharedMemory),
        (limits.warps, Limiter::Warps),
        (limits.blocks, Limiter::Blocks),
    ];
    let (blocks_per_sm, limiter) = order
        .iter()
        .copied()
        .min_by_key(|&(n, _)| n)
        .expect("four limits");
    Ok(Occupancy {
        blocks_per_sm,
        limiter,
        limits,
    })
}

/// Whether `k` CTAs of kernel `b` can be admitted on an SM already holding `j` CTAs of kernel
/// `a`: warps, CTAs and shared-memory allocations of both kernels together within the SM's,
/// and registers within each scheduler sub-partition's share when every warp, CTA after CTA,
/// goes to the sub-partition holding the fewest warps.
///
/// The warp placement is measured: `mkc probe coresidency` on our H200 agreed with it on all
/// 840 pairs of register and warp counts tried (docs/perf.md), where charging each kernel
/// `ceil(warps / 4)` warps per sub-partition missed 30 (two 9-warp CTAs share an SM whenever
/// 3 of one kernel's warps and 2 of the other's fit one sub-partition's registers). For one
/// kernel it reduces to `cuda_occupancy.h`'s register limit. Shared memory follows the sum
/// rule only when both kernels set the preferred carveout to 100%: with the default preference
/// the driver's own carveout choice refused co-residency in 45 of 156 pairs (gpu.md).
pub fn co_resident(
    rules: &ArchRules,
    a: &CtaResources,
    j: u32,
    b: &CtaResources,
    k: u32,
    carveout_pct: Option<u32>,
) -> bool {
    let (wa, wb) = (warps(a.threads) * j, warps(b.threads) * k);
    if wa + wb > rules.warps_per_sm || j + k > rules.ctas_per_sm {
        return false;
    }
    let (sa, sb) = (smem_allocation(rules, a), smem_allocation(rules, b));
    let smem = sa * j as u64 + sb * k as u64;
    if smem > rules.smem_capacity(carveout_pct, sa.max(sb)) {
        return false;
    }
    let per_sub = rules.registers_per_sm / SUB_PARTITIONS;
    let mut warps_in = [0u32; SUB_PARTITIONS as usize];
    let mut regs_in = [0u32; SUB_PARTITIONS as usize];
    let ctas = std::iter::repeat_n(a, j as usize).chain(std::iter::repeat_n(b, k as usize));
    for cta in ctas {
        for _ in 0..warps(cta.threads) {
            let fewest = (0..warps_in.len())
                .min_by_key(|&p| warps_in[p])
                .expect("four sub-partitions");
            warps_in[fewest] += 1;
            regs_in[fewest] += registers_per_warp(cta.registers);
        }
    }
    regs_in.iter().all(|&r| r <= per_sub)
}
