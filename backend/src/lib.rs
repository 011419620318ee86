//! mkc's CUDA backend: NVRTC-compiled operator kernels and the runners of every target.
//!
//! Its own issue (CUDA backend) fills this crate; until then it holds nothing.
