//! Typed `u32` ids for every IR entity.
//!
//! Each entity lives in a dense `Vec` indexed by its id; a newtype per entity keeps a
//! `TaskId` from being used where a `CounterId` is meant, which bare `usize` cannot.

use serde::{Deserialize, Serialize};

macro_rules! entity_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into the entity's dense vector.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id of the entity stored at `index`.
            pub fn from_index(index: usize) -> Self {
                Self(u32::try_from(index).expect(concat!(stringify!($name), " overflows u32")))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity_id!(
    /// One tile of one operator: the unit a CTA (or one instruction) executes.
    TaskId,
    "task"
);
entity_id!(
    /// One fused operator of the model (e.g. layer 3's up/gate matvec).
    OpId,
    "op"
);
entity_id!(
    /// One monotonic ready counter guarding one shard of one edge.
    CounterId,
    "counter"
);
entity_id!(
    /// One intermediate tensor (an activation buffer) written once per decode step.
    TensorId,
    "tensor"
);
entity_id!(
    /// One operator-level data edge (producer operator, consumer operator, tensor).
    EdgeId,
    "edge"
);
entity_id!(
    /// One streaming multiprocessor of the device.
    SmId,
    "sm"
);
entity_id!(
    /// One kernel (grid) of a chain target, or the single persistent kernel.
    KernelId,
    "kernel"
);
