//! `gpu::Arg`s -> the `void**` `kernelParams` array of `hipModuleLaunchKernel`.
//!
//! Entry i points at argument i's value, stored with the type the kernel's C signature
//! declares; the runtime copies `size_of(param i)` bytes from it (sizes come from the code
//! object's metadata) before the launch call returns, so the storage only has to outlive
//! the call. Same layout as `cuLaunchKernel` takes on the CUDA side.

use std::os::raw::c_void;

use crate::gpu::Arg;

/// Owns the argument values and the pointer array into them.
pub struct KernelParams {
    /// One 8-byte slot per argument (8-aligned, so any of i32/u32/f32/i64/pointer fits).
    /// Never resized after `ptrs` is built: the pointers point into this buffer.
    values: Vec<u64>,
    ptrs: Vec<*mut c_void>,
}

impl KernelParams {
    pub fn new(args: &[Arg]) -> Self {
        let mut values = vec![0u64; args.len()];
        for (slot, arg) in values.iter_mut().zip(args) {
            let at = (slot as *mut u64).cast::<u8>();
            // SAFETY: `at` is an 8-aligned, 8-byte slot; each write is at most 8 bytes of a
            // type with alignment <= 8, at offset 0 (where the runtime reads it from).
            unsafe {
                match *arg {
                    Arg::Ptr(p) => at.cast::<u64>().write(p.addr),
                    Arg::Null => at.cast::<u64>().write(0),
                    Arg::I32(v) => at.cast::<i32>().write(v),
                    Arg::U32(v) => at.cast::<u32>().write(v),
                    Arg::I64(v) => at.cast::<i64>().write(v),
                    Arg::F32(v) => at.cast::<f32>().write(v),
                }
            }
        }
        let ptrs = values
            .iter_mut()
            .map(|slot| (slot as *mut u64).cast::<c_void>())
            .collect();
        KernelParams { values, ptrs }
    }

    /// The array to pass as `kernelParams` (null for a kernel without arguments, which the
    /// runtime accepts).
    pub fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        debug_assert_eq!(self.values.len(), self.ptrs.len());
        if self.ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            self.ptrs.as_mut_ptr()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::DevPtr;

    #[test]
    fn each_pointer_reads_back_its_argument_with_its_c_type() {
        let buf = DevPtr {
            addr: 0x7f00_dead_beef_0000,
            bytes: 64,
        };
        let args = [
            Arg::Ptr(buf),
            Arg::Null,
            Arg::I32(-7),
            Arg::U32(0xffff_fffe),
            Arg::I64(-(1 << 40)),
            Arg::F32(1.5),
        ];
        let mut p = KernelParams::new(&args);
        assert_eq!((p.values.len(), p.ptrs.len()), (6, 6));
        let raw = p.as_mut_ptr();
        // SAFETY: six valid pointers into `p.values`, read with the types written.
        unsafe {
            let at = |i: usize| *raw.add(i);
            assert_eq!(*at(0).cast::<u64>(), 0x7f00_dead_beef_0000);
            assert!((*at(1).cast::<*const c_void>()).is_null());
            assert_eq!(*at(2).cast::<i32>(), -7);
            assert_eq!(*at(3).cast::<u32>(), 0xffff_fffe);
            assert_eq!(*at(4).cast::<i64>(), -(1 << 40));
            assert_eq!(*at(5).cast::<f32>(), 1.5);
            // Distinct slots: a kernel reading param 2 never sees param 3's bytes.
            assert_eq!(at(3) as usize - at(2) as usize, 8);
        }
    }

    #[test]
    fn no_arguments_give_a_null_array() {
        assert!(KernelParams::new(&[]).as_mut_ptr().is_null());
    }
}
