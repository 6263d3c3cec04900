//! The staged selection-attention kernels of kernels/selection_attention.cu on sm_90, run by
//! the emulator: their QK^T, P.V, S and dP go through the emulated mma.sync m16n8k16 (bf16
//! and f16), V's B fragments through ldmatrix.x4.trans, and the K / V staging through
//! cp.async with its zero-fill (keys past kv_len); the backward's dQ / dK / dV products go
//! through the emulated mma.sync m16n8k8 tf32, both with dK / dV by atomics and by the
//! KV-block-major kernel (qsa_attn_kv_bwd_*), and for bf16 that kernel with bf16 m16n8k16
//! products (qsa_attn_kv16_bwd_bf16, dO in 3 or 2 parts for dP; qsa_attn_kv16s_bwd_bf16, dO
//! split once per tile in shared memory). Each output is compared with the gather
//! kernels of the same source, which use none of those instructions (FP32 dot products, one
//! wave per row): a wrong fragment layout moves outputs by O(1), while only the f32 summation
//! order (and P's split into 16-bit parts, 2^-23 relative) may differ.

use half::{bf16, f16};
use qsa::dispatch::attention::{
    kv_bwd_shared_bytes, staged_plan, KvProducts, StagedPlan, GATHER_THREADS, KV_BWD_THREADS,
    STAGED_THREADS,
};
use qsa::dispatch::{TargetCaps, Vendor};
use qsa::emu::api::EmuApi;
use qsa::emu::Schedule;
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, DevPtr, GpuApi, LaunchDims};
use std::path::PathBuf;

const D: usize = 128;
/// batch, q_len, kv_len (4 blocks of 64, the last one partial), hq, hkv, ids per list: group
/// 4 (4 heads x 3 tokens per CTA), group 32 (two CTAs of 16 heads per token), group 3 (5
/// tokens x 3 heads: 15 of 16 rows) over two batches.
const SHAPES: [(usize, usize, usize, usize, usize, usize); 3] = [
    (1, 3, 200, 16, 4, 3),
    (1, 3, 200, 32, 1, 3),
    (2, 7, 200, 6, 2, 3),
];

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

struct Run<'a> {
    api: &'a EmuApi,
    src: PathBuf,
}

impl Run<'_> {
    fn buf<T: Copy>(&self, v: &[T]) -> DevPtr {
        let p = self.api.alloc(std::mem::size_of_val(v)).unwrap();
        self.api.upload(p, as_bytes(v)).unwrap();
        p
    }
    fn read(&self, p: DevPtr, n: usize) -> Vec<f32> {
        let mut v = vec![0f32; n];
        self.api.download(p, as_bytes_mut(&mut v)).unwrap();
        v
    }
    fn launch(&self, kernel: &str, grid: (u32, u32), block: u32, shared: u32, args: &[Arg]) {
        let d = LaunchDims {
            grid: (grid.0, grid.1, 1),
            block: (block, 1, 1),
            shared_bytes: shared,
        };
        self.api
            .launch_source(&self.src, kernel, d, args)
            .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    }
}

/// The emulator caches a module by the hash of the source it builds and the common headers;
/// the probe includes kernels/selection_attention.cu, which that hash does not see, so the
/// cache directory is keyed by that file's text (a changed kernel is rebuilt, not reused).
fn use_cache_keyed_by(kernel_source: &str) {
    use std::hash::{Hash, Hasher};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(kernel_source)).unwrap();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    std::env::set_var(
        "QSA_EMU_CACHE",
        root.join(format!("target/emu/attn-probe-{:016x}", h.finish())),
    );
}

/// |got - want| <= tol (1 + |want|) everywhere; -inf (a row that sees no key) must match.
fn check(what: &str, got: &[f32], want: &[f32], tol: f32) -> f32 {
    let mut worst = 0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_infinite() || g.is_infinite() {
            assert_eq!(g, w, "{what}[{i}]: staged {g}, gather {w}");
            continue;
        }
        let e = (g - w).abs() / (1.0 + w.abs());
        assert!(e <= tol, "{what}[{i}]: staged (mma) {g}, gather (FP32) {w}");
        worst = worst.max(e);
    }
    worst
}

#[test]
fn staged_attention_on_emulated_mma_matches_the_gather_kernels() {
    for shape in SHAPES {
        staged_matches_gather(shape);
    }
}

fn staged_matches_gather(
    (batch, q_len, kv_len, hq, hkv, t): (usize, usize, usize, usize, usize, usize),
) {
    let caps = TargetCaps {
        name: "sm_90".into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: 232_448,
        multiprocessors: 1, // keeps the plan unsplit (no combine kernel here)
        features: vec![],
    };
    use_cache_keyed_by("kernels/selection_attention.cu");
    let api = EmuApi::new(&caps, Schedule::Reverse).unwrap();
    let run = Run {
        api: &api,
        src: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/emu/attn_tc_nvidia.cu"),
    };
    let scale = 1.0 / (D as f32).sqrt();
    let rows = batch * q_len * hq;
    // Lists: a block, the partial last block, and a repeat of the first (counted once).
    let mut ids = Vec::new();
    for n in 0..batch * q_len {
        for g in 0..hkv {
            let b = ((n + g) % 4) as i32;
            ids.extend([b, 3, b][..t].iter().copied());
        }
    }
    let fwd = staged_plan(&caps, batch, q_len, hq, hkv, t, false).unwrap();
    let bwd = staged_plan(&caps, batch, q_len, hq, hkv, t, true).unwrap();
    assert_eq!(
        (fwd.nsplit, bwd.nsplit),
        (1, 1),
        "the test launches no combine kernel"
    );
    for is_bf16 in [true, false] {
        let name = if is_bf16 { "bf16" } else { "f16" };
        let bits = |v: Vec<f32>| -> Vec<u16> {
            v.into_iter()
                .map(|x| {
                    if is_bf16 {
                        bf16::from_f32(x).to_bits()
                    } else {
                        f16::from_f32(x).to_bits()
                    }
                })
                .collect()
        };
        let q = run.buf(&bits(values(rows * D, 11)));
        let k = run.buf(&bits(values(batch * kv_len * hkv * D, 12)));
        let v = run.buf(&bits(values(batch * kv_len * hkv * D, 13)));
        let pid = run.buf(&ids);
        let d_o = run.buf(&values(rows * D, 14));
        let dims = [batch, q_len, kv_len, hq, hkv, t].map(|x| Arg::I32(x as i32));
        let common = |extra: &[Arg]| -> Vec<Arg> {
            let mut a = vec![Arg::Ptr(q), Arg::Ptr(k), Arg::Ptr(v), Arg::Ptr(pid)];
            a.extend_from_slice(extra);
            a.extend_from_slice(&dims);
            a.push(Arg::F32(scale));
            a
        };
        let plan_args =
            |p: &StagedPlan| [p.hc, p.qt, p.nbuf, is_bf16 as usize].map(|x| Arg::I32(x as i32));
        let gather_grid = (rows.div_ceil(GATHER_THREADS as usize / 32) as u32, 1);
        let staged_grid = |p: &StagedPlan| (p.items as u32, 1);

        // Forward: (o, lse) of both kernels.
        let outs = |staged: bool| -> (Vec<f32>, Vec<f32>) {
            let (o, lse) = (
                run.buf(&vec![f32::NAN; rows * D]),
                run.buf(&vec![f32::NAN; rows]),
            );
            let mut a = common(&[Arg::Ptr(o), Arg::Ptr(lse)]);
            if staged {
                a.extend(plan_args(&fwd));
                run.launch(
                    "attn_staged_fwd",
                    staged_grid(&fwd),
                    STAGED_THREADS,
                    fwd.shared,
                    &a,
                );
            } else {
                a.push(Arg::I32(is_bf16 as i32));
                run.launch("attn_gather_fwd", gather_grid, GATHER_THREADS, 0, &a);
            }
            (run.read(o, rows * D), run.read(lse, rows))
        };
        let (go, glse) = outs(false);
        let (so, slse) = outs(true);
        // Measured worst (2026-12-01, this machine, printed below): 1.1e-7 for the forward,
        // 8e-8 for the gradients; the tolerances leave room for other inputs and stay far
        // below the O(1) of a layout error.
        let wo = check(&format!("{name} o"), &so, &go, 1e-5);
        let wl = check(&format!("{name} lse"), &slse, &glse, 1e-5);

        // Backward from the gather forward's (o, lse): dq, dk, dv of the gather kernel, the
        // staged kernel with dK / dV by atomics, and the staged query-side pass (dQ, D) followed
        // by the KV-block-major pass, whose dk / dv start as NaN: it must write every element.
        let (o, lse) = (run.buf(&go), run.buf(&glse));
        let grads = |path: &str| -> Vec<Vec<f32>> {
            let sizes = [rows * D, batch * kv_len * hkv * D, batch * kv_len * hkv * D];
            let kv = path.starts_with("kv");
            let fill = if kv { f32::NAN } else { 0.0 };
            let g: Vec<DevPtr> = sizes.iter().map(|&n| run.buf(&vec![fill; n])).collect();
            let drow = run.buf(&vec![f32::NAN; rows]);
            let outs = [o, lse, d_o, g[0], g[1], g[2]].map(Arg::Ptr);
            if path == "gather" {
                let mut a = common(&outs);
                a.push(Arg::I32(is_bf16 as i32));
                run.launch("attn_gather_bwd", gather_grid, GATHER_THREADS, 0, &a);
            } else {
                let mut a = common(&[&outs[..], &[Arg::Ptr(drow)]].concat());
                let p = plan_args(&bwd);
                a.extend_from_slice(&p[..3]);
                a.push(Arg::I32((path == "atomic") as i32));
                a.push(p[3]);
                run.launch(
                    "attn_staged_bwd",
                    staged_grid(&bwd),
                    STAGED_THREADS,
                    bwd.shared,
                    &a,
                );
            }
            if kv {
                // kv: 3xTF32 products; kv16: bf16 products, dO in 3 parts for dP; kv16p2: 2.
                let (products, dp_parts) = match path {
                    "kv16" => (1, 3),
                    "kv16p2" => (1, 2),
                    "kv16s" => (2, 3),
                    _ => (0, 3),
                };
                let mut a = common(&[lse, drow, d_o, g[1], g[2]].map(Arg::Ptr));
                a.extend(
                    [bwd.hc, bwd.qt, is_bf16 as usize, products, dp_parts]
                        .map(|x| Arg::I32(x as i32)),
                );
                let ctas = (batch * hkv * kv_len.div_ceil(64)) as u32;
                run.launch(
                    "attn_kv_bwd",
                    (ctas, 1),
                    KV_BWD_THREADS,
                    kv_bwd_shared_bytes(
                        KvProducts {
                            bf16: products > 0,
                            split: products == 2,
                            dp_parts: dp_parts as u32,
                            ..KvProducts::KV16S
                        },
                        false,
                    ) as u32,
                    &a,
                );
            }
            g.iter().zip(sizes).map(|(&p, n)| run.read(p, n)).collect()
        };
        let gg = grads("gather");
        // The bf16-product kernels exist for bf16 inputs only.
        let paths: &[&str] = if is_bf16 {
            &["atomic", "kv", "kv16", "kv16p2", "kv16s"]
        } else {
            &["atomic", "kv"]
        };
        for &path in paths {
            let sg = grads(path);
            let mut worst = [0f32; 3];
            for (j, what) in ["dq", "dk", "dv"].iter().enumerate() {
                worst[j] = check(&format!("{name} {path} {what}"), &sg[j], &gg[j], 1e-4);
            }
            println!(
                "group {} {name} {path}: worst |staged - gather| / (1 + |gather|): o {wo:.1e}, lse {wl:.1e}, dq {:.1e}, dk {:.1e}, dv {:.1e}",
                hq / hkv, worst[0], worst[1], worst[2]
            );
        }
    }
}
