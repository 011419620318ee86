//! Capturing a step with an ablation build of the operators (`mkc bench --ablate`): the same
//! schedule, grids (or persistent plan) and launch attributes as the full step, only the
//! kernels' code differs.

use mkc_scheduler::Schedule;

use super::launch::StepGraph;
use super::setup::load_operators;
use super::Runner;
use crate::ablation::Ablation;
use crate::error::BackendError;
use crate::kernels;

impl Runner {
    /// Captures one decode step of `schedule` (a per-op chain) with the kernels of `ablation`,
    /// compiling and loading that build on first use.
    pub fn capture_ablated(
        &mut self,
        schedule: &Schedule,
        ablation: Ablation,
    ) -> Result<StepGraph, BackendError> {
        if schedule.persistent().is_some() {
            // The persistent kernel's rung: its own build with the same removals (its counter
            // waits are what MKC_ABLATE_WAITS compiles out there).
            return self.capture_persistent_with(schedule, &ablation.defines(), 0);
        }
        if !ablation.applies_to(false) {
            return Err(BackendError::Unsupported(format!(
                "the ablation `{}` is the persistent kernel's alone (a chain grid's ring is new at \
                 every launch); run it with --targets persistent",
                ablation.label()
            )));
        }
        let i = match self.ablated.iter().position(|(a, _, _)| *a == ablation) {
            Some(i) => i,
            None => {
                let compiled =
                    kernels::compile_with_defines("sm_90a", &self.model, &ablation.defines())?;
                let (module, funcs) = load_operators(&compiled.cubin, &self.model)?;
                self.ablated.push((ablation, module, funcs));
                self.ablated.len() - 1
            }
        };
        let funcs = &self.ablated[i].2;
        self.capture_with(schedule, funcs, |_| 0)
    }
}
