//! The backend's error type: every CUDA call is checked and named.

use std::fmt;

/// Why a GPU operation failed.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendError {
    /// No CUDA driver (libcuda.so) or no GPU: the environment, not a bug.
    NoDevice(String),
    /// No NVRTC library could be loaded.
    NoNvrtc,
    /// NVRTC rejected the kernel source (an mkc bug): the compiler log.
    Compile(String),
    /// A CUDA driver call failed: which call, on what, and the driver's error.
    Cuda {
        /// The driver function.
        call: &'static str,
        /// What it was doing (kernel or buffer name).
        context: String,
        /// The driver's error name.
        error: String,
    },
    /// The watchdog stopped a step that did not finish in time.
    Watchdog {
        /// Target being run.
        target: String,
        /// Position of the step.
        pos: u32,
        /// Seconds waited.
        seconds: f64,
    },
    /// A probe's kernels did not finish in time (a probe kernel that spins on a barrier or a
    /// flag): stopped rather than waited for.
    ProbeStalled {
        /// The probe kernel waited for.
        kernel: String,
        /// Seconds waited.
        seconds: f64,
    },
    /// Unsupported configuration for the backend (user error).
    Unsupported(String),
    /// Weights could not be loaded (user error).
    Weights(String),
    /// Two of mkc's own descriptions disagree (an mkc bug, never the input's).
    Internal(String),
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::NoDevice(why) => write!(f, "no CUDA device available: {why}"),
            BackendError::NoNvrtc => write!(
                f,
                "no NVRTC library found (libnvrtc.so.13); install the CUDA 13 toolkit or \
                 `pip install nvidia-cuda-nvrtc==13.0.88` and add its nvidia/cu13/lib to \
                 LD_LIBRARY_PATH"
            ),
            BackendError::Compile(log) => write!(f, "NVRTC failed to compile mkc's kernels:\n{log}"),
            BackendError::Cuda {
                call,
                context,
                error,
            } => write!(f, "CUDA call {call} failed ({context}): {error}"),
            BackendError::Watchdog {
                target,
                pos,
                seconds,
            } => write!(
                f,
                "watchdog: the {target} step at position {pos} did not finish within {seconds:.1} s; \
                 the GPU run was stopped"
            ),
            BackendError::ProbeStalled { kernel, seconds } => write!(
                f,
                "watchdog: the probe kernel {kernel} did not finish within {seconds:.1} s; the \
                 probe was stopped"
            ),
            BackendError::Unsupported(why) => write!(f, "{why}"),
            BackendError::Weights(why) => write!(f, "{why}"),
            BackendError::Internal(why) => write!(f, "internal error (an mkc bug): {why}"),
        }
    }
}

impl std::error::Error for BackendError {}

/// Wraps a driver result with the call's name and context.
pub fn check<T>(
    r: Result<T, cudarc::driver::DriverError>,
    call: &'static str,
    context: impl Into<String>,
) -> Result<T, BackendError> {
    r.map_err(|e| BackendError::Cuda {
        call,
        context: context.into(),
        error: format!("{e:?}"),
    })
}
