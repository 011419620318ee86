//! Device profiles: the facts about a GPU that scheduling, occupancy and timing depend on.
//!
//! Profiles are RON files; the ones mkc knows are embedded (see [`crate::embedded`]) and any
//! can be replaced by a file. Each number's source is given as a comment in the profile file.

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// A GPU architecture, as far as occupancy rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Arch {
    /// Ampere A100.
    Sm80,
    /// Ampere consumer (GA10x).
    Sm86,
    /// Ada.
    Sm89,
    /// Hopper (H100, H200).
    Sm90,
    /// Blackwell datacenter (B200).
    Sm100,
    /// Blackwell consumer.
    Sm120,
}

impl Arch {
    /// The `sm_XX` spelling used by NVRTC and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm100 => "sm_100",
            Arch::Sm120 => "sm_120",
        }
    }

    /// Parses `sm_90`, `sm_90a`, `90`, `90a` and the like: an optional `sm_`, the digits,
    /// at most one `a` (arch-specific features), nothing else.
    pub fn parse(text: &str) -> Option<Arch> {
        let rest = text.strip_prefix("sm_").unwrap_or(text);
        let digits = rest.strip_suffix('a').unwrap_or(rest);
        Some(match digits {
            "80" => Arch::Sm80,
            "86" => Arch::Sm86,
            "89" => Arch::Sm89,
            "90" => Arch::Sm90,
            "100" => Arch::Sm100,
            "120" => Arch::Sm120,
            _ => return None,
        })
    }

    /// The shared-memory capacities an SM can be configured to (the carveouts), in KiB,
    /// ascending (CUDA programming guide, compute-capability table).
    pub fn carveouts_kib(self) -> &'static [u32] {
        match self {
            Arch::Sm80 => &[0, 8, 16, 32, 64, 100, 132, 164],
            Arch::Sm86 | Arch::Sm89 => &[0, 8, 16, 32, 64, 100],
            Arch::Sm90 | Arch::Sm100 => &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228],
            Arch::Sm120 => &[0, 8, 16, 32, 64, 100, 128],
        }
    }

    /// Whether the architecture has Programmatic Dependent Launch (sm_90 and newer).
    pub fn has_pdl(self) -> bool {
        !matches!(self, Arch::Sm80 | Arch::Sm86 | Arch::Sm89)
    }
}

/// Accepted range of a bandwidth in GB/s (device profiles, `--bandwidth`, sweep specs).
pub const BANDWIDTH_RANGE_GBPS: (f64, f64) = (1.0, 1e6);
/// Largest latency accepted, in ns (one second: far beyond any GPU event, finite in sums).
pub const MAX_LATENCY_NS: f64 = 1e9;
/// Accepted SM counts (device profiles, `--sms`, sweep specs).
pub const SMS_RANGE: (u32, u32) = (1, 4096);

/// What a field of a device profile (or the sweep knob of the same name) takes, in words.
pub fn expects(field: &str) -> Option<String> {
    let (lo, hi) = BANDWIDTH_RANGE_GBPS;
    let last = field.rsplit('.').next().unwrap_or(field);
    Some(match last {
        "sms" => format!("a whole number from {} to {}", SMS_RANGE.0, SMS_RANGE.1),
        "read_bandwidth_gbps" | "sm_read_bandwidth_gbps" | "bandwidth_gbps" => {
            format!("a number of GB/s from {lo} to {hi:e}")
        }
        l if l.ends_with("_ns") => format!("a number of ns from 0 to {MAX_LATENCY_NS:e}"),
        "count" if field.starts_with("fast_sms.") => "a whole number of SMs, at most `sms`".into(),
        "speedup" => format!("a number from {} to {}", SPEEDUP_RANGE.0, SPEEDUP_RANGE.1),
        "arch" => "one of Sm80, Sm86, Sm89, Sm90, Sm100, Sm120".into(),
        _ if field.starts_with("limits.") => "a whole number".into(),
        _ => return None,
    })
}

/// Per-SM and per-block resource limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// Resident threads per SM.
    pub threads_per_sm: u32,
    /// Resident CTAs per SM.
    pub ctas_per_sm: u32,
    /// Shared memory per SM in bytes (the largest carveout).
    pub smem_per_sm: u32,
    /// Shared memory one block may opt in to, in bytes.
    pub smem_per_block_optin: u32,
    /// Shared memory the driver reserves per CTA, in bytes.
    pub smem_reserved_per_cta: u32,
    /// Threads per block.
    pub threads_per_block: u32,
    /// Registers per thread.
    pub registers_per_thread: u32,
}

/// Latencies the timeline needs, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latencies {
    /// Gap between the end of one grid and the start of the next with an ordinary graph edge.
    pub launch_gap_ns: f64,
    /// From the predecessor grid's completion to the release of `griddepcontrol.wait`.
    pub pdl_wait_release_ns: f64,
    /// From an SM freeing room to a waiting CTA starting on it.
    pub cta_admission_ns: f64,
    /// From a producer's counter signal to a spinning consumer seeing it.
    pub signal_visible_ns: f64,
    /// Fixed cost of one persistent instruction (decode, setup, first-load latency).
    pub instruction_overhead_ns: f64,
    /// From a chain CTA issuing bulk weight loads to their first bytes landing, with every SM
    /// streaming (`mkc probe latency`: an L2 hit behind 8 bulk copies of 16 KiB per SM). A CTA's
    /// pages start arriving this long after it issues them, and the activations it reads after
    /// its wait this long after the release. Absent in older profiles: 0.
    #[serde(default)]
    pub load_latency_ns: f64,
    /// A persistent instruction's release: from its last store to its counter signal leaving
    /// the SM (the gpu-scope release waits for the SM's stores to be acknowledged), during
    /// which its consumers hold at the end barrier. Chain grids signal by exiting and do not
    /// pay it. Absent in older profiles: 0.
    #[serde(default)]
    pub release_ns: f64,
    /// A persistent attention task's compute once its inputs are staged (scores, softmax,
    /// output: latency chains through shared memory and barriers), beside
    /// `attention_head_ns` per query head of the task. Absent in older profiles: 0.
    #[serde(default)]
    pub attention_task_ns: f64,
    /// What each query head of an attention task adds to `attention_task_ns`, at a head
    /// dimension of [`ATTENTION_HEAD_DIM`] (the measured shape's): a head's work (q·k over its
    /// dimension for every position, then the weighted sum of V) scales with its dimension.
    /// Absent in older profiles: 0.
    #[serde(default)]
    pub attention_head_ns: f64,
    /// Each KV chunk of an attention task after its first (the history past what its shared
    /// memory stages at once) is two dependent passes, K for the scores and V for the output:
    /// this round trip per pass, beside `attention_kv_ns_per_kib` for the chunk's rows. What
    /// makes a long context's attention grow. Absent in older profiles: 0 (no growth).
    #[serde(default)]
    pub attention_kv_pass_ns: f64,
    /// One SM loading a KV chunk's rows (its threads' 16-byte copies, one chunk in flight):
    /// ns per KiB of K (or V) rows in a pass. Absent in older profiles: 0.
    #[serde(default)]
    pub attention_kv_ns_per_kib: f64,
    /// One consumer warp's dot products over one weight page that has landed (~900
    /// instructions for 16 KiB: FFMA, bf16 conversions, shared-memory loads). A persistent
    /// instruction's consumer warps take its pages in turn once staged, each page no sooner
    /// than it landed, and the instruction ends with its last page's products: after a wait,
    /// the pages already in the ring cost this on the critical path. Absent in older
    /// profiles: 0.
    #[serde(default)]
    pub page_compute_ns: f64,
    /// The persistent producer's loop per weight page: the fewest ns between two pages its
    /// single thread hands to the consumers (the slot's barriers, the copy's descriptor). With
    /// weights a page's copy outlasts it; without (`MKC_ABLATE_WEIGHTS`, the ladder's chain
    /// rungs) the pages arrive at this pace (lease BN: spinning consumers did not move it, so
    /// it is the producer's). Absent: 0 (not measured on that card).
    #[serde(default)]
    pub page_loop_ns: f64,
    /// The O-projection's merge of split-KV partial records (attention split into several KV
    /// parts, `lowering.attention_kv_split`) after its wait, beyond their load: every part's
    /// record, the softmax weights, the merged input written for the page loop. Paid by an
    /// O-projection instruction (persistent) or CTA (chain) before its pages, where its input
    /// would otherwise be read in the page loop. Absent: 0 (not measured on that card).
    #[serde(default)]
    pub kv_merge_ns: f64,
    /// `page_compute_ns` for the pages whose loop runs on the tensor cores
    /// (`mkc_catalogue::tensor_core_shape`: 4-row pages of 2,048 columns, whatever the operator).
    /// `mkc probe pages` times that loop beside the FMA one. Absent: `page_compute_ns` (not
    /// measured on that card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_compute_mma_ns: Option<f64>,
    /// The load latency of a chain CTA (its first weight pages after it issues them, its
    /// activations after its release), where it is not `load_latency_ns`: a chain's grid
    /// boundaries drain the copies a persistent stream keeps queued, so the probe's figure
    /// behind 8 copies per SM over-charges it on some cards. Fitted on one measured chain
    /// step, not probed (docs/perf.md says which); absent: `load_latency_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_load_latency_ns: Option<f64>,
    /// A persistent instruction's release when the producer holds its next weight pages back
    /// at the boundary (`tuning.persistent_boundary_inflight` below the ring's slots): the
    /// stores' acknowledgement with no fresh copies queued ahead of it. Absent: `release_ns`
    /// (the hold does not shorten it on that card, or it was never measured there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_held_ns: Option<f64>,
    /// An L2 hit beside one bulk copy per SM (`mkc probe latency`): the near end of the line
    /// [`Latencies::load_latency_beside`] draws to `load_latency_ns`, from which a persistent
    /// instruction's activation reads take their latency by the copies its producer keeps in
    /// flight (one inside a boundary window held at 1). Absent:
    /// `load_latency_ns` whatever the copies (not probed there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_latency_held_ns: Option<f64>,
}

impl Latencies {
    /// Every latency term by its field name, mutable: what `mkc simulate --sensitivity` halves
    /// one at a time. `page_compute_mma_ns`, `chain_load_latency_ns`, `release_held_ns` and
    /// `load_latency_held_ns` are listed only where the profile sets them (absent, they follow
    /// `page_compute_ns`, `load_latency_ns` and `release_ns`).
    pub fn terms_mut(&mut self) -> Vec<(&'static str, &mut f64)> {
        let mut terms = vec![
            ("launch_gap_ns", &mut self.launch_gap_ns),
            ("pdl_wait_release_ns", &mut self.pdl_wait_release_ns),
            ("cta_admission_ns", &mut self.cta_admission_ns),
            ("signal_visible_ns", &mut self.signal_visible_ns),
            ("instruction_overhead_ns", &mut self.instruction_overhead_ns),
            ("load_latency_ns", &mut self.load_latency_ns),
            ("release_ns", &mut self.release_ns),
            ("attention_task_ns", &mut self.attention_task_ns),
            ("attention_head_ns", &mut self.attention_head_ns),
            ("attention_kv_pass_ns", &mut self.attention_kv_pass_ns),
            ("attention_kv_ns_per_kib", &mut self.attention_kv_ns_per_kib),
            ("page_compute_ns", &mut self.page_compute_ns),
            ("page_loop_ns", &mut self.page_loop_ns),
            ("kv_merge_ns", &mut self.kv_merge_ns),
        ];
        if let Some(v) = self.page_compute_mma_ns.as_mut() {
            terms.push(("page_compute_mma_ns", v));
        }
        if let Some(v) = self.chain_load_latency_ns.as_mut() {
            terms.push(("chain_load_latency_ns", v));
        }
        if let Some(v) = self.release_held_ns.as_mut() {
            terms.push(("release_held_ns", v));
        }
        if let Some(v) = self.load_latency_held_ns.as_mut() {
            terms.push(("load_latency_held_ns", v));
        }
        terms
    }

    /// The release a persistent instruction pays when the producer holds its copies at the
    /// boundary: `release_held_ns`, else `release_ns`.
    pub fn held_release(&self) -> f64 {
        self.release_held_ns.unwrap_or(self.release_ns)
    }

    /// The activation loads' latency beside one bulk copy per SM: `load_latency_held_ns`, else
    /// `load_latency_ns`.
    pub fn held_load_latency(&self) -> f64 {
        self.load_latency_held_ns.unwrap_or(self.load_latency_ns)
    }

    /// An L2 hit's latency while each SM keeps `copies` bulk copies of weight pages in flight:
    /// on the line from `load_latency_held_ns` at one copy to `load_latency_ns` at
    /// [`FULL_QUEUE_COPIES`], and `load_latency_ns` past it (the probe's furthest case). A
    /// persistent instruction's activation reads queue behind as many copies as its producer
    /// then keeps in flight: the boundary hold's inside the window, the stream cap's in the
    /// page loop. The H100 probe's cases between (683, 1,003, 1,319 and 1,726 ns beside 2, 3,
    /// 4 and 6 copies) lie within 10% of the line (docs/perf.md). Without
    /// `load_latency_held_ns`, `load_latency_ns` whatever the copies.
    pub fn load_latency_beside(&self, copies: u32) -> f64 {
        let (one, full) = (self.held_load_latency(), self.load_latency_ns);
        let span = f64::from(FULL_QUEUE_COPIES - 1);
        let along = f64::from(copies.clamp(1, FULL_QUEUE_COPIES) - 1) / span;
        one + (full - one) * along
    }

    /// One consumer warp's math over one landed page: `page_compute_mma_ns` where the page loop
    /// runs on the tensor cores and the profile has it, else `page_compute_ns`.
    pub fn page_compute(&self, tensor_cores: bool) -> f64 {
        match self.page_compute_mma_ns {
            Some(ns) if tensor_cores => ns,
            _ => self.page_compute_ns,
        }
    }

    /// The load latency the chain model charges: `chain_load_latency_ns`, else
    /// `load_latency_ns`.
    pub fn chain_load_latency(&self) -> f64 {
        self.chain_load_latency_ns.unwrap_or(self.load_latency_ns)
    }
}

/// The bulk copies of 16 KiB per SM in flight beside which `mkc probe latency` measures
/// `load_latency_ns`, as the operators' rings keep them: the far end of
/// [`Latencies::load_latency_beside`]'s line.
pub const FULL_QUEUE_COPIES: u32 = 8;

/// The head dimension `attention_head_ns` is given at (Llama-3.2-1B's, where it was measured).
pub const ATTENTION_HEAD_DIM: u32 = 64;

/// Some SMs of a card stream faster than the others when all stream: `count` of them at
/// `speedup` times the others' rate (`mkc probe sm-speeds`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastSms {
    /// How many SMs are fast.
    pub count: u32,
    /// Their rate over the others' (at least 1).
    pub speedup: f64,
}

/// Accepted `fast_sms.speedup` (a faster SM, at most 4x: the probe measured 1.3-1.5x).
pub const SPEEDUP_RANGE: (f64, f64) = (1.0, 4.0);

/// Everything mkc knows about one GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    /// Short name (`h200`).
    pub name: String,
    /// Architecture.
    pub arch: Arch,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Sustained streaming read bandwidth in GB/s (10^9 bytes per second).
    pub read_bandwidth_gbps: f64,
    /// Most one SM can stream on its own, GB/s (bounds a lone SM's share of the bandwidth).
    pub sm_read_bandwidth_gbps: f64,
    /// SMs that stream faster than the rest while all stream (`mkc probe sm-speeds`: whole
    /// TPCs, fixed by where they sit). Absent: every SM streams alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_sms: Option<FastSms>,
    /// Resource limits.
    pub limits: Limits,
    /// Latencies.
    pub latencies: Latencies,
    /// The kernels' knobs measured best on this card, used wherever a model's `tuning` leaves
    /// them unset ([`crate::model::Tuning::or_card`]): one layout can want different knobs on
    /// two cards (the persistent boundary limit gains 58 us per step on an H100 and loses 15-20
    /// on an H200, docs/perf.md). Numeric knobs only.
    #[serde(default, skip_serializing_if = "crate::model::Tuning::is_default")]
    pub tuning: crate::model::Tuning,
}

impl DeviceProfile {
    /// Parses and checks a device profile; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<DeviceProfile, InputError> {
        let d: DeviceProfile = ron::from_str(text)
            .map_err(|e| InputError::from_ron(crate::FileKind::Device, file, text, &e))?;
        d.validate(file)?;
        Ok(d)
    }

    /// Checks every field (a profile file's, or one embedded in a schedule); `file` names it.
    pub fn validate(&self, file: &str) -> Result<(), InputError> {
        if !(SMS_RANGE.0..=SMS_RANGE.1).contains(&self.sms) {
            return Err(InputError::invalid(
                file,
                "sms",
                format!("{} SMs is out of range", self.sms),
                format!(
                    "use the device's multiprocessor count ({}..{})",
                    SMS_RANGE.0, SMS_RANGE.1
                ),
            ));
        }
        check_bandwidth(
            file,
            "read_bandwidth_gbps",
            self.read_bandwidth_gbps,
            "give the measured streaming read bandwidth in GB/s, e.g. 4500.0",
        )?;
        check_bandwidth(
            file,
            "sm_read_bandwidth_gbps",
            self.sm_read_bandwidth_gbps,
            "give what one SM streams alone in GB/s, e.g. 68.0",
        )?;
        let l = &self.latencies;
        for (field, v) in [
            ("latencies.launch_gap_ns", l.launch_gap_ns),
            ("latencies.pdl_wait_release_ns", l.pdl_wait_release_ns),
            ("latencies.cta_admission_ns", l.cta_admission_ns),
            ("latencies.signal_visible_ns", l.signal_visible_ns),
            (
                "latencies.instruction_overhead_ns",
                l.instruction_overhead_ns,
            ),
            ("latencies.load_latency_ns", l.load_latency_ns),
            ("latencies.release_ns", l.release_ns),
            ("latencies.attention_task_ns", l.attention_task_ns),
            ("latencies.attention_head_ns", l.attention_head_ns),
            ("latencies.attention_kv_pass_ns", l.attention_kv_pass_ns),
            (
                "latencies.attention_kv_ns_per_kib",
                l.attention_kv_ns_per_kib,
            ),
            ("latencies.page_compute_ns", l.page_compute_ns),
            ("latencies.page_loop_ns", l.page_loop_ns),
            ("latencies.kv_merge_ns", l.kv_merge_ns),
            ("latencies.page_compute_mma_ns", l.page_compute(true)),
            ("latencies.chain_load_latency_ns", l.chain_load_latency()),
            ("latencies.release_held_ns", l.held_release()),
            ("latencies.load_latency_held_ns", l.held_load_latency()),
        ] {
            check_latency(file, field, v)?;
        }
        if let Some(f) = self.fast_sms {
            if !(1..=self.sms).contains(&f.count) {
                return Err(InputError::invalid(
                    file,
                    "fast_sms.count",
                    format!("{} fast SMs of {} is out of range", f.count, self.sms),
                    format!(
                        "give how many SMs `mkc probe sm-speeds` shows fast (1..{})",
                        self.sms
                    ),
                ));
            }
            let (lo, hi) = SPEEDUP_RANGE;
            if !(f.speedup.is_finite() && (lo..=hi).contains(&f.speedup)) {
                return Err(InputError::invalid(
                    file,
                    "fast_sms.speedup",
                    format!("{} is outside {lo} to {hi}", f.speedup),
                    "give the fast SMs' rate over the others' from `mkc probe sm-speeds`, e.g. 1.3",
                ));
            }
        }
        self.validate_limits(file)
    }

    /// The limits must describe an SM the occupancy rule can use: whole warps, register files
    /// split into four sub-partitions of 256-register units, and a shared-memory capacity that
    /// is one of the architecture's carveouts.
    fn validate_limits(&self, file: &str) -> Result<(), InputError> {
        let l = &self.limits;
        let range = |field: &str, v: u32, lo: u32, hi: u32, multiple: u32| {
            if v < lo || v > hi || !v.is_multiple_of(multiple) {
                let unit = if multiple > 1 {
                    format!(", a multiple of {multiple}")
                } else {
                    String::new()
                };
                return Err(InputError::invalid(
                    file,
                    format!("limits.{field}"),
                    format!("{v} is out of range"),
                    format!("use the driver's value ({lo}..{hi}{unit})"),
                ));
            }
            Ok(())
        };
        range("registers_per_sm", l.registers_per_sm, 1024, 1 << 20, 1024)?;
        range("threads_per_sm", l.threads_per_sm, 32, 4096, 32)?;
        range("ctas_per_sm", l.ctas_per_sm, 1, 64, 1)?;
        range(
            "threads_per_block",
            l.threads_per_block,
            32,
            l.threads_per_sm,
            32,
        )?;
        range("registers_per_thread", l.registers_per_thread, 1, 255, 1)?;
        range(
            "smem_reserved_per_cta",
            l.smem_reserved_per_cta,
            0,
            65536,
            1,
        )?;
        crate::validate::check_tuning(&self.tuning, file)?;
        if self.tuning.kernels_cu.is_some() {
            return Err(InputError::invalid(
                file,
                "tuning.kernels_cu",
                "a device profile cannot replace the kernels' source",
                "give the CUDA file in the model's tuning or with --tune instead",
            ));
        }
        let carveouts = self.arch.carveouts_kib();
        if !carveouts
            .iter()
            .any(|&k| k > 0 && k * 1024 == l.smem_per_sm)
        {
            let sizes: Vec<String> = carveouts.iter().map(|k| (k * 1024).to_string()).collect();
            return Err(InputError::invalid(
                file,
                "limits.smem_per_sm",
                format!(
                    "{} B is not a shared-memory capacity of {}",
                    l.smem_per_sm,
                    self.arch.name()
                ),
                format!("use one of {}", sizes.join(", ")),
            ));
        }
        range(
            "smem_per_block_optin",
            l.smem_per_block_optin,
            0,
            l.smem_per_sm,
            1,
        )
    }

    /// Bytes per nanosecond one SM streams when all SMs stream together.
    pub fn per_sm_bytes_per_ns(&self) -> f64 {
        self.read_bandwidth_gbps / self.sms as f64
    }

    /// SM `sm`'s streaming rate against the mean of the card's `sms` SMs while all stream:
    /// the `fast_sms` are spread evenly over the SM indices (which ones does not matter to a
    /// schedule whose streams are dealt in order), the rest share what they leave.
    pub fn sm_speed(&self, sm: u32, sms: u32) -> f64 {
        let Some(f) = self.fast_sms.filter(|f| f.count < sms) else {
            return 1.0;
        };
        let slow = sms as f64 / (sms as f64 + f.count as f64 * (f.speedup - 1.0));
        let fast = (sm as u64 * f.count as u64) % (sms as u64) < (f.count as u64);
        if fast {
            slow * f.speedup
        } else {
            slow
        }
    }

    /// The same profile with a different SM count (the `--sms` override); its fast SMs keep
    /// their proportion of the card (none where that rounds to none or to all).
    pub fn with_sms(mut self, sms: u32) -> DeviceProfile {
        self.fast_sms = self.fast_sms.and_then(|f| {
            let count = (f.count as f64 * sms as f64 / self.sms as f64).round() as u32;
            (1..sms).contains(&count).then_some(FastSms { count, ..f })
        });
        self.sms = sms;
        self
    }
}

/// Checks a bandwidth in GB/s against [`BANDWIDTH_RANGE_GBPS`]; `field` names it (a profile
/// field, a sweep knob or a flag).
pub fn check_bandwidth(file: &str, field: &str, v: f64, fix: &str) -> Result<(), InputError> {
    let (lo, hi) = BANDWIDTH_RANGE_GBPS;
    if !(v.is_finite() && (lo..=hi).contains(&v)) {
        return Err(InputError::invalid(
            file,
            field,
            format!("{v} GB/s is outside {lo} to {hi:e}"),
            fix,
        ));
    }
    Ok(())
}

/// Checks a latency in ns against `0..=`[`MAX_LATENCY_NS`].
pub fn check_latency(file: &str, field: &str, v: f64) -> Result<(), InputError> {
    if !(v.is_finite() && (0.0..=MAX_LATENCY_NS).contains(&v)) {
        return Err(InputError::invalid(
            file,
            field,
            format!("{v} is not a latency from 0 to {MAX_LATENCY_NS:e} ns"),
            "give the latency in nanoseconds",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FastSms;

    /// The SMs' speeds average one (the card's bandwidth is the measured total), the fast ones
    /// are `speedup` times the rest and there are `count` of them; `--sms` keeps their
    /// proportion, and a card with none or all fast streams alike.
    #[test]
    fn sm_speeds_average_one_and_keep_their_proportion() {
        let mut d = crate::embedded::resolve_device("h100").unwrap();
        d.fast_sms = Some(FastSms {
            count: 12,
            speedup: 1.5,
        });
        for sms in [132, 66, 13] {
            let d = d.clone().with_sms(sms);
            let speeds: Vec<f64> = (0..sms).map(|sm| d.sm_speed(sm, sms)).collect();
            let mean = speeds.iter().sum::<f64>() / sms as f64;
            assert!((mean - 1.0).abs() < 1e-9, "{sms}: mean {mean}");
            let slow = speeds.iter().cloned().fold(f64::INFINITY, f64::min);
            let fast: Vec<&f64> = speeds.iter().filter(|&&v| v > slow * 1.01).collect();
            let expected = (12.0 * sms as f64 / 132.0).round() as usize;
            assert_eq!(fast.len(), expected, "{sms} SMs");
            assert!(fast.iter().all(|&&v| (v / slow - 1.5).abs() < 1e-9));
        }
        assert_eq!(
            d.clone().with_sms(5).fast_sms,
            None,
            "12 of 132 rounds to none of 5"
        );
        d.fast_sms = None;
        assert_eq!(d.sm_speed(0, 132), 1.0);
    }
}
