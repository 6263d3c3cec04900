//! Shared by tests/emu_mma.rs (the emulated primitives) and tests/emu_mma_h200.rs (the same
//! probes on a real GPU): the probe launches, with every register built from the PTX ISA's
//! fragment tables (written from the document, not from emu_mma.h), and the reference
//! computations. Each test crate uses part of it.
#![allow(dead_code)]

use half::{bf16, f16};
use qsa::backend::BackendError;
use qsa::dispatch::{TargetCaps, Vendor};
use qsa::emu::api::EmuApi;
use qsa::emu::Schedule;
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, DevPtr, GpuApi, LaunchDims};
use std::path::PathBuf;

pub type Launch<'a> = &'a dyn Fn(&str, LaunchDims, &[Arg]) -> Result<(), BackendError>;

/// A device (emulated or real) and how to launch a probe kernel on it.
pub struct Dev<'a> {
    pub api: &'a dyn GpuApi,
    pub launch: Launch<'a>,
}

impl Dev<'_> {
    pub fn buf<T: Copy>(&self, init: &[T]) -> DevPtr {
        let p = self.api.alloc(std::mem::size_of_val(init)).unwrap();
        self.api.upload(p, as_bytes(init)).unwrap();
        p
    }
    pub fn read<T: Copy + Default>(&self, p: DevPtr, n: usize) -> Vec<T> {
        let mut v = vec![T::default(); n];
        self.api.download(p, as_bytes_mut(&mut v)).unwrap();
        v
    }
    pub fn run(&self, kernel: &str, grid: u32, block: u32, args: &[Arg]) {
        let d = LaunchDims {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_bytes: 0,
        };
        (self.launch)(kernel, d, args).unwrap_or_else(|e| panic!("{kernel}: {e}"));
    }
}

pub fn probe(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/emu")
        .join(name)
}

pub fn caps(name: &str, vendor: Vendor, wave: u32) -> TargetCaps {
    TargetCaps {
        name: name.into(),
        vendor,
        wave,
        shared_per_block: 65_536,
        multiprocessors: 2,
        features: vec![],
    }
}

/// Runs `f` on the emulated sm_90 with the NVIDIA probe.
pub fn with_emulated_sm90<R>(f: impl FnOnce(&Dev) -> R) -> R {
    let api = EmuApi::new(&caps("sm_90", Vendor::Nvidia, 32), Schedule::Reverse).unwrap();
    let src = probe("mma_probe.cu");
    let launch = |k: &str, d: LaunchDims, a: &[Arg]| api.launch_source(&src, k, d, a);
    f(&Dev {
        api: &api,
        launch: &launch,
    })
}

/// Deterministic small integers in [-lim, lim] (a 64-bit LCG: no RNG crate needed here).
pub fn ints(n: usize, seed: u64, lim: i64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as i64 % (2 * lim + 1) - lim) as f32
        })
        .collect()
}

// ---- PTX ISA fragment tables (written from the document, not from emu_mma.h) --------------
// Lane l: groupID g = l >> 2, threadID_in_group t = l % 4.
/// C / D of m16n8: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
pub fn c_pos(lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane % 4);
    (g + if i >= 2 { 8 } else { 0 }, 2 * t + i % 2)
}
/// m16n8k8 .tf32 A: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4). B: b0 (t, g), b1 (t+4, g).
pub fn tf32_a_pos(lane: usize, reg: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane % 4);
    (g + 8 * (reg % 2), t + 4 * (reg / 2))
}
pub fn tf32_b_pos(lane: usize, reg: usize) -> (usize, usize) {
    (lane % 4 + 4 * reg, lane >> 2)
}
/// m16n8k16 16-bit A: register r holds (row, k) and (row, k+1) in its low / high half:
/// a0 (g, 2t), a1 (g+8, 2t), a2 (g, 2t+8), a3 (g+8, 2t+8). B: b0 (k 2t, n g), b1 (k 2t+8, n g).
pub fn k16_a_pos(lane: usize, reg: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane % 4);
    (g + 8 * (reg % 2), 2 * t + 8 * (reg / 2))
}
pub fn k16_b_pos(lane: usize, reg: usize) -> (usize, usize) {
    (2 * (lane % 4) + 8 * reg, lane >> 2)
}

/// D = A B + C over matrices given row-major ([m][k], [k][n], [m][n]), in f64.
pub fn matmul(a: &[f32], b: &[f32], c: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut d = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|x| a[i * k + x] as f64 * b[x * n + j] as f64)
                .sum();
            d[i * n + j] = s + c[i * n + j] as f64;
        }
    }
    d
}

pub fn check_c(what: &str, d: &[f32], want: &[f64]) {
    for lane in 0..32 {
        for i in 0..4 {
            let (m, n) = c_pos(lane, i);
            assert_eq!(
                d[4 * lane + i] as f64,
                want[m * 8 + n],
                "{what}: lane {lane} register c{i} (row {m}, column {n})"
            );
        }
    }
}

/// The tf32 probe on `dev`: registers from A (16x8), B (8x8), C (16x8) by the PTX table.
pub fn run_tf32(dev: &Dev, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let mut ar = vec![0u32; 128];
    let mut br = vec![0u32; 64];
    let mut cr = vec![0f32; 128];
    for lane in 0..32 {
        for reg in 0..4 {
            let (m, k) = tf32_a_pos(lane, reg);
            ar[4 * lane + reg] = a[m * 8 + k].to_bits();
            let (m, n) = c_pos(lane, reg);
            cr[4 * lane + reg] = c[m * 8 + n];
        }
        for reg in 0..2 {
            let (k, n) = tf32_b_pos(lane, reg);
            br[2 * lane + reg] = b[k * 8 + n].to_bits();
        }
    }
    let (pa, pb, pc) = (dev.buf(&ar), dev.buf(&br), dev.buf(&cr));
    dev.run(
        "probe_mma_tf32",
        1,
        32,
        &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc)],
    );
    dev.read(pc, 128)
}

/// The m16n8k16 probe: A (16x16), B (16x8), C (16x8); `bits` narrows an f32 to 16 bits.
pub fn run_k16(dev: &Dev, bf: bool, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let bits = |x: f32| -> u32 {
        if bf {
            bf16::from_f32(x).to_bits() as u32
        } else {
            f16::from_f32(x).to_bits() as u32
        }
    };
    let mut ar = vec![0u32; 128];
    let mut br = vec![0u32; 64];
    let mut cr = vec![0f32; 128];
    for lane in 0..32 {
        for reg in 0..4 {
            let (m, k) = k16_a_pos(lane, reg);
            ar[4 * lane + reg] = bits(a[m * 16 + k]) | bits(a[m * 16 + k + 1]) << 16;
            let (m, n) = c_pos(lane, reg);
            cr[4 * lane + reg] = c[m * 8 + n];
        }
        for reg in 0..2 {
            let (k, n) = k16_b_pos(lane, reg);
            br[2 * lane + reg] = bits(b[k * 8 + n]) | bits(b[(k + 1) * 8 + n]) << 16;
        }
    }
    let (pa, pb, pc) = (dev.buf(&ar), dev.buf(&br), dev.buf(&cr));
    let args = [
        Arg::Ptr(pa),
        Arg::Ptr(pb),
        Arg::Ptr(pc),
        Arg::I32(bf as i32),
    ];
    dev.run("probe_mma_k16", 1, 32, &args);
    dev.read(pc, 128)
}

/// Identity-like A (A[m][k] = 1 iff k == m % K) pins each lane's A rows; integers pin B and C.
pub fn one_hot_a(m: usize, k: usize) -> Vec<f32> {
    (0..m * k)
        .map(|i| (i % k == (i / k) % k) as u8 as f32)
        .collect()
}

/// Rows of 8 b16 at a stride of 16 (16-byte aligned, as ldmatrix requires); lane l addresses
/// row ROW_OF[l] (a permutation, so a lane that reads its own row instead is caught).
pub fn ldmatrix_inputs() -> (Vec<u16>, Vec<i32>) {
    let src: Vec<u16> = (0..32 * 16).map(|i| 0x1000 + i as u16).collect();
    let row_of: Vec<i32> = (0..32).map(|l| (l * 7 + 3) % 32).collect();
    (src, row_of)
}

pub fn run_ldmatrix(dev: &Dev) -> Vec<u32> {
    let (src, row_of) = ldmatrix_inputs();
    let (ps, pr, po) = (dev.buf(&src), dev.buf(&row_of), dev.buf(&[0u32; 128]));
    let args = [Arg::Ptr(ps), Arg::Ptr(pr), Arg::I32(16), Arg::Ptr(po)];
    dev.run("probe_ldmatrix_trans", 1, 32, &args);
    dev.read(po, 128)
}

pub fn run_cp_async(dev: &Dev) -> (Vec<u8>, Vec<i32>, Vec<u8>) {
    let src: Vec<u8> = (0..512).map(|i| (i % 251) as u8 + 1).collect();
    let sizes: Vec<i32> = (0..32).map(|l| l % 17).collect();
    let (ps, pn, po) = (dev.buf(&src), dev.buf(&sizes), dev.buf(&[0u8; 512]));
    dev.run(
        "probe_cp_async",
        1,
        32,
        &[Arg::Ptr(ps), Arg::Ptr(pn), Arg::Ptr(po)],
    );
    (src, sizes, dev.read(po, 512))
}

/// f32 inputs of the conversion probe: specials, ties of each format, subnormals, random bits.
pub fn convert_inputs() -> Vec<f32> {
    let mut bits: Vec<u32> = vec![
        0x0000_0000,
        0x8000_0000,
        0x3f80_0000,
        0x7f80_0000,
        0xff80_0000, // 0, -0, 1, +-inf
        0x7fc0_0000,
        0xffc0_0000,
        0x7f80_0001,
        0x7fa0_0000, // NaNs: quiet, signalling, low payload
        0x0000_0001,
        0x807f_ffff,
        0x0040_0000, // f32 subnormals
        0x3f80_1000,
        0x3f80_3000,
        0xbf80_1000,
        0x3f80_0fff, // tf32 ties (even / odd lsb), below
        0x3f80_8000,
        0x3f81_8000,
        0xbf81_8000,
        0x3f80_8001, // bf16 ties
        0x3f80_1000,
        0x3f80_3000,
        0x3f80_2fff, // f16 ties: 13 dropped bits
        0x7f7f_ffff,
        0x7f7f_f000,
        0x7f7f_8000, // near f32 max: rounds to inf in every format
        0x477f_e000,
        0x477f_efff,
        0x477f_f000,
        0x4780_0000, // f16 max, below / at halfway, 2^16
        0x3880_0000,
        0x387f_ffff,
        0x3380_0000,
        0x3300_0000,
        0x3300_0001,
        0x3340_0000, // f16 subnormal edges
        0x3500_1000,
        0x3500_3000,
        0x3500_0800, // f16 subnormal ties
    ];
    let mut s = 0x2545_f491_4f6c_dd1du64;
    while bits.len() < 65_536 {
        // 65,536 inputs: the f16 widening sees every bit pattern
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        bits.push(s as u32);
    }
    bits.into_iter().map(f32::from_bits).collect()
}

/// cvt.rna.tf32.f32 from its definition: nearest tf32 (10 fraction bits; f32's exponent
/// range), ties away from zero, in f64. Overflow gives infinity; NaN stays NaN.
pub fn tf32_reference(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let a = (x as f64).abs();
    let exp = if a == 0.0 {
        -126
    } else {
        (a.log2().floor() as i32).max(-126)
    };
    let ulp = 2f64.powi(exp - 10);
    let q = a / ulp;
    let r = if q - q.floor() >= 0.5 {
        q.floor() + 1.0
    } else {
        q.floor()
    };
    let v = (r * ulp).copysign(x as f64);
    v as f32 // exact (or +-inf past f32's range)
}

/// The conversion probe's inputs and results, element by element.
pub struct Converted {
    pub x: Vec<f32>,
    pub tf32: Vec<u32>,
    pub bf16x2: Vec<u32>,
    pub f16x2: Vec<u32>,
    pub h32: Vec<f32>,
}

pub fn run_convert(dev: &Dev) -> Converted {
    let x = convert_inputs();
    let n = x.len();
    let h: Vec<u16> = (0..n).map(|i| (i * 16411 % 65536) as u16).collect();
    let (px, ph) = (dev.buf(&x), dev.buf(&h));
    let outs: Vec<DevPtr> = (0..4).map(|_| dev.buf(&vec![0u32; n])).collect();
    let args = [
        Arg::Ptr(px),
        Arg::Ptr(ph),
        Arg::Ptr(outs[0]),
        Arg::Ptr(outs[1]),
        Arg::Ptr(outs[2]),
        Arg::Ptr(outs[3]),
        Arg::I32(n as i32),
    ];
    dev.run("probe_convert", n.div_ceil(128) as u32, 128, &args);
    let tf: Vec<u32> = dev.read(outs[0], n);
    let (bf, hf): (Vec<u32>, Vec<u32>) = (dev.read(outs[1], n), dev.read(outs[2], n));
    let h32: Vec<f32> = dev.read(outs[3], n);
    Converted {
        x,
        tf32: tf,
        bf16x2: bf,
        f16x2: hf,
        h32,
    }
}
