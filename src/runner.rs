//! One target's run: open the backend for the target, run every selected case's suites
//! unit by unit (`journal::Unit`: a suite on one input), stream each unit's records to the
//! journal as it ends, and collect them. The `qsa` binary is a thin CLI over this.

use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, DeviceInfo};
use crate::crash::{self, TestCrash};
use crate::dump::Dumper;
#[cfg(feature = "cuda")]
use crate::gpu::backend::GpuBackend;
use crate::journal::{self, Entry, Journal, Unit};
use crate::matrix::{Case, Matrix, Suite, Target};
use crate::results::{utc_now, TargetResults, TargetStatus};
use crate::suites::bench::BenchGolden;
use crate::suites::{run_suite, Ctx, Filter};
use std::path::Path;

/// Why a target's backend could not be opened: a skip with the reason, not a crash.
#[derive(Debug)]
pub struct NoDevice(pub String);

/// Open the backend that runs `target` on this machine. An NVIDIA target without its own
/// card runs through its PTX on a newer NVIDIA card (`crate::ptx`); `open_backend_with`
/// can refuse that (`qsa run --no-ptx`).
pub fn open_backend(target: &Target, code_objects: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    open_backend_with(target, code_objects, true)
}

/// `open_backend`, with the PTX mode allowed or not.
pub fn open_backend_with(
    target: &Target,
    code_objects: &Path,
    allow_ptx: bool,
) -> Result<Box<dyn Backend>, NoDevice> {
    use crate::dispatch::Vendor;
    match target.vendor {
        Vendor::Cpu => Ok(Box::new(CpuBackend::new())),
        Vendor::Nvidia => open_cuda(target, code_objects, allow_ptx),
        Vendor::Amd => open_hip(target, code_objects),
    }
}

/// The target's own card (its SASS), or a newer NVIDIA card through the target's PTX
/// (`ptx::decide` says which, or why neither, before any work).
#[cfg(feature = "cuda")]
fn open_cuda(target: &Target, dir: &Path, allow_ptx: bool) -> Result<Box<dyn Backend>, NoDevice> {
    use crate::ptx::{decide, scan_fatbins, Card, Mode, Wanted};
    let mut api =
        crate::backend::cuda::CudaApi::open(0, dir).map_err(|e| NoDevice(e.to_string()))?;
    let props = crate::gpu::GpuApi::props(&api).clone();
    let caps = target.caps();
    let mode = decide(
        &Wanted {
            name: &target.name,
            vendor: target.vendor,
            shared_per_block: caps.shared_per_block,
        },
        &Card {
            vendor: crate::dispatch::Vendor::Nvidia,
            arch: &props.arch,
            max_shared_per_block: props.max_shared_per_block,
        },
        allow_ptx,
        || scan_fatbins(dir),
    )
    .map_err(NoDevice)?;
    let driver = api.driver().to_string();
    Ok(match mode {
        Mode::Native => Box::new(GpuBackend::new(api, caps).with_driver(driver)),
        Mode::Ptx(run) => {
            // The fatbin's PTX is plain compute_XX: sm_90a's wgmma scorers exist as SASS only
            // (xtask's nvidia_flags), so dispatch must not pick them on another card.
            let mut caps = caps;
            caps.features
                .retain(|f| *f != crate::dispatch::Feature::Wgmma);
            api.run_as_ptx(&run.target, run.shared_limit);
            // The driver compiles the PTX at load: a driver too old for it says so here.
            api.load_all().map_err(|e| NoDevice(e.to_string()))?;
            Box::new(GpuBackend::new(api, caps).with_driver(driver).with_ptx(run))
        }
    })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &Target, _: &Path, _: bool) -> Result<Box<dyn Backend>, NoDevice> {
    Err(NoDevice(
        "this runner was built without the `cuda` feature".into(),
    ))
}

#[cfg(feature = "hip")]
fn open_hip(target: &Target, dir: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    let api = crate::backend::hip::HipApi::open(0, dir).map_err(|e| NoDevice(e.to_string()))?;
    let arch = crate::gpu::GpuApi::props(&api).arch.clone();
    if arch != target.name {
        return Err(NoDevice(format!(
            "the HIP device here is {arch}, not {}: run target {arch} instead",
            target.name
        )));
    }
    let driver = api.driver().to_string();
    Ok(Box::new(
        crate::gpu::backend::GpuBackend::new(api, target.caps()).with_driver(driver),
    ))
}

#[cfg(not(feature = "hip"))]
fn open_hip(_: &Target, _: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    Err(NoDevice(
        "this runner was built without the `hip` feature (on by default; --no-default-features drops it)".into(),
    ))
}

/// Open the emulated backend of GPU `target` (src/emu/): its kernels on the CPU.
pub fn open_emulated(target: &Target) -> Result<Box<dyn Backend>, NoDevice> {
    crate::emu::backend::EmuBackend::new(target.caps())
        .map(|b| Box::new(b) as Box<dyn Backend>)
        .map_err(|e| NoDevice(e.to_string()))
}

/// Everything `run_target` needs besides the backend.
pub struct RunSpec<'a> {
    pub matrix: &'a Matrix,
    pub target: &'a Target,
    pub filter: &'a Filter,
    pub bench_golden: &'a BenchGolden,
    pub repro_extra: String,
    /// `--dump DIR`: where the arrays of failing (or all) checks go.
    pub dump: Option<&'a Dumper>,
    /// The journal every finished unit is streamed to (`crate::journal`).
    pub journal: &'a Path,
    /// Keep the journal and skip every unit it has begun (a restart after a crash).
    pub resume: bool,
}

/// Run the selected cases on `backend`, unit by unit (a suite on one input), streaming each
/// unit's records to the journal as it ends; progress lines go to `progress`. A panic in a
/// unit becomes its `crashed` record and the run goes on. The results are the journal's
/// records: with `resume`, those of the earlier runs too, in plan order.
pub fn run_target(
    spec: &RunSpec,
    backend: &dyn Backend,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<TargetResults> {
    let mut journal = Journal::open(spec.journal, !spec.resume)?;
    if spec.resume {
        let earlier = journal::read(spec.journal)?;
        journal.close_in_flight(
            &earlier,
            "a previous runner died in this check (its exit status was not recorded); \
             skipped on resume",
        )?;
    }
    let done = journal::read(spec.journal)?.begun;
    journal.append(&Entry::Start(journal::Start {
        target: spec.target.name.clone(),
        device: backend.device(),
        seed: spec.matrix.seed,
        started: utc_now(),
        pid: std::process::id(),
    }))?;
    let test_crash = TestCrash::from_env();
    // A PTX run on a newer card keeps no bench medians: its bench checks are skipped,
    // each with the reason, before anything is timed.
    let ptx = backend.ptx_run();
    let units = planned_units(spec.matrix, spec.target, spec.filter);
    let total = units.len();
    for (i, (case, unit)) in units.iter().enumerate() {
        if done.contains(unit) {
            progress(&format!(
                "[{}/{total}] {} {unit}: done by an earlier run, skipped",
                i + 1,
                spec.target.name
            ));
            continue;
        }
        progress(&format!("[{}/{total}] {} {unit}", i + 1, spec.target.name));
        let filter = unit_filter(spec.filter, unit);
        let ctx = Ctx {
            matrix: spec.matrix,
            target: spec.target,
            backend,
            filter: &filter,
            bench_golden: spec.bench_golden,
            repro_extra: spec.repro_extra.clone(),
            dump: spec.dump,
        };
        let begin = journal::Begin {
            unit: unit.clone(),
            repro: ctx.repro(unit.suite, &unit.case, &unit.dist, "-"),
        };
        journal.append(&Entry::Begin(begin.clone()))?;
        let clock = std::time::Instant::now();
        let records = crash::catch(|| {
            if let Some(t) = &test_crash {
                t.fire(unit);
            }
            match &ptx {
                Some(run) if unit.suite == Suite::Bench => {
                    bench_skipped(&ctx, case, &run.bench_skip())
                }
                _ => run_suite(&ctx, case, unit.suite),
            }
        })
        .unwrap_or_else(|panic| {
            progress(&format!("{} {unit}: crashed: {panic}", spec.target.name));
            vec![journal::crashed_record(&begin, &panic)]
        });
        for r in records {
            journal.append(&Entry::Record(Box::new(r)))?;
        }
        journal.append(&Entry::End {
            unit: unit.clone(),
            seconds: clock.elapsed().as_secs_f64(),
        })?;
    }
    let st = journal::read(spec.journal)?;
    Ok(TargetResults {
        target: spec.target.name.clone(),
        status: if ptx.is_some() {
            TargetStatus::RunPtx
        } else {
            TargetStatus::Run
        },
        reason: ptx.as_ref().map(|p| p.reason()).unwrap_or_default(),
        device: backend.device(),
        seed: spec.matrix.seed,
        started: st
            .starts
            .first()
            .map_or_else(utc_now, |s| s.started.clone()),
        seconds: st.seconds,
        records: st.records,
    })
}

/// The bench checks of `case`, each skipped with `why` (a PTX run on a newer card: its
/// times say nothing about the target's card), without building inputs or timing.
fn bench_skipped(ctx: &Ctx, case: &Case, why: &str) -> Vec<crate::results::Record> {
    use crate::matrix::FamilyName;
    let Some(dist) = crate::cases::dists(case)
        .into_iter()
        .find(|d| ctx.filter.dist(d))
    else {
        return Vec::new();
    };
    let checks: &[&str] = match case.family() {
        FamilyName::Attention => &["fwd", "bwd"],
        FamilyName::Topk | FamilyName::Scores => &["-"],
    };
    let mut out = Vec::new();
    for check in checks {
        for variant in case.variants.iter().filter(|v| ctx.filter.variant(v)) {
            let mut rec = ctx.record(Suite::Bench, case, &dist, variant, check);
            rec.status = crate::results::Status::Skip;
            rec.message = why.to_string();
            out.push(rec);
        }
    }
    out
}

/// The units of the run, in order: per planned case, per selected suite, per selected
/// distribution (bench: one unit, it measures the first selected distribution).
pub fn planned_units<'m>(
    matrix: &'m Matrix,
    target: &Target,
    filter: &Filter,
) -> Vec<(&'m Case, Unit)> {
    let mut out = Vec::new();
    for case in planned_cases(matrix, target, filter) {
        for suite in Suite::ALL {
            if !case.suites.contains(&suite) || !filter.suite(suite) {
                continue;
            }
            let dists = if suite == Suite::Bench {
                vec!["-".to_string()]
            } else {
                crate::cases::dists(case)
                    .into_iter()
                    .filter(|d| filter.dist(d))
                    .collect()
            };
            for dist in dists {
                let unit = Unit {
                    suite,
                    case: case.name.clone(),
                    dist,
                };
                out.push((case, unit));
            }
        }
    }
    out
}

/// The user's filter narrowed to one unit (variants as the user chose them).
fn unit_filter(user: &Filter, unit: &Unit) -> Filter {
    Filter {
        cases: vec![unit.case.clone()],
        suites: vec![unit.suite],
        variants: user.variants.clone(),
        dists: if unit.dist == "-" {
            user.dists.clone()
        } else {
            vec![unit.dist.clone()]
        },
        shard: None,
    }
}

/// The cases of `matrix` that run on `target` under `filter` (shards applied), in order.
pub fn planned_cases<'m>(
    matrix: &'m Matrix,
    target: &Target,
    filter: &Filter,
) -> Vec<&'m crate::matrix::Case> {
    matrix
        .cases
        .iter()
        .filter(|c| c.runs_on(target) && filter.case(&c.name))
        .filter(|c| c.suites.iter().any(|s| filter.suite(*s)))
        .enumerate()
        .filter(|(i, _)| filter.shard.is_none_or(|(k, n)| i % n == k - 1))
        .map(|(_, c)| c)
        .collect()
}

/// Results for a target that did not run: `built, not run` or `skipped`, with the reason.
pub fn not_run(
    matrix: &Matrix,
    target: &Target,
    status: TargetStatus,
    reason: String,
) -> TargetResults {
    TargetResults {
        target: target.name.clone(),
        status,
        reason,
        device: DeviceInfo::default(),
        seed: matrix.seed,
        started: utc_now(),
        seconds: 0.0,
        records: Vec::new(),
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "runner_ptx_tests.rs"]
mod ptx_tests;
