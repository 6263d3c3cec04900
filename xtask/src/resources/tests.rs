use super::*;

// Real tool output, captured from this build (xtask/tests/fixtures/README.md says how).
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../tests/fixtures/", $name))
    };
}

fn matrix() -> qsa::matrix::Matrix {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../matrix.yaml");
    qsa::matrix::Matrix::load(std::path::Path::new(path)).unwrap()
}

pub(crate) fn target(name: &str) -> Target {
    matrix().target(name).unwrap().clone()
}

fn decls(pairs: &[(&str, u32, u32)]) -> BTreeMap<String, LaunchDecl> {
    pairs
        .iter()
        .map(|(n, b, d)| {
            (
                n.to_string(),
                LaunchDecl {
                    block: Some(*b),
                    dynamic_shared: *d,
                },
            )
        })
        .collect()
}

#[test]
fn cuobjdump_usage_sm90_probe() {
    let u = parse_cuobjdump_usage(fixture!("probe_sm_90.res-usage.txt")).unwrap();
    assert_eq!(
        u["qsa_probe_scan"],
        CuobjdumpUsage {
            regs: 15,
            stack: 0,
            shared: 1088,
            local: 0
        }
    );
    assert_eq!(
        u["qsa_probe_histogram"],
        CuobjdumpUsage {
            regs: 16,
            stack: 0,
            shared: 2080,
            local: 0
        }
    );
    let u = parse_cuobjdump_usage(fixture!("block_scores_sm_86.res-usage.txt")).unwrap();
    assert_eq!(u.len(), 6);
    assert_eq!(
        u["block_scores_bf16_decode"],
        CuobjdumpUsage {
            regs: 128,
            stack: 152,
            shared: 0,
            local: 0
        }
    );
    assert_eq!(u["block_scores_simt"].shared, 43264);
    assert!(parse_cuobjdump_usage(" Function f:\n  REG:x STACK:0 SHARED:0 LOCAL:0\n").is_err());
}

#[test]
fn cuobjdump_max_threads() {
    let m = parse_cuobjdump_max_threads(fixture!("probe_sm_90.elf.txt")).unwrap();
    assert_eq!(m.get("qsa_probe_scan"), Some(&256));
    assert_eq!(m.get("qsa_probe_histogram"), Some(&256));
    let m = parse_cuobjdump_max_threads(fixture!("spill_sm_75.elf.txt")).unwrap();
    assert_eq!(m.get("spill_kernel"), Some(&1024));
}

#[test]
fn ptxas_logs() {
    let p = parse_ptxas(fixture!("probe_sm_90.ptxas.log")).unwrap();
    assert_eq!(
        p["qsa_probe_scan"],
        PtxasUsage {
            regs: 15,
            stack_frame: 0,
            spill_stores: 0,
            spill_loads: 0,
            smem: 64
        }
    );
    assert_eq!(p["qsa_probe_histogram"].smem, 1056);
    let p = parse_ptxas(fixture!("spill_sm_75.ptxas.log")).unwrap();
    assert_eq!(
        p["spill_kernel"],
        PtxasUsage {
            regs: 64,
            stack_frame: 272,
            spill_stores: 516,
            spill_loads: 532,
            smem: 0
        }
    );
    let p = parse_ptxas(fixture!("block_scores_sm_86.ptxas.log")).unwrap();
    assert_eq!(p.len(), 6);
    assert_eq!(
        (
            p["block_scores_tf32_decode"].spill_stores,
            p["block_scores_tf32_decode"].spill_loads
        ),
        (196, 144)
    );
    assert_eq!(p["block_scores_warp"].regs, 40);
}

#[test]
fn readobj_notes_all_three_amd_targets() {
    let k = parse_readobj_notes(fixture!("probe_gfx906.notes.txt")).unwrap();
    let h = k.iter().find(|k| k.name == "qsa_probe_histogram").unwrap();
    assert_eq!(
        (
            h.vgpr_count,
            h.sgpr_count,
            h.agpr_count,
            h.group_segment_fixed_size,
            h.wavefront_size,
            h.max_flat_workgroup_size
        ),
        (12, 27, None, 1040, 64, 256)
    );
    let k = parse_readobj_notes(fixture!("probe_gfx950.notes.txt")).unwrap();
    let h = k.iter().find(|k| k.name == "qsa_probe_histogram").unwrap();
    assert_eq!(
        (
            h.vgpr_count,
            h.sgpr_count,
            h.agpr_count,
            h.group_segment_fixed_size
        ),
        (11, 30, Some(0), 1040)
    );
    let k = parse_readobj_notes(fixture!("probe_gfx1201.notes.txt")).unwrap();
    let s = k.iter().find(|k| k.name == "qsa_probe_scan").unwrap();
    assert_eq!(
        (
            s.vgpr_count,
            s.sgpr_count,
            s.group_segment_fixed_size,
            s.wavefront_size
        ),
        (14, 10, 64, 32)
    );
    let k = parse_readobj_notes(fixture!("topk_gfx906.notes.txt")).unwrap();
    let s = k
        .iter()
        .find(|k| k.name == "qsa_topk_split_select")
        .unwrap();
    assert_eq!(
        (
            s.vgpr_count,
            s.sgpr_count,
            s.sgpr_spill_count,
            s.vgpr_spill_count
        ),
        (54, 100, 38, 0)
    );
    let k = parse_readobj_notes(fixture!("spill_gfx906.notes.txt")).unwrap();
    assert_eq!(
        (k[0].vgpr_spill_count, k[0].private_segment_fixed_size),
        (81, 176)
    );
    assert!(parse_readobj_notes("File: x.co\nNotes [\n]\n").is_err());
}

pub(crate) fn nvidia_probe_report() -> Report {
    let t = target("sm_90");
    let d = decls(&[
        ("qsa_probe_histogram", 256, 0),
        ("qsa_probe_scan", 256, 1024),
    ]);
    let kernels = nvidia_kernels(
        &t,
        "probe",
        fixture!("probe_sm_90.res-usage.txt"),
        fixture!("probe_sm_90.elf.txt"),
        fixture!("probe_sm_90.ptxas.log"),
        &d,
    )
    .unwrap();
    Report {
        target: "sm_90".into(),
        vendor: "nvidia".into(),
        wave: 32,
        compiler: "nvcc 13.0.88".into(),
        kernels,
    }
}

pub(crate) fn amd_topk_report() -> Report {
    let t = target("gfx906");
    let d = decls(&[
        ("qsa_topk_split_select", 512, 0),
        ("qsa_topk_wide", 1024, 0),
    ]);
    let kernels = amd_kernels(&t, "topk", fixture!("topk_gfx906.notes.txt"), &d).unwrap();
    Report {
        target: "gfx906".into(),
        vendor: "amd".into(),
        wave: 64,
        compiler: "clang 22.1.8 (Debian)".into(),
        kernels,
    }
}

#[test]
fn nvidia_report_combines_the_tools() {
    let r = nvidia_probe_report();
    let h = r.kernel("probe", "qsa_probe_histogram").unwrap();
    assert_eq!(
        (h.registers, h.static_shared, h.max_threads, h.spill_stores),
        (16, 2080, 256, Some(0))
    );
    // 256 threads, 16 regs on sm_90: 8 blocks by threads (see occupancy tests).
    assert_eq!(h.occupancy.unwrap().waves, 64);
    // A ptxas log from another binary is caught.
    let e = nvidia_kernels(
        &target("sm_90"),
        "probe",
        fixture!("probe_sm_90.res-usage.txt"),
        "",
        &fixture!("probe_sm_90.ptxas.log").replace("Used 15 registers", "Used 17 registers"),
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("ptxas says 17 registers, cuobjdump 15"),
        "{e}"
    );
}

#[test]
fn amd_report_wave_mismatch_is_an_error() {
    let e = amd_kernels(
        &target("gfx1201"),
        "topk",
        fixture!("topk_gfx906.notes.txt"),
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("wave 64 but target gfx1201 has wave 32"),
        "{e}"
    );
}

#[test]
fn text_round_trips_and_is_aligned() {
    for r in [nvidia_probe_report(), amd_topk_report()] {
        let text = r.to_text();
        let back = Report::from_text(&text).unwrap();
        assert_eq!(back.to_text(), text);
        assert_eq!(back.kernels.len(), r.kernels.len());
        for (a, b) in back.kernels.iter().zip(&r.kernels) {
            assert_eq!(
                (a.registers, a.static_shared, a.stack, a.block),
                (b.registers, b.static_shared, b.stack, b.block)
            );
            assert_eq!(
                (a.spill_stores, a.spill_loads, a.vgpr_spills, a.sgpr_spills),
                (b.spill_stores, b.spill_loads, b.vgpr_spills, b.sgpr_spills)
            );
            assert_eq!(
                a.occupancy
                    .map(|o| (o.waves, o.max_waves, o.blocks, o.limiter)),
                b.occupancy
                    .map(|o| (o.waves, o.max_waves, o.blocks, o.limiter))
            );
        }
        // Every table line has its columns at the same offsets as the header.
        let table: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let col = |l: &str| l.find(" kernel").or_else(|| l.find(" qsa_"));
        assert!(table.iter().all(|l| col(l) == col(table[0])), "{text}");
    }
    // Inside an insta snapshot file.
    let r = nvidia_probe_report();
    let snap = format!(
        "---\nsource: xtask/src/golden.rs\nexpression: resources\n---\n{}",
        r.to_text()
    );
    assert_eq!(Report::from_text(&snap).unwrap().to_text(), r.to_text());
    assert!(Report::from_text("garbage\n").is_err());
}

#[test]
fn text_snapshot_of_the_probe_on_sm_90() {
    let text = nvidia_probe_report().to_text();
    let expected = "\
# target: sm_90  vendor: nvidia  wave: 32  compiler: nvcc 13.0.88
# bytes: dyn_smem smem stack local spill_st spill_ld; regs per thread; blocks/SM, warps/SM: resident at the declared block size
source  kernel               block  dyn_smem  regs  smem  stack  local  spill_st  spill_ld  max_thr  blocks/SM  warps/SM   occ  limiter
probe   qsa_probe_histogram    256         0    16  2080      0      0         0         0      256          8     64/64  100%  threads
probe   qsa_probe_scan         256      1024    15  1088      0      0         0         0      256          8     64/64  100%  threads
";
    assert_eq!(text, expected);
}
