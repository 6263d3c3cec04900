//! The resource gates: one target's freshly built resource report against its golden
//! snapshot (`golden/<target>/resources.snap`, read back with `Report::from_text` by
//! `matrix::gates::resource_gates` and `build::gate_summary`) and against the target's limits.
//!
//! - Spills: no spill figure above the golden's (NVIDIA: spill store / load bytes per thread,
//!   from ptxas; AMD: VGPR / SGPR spill counts, from the code object). Not only 0 -> n: 18 ->
//!   40 fails too.
//! - Stack / scratch: no stack figure above the golden's (NVIDIA: stack frame and local
//!   memory bytes per thread, from cuobjdump; AMD: private segment bytes per lane). A
//!   dynamically indexed local array lands here even when nothing spills.
//! - A kernel the golden does not have is held to zero spills and zero stack.
//! - Shared memory / LDS within the target's `shared_per_block`; occupancy not below the
//!   golden's; the declared block size present and launchable.
//!
//! Every message names the target, the kernel and both numbers.

use super::resources::{KernelReport, Report};
use qsa::dispatch::Vendor;
use qsa::matrix::Target;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A spill figure above the golden's (or any spill in a kernel the golden lacks).
    SpillsGrew,
    /// Stack / local memory / scratch above the golden's (or any in a new kernel).
    StackGrew,
    /// Static + dynamic shared memory / LDS over the target's per-block limit.
    SharedOverLimit,
    /// Fewer resident waves than the golden.
    OccupancyDrop,
    /// The kernel cannot run at its declared block size on this target.
    Unlaunchable,
    /// The declared block is larger than the binary's launch bounds.
    BlockOverLaunchBounds,
    /// No `// qsa:block N` annotation: occupancy cannot be computed.
    NoBlockSize,
}

/// One failed resource gate; `message` names the kernel, the target and the numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub target: String,
    pub kernel: String,
    pub kind: ViolationKind,
    pub message: String,
}

/// One figure of a kernel that a growth gate holds to the golden's.
struct Figure {
    name: &'static str,
    unit: &'static str,
    value: fn(&KernelReport) -> u32,
}

const NVIDIA_SPILLS: [Figure; 2] = [
    Figure {
        name: "spill stores",
        unit: "bytes per thread",
        value: |k| k.spill_stores.unwrap_or(0),
    },
    Figure {
        name: "spill loads",
        unit: "bytes per thread",
        value: |k| k.spill_loads.unwrap_or(0),
    },
];
const AMD_SPILLS: [Figure; 2] = [
    Figure {
        name: "VGPR spills",
        unit: "registers",
        value: |k| k.vgpr_spills.unwrap_or(0),
    },
    Figure {
        name: "SGPR spills",
        unit: "registers",
        value: |k| k.sgpr_spills.unwrap_or(0),
    },
];
const NVIDIA_STACK: [Figure; 2] = [
    Figure {
        name: "stack frame",
        unit: "bytes per thread",
        value: |k| k.stack,
    },
    Figure {
        name: "local memory",
        unit: "bytes per thread",
        value: |k| k.local.unwrap_or(0),
    },
];
const AMD_STACK: [Figure; 1] = [Figure {
    name: "scratch (private segment)",
    unit: "bytes per lane",
    value: |k| k.stack,
}];

/// `"<target> <kernel>: <figure> <golden> -> <new> <unit> (golden <golden>), ..."` for every
/// figure above the golden's (a kernel the golden lacks counts as 0); None when none grew.
fn growth(
    target: &str,
    new: &KernelReport,
    old: Option<&KernelReport>,
    figures: &[Figure],
) -> Option<String> {
    let grown: Vec<String> = figures
        .iter()
        .filter_map(|f| {
            let (was, now) = (old.map_or(0, f.value), (f.value)(new));
            let base = if old.is_some() {
                format!("golden {was}")
            } else {
                "not in the golden: a new kernel is held to 0".to_string()
            };
            (now > was).then(|| format!("{} {was} -> {now} {} ({base})", f.name, f.unit))
        })
        .collect();
    (!grown.is_empty()).then(|| {
        format!(
            "{target} {}: {}; if intended, review and accept with `cargo xtask matrix --bless`",
            new.id(),
            grown.join(", ")
        )
    })
}

/// The resource gates of one target (see the module doc).
pub fn gate_resources(golden: Option<&Report>, new: &Report, target: &Target) -> Vec<Violation> {
    let mut out = Vec::new();
    let amd = target.vendor == Vendor::Amd;
    let lds = if amd { "LDS" } else { "shared memory" };
    let (spills, stack): (&[Figure], &[Figure]) = if amd {
        (&AMD_SPILLS, &AMD_STACK)
    } else {
        (&NVIDIA_SPILLS, &NVIDIA_STACK)
    };
    for k in &new.kernels {
        let id = k.id();
        let mut v = |kind, message: String| {
            out.push(Violation {
                target: target.name.clone(),
                kernel: id.clone(),
                kind,
                message,
            });
        };
        let old = golden.and_then(|g| g.kernel(&k.source, &k.kernel));
        if let Some(m) = growth(&target.name, k, old, spills) {
            v(ViolationKind::SpillsGrew, m);
        }
        if let Some(m) = growth(&target.name, k, old, stack) {
            v(ViolationKind::StackGrew, m);
        }
        if let Some(limit) = target.shared_per_block {
            if k.shared_total() > u64::from(limit) {
                v(
                    ViolationKind::SharedOverLimit,
                    format!(
                        "{id} on {}: {} bytes of {lds} per block ({} static + {} dynamic) exceeds the target's shared_per_block {limit}",
                        target.name,
                        k.shared_total(),
                        k.static_shared,
                        k.dynamic_shared
                    ),
                );
            }
        }
        let Some(block) = k.block else {
            v(
                ViolationKind::NoBlockSize,
                format!("{id} on {}: no launch block size declared (add `// qsa:block N` above the kernel)", target.name),
            );
            continue;
        };
        if block > k.max_threads {
            v(
                ViolationKind::BlockOverLaunchBounds,
                format!(
                    "{id} on {}: declared block {block} exceeds the binary's launch bounds {}",
                    target.name, k.max_threads
                ),
            );
        }
        if let Some(o) = k.occupancy {
            if o.blocks == 0 {
                v(
                    ViolationKind::Unlaunchable,
                    format!(
                        "{id} on {}: cannot launch with block {block}: limited by {} ({} registers, {} bytes of {lds})",
                        target.name,
                        o.limiter.name(),
                        k.registers,
                        k.shared_total()
                    ),
                );
            }
            if let Some(go) = old.and_then(|g| g.occupancy) {
                if o.waves < go.waves {
                    v(
                        ViolationKind::OccupancyDrop,
                        format!(
                            "{id} on {}: occupancy fell from {}/{} to {}/{} resident waves (block {block}, limited by {}; registers {} -> {}, {lds} {} -> {})",
                            target.name,
                            go.waves,
                            go.max_waves,
                            o.waves,
                            o.max_waves,
                            o.limiter.name(),
                            old.map_or(0, |g| g.registers),
                            k.registers,
                            old.map_or(0, KernelReport::shared_total),
                            k.shared_total()
                        ),
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::occupancy::{self, Limiter, Occupancy};
    use super::super::resources::tests::{amd_topk_report, nvidia_probe_report, target};
    use super::*;

    /// The violations of one kind.
    fn of(kind: ViolationKind, v: Vec<Violation>) -> Vec<String> {
        v.into_iter()
            .filter(|v| v.kind == kind)
            .map(|v| v.message)
            .collect()
    }

    fn split_select(r: &mut Report) -> &mut KernelReport {
        r.kernels
            .iter_mut()
            .find(|k| k.kernel == "qsa_topk_split_select")
            .expect("the gfx906 top-k fixture has split_select")
    }

    #[test]
    fn gate_spills_growth_past_the_golden() {
        let t = target("gfx906");
        // Fixture numbers: golden/gfx906/resources.snap has 18 SGPR spills in split_select.
        let mut golden = amd_topk_report();
        split_select(&mut golden).sgpr_spills = Some(18);
        let mut new = golden.clone();
        assert!(of(
            ViolationKind::SpillsGrew,
            gate_resources(Some(&golden), &new, &t)
        )
        .is_empty());
        // 18 -> 40: not 0 -> n, still a failure naming target, kernel and both numbers.
        split_select(&mut new).sgpr_spills = Some(40);
        assert_eq!(
            of(
                ViolationKind::SpillsGrew,
                gate_resources(Some(&golden), &new, &t)
            ),
            [
                "gfx906 topk/qsa_topk_split_select: SGPR spills 18 -> 40 registers (golden 18); \
              if intended, review and accept with `cargo xtask matrix --bless`"
            ]
        );
        // Fewer spills pass; so does a shift of none.
        split_select(&mut new).sgpr_spills = Some(12);
        assert!(of(
            ViolationKind::SpillsGrew,
            gate_resources(Some(&golden), &new, &t)
        )
        .is_empty());
        // Each figure on its own: VGPR spills where there were none.
        split_select(&mut new).vgpr_spills = Some(3);
        let v = of(
            ViolationKind::SpillsGrew,
            gate_resources(Some(&golden), &new, &t),
        );
        assert_eq!(v.len(), 1);
        assert!(
            v[0].contains("VGPR spills 0 -> 3 registers (golden 0)"),
            "{}",
            v[0]
        );
        // No golden at all: the fixture's 38 SGPR spills are held to 0.
        let v = of(
            ViolationKind::SpillsGrew,
            gate_resources(None, &amd_topk_report(), &t),
        );
        assert_eq!(v.len(), 1);
        assert!(
            v[0].starts_with("gfx906 topk/qsa_topk_split_select: SGPR spills 0 -> 38 registers (not in the golden: a new kernel is held to 0)"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn gate_spills_nvidia_bytes() {
        let t = target("sm_90");
        let golden = nvidia_probe_report();
        let mut new = golden.clone();
        new.kernels[0].spill_stores = Some(516);
        new.kernels[0].spill_loads = Some(532);
        assert_eq!(
            of(ViolationKind::SpillsGrew, gate_resources(Some(&golden), &new, &t)),
            ["sm_90 probe/qsa_probe_histogram: spill stores 0 -> 516 bytes per thread (golden 0), \
              spill loads 0 -> 532 bytes per thread (golden 0); \
              if intended, review and accept with `cargo xtask matrix --bless`"]
        );
    }

    #[test]
    fn gate_stack_growth() {
        // AMD: a 2 KiB dynamically indexed local array becomes scratch, with no spill at all.
        let t = target("gfx906");
        let golden = amd_topk_report();
        let mut new = golden.clone();
        split_select(&mut new).stack = 2064;
        let v = gate_resources(Some(&golden), &new, &t);
        assert!(of(ViolationKind::SpillsGrew, v.clone()).is_empty());
        assert_eq!(
            of(ViolationKind::StackGrew, v),
            ["gfx906 topk/qsa_topk_split_select: scratch (private segment) 0 -> 2064 bytes per lane (golden 0); \
              if intended, review and accept with `cargo xtask matrix --bless`"]
        );
        // Equal or smaller scratch passes.
        assert!(of(
            ViolationKind::StackGrew,
            gate_resources(Some(&new), &new, &t)
        )
        .is_empty());
        assert!(of(
            ViolationKind::StackGrew,
            gate_resources(Some(&new), &golden, &t)
        )
        .is_empty());

        // NVIDIA: the stack frame and local memory, each against the golden's.
        let t = target("sm_75");
        let mut golden = nvidia_probe_report();
        golden.kernels[1].stack = 152;
        let mut new = golden.clone();
        new.kernels[1].stack = 2200;
        new.kernels[1].local = Some(16);
        let v = of(
            ViolationKind::StackGrew,
            gate_resources(Some(&golden), &new, &t),
        );
        assert_eq!(v.len(), 1);
        assert!(
            v[0].starts_with("sm_75 probe/qsa_probe_scan: stack frame 152 -> 2200 bytes per thread (golden 152), local memory 0 -> 16 bytes per thread (golden 0);"),
            "{}",
            v[0]
        );
        // A kernel the golden lacks is held to no stack.
        golden.kernels.remove(1);
        let v = of(
            ViolationKind::StackGrew,
            gate_resources(Some(&golden), &new, &t),
        );
        assert!(
            v[0].contains("stack frame 0 -> 2200 bytes per thread (not in the golden"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn gate_shared_limit() {
        let t = target("sm_75");
        let mut r = nvidia_probe_report();
        r.target = "sm_75".into();
        assert!(gate_resources(None, &r, &t)
            .iter()
            .all(|v| v.kind != ViolationKind::SharedOverLimit));
        r.kernels[1].dynamic_shared = 65536; // 1088 static + 65536 dynamic > 65536
        let v: Vec<_> = gate_resources(None, &r, &t)
            .into_iter()
            .filter(|v| v.kind == ViolationKind::SharedOverLimit)
            .collect();
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].message,
            "probe/qsa_probe_scan on sm_75: 66624 bytes of shared memory per block (1088 static + 65536 dynamic) exceeds the target's shared_per_block 65536"
        );
    }

    #[test]
    fn gate_occupancy_drop_and_launchability() {
        let t = target("sm_90");
        let golden = nvidia_probe_report();
        let mut new = golden.clone();
        assert!(gate_resources(Some(&golden), &new, &t).is_empty());
        // 72 registers at 256 threads: 3 blocks = 24 warps, down from 64.
        let h = &mut new.kernels[0];
        h.registers = 72;
        h.occupancy = Some(
            occupancy::nvidia(
                "sm_90",
                &t.limits,
                occupancy::NvidiaKernel {
                    block: 256,
                    regs: 72,
                    static_shared: 2080,
                    dynamic_shared: 0,
                },
            )
            .unwrap(),
        );
        let v = gate_resources(Some(&golden), &new, &t);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].kind, ViolationKind::OccupancyDrop);
        assert!(
            v[0].message.starts_with(
                "probe/qsa_probe_histogram on sm_90: occupancy fell from 64/64 to 24/64"
            ),
            "{}",
            v[0].message
        );
        assert!(
            v[0].message.contains("registers 16 -> 72"),
            "{}",
            v[0].message
        );
        // Higher occupancy than the golden passes.
        assert!(gate_resources(Some(&new), &golden, &t).is_empty());
        // Declared block beyond the launch bounds; missing declaration.
        let mut bad = golden.clone();
        bad.kernels[0].block = Some(512);
        bad.kernels[1].block = None;
        let kinds: Vec<_> = gate_resources(Some(&golden), &bad, &t)
            .into_iter()
            .map(|v| v.kind)
            .collect();
        assert!(
            kinds.contains(&ViolationKind::BlockOverLaunchBounds),
            "{kinds:?}"
        );
        assert!(kinds.contains(&ViolationKind::NoBlockSize), "{kinds:?}");
        // Unlaunchable at the declared block.
        let mut un = golden.clone();
        un.kernels[0].occupancy = Some(Occupancy {
            blocks: 0,
            waves: 0,
            max_waves: 64,
            limiter: Limiter::Unlaunchable,
        });
        let v = gate_resources(None, &un, &t);
        assert!(v.iter().any(|v| v.kind == ViolationKind::Unlaunchable
            && v.message.contains("cannot launch with block 256")));
    }
}
