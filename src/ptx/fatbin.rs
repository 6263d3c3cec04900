//! What a CUDA fatbin carries: its entries (SASS ELF or PTX) and the architecture of each,
//! read from the container headers without cuobjdump (which a GPU machine without the
//! toolkit lacks), so the runner can tell before any work whether an older target's PTX
//! is there for the driver to compile.
//!
//! The layout (little-endian), as nvcc 13.0.88's `-fatbin` writes it and cuobjdump 13.2.51
//! lists it (`cuobjdump --list-ptx --list-elf build/kernels/sm_75/topk.fatbin`, 2026-12-01):
//! a container header `{magic u32 = 0xBA55ED50, version u16, header_size u16, body_size
//! u64}`, then entries `{kind u16 (1 PTX, 2 ELF), version u16, header_size u32,
//! padded_payload_size u64, ..., arch u32 at offset 28}` each followed by its payload.
//! A file may hold several containers back to back.
//!
//! Arch-specific PTX (`compute_90a`, what sm_90's wgmma kernels need) runs on no other
//! architecture, so it cannot stand for the target on a newer card: such entries are left
//! out. nvcc 13.0.88 marks them with bit 0x0010_0000 of the u32 at entry offset 40 (flags
//! 0x0010_8011 against 0x0000_8011: kernels/probe.cu built `-gencode
//! arch=compute_90,code=compute_90` and `..._90a..._90a` differ there and in the payload
//! size only, 2026-12-02).

/// The magic number that opens every fatbin container.
pub const MAGIC: u32 = 0xBA55_ED50;
const CONTAINER_HEADER: usize = 16;
/// The entry header reaches at least past its arch field (offset 28, 4 bytes).
const ENTRY_HEADER_MIN: usize = 32;
/// Where the arch-specific ("a") mark of an entry is, and its bit.
const ARCH_SPECIFIC_AT: usize = 40;
const ARCH_SPECIFIC_BIT: u32 = 0x0010_0000;

/// What one fatbin entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// PTX for `compute_<arch>`: the driver compiles it for the card at load.
    Ptx,
    /// SASS for `sm_<arch>` (an ELF cubin): runs only on that architecture family.
    Sass,
}

/// One entry: its kind and architecture number (75 for sm_75 / compute_75).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub arch: u32,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The entries of a fatbin file, or why it is not one (a plain cubin, a truncated file).
pub fn entries(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    if bytes.starts_with(b"\x7fELF") {
        return Err("a plain cubin (SASS only, no PTX), not a fatbin".into());
    }
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        if u32_at(bytes, at) != Some(MAGIC) {
            return Err(format!(
                "no fatbin magic (0x{MAGIC:08X}) at byte {at}: not a fatbin, or truncated"
            ));
        }
        let header = usize::from(u16_at(bytes, at + 6).unwrap_or(0));
        let body = u64_at(bytes, at + 8)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| format!("truncated fatbin header at byte {at}"))?;
        if header < CONTAINER_HEADER {
            return Err(format!("fatbin header at byte {at} claims {header} bytes"));
        }
        let start = at + header;
        let end = start
            .checked_add(body)
            .filter(|e| *e <= bytes.len())
            .ok_or_else(|| {
                format!("fatbin at byte {at} claims {body} bytes past the end of the file")
            })?;
        let mut e = start;
        while e < end {
            let kind = u16_at(bytes, e);
            let eh = u32_at(bytes, e + 4).map(|v| v as usize);
            let payload = u64_at(bytes, e + 8).and_then(|v| usize::try_from(v).ok());
            let arch = u32_at(bytes, e + 28);
            let (Some(kind), Some(eh), Some(payload), Some(arch)) = (kind, eh, payload, arch)
            else {
                return Err(format!("truncated fatbin entry at byte {e}"));
            };
            if eh < ENTRY_HEADER_MIN {
                return Err(format!(
                    "fatbin entry at byte {e} claims a {eh}-byte header"
                ));
            }
            let arch_specific = eh >= ARCH_SPECIFIC_AT + 4
                && u32_at(bytes, e + ARCH_SPECIFIC_AT).is_some_and(|f| f & ARCH_SPECIFIC_BIT != 0);
            let kind = match kind {
                1 if arch_specific => None, // compute_XXa: JIT-compiles for XX only
                1 => Some(Kind::Ptx),
                2 => Some(Kind::Sass),
                _ => None, // other kinds (none seen from nvcc 13): not code we can use
            };
            if let Some(kind) = kind {
                out.push(Entry { kind, arch });
            }
            e = e
                .checked_add(eh)
                .and_then(|x| x.checked_add(payload))
                .filter(|x| *x <= end)
                .ok_or_else(|| format!("fatbin entry at byte {e} runs past its container"))?;
        }
        at = end;
    }
    Ok(out)
}

/// The PTX architectures a fatbin carries (75 for compute_75), in file order.
pub fn ptx_archs(bytes: &[u8]) -> Result<Vec<u32>, String> {
    Ok(entries(bytes)?
        .into_iter()
        .filter(|e| e.kind == Kind::Ptx)
        .map(|e| e.arch)
        .collect())
}

/// A fatbin made of the given entries, laid out as nvcc writes them (tests, here and in
/// the decision's tests).
#[cfg(test)]
pub fn synthetic(entries: &[(Kind, u32, usize)]) -> Vec<u8> {
    let mut body = Vec::new();
    for &(kind, arch, payload) in entries {
        let mut h = vec![0u8; 64];
        h[0..2].copy_from_slice(&(if kind == Kind::Ptx { 1u16 } else { 2u16 }).to_le_bytes());
        h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        h[4..8].copy_from_slice(&64u32.to_le_bytes());
        h[8..16].copy_from_slice(&(payload as u64).to_le_bytes());
        h[28..32].copy_from_slice(&arch.to_le_bytes());
        body.extend(h);
        body.extend(std::iter::repeat_n(0xAAu8, payload));
    }
    let mut out = Vec::new();
    out.extend(MAGIC.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend((body.len() as u64).to_le_bytes());
    out.extend(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_specific_ptx_is_not_portable_ptx() {
        // synthetic's 64-byte entry header, with the "a" mark set on the PTX.
        let mut f = synthetic(&[(Kind::Ptx, 90, 16)]);
        let e = CONTAINER_HEADER;
        f[e + ARCH_SPECIFIC_AT..e + ARCH_SPECIFIC_AT + 4]
            .copy_from_slice(&ARCH_SPECIFIC_BIT.to_le_bytes());
        assert_eq!(ptx_archs(&f).unwrap(), Vec::<u32>::new());
        f[e + ARCH_SPECIFIC_AT..e + ARCH_SPECIFIC_AT + 4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(ptx_archs(&f).unwrap(), vec![90]);
    }

    #[test]
    fn sass_and_ptx_entries_with_their_archs() {
        let f = synthetic(&[(Kind::Sass, 75, 40), (Kind::Ptx, 75, 24)]);
        assert_eq!(
            entries(&f).unwrap(),
            [
                Entry {
                    kind: Kind::Sass,
                    arch: 75
                },
                Entry {
                    kind: Kind::Ptx,
                    arch: 75
                }
            ]
        );
        assert_eq!(ptx_archs(&f).unwrap(), [75]);
        let sass_only = synthetic(&[(Kind::Sass, 86, 40)]);
        assert_eq!(ptx_archs(&sass_only).unwrap(), Vec::<u32>::new());
        // Two containers back to back.
        let two = [f.clone(), synthetic(&[(Kind::Ptx, 86, 8)])].concat();
        assert_eq!(ptx_archs(&two).unwrap(), [75, 86]);
    }

    #[test]
    fn a_cubin_a_truncated_file_or_garbage_is_an_error_naming_it() {
        let cubin = b"\x7fELF\x02\x01\x01rest";
        assert!(ptx_archs(cubin).unwrap_err().contains("plain cubin"));
        let f = synthetic(&[(Kind::Ptx, 75, 24)]);
        let cut = &f[..f.len() - 5];
        assert!(
            ptx_archs(cut).unwrap_err().contains("past the end"),
            "{:?}",
            ptx_archs(cut)
        );
        assert!(ptx_archs(b"not a fatbin at all")
            .unwrap_err()
            .contains("no fatbin magic"));
        let mut lying = f.clone();
        lying[16 + 8..16 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(ptx_archs(&lying).unwrap_err().contains("runs past"));
    }

    /// The fatbins `cargo xtask build` wrote here (nvcc 13.0.88): each carries its own
    /// target's PTX, which is what the PTX mode loads on a newer card. Without a build the
    /// test says so and checks nothing else.
    #[test]
    fn the_built_sm_75_and_sm_86_fatbins_carry_their_ptx() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for (t, arch) in [("sm_75", 75), ("sm_86", 86), ("sm_90", 90)] {
            for stem in ["topk", "block_scores", "selection_attention"] {
                let p = root.join(format!("build/kernels/{t}/{stem}.fatbin"));
                let Ok(bytes) = std::fs::read(&p) else {
                    continue;
                };
                seen += 1;
                let e = entries(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(
                    e.contains(&Entry {
                        kind: Kind::Ptx,
                        arch
                    }),
                    "{} carries no compute_{arch} PTX: {e:?}",
                    p.display()
                );
                assert!(
                    e.contains(&Entry {
                        kind: Kind::Sass,
                        arch
                    }),
                    "{} carries no sm_{arch} SASS: {e:?}",
                    p.display()
                );
            }
        }
        if seen == 0 {
            eprintln!("SKIPPED: no build/kernels/sm_*/ fatbins here (cargo xtask build)");
        }
    }
}
