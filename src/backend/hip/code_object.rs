//! Which GPU a HIP code object was built for, read from its header (no runtime needed).
//!
//! This is how `HipApi` learns the device's gfx name. `hipDeviceGetAttribute` has no string
//! attribute (`hipDeviceAttributeGcnArchName` existed in ROCm 5 and is "Unused5" since 6),
//! and `hipDeviceProp_t::gcnArchName` sits in a struct whose layout changed in ROCm 6. The
//! code objects the runner is told to use name their target exactly (an AMDGPU ELF carries
//! `EF_AMDGPU_MACH` and the xnack/sramecc bits in `e_flags`; a clang offload bundle carries
//! target ids such as `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`), and a trial
//! `hipModuleLoadData` then proves the device can run them (see `api.rs`).

use std::fmt;

/// One gfx target: "gfx906", plus target-id features like "xnack-" or "sramecc+".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GfxTarget {
    pub arch: String,
    pub features: Vec<String>,
}

impl GfxTarget {
    /// (major, minor, stepping) of a specific processor: gfx906 -> (9, 0, 6), gfx90a ->
    /// (9, 0, 10), gfx1201 -> (12, 0, 1), gfx950 -> (9, 5, 0). None for generic targets.
    /// HIP reports the first two as the device's "compute capability".
    pub fn version(&self) -> Option<(u32, u32, u32)> {
        let digits = self.arch.strip_prefix("gfx")?;
        if digits.len() < 3 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let (major, rest) = digits.split_at(digits.len() - 2);
        let mut rest = rest.chars();
        let minor = rest.next()?.to_digit(16)?;
        let stepping = rest.next()?.to_digit(16)?;
        Some((major.parse().ok()?, minor, stepping))
    }
}

impl fmt::Display for GfxTarget {
    /// The target id as clang and the runtime spell it: "gfx90a:xnack-".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.arch)?;
        for feature in &self.features {
            write!(f, ":{feature}")?;
        }
        Ok(())
    }
}

const ELF_MAGIC: &[u8] = b"\x7fELF";
const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const COMPRESSED_BUNDLE_MAGIC: &[u8] = b"CCOB";
const EM_AMDGPU: u16 = 224;
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `EI_ABIVERSION` of code object v4 and later (v4 = 2, v5 = 3, v6 = 4).
const ABI_V4: u8 = 2;

/// The gfx targets `bytes` (a whole `.co` file) holds: one for an AMDGPU ELF, one per
/// amdgcn entry for an offload bundle. The error says what the bytes are instead.
pub fn targets(bytes: &[u8]) -> Result<Vec<GfxTarget>, String> {
    if bytes.starts_with(ELF_MAGIC) {
        elf_target(bytes).map(|t| vec![t])
    } else if bytes.starts_with(BUNDLE_MAGIC) {
        bundle_targets(bytes)
    } else if bytes.starts_with(COMPRESSED_BUNDLE_MAGIC) {
        Err(
            "a compressed offload bundle (clang --offload-compress): build uncompressed code \
             objects, or set QSA_HIP_ARCH"
                .into(),
        )
    } else {
        Err("neither an AMDGPU ELF code object nor a clang offload bundle".into())
    }
}

fn elf_target(b: &[u8]) -> Result<GfxTarget, String> {
    // ELF64 little-endian header: EI_CLASS at 4, EI_DATA at 5, EI_OSABI at 7,
    // EI_ABIVERSION at 8, e_machine at 18, e_flags at 48; 64 bytes in all.
    if b.len() < 64 || b[4] != 2 || b[5] != 1 {
        return Err("an ELF file, but not a 64-bit little-endian one".into());
    }
    let machine = u16::from_le_bytes([b[18], b[19]]);
    if machine != EM_AMDGPU || b[7] != ELFOSABI_AMDGPU_HSA {
        return Err(format!(
            "an ELF file for machine {machine} / OS ABI {}, not an AMDGPU HSA code object",
            b[7]
        ));
    }
    let flags = u32::from_le_bytes([b[48], b[49], b[50], b[51]]);
    let mach = flags & 0xff;
    let arch = mach_name(mach)
        .ok_or_else(|| format!("an AMDGPU code object for EF_AMDGPU_MACH {mach:#x}, a processor this build does not know"))?;
    let mut features = Vec::new();
    if b[8] >= ABI_V4 {
        // Code object v4+: two-bit fields, "any" (unspecified) is not part of the target id.
        match flags & 0xc00 {
            0x800 => features.push("sramecc-".to_string()),
            0xc00 => features.push("sramecc+".to_string()),
            _ => {}
        }
        match flags & 0x300 {
            0x200 => features.push("xnack-".to_string()),
            0x300 => features.push("xnack+".to_string()),
            _ => {}
        }
    } else {
        // Code object v3: one bit each, set means "+".
        if flags & 0x200 != 0 {
            features.push("sramecc+".to_string());
        }
        if flags & 0x100 != 0 {
            features.push("xnack+".to_string());
        }
    }
    Ok(GfxTarget {
        arch: arch.to_string(),
        features,
    })
}

fn bundle_targets(b: &[u8]) -> Result<Vec<GfxTarget>, String> {
    let truncated = || "a truncated clang offload bundle".to_string();
    let u64_at = |at: usize| -> Result<u64, String> {
        let bytes = b.get(at..at + 8).ok_or_else(truncated)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    };
    let entries = u64_at(BUNDLE_MAGIC.len())?;
    let mut at = BUNDLE_MAGIC.len() + 8;
    let mut found = Vec::new();
    for _ in 0..entries {
        // Each entry: offset u64, size u64, id length u64, id bytes.
        let id_len = usize::try_from(u64_at(at + 16)?).map_err(|_| truncated())?;
        at += 24;
        let id = b.get(at..at + id_len).ok_or_else(truncated)?;
        at += id_len;
        let id = std::str::from_utf8(id).map_err(|_| "a bundle entry id that is not UTF-8")?;
        // "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-" (the host entry has no "amdgcn").
        if let Some((triple, target)) = id.split_once("--") {
            if triple.contains("amdgcn") && !target.is_empty() {
                let mut parts = target.split(':');
                let arch = parts.next().unwrap_or_default().to_string();
                found.push(GfxTarget {
                    arch,
                    features: parts.map(str::to_string).collect(),
                });
            }
        }
    }
    if found.is_empty() {
        return Err("a clang offload bundle with no amdgcn entry".into());
    }
    Ok(found)
}

/// `EF_AMDGPU_MACH_AMDGCN_*` (llvm/BinaryFormat/ELF.h) for the GCN 5 and later processors
/// HIP runs on; values are fixed once assigned.
fn mach_name(mach: u32) -> Option<&'static str> {
    Some(match mach {
        0x02c => "gfx900",
        0x02d => "gfx902",
        0x02e => "gfx904",
        0x02f => "gfx906",
        0x030 => "gfx908",
        0x031 => "gfx909",
        0x032 => "gfx90c",
        0x033 => "gfx1010",
        0x034 => "gfx1011",
        0x035 => "gfx1012",
        0x036 => "gfx1030",
        0x037 => "gfx1031",
        0x038 => "gfx1032",
        0x039 => "gfx1033",
        0x03d => "gfx1035",
        0x03e => "gfx1034",
        0x03f => "gfx90a",
        0x041 => "gfx1100",
        0x042 => "gfx1013",
        0x043 => "gfx1150",
        0x044 => "gfx1103",
        0x045 => "gfx1036",
        0x046 => "gfx1101",
        0x047 => "gfx1102",
        0x048 => "gfx1200",
        0x04a => "gfx1151",
        0x04c => "gfx942",
        0x04e => "gfx1201",
        0x04f => "gfx950",
        0x051 => "gfx9-generic",
        0x052 => "gfx10-1-generic",
        0x053 => "gfx10-3-generic",
        0x054 => "gfx11-generic",
        0x055 => "gfx1152",
        0x058 => "gfx1153",
        0x059 => "gfx12-generic",
        0x05f => "gfx9-4-generic",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/backend/hip/testdata")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn one(name: &str) -> GfxTarget {
        let t = targets(&fixture(name)).unwrap();
        assert_eq!(t.len(), 1, "{name}: {t:?}");
        t.into_iter().next().unwrap()
    }

    #[test]
    fn reads_the_target_of_real_clang_code_objects() {
        // The matrix's three AMD targets, as clang 22 writes them (testdata/README.md).
        assert_eq!(one("gfx906.co").to_string(), "gfx906");
        assert_eq!(one("gfx1201.co").to_string(), "gfx1201");
        assert_eq!(one("gfx950.co").to_string(), "gfx950");
        // A target id with a feature: the runtime refuses it on an xnack+ device.
        let t = one("gfx90a_xnack_off.co");
        assert_eq!(t.arch, "gfx90a");
        assert_eq!(t.features, vec!["xnack-".to_string()]);
        assert_eq!(t.to_string(), "gfx90a:xnack-");
    }

    #[test]
    fn reads_the_target_of_an_offload_bundle() {
        assert_eq!(one("gfx1201.bundle").to_string(), "gfx1201");
    }

    #[test]
    fn says_what_a_wrong_file_is() {
        assert!(targets(b"").unwrap_err().contains("neither"));
        assert!(targets(b"P5\n1 1\n255\n\0")
            .unwrap_err()
            .contains("neither"));
        assert!(targets(b"CCOB\x01\x00").unwrap_err().contains("compressed"));
        // A host ELF: right magic, wrong machine.
        let mut host = fixture("gfx906.co");
        host[18] = 62; // EM_X86_64
        host[7] = 0;
        assert!(targets(&host)
            .unwrap_err()
            .contains("not an AMDGPU HSA code object"));
        let mut unknown = fixture("gfx906.co");
        unknown[48] = 0xfe;
        assert!(targets(&unknown).unwrap_err().contains("0xfe"));
        let bundle = fixture("gfx1201.bundle");
        assert!(targets(&bundle[..40]).unwrap_err().contains("truncated"));
        assert!(targets(&fixture("gfx906.co")[..40])
            .unwrap_err()
            .contains("64-bit"));
    }

    #[test]
    fn gfx_versions_split_like_hip_reports_them() {
        let v = |arch: &str| {
            GfxTarget {
                arch: arch.into(),
                features: vec![],
            }
            .version()
        };
        assert_eq!(v("gfx906"), Some((9, 0, 6)));
        assert_eq!(v("gfx90a"), Some((9, 0, 10)));
        assert_eq!(v("gfx942"), Some((9, 4, 2)));
        assert_eq!(v("gfx950"), Some((9, 5, 0)));
        assert_eq!(v("gfx1201"), Some((12, 0, 1)));
        assert_eq!(v("gfx9-generic"), None);
        assert_eq!(v("sm_90"), None);
    }
}
