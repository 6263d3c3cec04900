//! The host side of the GPU kernels, written once for CUDA and HIP.
//!
//! `GpuApi` is the small set of driver calls the kernels' host code needs (memory, modules,
//! launches, events). `backend::cuda` implements it with cudarc, `backend::hip` with the
//! HIP runtime loaded at run time. The per-family host code (`topk`, `scores`,
//! `attention`) is written against the trait only, so both vendors launch the same kernels
//! with the same arguments, the way the kernel sources share one body through
//! `kernels/common/portable.h`.

use crate::backend::BackendResult;

/// A device allocation (opaque to family code). Freed by `GpuApi::free`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevPtr {
    pub addr: u64,
    pub bytes: usize,
}

/// One kernel argument, passed by value as the kernel's C signature declares it.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Ptr(DevPtr),
    /// A null pointer argument (e.g. "no active counts").
    Null,
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug)]
pub struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

/// Device facts the dispatch and launch code need.
#[derive(Clone, Debug)]
pub struct GpuProps {
    pub name: String,
    /// "sm_90", "gfx906", ...
    pub arch: String,
    pub multiprocessors: u32,
    pub warp_size: u32,
    /// Largest dynamic shared memory one block may opt into.
    pub max_shared_per_block: u32,
}

/// The driver calls the kernels' host code needs. Every call is synchronous with respect to
/// the API's one stream unless it says otherwise.
pub trait GpuApi {
    fn props(&self) -> &GpuProps;
    fn alloc(&self, bytes: usize) -> BackendResult<DevPtr>;
    fn free(&self, ptr: DevPtr);
    fn upload(&self, dst: DevPtr, src: &[u8]) -> BackendResult<()>;
    fn download(&self, src: DevPtr, dst: &mut [u8]) -> BackendResult<()>;
    fn memset_zero(&self, dst: DevPtr) -> BackendResult<()>;
    /// Launch `kernel` (an `extern "C"` name in the family's code object). Asynchronous.
    fn launch(
        &self,
        family: Family,
        kernel: &str,
        dims: LaunchDims,
        args: &[Arg],
    ) -> BackendResult<()>;
    fn synchronize(&self) -> BackendResult<()>;
    /// Time `f` (which only enqueues launches) with device events: seconds elapsed.
    fn time(&self, f: &mut dyn FnMut() -> BackendResult<()>) -> BackendResult<f64>;
}

/// The kernel families, one code object each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Topk,
    Scores,
    Attention,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Topk, Family::Scores, Family::Attention];
    /// Stem of the kernel source `kernels/<stem>.cu` and of its code objects.
    pub fn stem(self) -> &'static str {
        match self {
            Family::Topk => "topk",
            Family::Scores => "block_scores",
            Family::Attention => "selection_attention",
        }
    }
}

/// Helpers to move typed slices through `GpuApi`.
pub fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: T is plain data (f32, i32, u16) with no padding; the slice is reinterpreted
    // read-only for the copy.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

pub fn as_bytes_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above; every bit pattern is a valid f32 / i32 / u16.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

pub mod attention;
pub mod attention_decode;
pub mod backend;
pub mod launch;
pub mod scores;
pub mod topk;
