//! `GpuBackend`: the `Backend` of every GPU target, over any `GpuApi` (CUDA or HIP). It
//! routes each problem to its family's host code, which dispatches and launches.

use super::GpuApi;
use crate::backend::{Backend, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::{Switches, TargetCaps};
use crate::problem::Problem;

pub struct GpuBackend<A: GpuApi> {
    api: A,
    caps: TargetCaps,
    driver: String,
    ptx: Option<crate::ptx::PtxRun>,
}

impl<A: GpuApi> GpuBackend<A> {
    /// `caps` are the target's capabilities from matrix.yaml (what dispatch reads).
    pub fn new(api: A, caps: TargetCaps) -> Self {
        GpuBackend {
            api,
            caps,
            driver: String::new(),
            ptx: None,
        }
    }
    /// This backend runs an older target's PTX on a newer card (`crate::ptx`).
    pub fn with_ptx(mut self, run: crate::ptx::PtxRun) -> Self {
        self.ptx = Some(run);
        self
    }
    /// Driver / runtime versions for `DeviceInfo` (free text).
    pub fn with_driver(mut self, driver: impl Into<String>) -> Self {
        self.driver = driver.into();
        self
    }
    pub fn api(&self) -> &A {
        &self.api
    }
    pub fn caps(&self) -> &TargetCaps {
        &self.caps
    }
}

impl<A: GpuApi> Backend for GpuBackend<A> {
    fn device(&self) -> DeviceInfo {
        let props = self.api.props();
        DeviceInfo {
            name: props.name.clone(),
            arch: props.arch.clone(),
            driver: self.driver.clone(),
        }
    }

    fn ptx_run(&self) -> Option<crate::ptx::PtxRun> {
        self.ptx.clone()
    }

    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        match problem {
            Problem::Topk(p) => super::topk::prepare(&self.api, &self.caps, switches, p),
            Problem::Scores(p) => super::scores::prepare(&self.api, &self.caps, switches, p),
            Problem::AttnForward(p) => {
                super::attention::prepare(&self.api, &self.caps, switches, p, false)
            }
            Problem::AttnBackward(p) => {
                super::attention::prepare(&self.api, &self.caps, switches, p, true)
            }
        }
    }
}
