//! mkc's simulator: occupancy and admission rules, and a discrete-event timeline of a decode
//! step under each target, so that a schedule's step time, bubbles and occupancy are predicted
//! before anyone touches a GPU.
//!
//! Entry points: [`occupancy::occupancy`] (the `cuda_occupancy.h` rule), [`simulate_step`]
//! (one step at a KV length), [`simulate`] (a report with occupancy and, optionally, the whole
//! workload trajectory), [`trace::chrome_trace`] and [`sweep`].

pub mod chain;
pub mod engine;
pub mod measured;
pub mod occupancy;
pub mod persistent;
pub mod report;
pub mod sweep;
pub mod timeline;
pub mod trace;

use indicatif::ParallelProgressIterator;
use rayon::prelude::*;
use serde::Serialize;

use mkc_ir::device::DeviceProfile;
use mkc_ir::{InputError, Model};
use mkc_scheduler::{Schedule, Target};

use crate::occupancy::{occupancy, ArchRules, CannotLaunch, CtaResources};
pub use crate::report::StepReport;
pub use crate::timeline::{SimOptions, StepTimeline};
pub use mkc_catalogue::Ablation;

/// Why a schedule cannot be simulated on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// PDL needs sm_90 or newer.
    NoPdl(String),
    /// A kernel cannot launch at all.
    CannotLaunch(String, CannotLaunch),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::NoPdl(d) => write!(
                f,
                "device {d} has no Programmatic Dependent Launch (it needs sm_90 or newer); \
                 simulate --target graph or persistent there"
            ),
            SimError::CannotLaunch(k, why) => write!(f, "kernel {k} cannot launch: {why}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Occupancy of one kernel, as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelOccupancy {
    /// Kernel name.
    pub kernel: String,
    /// CTAs per SM.
    pub blocks_per_sm: u32,
    /// Binding resource.
    pub limiter: String,
}

/// A simulation report of one schedule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    /// Target.
    pub target: String,
    /// Device.
    pub device: String,
    /// KV length of the simulated step.
    pub kv_len: u32,
    /// The step's figures (flattened into this object).
    #[serde(flatten)]
    pub step: StepReport,
    /// Occupancy per distinct kernel resource declaration.
    pub occupancy: Vec<KernelOccupancy>,
    /// The whole workload, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<Trajectory>,
    /// The step with dependent work removed, rung by rung ([`Ablation::LADDER`]), when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablation: Vec<AblationRung>,
    /// The step with each latency term of the device halved, largest saving first, when asked
    /// for ([`sensitivity`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sensitivity: Vec<LatencySensitivity>,
    /// The step's operator boundaries, median per kind over the layers, when asked for (with
    /// a trace): the terms a traced GPU step (`--timeline`) reports too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<mkc_ir::edges::LayerEdge>,
}

/// The step with one latency term of the device profile halved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencySensitivity {
    /// The term, by its field name in the profile (`latencies.<term>`).
    pub term: String,
    /// Its value in the profile, ns.
    pub ns: f64,
    /// The step with it halved, µs.
    pub step_us: f64,
    /// The full step minus that one, µs: what halving the term would buy.
    pub saved_us: f64,
}

/// The step of `s` (at its typical KV length) with each nonzero latency term of `device`
/// halved in turn, beside `full_us`, largest saving first: which hardware latency the
/// schedule's time hangs on, so that an experiment goes where the prediction says the time is.
pub fn sensitivity(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
    full_us: f64,
) -> Vec<LatencySensitivity> {
    let terms = device.latencies.clone().terms_mut().len();
    let mut out: Vec<LatencySensitivity> = (0..terms)
        .into_par_iter()
        .filter_map(|k| {
            let mut halved = device.clone();
            let (term, value) = halved.latencies.terms_mut().swap_remove(k);
            let ns = *value;
            *value = ns / 2.0;
            (ns > 0.0).then_some((term, ns, halved))
        })
        .map(|(term, ns, halved)| {
            let step_us = simulate_step(s, &halved, options, s.graph.typical_kv_len).step_ns / 1e3;
            LatencySensitivity {
                term: term.to_string(),
                ns,
                step_us,
                saved_us: full_us - step_us,
            }
        })
        .collect();
    out.sort_by(|a, b| b.saved_us.total_cmp(&a.saved_us));
    out
}

/// One rung of the predicted ablation ladder.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AblationRung {
    /// What is removed, in `mkc bench --ablate`'s words.
    pub removed: String,
    /// The step without it, µs.
    pub step_us: f64,
    /// What that work costs: the full step minus this one, µs.
    pub saved_us: f64,
}

/// The step of `s` (at its typical KV length) with each rung of [`Ablation::LADDER`] removed,
/// beside `full_us`: what `mkc bench --ablate` measures, predicted.
pub fn ablation_ladder(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
    full_us: f64,
) -> Vec<AblationRung> {
    Ablation::ladder(s.persistent().is_some())
        .map(|ablate| {
            let opts = SimOptions {
                ablate,
                ..options.clone()
            };
            let step_us = simulate_step(s, device, &opts, s.graph.typical_kv_len).step_ns / 1e3;
            AblationRung {
                removed: ablate.label(),
                step_us,
                saved_us: full_us - step_us,
            }
        })
        .collect()
}

/// Every decode step of the workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trajectory {
    /// Decode steps simulated.
    pub steps: u32,
    /// Mean step time, µs.
    pub mean_step_us: f64,
    /// First and last step times, µs.
    pub first_step_us: f64,
    /// Last step time, µs.
    pub last_step_us: f64,
    /// Sum of all steps, ms.
    pub total_ms: f64,
}

/// The one validation of a model's declared kernel and a device for a set of targets, shared
/// by `compile`, `simulate` and sweeps, so that what one refuses the others refuse too: PDL
/// needs sm_90 or newer, and the declared CTA must fit an SM of the device.
pub fn check_setup(
    model: &Model,
    model_file: &str,
    device: &DeviceProfile,
    targets: &[Target],
) -> Result<(), InputError> {
    if targets.contains(&Target::Pdl) && !device.arch.has_pdl() {
        return Err(InputError::invalid(
            "<command line>",
            "--target",
            format!(
                "device {} ({}) has no Programmatic Dependent Launch, which the pdl target needs \
                 (sm_90 or newer)",
                device.name,
                device.arch.name()
            ),
            "use --target graph or persistent there, or a Hopper or newer --device",
        ));
    }
    let k = &model.lowering.kernel;
    let cta = CtaResources {
        threads: k.threads,
        registers: k.registers,
        static_smem: 0,
        dynamic_smem: k.dynamic_smem_bytes,
    };
    occupancy(&ArchRules::for_device(device), &cta, None).map_err(|e| {
        InputError::invalid(
            model_file,
            "lowering.kernel",
            format!(
                "the declared CTA ({} threads, {} registers, {} B dynamic shared memory) cannot \
                 launch on {} ({}): {e}",
                k.threads,
                k.registers,
                k.dynamic_smem_bytes,
                device.name,
                device.arch.name()
            ),
            "declare threads, registers and dynamic_smem_bytes that fit one SM",
        )
    })?;
    let chain = targets.iter().any(|t| *t != Target::Persistent);
    for &(name, kind) in mkc_catalogue::ENTRY_POINTS.iter().filter(|_| chain) {
        let r = mkc_catalogue::declared_resources(model, kind);
        let cta = CtaResources {
            threads: r.threads,
            registers: r.registers,
            static_smem: r.static_smem,
            dynamic_smem: r.dynamic_smem,
        };
        occupancy(&ArchRules::for_device(device), &cta, None).map_err(|e| {
            let (field, fix) = if kind == mkc_ir::OpKind::Attention {
                (
                    "workload.max_seq_len",
                    "lower max_seq_len (attention stages every position's score), or raise \
                     lowering.attention_split",
                )
            } else {
                ("tuning", "choose tuning knobs whose CTA fits one SM")
            };
            InputError::invalid(
                model_file,
                field,
                format!(
                    "the chain targets' {name} CTA ({} threads, {} registers, {} B dynamic shared \
                     memory) cannot launch on {}: {e}",
                    r.threads, r.registers, r.dynamic_smem, device.name
                ),
                fix,
            )
        })?;
    }
    Ok(())
}

/// Checks the schedule can run on the device and returns its kernels' occupancy.
pub fn kernel_occupancy(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
) -> Result<Vec<KernelOccupancy>, SimError> {
    if s.target == Target::Pdl && !device.arch.has_pdl() {
        return Err(SimError::NoPdl(device.name.clone()));
    }
    let rules = ArchRules::for_device(device);
    let decls: Vec<(String, CtaResources)> = match (&s.persistent(), &s.chain()) {
        (Some(p), _) => vec![(
            "persistent".to_string(),
            CtaResources {
                threads: p.resources.threads,
                registers: p.resources.registers,
                static_smem: 0,
                dynamic_smem: p.resources.dynamic_smem_bytes,
            },
        )],
        (_, Some(c)) => c
            .kernels
            .iter()
            .map(|k| {
                (
                    k.name.clone(),
                    CtaResources {
                        threads: k.threads,
                        registers: k.registers,
                        static_smem: 0,
                        dynamic_smem: k.dynamic_smem_bytes,
                    },
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    // Grids sharing one declaration are reported once, under the first one's name.
    let mut unique: Vec<(String, CtaResources)> = Vec::new();
    for d in decls {
        if !unique.iter().any(|u| u.1 == d.1) {
            unique.push(d);
        }
    }
    let decls = unique;
    decls
        .into_iter()
        .map(|(name, r)| {
            let o = occupancy(&rules, &r, options.carveout_pct)
                .map_err(|e| SimError::CannotLaunch(name.clone(), e))?;
            Ok(KernelOccupancy {
                kernel: name,
                blocks_per_sm: o.blocks_per_sm,
                limiter: o.limiter.name().to_string(),
            })
        })
        .collect()
}

/// Simulates one decode step with `kv_len` tokens in the cache.
pub fn simulate_step(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
    kv_len: u32,
) -> StepTimeline {
    match s.target {
        Target::Persistent => persistent::simulate(s, device, options, kv_len),
        Target::Pdl | Target::Graph => chain::simulate(s, device, options, kv_len),
    }
}

/// Simulates the schedule's typical step; with `trajectory`, also every decode step of the
/// workload (positions `prompt_len .. prompt_len + generate`, in parallel).
pub fn simulate(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
    workload: Option<(u32, u32)>,
) -> Result<(SimReport, StepTimeline), SimError> {
    let occupancy = kernel_occupancy(s, device, options)?;
    let kv_len = s.graph.typical_kv_len;
    let timeline = simulate_step(s, device, options, kv_len);
    let step = report::summarize(s, device, &timeline, kv_len);
    let trajectory = workload.map(|(prompt, generate)| {
        // A progress bar with an estimate (drawn only on a terminal): a long workload of a
        // large model takes minutes.
        let bar = indicatif::ProgressBar::new(generate as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} decode steps simulated, {eta} left",
            )
            .expect("a valid template"),
        );
        let steps: Vec<f64> = (prompt..prompt + generate)
            .into_par_iter()
            .progress_with(bar)
            .map(|pos| simulate_step(s, device, options, pos + 1).step_ns / 1e3)
            .collect();
        let total: f64 = steps.iter().sum();
        Trajectory {
            steps: generate,
            mean_step_us: total / generate as f64,
            first_step_us: steps[0],
            last_step_us: *steps.last().expect("one step at least"),
            total_ms: total / 1e3,
        }
    });
    Ok((
        SimReport {
            target: s.target.name().to_string(),
            device: device.name.clone(),
            kv_len,
            step,
            occupancy,
            trajectory,
            ablation: Vec::new(),
            sensitivity: Vec::new(),
            edges: Vec::new(),
        },
        timeline,
    ))
}
