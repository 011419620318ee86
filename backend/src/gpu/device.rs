//! The device: the primary context, device buffers and timing events, each released on drop
//! (unless the watchdog fired: then nothing may block on the GPU).

use cudarc::driver::{result, sys};

use crate::error::{check, BackendError};

/// An open GPU: the primary context of device 0.
pub struct Gpu {
    /// Device name.
    pub name: String,
    /// Compute capability.
    pub cc: (i32, i32),
    /// Multiprocessors.
    pub sms: i32,
    ctx: sys::CUcontext,
    pub(super) dev: sys::CUdevice,
}

impl Gpu {
    /// Opens device 0, or says why there is none.
    pub fn open() -> Result<Gpu, BackendError> {
        // SAFETY: probing for the library has no preconditions.
        if !unsafe { sys::is_culib_present() } {
            return Err(BackendError::NoDevice(
                "no CUDA driver found (libcuda.so.1 is not installed)".into(),
            ));
        }
        result::init().map_err(|e| BackendError::NoDevice(format!("cuInit failed: {e:?}")))?;
        let count =
            result::device::get_count().map_err(|e| BackendError::NoDevice(format!("{e:?}")))?;
        if count == 0 {
            return Err(BackendError::NoDevice("the driver reports no GPU".into()));
        }
        let dev = check(result::device::get(0), "cuDeviceGet", "device 0")?;
        // SAFETY: `dev` is a valid device; the context is released in Drop.
        let ctx = check(
            unsafe { result::primary_ctx::retain(dev) },
            "cuDevicePrimaryCtxRetain",
            "device 0",
        )?;
        // SAFETY: `ctx` was just retained.
        check(
            unsafe { result::ctx::set_current(ctx) },
            "cuCtxSetCurrent",
            "device 0",
        )?;
        let attr = |a| {
            // SAFETY: valid device and attribute.
            check(
                unsafe { result::device::get_attribute(dev, a) },
                "cuDeviceGetAttribute",
                "device 0",
            )
        };
        let cc = (
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let name = check(result::device::get_name(dev), "cuDeviceGetName", "device 0")?;
        Ok(Gpu {
            name,
            cc,
            sms,
            ctx,
            dev,
        })
    }
}

/// Set when the watchdog fired: a kernel may still be spinning, so no drop may synchronise,
/// free or destroy anything (each would block behind it); the process exit reclaims the GPU.
pub(super) static STALLED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

pub(super) fn stalled() -> bool {
    STALLED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Polls `stream` (`what` names it in errors) until its work is done, `Ok(true)`, or until
/// `deadline`, `Ok(false)` with [`STALLED`] set: the watchdog of every wait that must not hang
/// behind a spinning kernel. The caller says what stalled.
pub(super) fn wait_stream(
    stream: sys::CUstream,
    what: &str,
    deadline: std::time::Instant,
) -> Result<bool, BackendError> {
    loop {
        // SAFETY: the caller's stream is live.
        match unsafe { sys::cuStreamQuery(stream) } {
            sys::CUresult::CUDA_SUCCESS => return Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => {}
            e => {
                return Err(BackendError::Cuda {
                    call: "cuStreamQuery",
                    context: what.to_string(),
                    error: format!("{e:?}"),
                })
            }
        }
        if std::time::Instant::now() > deadline {
            STALLED.store(true, std::sync::atomic::Ordering::SeqCst);
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if stalled() {
            return;
        }
        let _ = self.ctx;
        // SAFETY: retained in `open`.
        unsafe { result::primary_ctx::release(self.dev) }.ok();
    }
}

/// A device allocation, freed on drop.
pub(super) struct DevBuf {
    pub(super) ptr: sys::CUdeviceptr,
}

impl DevBuf {
    pub(super) fn new(bytes: usize, what: &str) -> Result<DevBuf, BackendError> {
        // SAFETY: a plain allocation in the current context.
        let ptr = check(
            unsafe { result::malloc_sync(bytes.max(16)) },
            "cuMemAlloc",
            what,
        )?;
        // Poison: every buffer starts as 0xFF bytes (NaN floats), never zero.
        fill_bytes(ptr, 0xFF, bytes.max(16), what)?;
        Ok(DevBuf { ptr })
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if stalled() {
            return;
        }
        // SAFETY: allocated by `new`, freed once.
        unsafe { result::free_sync(self.ptr) }.ok();
    }
}

/// A start/end pair of timing events, destroyed on drop.
pub(super) struct EventPair {
    pub(super) start: sys::CUevent,
    pub(super) end: sys::CUevent,
}

impl EventPair {
    pub(super) fn new(what: &str) -> Result<EventPair, BackendError> {
        let make = || {
            check(
                result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
                "cuEventCreate",
                what,
            )
        };
        Ok(EventPair {
            start: make()?,
            end: make()?,
        })
    }

    /// Milliseconds between the two (both must have completed).
    pub(super) fn elapsed_ms(&self, what: &str) -> Result<f64, BackendError> {
        // SAFETY: both events were recorded and have completed.
        check(
            unsafe { result::event::elapsed(self.start, self.end) },
            "cuEventElapsedTime",
            what,
        )
        .map(f64::from)
    }
}

impl Drop for EventPair {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            result::event::destroy(self.start).ok();
            result::event::destroy(self.end).ok();
        }
    }
}

/// Finishes the legacy stream's copies and memsets before anything else runs: the runner's
/// stream is non-blocking, so a kernel launched on it does not wait for them (a pageable
/// upload may return before its DMA lands, a memset before it runs). Without this, a
/// poison could land after a kernel's first CTAs had written, or a kernel read inputs half
/// uploaded.
fn settle(what: &str) -> Result<(), BackendError> {
    check(result::ctx::synchronize(), "cuCtxSynchronize", what)
}

/// Copies `data` to the device buffer at `ptr`, landed before this returns.
pub(super) fn upload<T>(ptr: u64, data: &[T], what: &str) -> Result<(), BackendError> {
    // SAFETY: every caller passes a live device buffer at least `data`'s size.
    check(
        unsafe { result::memcpy_htod_sync(ptr, data) },
        "cuMemcpyHtoD",
        what,
    )?;
    settle(what)
}

/// Sets `bytes` bytes at `ptr` to `byte`, done before this returns.
pub(super) fn fill_bytes(ptr: u64, byte: u8, bytes: usize, what: &str) -> Result<(), BackendError> {
    // SAFETY: every caller passes a live device buffer of at least `bytes` bytes.
    check(
        unsafe { sys::cuMemsetD8_v2(ptr, byte, bytes).result() },
        "cuMemsetD8",
        what,
    )?;
    settle(what)
}
