//! One launch path: the family code (`topk`, `scores`, `attention`) turns a shape into a
//! `LaunchPlan` (buffers with their sizes and roles, then the launches and zero-fills in
//! order, with grid, block, dynamic shared bytes and every argument), and `PlannedCall`
//! executes exactly that plan over a `GpuApi`. The runner launches through `PlannedCall`;
//! `qsa plan --json` prints the same plan for the side-by-side benches (bench/), which launch
//! it with cupy instead of re-deriving any rule. A plan needs no device and no data.

use super::{Arg, DevPtr, Family, GpuApi, GpuProps, LaunchDims};
use crate::backend::{BackendError, BackendResult, Prepared};
use crate::dispatch::TargetCaps;
use crate::problem::Output;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a buffer holds: uploaded before the call, read back after it, or scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Input,
    Output,
    Workspace,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
            Role::Workspace => "workspace",
        }
    }
}

/// One device buffer of a plan, named as the kernels' arguments name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Buffer {
    pub name: &'static str,
    pub bytes: usize,
    pub role: Role,
}

/// One kernel argument of a plan: a buffer by name, or a scalar with its C type.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanArg {
    Buffer(&'static str),
    /// A null pointer (e.g. "no active counts").
    Null,
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
}

/// One step of a call, in stream order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Step {
    /// Launch `kernel` (the exported symbol of the family's code object).
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: Vec<PlanArg>,
    },
    /// Fill a buffer with zero bytes.
    Zero { buffer: &'static str },
}

/// Everything one call launches, computed from the shape alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchPlan {
    #[serde(skip)]
    pub family: Family,
    /// The code object: `<module>.cubin` / `<module>.co`.
    pub module: &'static str,
    /// What `Prepared::dispatched` reports (the dispatch snapshot's name).
    pub dispatched: String,
    pub buffers: Vec<Buffer>,
    /// Once, after the inputs are uploaded (zeroing a reusable workspace; the backward's
    /// forward pass).
    pub setup: Vec<Step>,
    /// Every call (what the bench suite times).
    pub call: Vec<Step>,
}

impl LaunchPlan {
    pub fn new(family: Family, dispatched: impl Into<String>) -> Self {
        LaunchPlan {
            family,
            module: family.stem(),
            dispatched: dispatched.into(),
            buffers: Vec::new(),
            setup: Vec::new(),
            call: Vec::new(),
        }
    }

    /// Declare a buffer; returns the argument that passes it.
    pub fn buffer(&mut self, name: &'static str, bytes: usize, role: Role) -> PlanArg {
        self.buffers.push(Buffer { name, bytes, role });
        PlanArg::Buffer(name)
    }

    pub fn find(&self, name: &str) -> Option<&Buffer> {
        self.buffers.iter().find(|b| b.name == name)
    }

    /// Every step names a declared buffer, each buffer once: a plan that fails this is a bug
    /// in the family code, reported before anything is allocated.
    pub fn check(&self) -> Result<(), String> {
        for (i, b) in self.buffers.iter().enumerate() {
            if self.buffers[..i].iter().any(|o| o.name == b.name) {
                return Err(format!("buffer `{}` declared twice", b.name));
            }
        }
        for step in self.setup.iter().chain(&self.call) {
            let names: Vec<&str> = match step {
                Step::Zero { buffer } => vec![buffer],
                Step::Launch { args, .. } => args
                    .iter()
                    .filter_map(|a| match a {
                        PlanArg::Buffer(n) => Some(*n),
                        _ => None,
                    })
                    .collect(),
            };
            if let Some(n) = names.into_iter().find(|n| self.find(n).is_none()) {
                return Err(format!(
                    "a step uses buffer `{n}`, which the plan does not declare"
                ));
            }
        }
        Ok(())
    }
}

/// A launch step from its dims.
pub fn launch(kernel: impl Into<String>, dims: LaunchDims, args: Vec<PlanArg>) -> Step {
    Step::Launch {
        kernel: kernel.into(),
        grid: [dims.grid.0, dims.grid.1, dims.grid.2],
        block: [dims.block.0, dims.block.1, dims.block.2],
        shared_bytes: dims.shared_bytes,
        args,
    }
}

/// The device facts a plan reads, for planning without a device: what matrix.yaml says of
/// the target (the runner's own backends report the same figures for their card).
pub fn props_of(caps: &TargetCaps) -> GpuProps {
    GpuProps {
        name: format!("{} (planned from matrix.yaml)", caps.name),
        arch: caps.name.clone(),
        multiprocessors: caps.multiprocessors,
        warp_size: caps.wave,
        max_shared_per_block: caps.shared_per_block,
    }
}

/// A plan with its buffers on the device: runs the plan's steps, frees on drop.
pub struct PlannedCall<'a, A: GpuApi> {
    api: &'a A,
    plan: LaunchPlan,
    ptrs: BTreeMap<&'static str, DevPtr>,
    output: fn(&PlannedCall<'a, A>) -> BackendResult<Output>,
}

impl<'a, A: GpuApi> PlannedCall<'a, A> {
    /// Allocate every buffer of `plan`, upload `inputs` (one per input buffer, its exact
    /// size), run the setup steps and wait for them. `output` reads the result back.
    pub fn new(
        api: &'a A,
        plan: LaunchPlan,
        inputs: &[(&str, &[u8])],
        output: fn(&PlannedCall<'a, A>) -> BackendResult<Output>,
    ) -> BackendResult<Self> {
        plan.check().map_err(BackendError::Device)?;
        let mut call = PlannedCall {
            api,
            plan,
            ptrs: BTreeMap::new(),
            output,
        };
        // Pushed as made, so Drop frees every one even when a later step fails.
        for b in call.plan.buffers.clone() {
            let ptr = api.alloc(b.bytes.max(4))?;
            call.ptrs.insert(b.name, ptr);
            if b.role == Role::Input {
                let data = inputs
                    .iter()
                    .find(|(n, _)| *n == b.name)
                    .map(|(_, d)| *d)
                    .ok_or_else(|| BackendError::Device(format!("input `{}` not given", b.name)))?;
                if data.len() != b.bytes {
                    return Err(BackendError::Device(format!(
                        "input `{}` has {} bytes, the plan sized it {}",
                        b.name,
                        data.len(),
                        b.bytes
                    )));
                }
                api.upload(ptr, data)?;
            }
        }
        let setup = std::mem::take(&mut call.plan.setup);
        let ran = call.run(&setup).and_then(|()| api.synchronize());
        call.plan.setup = setup;
        ran?;
        Ok(call)
    }

    pub fn plan(&self) -> &LaunchPlan {
        &self.plan
    }

    fn ptr(&self, name: &str) -> BackendResult<DevPtr> {
        self.ptrs
            .get(name)
            .copied()
            .ok_or_else(|| BackendError::Device(format!("buffer `{name}` not allocated")))
    }

    fn run(&self, steps: &[Step]) -> BackendResult<()> {
        for step in steps {
            match step {
                Step::Zero { buffer } => self.api.memset_zero(self.ptr(buffer)?)?,
                Step::Launch {
                    kernel,
                    grid,
                    block,
                    shared_bytes,
                    args,
                } => {
                    let args = args
                        .iter()
                        .map(|a| {
                            Ok(match *a {
                                PlanArg::Buffer(n) => Arg::Ptr(self.ptr(n)?),
                                PlanArg::Null => Arg::Null,
                                PlanArg::I32(v) => Arg::I32(v),
                                PlanArg::U32(v) => Arg::U32(v),
                                PlanArg::I64(v) => Arg::I64(v),
                                PlanArg::F32(v) => Arg::F32(v),
                            })
                        })
                        .collect::<BackendResult<Vec<_>>>()?;
                    let dims = LaunchDims {
                        grid: (grid[0], grid[1], grid[2]),
                        block: (block[0], block[1], block[2]),
                        shared_bytes: *shared_bytes,
                    };
                    self.api.launch(self.plan.family, kernel, dims, &args)?;
                }
            }
        }
        Ok(())
    }

    /// Enqueue one call (no wait).
    pub fn enqueue(&self) -> BackendResult<()> {
        self.run(&self.plan.call)
    }

    /// Read a buffer back as 4-byte values (f32, i32): as many as the plan sized it for.
    pub fn download<T: Copy + Default>(&self, name: &str) -> BackendResult<Vec<T>> {
        let bytes = self
            .plan
            .find(name)
            .ok_or_else(|| BackendError::Device(format!("buffer `{name}` not in the plan")))?
            .bytes;
        let mut v = vec![T::default(); bytes / std::mem::size_of::<T>()];
        self.api
            .download(self.ptr(name)?, super::as_bytes_mut(&mut v))?;
        Ok(v)
    }
}

impl<A: GpuApi> Prepared for PlannedCall<'_, A> {
    fn dispatched(&self) -> String {
        self.plan.dispatched.clone()
    }

    fn run(&mut self) -> BackendResult<()> {
        self.enqueue()?;
        self.api.synchronize()
    }

    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
        let this = &*self;
        (0..reps)
            .map(|_| this.api.time(&mut || this.enqueue()))
            .collect()
    }

    fn output(&mut self) -> BackendResult<Output> {
        (self.output)(self)
    }
}

impl<A: GpuApi> Drop for PlannedCall<'_, A> {
    fn drop(&mut self) {
        // Nothing may still use the buffers: wait for queued launches, best effort.
        let _ = self.api.synchronize();
        for (_, p) in std::mem::take(&mut self.ptrs) {
            self.api.free(p);
        }
    }
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
