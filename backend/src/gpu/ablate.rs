//! Capturing a chain with an ablation build of the operators (`mkc bench --ablate`): the same
//! schedule, grids and launch attributes as the full chain, only the kernels' code differs.

use mkc_ir::OpKind;
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
        let plan = schedule.chain().ok_or_else(|| {
            BackendError::Unsupported("ablation builds run the graph and pdl targets only".into())
        })?;
        if plan.kernels.iter().any(|k| k.then.is_some()) {
            return Err(BackendError::Unsupported(
                "--ablate measures the per-op chain (one grid per operator); drop --grids".into(),
            ));
        }
        if !self.ablated.iter().any(|(a, _, _)| *a == ablation) {
            let compiled = kernels::compile_with_defines("sm_90a", &ablation.defines())?;
            let (module, funcs) =
                load_operators(&compiled.cubin, &self.model, self._gpu.sms as u32)?;
            self.ablated.push((ablation, module, funcs));
        }
        let funcs = &self
            .ablated
            .iter()
            .find(|(a, _, _)| *a == ablation)
            .expect("loaded")
            .2;
        if ablation.loads {
            self.check_ablated_inputs_fit(funcs)?;
        }
        self.capture_with(schedule, funcs, |_| 0)
    }

    /// Without its loads, an O-projection or down CTA multiplies by whatever its shared memory
    /// holds where the input vector would be staged: that span must lie inside the CTA's
    /// dynamic shared memory (it does for every model whose vector fits beside the ring).
    fn check_ablated_inputs_fit(&self, funcs: &[super::OpFn]) -> Result<(), BackendError> {
        for &((kind, then), _, smem) in funcs {
            let floats = match (kind, then) {
                (OpKind::OProj, None) => self.model.q_dim() as usize,
                (OpKind::Down, None) => self.model.geometry.intermediate as usize,
                _ => continue,
            };
            if kernels::STREAM_X_OFFSET as usize + 4 * floats > smem as usize {
                return Err(BackendError::Unsupported(format!(
                    "--ablate loads: the {kind:?} input vector ({floats} floats) is larger than \
                     its CTA's shared memory ({smem} B), so this model cannot be ablated. Fix: run \
                     without --ablate"
                )));
            }
        }
        Ok(())
    }
}
