//! Persistent-target policies: each turns a task graph into an [`Assignment`].

pub mod ilp;
pub mod list;
pub mod round_robin;
