//! Ablation builds of the operator kernels: the step with one kind of dependent work removed,
//! so that `mkc bench --ablate` can say what each kind costs (the difference to the full step,
//! measured side by side in one process) and `mkc simulate --ablate` can predict the same
//! rungs. One description for both: the backend builds the kernels from it, the simulator
//! removes the same work from its timelines.
//!
//! An ablated build computes meaningless values by design: it is timed, never checked. They are
//! finite (a NaN-filled chain measured ~20 µs slower per step). The default build contains none
//! of this (the source's `MKC_ABLATE_*` blocks compile only when defined).

use serde::{Deserialize, Serialize};

/// Which kinds of dependent work an ablated build skips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ablation {
    /// Attention grids only wait for their predecessor, write zeros and exit.
    pub attention: bool,
    /// Streaming operators skip their activation inputs: no prepare (embedding, split-K sums,
    /// RMSNorm), and a constant input vector instead of the slices they read.
    pub loads: bool,
    /// No grid waits for its predecessor (`griddepcontrol.wait` is compiled out): what is left
    /// is weight streaming and the CTA turnover at each grid boundary.
    pub waits: bool,
    /// The matvec consumers take each weight page from the ring and free its slot without
    /// computing its dot products (every row sum is zero): what is left is the weight stream,
    /// its ring and the grid or instruction boundaries, and what the page math costs shows.
    #[serde(default)]
    pub compute: bool,
    /// The persistent kernel streams no weights: each page lands as soon as its ring slot is
    /// free (the producer arrives on its barrier without a copy; the ring is zeroed at the
    /// kernel's start and the boundary hold has nothing to hold), so what is left is the step's
    /// dependency chain (waits, activation loads, page math, releases) at unbounded bandwidth: the term that
    /// binds on a card whose stream is faster than that chain (the H200), measurable on any
    /// card. Not a chain rung: a chain grid's ring is new at every launch, so it has no zeroed
    /// ring to compute on ([`Ablation::applies_to`]).
    #[serde(default)]
    pub weights: bool,
}

impl Ablation {
    /// The rungs `mkc bench --ablate` measures, each against the full chain: each kind alone,
    /// then removed together, then with the grid waits gone as well, then with the page math
    /// gone too (the weight stream alone); then its complement, the dependency chain alone (no
    /// weights: the persistent target's rungs), and that chain with each kind of its work
    /// removed in turn and last with all of it, so that the chain's time is split as the
    /// step's is (what binds on a card whose stream outruns the chain).
    pub const LADDER: [Ablation; 11] = [
        Ablation {
            attention: true,
            loads: false,
            waits: false,
            compute: false,
            weights: false,
        },
        Ablation {
            attention: false,
            loads: true,
            waits: false,
            compute: false,
            weights: false,
        },
        Ablation {
            attention: false,
            loads: false,
            waits: false,
            compute: true,
            weights: false,
        },
        Ablation {
            attention: true,
            loads: true,
            waits: false,
            compute: false,
            weights: false,
        },
        Ablation {
            attention: true,
            loads: true,
            waits: true,
            compute: false,
            weights: false,
        },
        Ablation {
            attention: true,
            loads: true,
            waits: true,
            compute: true,
            weights: false,
        },
        Ablation {
            attention: false,
            loads: false,
            waits: false,
            compute: false,
            weights: true,
        },
        Ablation {
            attention: true,
            loads: false,
            waits: false,
            compute: false,
            weights: true,
        },
        Ablation {
            attention: false,
            loads: true,
            waits: false,
            compute: false,
            weights: true,
        },
        Ablation {
            attention: false,
            loads: false,
            waits: false,
            compute: true,
            weights: true,
        },
        Ablation {
            attention: true,
            loads: true,
            waits: true,
            compute: true,
            weights: true,
        },
    ];

    /// The preprocessor defines that select this build (none for the default build).
    pub fn defines(&self) -> Vec<(&'static str, u32)> {
        [
            (self.attention, "MKC_ABLATE_ATTENTION"),
            (self.loads, "MKC_ABLATE_LOADS"),
            (self.waits, "MKC_ABLATE_WAITS"),
            (self.compute, "MKC_ABLATE_COMPUTE"),
            (self.weights, "MKC_ABLATE_WEIGHTS"),
        ]
        .into_iter()
        .filter(|&(on, _)| on)
        .map(|(_, name)| (name, 1))
        .collect()
    }

    /// Whether the persistent kernel (`persistent`) or a chain target (pdl, graph) can run
    /// this rung: the persistent kernel every one, a chain every one but the weights'.
    pub fn applies_to(&self, persistent: bool) -> bool {
        persistent || !self.weights
    }

    /// The rungs of [`Ablation::LADDER`] a target runs ([`Ablation::applies_to`]).
    pub fn ladder(persistent: bool) -> impl Iterator<Item = Ablation> {
        Self::LADDER
            .into_iter()
            .filter(move |a| a.applies_to(persistent))
    }

    /// What is removed, e.g. `attention+loads` (`full chain` for none).
    pub fn label(&self) -> String {
        let parts: Vec<&str> = [
            (self.attention, "attention"),
            (self.loads, "loads"),
            (self.waits, "waits"),
            (self.compute, "compute"),
            (self.weights, "weights"),
        ]
        .into_iter()
        .filter(|&(on, _)| on)
        .map(|(_, name)| name)
        .collect();
        if parts.is_empty() {
            "full chain".into()
        } else {
            parts.join("+")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_rungs_are_distinct_ablations_with_matching_defines_and_labels() {
        let mut labels = Vec::new();
        for a in Ablation::LADDER {
            assert_ne!(a, Ablation::default());
            let d = a.defines();
            assert_eq!(d.len(), a.label().split('+').count());
            for (name, v) in &d {
                assert_eq!(*v, 1);
                let kind = name.trim_start_matches("MKC_ABLATE_").to_lowercase();
                assert!(
                    a.label().split('+').any(|p| p == kind),
                    "{name} vs {}",
                    a.label()
                );
            }
            labels.push(a.label());
        }
        labels.dedup();
        assert_eq!(labels.len(), Ablation::LADDER.len());
        assert_eq!(Ablation::ladder(true).count(), Ablation::LADDER.len());
        let chain: Vec<String> = Ablation::ladder(false).map(|a| a.label()).collect();
        assert!(!chain.is_empty() && chain.iter().all(|l| !l.contains("weights")));
        assert_eq!(
            chain.len(),
            Ablation::LADDER.iter().filter(|a| !a.weights).count()
        );
        assert!(Ablation::LADDER.iter().filter(|a| a.weights).count() > 1);
        assert!(Ablation::default().defines().is_empty());
        assert_eq!(Ablation::default().label(), "full chain");
    }
}
