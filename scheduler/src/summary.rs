//! The compile summary: the figures `mkc compile` prints as a table or as one JSON object.

use serde::Serialize;

use mkc_ir::OpKind;

use crate::schedule::{EdgeSync, Plan, Schedule};

/// Counts of grid-to-grid edges by kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EdgeCounts {
    /// Programmatic (PDL) edges.
    pub programmatic: u32,
    /// Ordinary full-completion edges.
    pub full: u32,
}

/// Fewest and most instructions on one SM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MinMax {
    /// Fewest.
    pub min: u32,
    /// Most.
    pub max: u32,
}

/// A policy's cost-model makespan and its gap to the lower bound.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyEstimate {
    /// Policy name.
    pub policy: String,
    /// Cost-model makespan of one step, microseconds.
    pub makespan_us: f64,
    /// `(makespan - bound) / bound`.
    pub gap: f64,
}

/// Tasks and weight bytes of one operator kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpKindRow {
    /// Operator kind.
    pub kind: String,
    /// Operators of that kind.
    pub ops: u32,
    /// Tasks per operator.
    pub tasks_per_op: u32,
    /// Weight bytes over all operators of that kind.
    pub weight_bytes: u64,
    /// The grid every operator of that kind launches (chain targets only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid: Option<GridRow>,
}

/// One operator kind's grid as the chain plan launches it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GridRow {
    /// Kernel entry point.
    pub entry: String,
    /// CTAs.
    pub ctas: u32,
    /// Most tasks one CTA runs.
    pub tasks_per_cta: u32,
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static plus dynamic shared memory per CTA, bytes.
    pub smem_bytes: u32,
    /// `declared` (the catalogue's) or `compiled` (NVRTC's) registers and static memory.
    pub resources: String,
}

/// The persistent kernel's CTA as the plan declares it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PersistentKernelRow {
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Shared memory per CTA, bytes.
    pub smem_bytes: u32,
    /// `declared` (the model file's `lowering.kernel`) or `compiled` (NVRTC's `k_persistent`).
    pub resources: String,
}

/// Everything `mkc compile` reports about a schedule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Target name.
    pub target: String,
    /// Policy name (persistent only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Model name.
    pub model: String,
    /// Device name.
    pub device: String,
    /// Operators.
    pub operators: u32,
    /// Tasks.
    pub tasks: u32,
    /// Kernels launched per step (1 for persistent).
    pub kernels: u32,
    /// SMs.
    pub sms: u32,
    /// Weight bytes read per decode step.
    pub weight_bytes: u64,
    /// Grid-to-grid edges.
    pub edges: EdgeCounts,
    /// Instructions per SM (persistent only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions_per_sm: Option<MinMax>,
    /// The persistent kernel's CTA (persistent only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_kernel: Option<PersistentKernelRow>,
    /// Total ready counters (VTP shards over all synchronised edges).
    pub vtp_shards: u32,
    /// Per operator kind.
    pub op_kinds: Vec<OpKindRow>,
    /// Cost-model lower bound of the persistent makespan, microseconds (persistent only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound_us: Option<f64>,
    /// Cost-model estimates of the policies computed (persistent only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<PolicyEstimate>,
}

impl Summary {
    /// Summarises `schedule`; `estimates` and `bound_ns` come from the compile report.
    pub fn new(schedule: &Schedule, bound_ns: Option<f64>, estimates: Vec<PolicyEstimate>) -> Self {
        let g = &schedule.graph;
        let persistent_kernel = schedule.persistent().map(|p| PersistentKernelRow {
            threads: p.resources.threads,
            registers: p.resources.registers,
            smem_bytes: p.resources.dynamic_smem_bytes,
            resources: match p.source {
                mkc_catalogue::ResourceSource::Declared => "declared".into(),
                mkc_catalogue::ResourceSource::Compiled => "compiled".into(),
            },
        });
        let (kernels, edges, instructions_per_sm) = match &schedule.plan {
            Plan::Persistent(p) => {
                let lens = p.streams.iter().map(|s| s.len() as u32);
                let mm = MinMax {
                    min: lens.clone().min().unwrap_or(0),
                    max: lens.max().unwrap_or(0),
                };
                let none = EdgeCounts {
                    programmatic: 0,
                    full: 0,
                };
                (1, none, Some(mm))
            }
            Plan::Chain(c) => {
                let count = |kind| {
                    c.kernels
                        .iter()
                        .filter(|k| k.incoming == Some(kind))
                        .count()
                };
                let edges = EdgeCounts {
                    programmatic: count(EdgeSync::Programmatic) as u32,
                    full: count(EdgeSync::Full) as u32,
                };
                (c.kernels.len() as u32, edges, None)
            }
        };
        let mut op_kinds: Vec<OpKindRow> = Vec::new();
        for kind in [
            OpKind::QkvRope,
            OpKind::Attention,
            OpKind::OProj,
            OpKind::UpGate,
            OpKind::Down,
            OpKind::LmHead,
        ] {
            let ops: Vec<_> = g.ops.iter().filter(|o| o.kind == kind).collect();
            if let Some(first) = ops.first() {
                op_kinds.push(OpKindRow {
                    kind: kind.name().to_string(),
                    ops: ops.len() as u32,
                    tasks_per_op: first.tasks,
                    weight_bytes: ops
                        .iter()
                        .flat_map(|o| g.tasks_of(o.id))
                        .map(|t| t.cost.weight_bytes)
                        .sum(),
                    grid: schedule.chain().and_then(|c| {
                        let k = c.kernels.iter().find(|k| k.op == first.id)?;
                        Some(GridRow {
                            entry: k.entry.clone(),
                            ctas: k.ctas,
                            tasks_per_cta: k.runs.iter().map(|r| r[1]).max().unwrap_or(0),
                            threads: k.threads,
                            registers: k.registers,
                            smem_bytes: k.static_smem_bytes + k.dynamic_smem_bytes,
                            resources: match k.resources {
                                mkc_catalogue::ResourceSource::Declared => "declared".into(),
                                mkc_catalogue::ResourceSource::Compiled => "compiled".into(),
                            },
                        })
                    }),
                });
            }
        }
        Summary {
            target: schedule.target.name().to_string(),
            policy: schedule.policy.map(|p| p.name().to_string()),
            model: g.model.clone(),
            device: schedule.device.name.clone(),
            operators: g.ops.len() as u32,
            tasks: g.tasks.len() as u32,
            kernels,
            sms: schedule.device.sms,
            weight_bytes: g.task_weight_bytes(),
            edges,
            instructions_per_sm,
            persistent_kernel,
            vtp_shards: g.counters.len() as u32,
            op_kinds,
            lower_bound_us: bound_ns.map(|b| b / 1e3),
            estimates,
        }
    }

    /// A readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let policy = self
            .policy
            .as_deref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default();
        s += &format!(
            "mkc compile: {} -> {}{} on {} ({} SMs)\n",
            self.model, self.target, policy, self.device, self.sms
        );
        s += &format!(
            "  operators {}   tasks {}   kernels/step {}   ready counters {}\n",
            self.operators, self.tasks, self.kernels, self.vtp_shards
        );
        s += &format!(
            "  weight bytes/step {} ({:.3} GB)\n",
            self.weight_bytes,
            self.weight_bytes as f64 / 1e9
        );
        if self.kernels > 1 {
            s += &format!(
                "  grid edges: {} programmatic, {} full\n",
                self.edges.programmatic, self.edges.full
            );
        }
        if let Some(mm) = &self.instructions_per_sm {
            s += &format!("  instructions per SM: min {}, max {}\n", mm.min, mm.max);
        }
        if let Some(k) = &self.persistent_kernel {
            s += &format!(
                "  persistent kernel CTA: {} threads, {} registers, {} B shared memory: {}\n",
                k.threads,
                k.registers,
                k.smem_bytes,
                if k.resources == "compiled" {
                    "compiled k_persistent (NVRTC)"
                } else {
                    "declared by the model file's lowering.kernel (not compiled: `--resources compiled` says why)"
                }
            );
        }
        let grids = self.op_kinds.iter().any(|r| r.grid.is_some());
        s += "\n  operator     ops  tasks/op   weight MB";
        s += if grids {
            "   grid: kernel        CTAs  tasks/CTA  threads  regs  smem B\n"
        } else {
            "\n"
        };
        for r in &self.op_kinds {
            s += &format!(
                "  {:<11} {:>4} {:>9} {:>11.1}",
                r.kind,
                r.ops,
                r.tasks_per_op,
                r.weight_bytes as f64 / 1e6
            );
            if let Some(k) = &r.grid {
                s += &format!(
                    "         {:<13} {:>5} {:>10} {:>8} {:>5} {:>7}",
                    k.entry, k.ctas, k.tasks_per_cta, k.threads, k.registers, k.smem_bytes
                );
            }
            s += "\n";
        }
        if let Some(k) = self.op_kinds.iter().find_map(|r| r.grid.as_ref()) {
            s += &format!(
                "  grid registers and static shared memory: {}\n",
                if k.resources == "compiled" {
                    "compiled (NVRTC)"
                } else {
                    "declared by the operator catalogue (not compiled: `--resources compiled` says why)"
                }
            );
        }
        if let Some(lb) = self.lower_bound_us {
            s += &format!("\n  cost-model lower bound: {lb:.1} us/step\n");
            s += "  policy        makespan us   gap to bound\n";
            for e in &self.estimates {
                s += &format!(
                    "  {:<13} {:>11.1} {:>13.1}%\n",
                    e.policy,
                    e.makespan_us,
                    e.gap * 100.0
                );
            }
        }
        s
    }
}
