//! mkc's intermediate representation: model files, device profiles and the tiled task DAG.
//!
//! Start at [`model::Model::parse`] (a RON model file, validated) and [`lower::lower`] (the
//! model becomes a [`graph::TaskGraph`] of one decode step). Everything downstream (scheduler,
//! simulator, backend) consumes the task graph and nothing else from the model.

pub mod device;
pub mod edges;
pub mod embedded;
pub mod error;
pub mod graph;
pub mod ids;
pub mod input;
pub mod lower;
pub mod model;
mod ron_error;
pub mod stats;
mod validate;
pub mod work;

/// The bounds model validation keeps every derived size within.
pub mod validate_bounds {
    pub use crate::validate::{
        MAX_DIM, MAX_TASKS, MAX_TENSOR_ROWS, NORM_EPS_RANGE, ROPE_THETA_RANGE,
    };
}

pub use error::InputError;
pub use graph::{Access, Counter, Edge, OpKind, Operator, Rows, Task, TaskCost, TaskGraph, Tensor};
pub use ids::{CounterId, EdgeId, KernelId, OpId, SmId, TaskId, TensorId};
pub use input::FileKind;
pub use model::{Model, Tuning};
