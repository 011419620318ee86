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

    /// Parses `sm_90`, `sm_90a`, `90` and the like.
    pub fn parse(text: &str) -> Option<Arch> {
        let digits = text.trim_start_matches("sm_").trim_end_matches('a');
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
    /// One intra-CTA barrier.
    pub barrier_ns: f64,
    /// Fixed cost of one persistent instruction (decode, setup, first-load latency).
    pub instruction_overhead_ns: f64,
}

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
    /// SM clock in MHz.
    pub sm_clock_mhz: u32,
    /// Sustained streaming read bandwidth in GB/s (10^9 bytes per second).
    pub read_bandwidth_gbps: f64,
    /// Most one SM can stream on its own, GB/s (bounds a lone SM's share of the bandwidth).
    pub sm_read_bandwidth_gbps: f64,
    /// Resource limits.
    pub limits: Limits,
    /// Latencies.
    pub latencies: Latencies,
}

impl DeviceProfile {
    /// Parses and checks a device profile; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<DeviceProfile, InputError> {
        let d: DeviceProfile = ron::from_str(text).map_err(|e| InputError::from_ron(file, &e))?;
        d.validate(file)?;
        Ok(d)
    }

    fn validate(&self, file: &str) -> Result<(), InputError> {
        if self.sms == 0 || self.sms > 4096 {
            return Err(InputError::invalid(
                file,
                "sms",
                format!("{} SMs is out of range", self.sms),
                "use the device's multiprocessor count (1..4096)",
            ));
        }
        if !(self.read_bandwidth_gbps.is_finite() && self.read_bandwidth_gbps > 0.0) {
            return Err(InputError::invalid(
                file,
                "read_bandwidth_gbps",
                format!("{} is not a positive bandwidth", self.read_bandwidth_gbps),
                "give the measured streaming read bandwidth in GB/s, e.g. 4500.0",
            ));
        }
        if !(self.sm_read_bandwidth_gbps.is_finite() && self.sm_read_bandwidth_gbps > 0.0) {
            return Err(InputError::invalid(
                file,
                "sm_read_bandwidth_gbps",
                format!(
                    "{} is not a positive bandwidth",
                    self.sm_read_bandwidth_gbps
                ),
                "give what one SM streams alone in GB/s, e.g. 68.0",
            ));
        }
        let l = &self.latencies;
        for (field, v) in [
            ("latencies.launch_gap_ns", l.launch_gap_ns),
            ("latencies.pdl_wait_release_ns", l.pdl_wait_release_ns),
            ("latencies.cta_admission_ns", l.cta_admission_ns),
            ("latencies.signal_visible_ns", l.signal_visible_ns),
            ("latencies.barrier_ns", l.barrier_ns),
            (
                "latencies.instruction_overhead_ns",
                l.instruction_overhead_ns,
            ),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(InputError::invalid(
                    file,
                    field,
                    format!("{v} is not a non-negative latency"),
                    "give the latency in nanoseconds",
                ));
            }
        }
        Ok(())
    }

    /// Bytes per nanosecond one SM streams when all SMs stream together.
    pub fn per_sm_bytes_per_ns(&self) -> f64 {
        self.read_bandwidth_gbps / self.sms as f64
    }

    /// The same profile with a different SM count (the `--sms` override).
    pub fn with_sms(mut self, sms: u32) -> DeviceProfile {
        self.sms = sms;
        self
    }
}
