//! mkc's scheduler: turns a task graph into a schedule for one target.
//!
//! Entry point: [`compile`]. The persistent target assigns tasks to SMs with a [`Policy`]
//! (every policy yields an [`assignment::Assignment`], turned into streams by one function);
//! the chain targets (`pdl`, `graph`) lay grids out in operator order ([`chain`]). Every
//! schedule can be re-verified by the independent [`check`]er, and [`exec`] runs a persistent
//! schedule on CPU threads with real atomic counters.

pub mod assignment;
pub mod chain;
pub mod check;
pub mod cost;
pub mod exec;
pub mod policy;
pub mod schedule;
mod structure;
pub mod summary;

use mkc_ir::device::DeviceProfile;
use mkc_ir::{lower, Model, TaskGraph};

pub use policy::ilp::{IlpOptions, IlpReport};
pub use schedule::{Plan, Policy, Schedule, Target, Trigger};

use crate::assignment::Assignment;
use crate::cost::CostModel;
use crate::summary::{PolicyEstimate, Summary};

/// What to compile.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Target.
    pub target: Target,
    /// Assignment policy (persistent target).
    pub policy: Policy,
    /// Trigger placement (`pdl` target).
    pub trigger: Trigger,
    /// Budgets of the ILP policy.
    pub ilp: IlpOptions,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            target: Target::Persistent,
            policy: Policy::RoundRobin,
            trigger: Trigger::Early,
            ilp: IlpOptions::default(),
        }
    }
}

/// A schedule and what was learnt building it.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The schedule.
    pub schedule: Schedule,
    /// Its summary.
    pub summary: Summary,
    /// The ILP report, when the ILP policy ran.
    pub ilp: Option<IlpReport>,
}

/// Lowers `model` (for a chain target, its [`Model::for_chain`]) and schedules it for
/// `device`; the schedule embeds the model it lowered.
pub fn compile(model: &Model, device: &DeviceProfile, options: &CompileOptions) -> Compiled {
    if options.target != Target::Persistent && model.lowering.persistent_only() {
        return compile(&model.for_chain(), device, options);
    }
    let graph = lower::lower(model);
    schedule_graph(graph, model, device, options)
}

/// Schedules an already lowered graph.
pub fn schedule_graph(
    graph: TaskGraph,
    model: &Model,
    device: &DeviceProfile,
    options: &CompileOptions,
) -> Compiled {
    let sms = device.sms as usize;
    let mut ilp = None;
    let mut bound = None;
    let mut estimates = Vec::new();
    let (policy, plan) = match options.target {
        Target::Persistent => {
            let cost = CostModel::new(&graph, device);
            let (assignment, report) = assign(&graph, &cost, sms, options.policy, &options.ilp);
            ilp = report;
            // The streams and the cost-model figures (bound, estimates) are independent: the
            // two run side by side.
            let (plan, (lb, policy_estimates)) = std::thread::scope(|scope| {
                let plan = scope.spawn(|| assignment.to_plan(&graph, sms, &model.lowering.kernel));
                let lb = cost::lower_bound(&graph, &cost, sms);
                // The ILP policy is compared against the heuristics; others report themselves.
                let compared: Vec<(Policy, Assignment)> = if options.policy == Policy::Ilp {
                    vec![
                        (Policy::RoundRobin, policy::round_robin::assign(&graph, sms)),
                        (Policy::List, policy::list::assign(&graph, &cost, sms)),
                    ]
                } else {
                    Vec::new()
                };
                let estimates: Vec<PolicyEstimate> = compared
                    .iter()
                    .map(|(p, a)| (*p, a))
                    .chain(std::iter::once((options.policy, &assignment)))
                    .map(|(p, a)| {
                        let makespan = cost::evaluate(&graph, &cost, a, sms).makespan_ns;
                        PolicyEstimate {
                            policy: p.name().to_string(),
                            makespan_us: makespan / 1e3,
                            gap: (makespan - lb) / lb,
                        }
                    })
                    .collect();
                let plan = plan.join().expect("the stream builder panicked");
                (plan, (lb, estimates))
            });
            estimates = policy_estimates;
            bound = Some(lb);
            (Some(options.policy), Plan::Persistent(plan))
        }
        Target::Pdl => (
            None,
            Plan::Chain(chain::plan(
                &graph,
                model,
                device.sms,
                true,
                options.trigger,
            )),
        ),
        Target::Graph => (
            None,
            Plan::Chain(chain::plan(
                &graph,
                model,
                device.sms,
                false,
                options.trigger,
            )),
        ),
    };
    let schedule = Schedule {
        mkc_version: env!("CARGO_PKG_VERSION").to_string(),
        target: options.target,
        policy,
        device: device.clone(),
        model: Some(model.clone()),
        tuning: model.tuning.clone(),
        graph,
        plan,
    };
    let summary = Summary::new(&schedule, bound, estimates);
    Compiled {
        schedule,
        summary,
        ilp,
    }
}

/// Runs one persistent policy.
pub fn assign(
    graph: &TaskGraph,
    cost: &CostModel,
    sms: usize,
    policy: Policy,
    ilp: &IlpOptions,
) -> (Assignment, Option<IlpReport>) {
    match policy {
        Policy::RoundRobin => (policy::round_robin::assign(graph, sms), None),
        Policy::List => (policy::list::assign(graph, cost, sms), None),
        Policy::Ilp => {
            let (a, r) = policy::ilp::assign(graph, cost, sms, ilp);
            (a, Some(r))
        }
    }
}
