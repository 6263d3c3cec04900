//! Compile a kernel source for the host: one shared library per (source, vendor, wave
//! width, arch), built with the host C++ compiler through the emulation branch of
//! kernels/common/portable.h, cached by the hash of everything that goes into it.
//!
//! The wave width is a compile-time constant of the kernels (QSA_WAVE sizes arrays and
//! unrolls loops), so it is a build parameter, like the GPU targets' own builds.

use super::EmuTarget;
use crate::backend::{BackendError, BackendResult};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Largest dynamic shared memory a launch may ask for: at least every target's
/// shared_per_block in matrix.yaml (sm_90: 232,448). The array is thread-local storage.
pub const DYN_SHARED_MAX: u32 = 256 * 1024;

/// Part of every module's cache key: change it with what `wrapper` generates (the wrapper
/// itself is made only on a cache miss, after preprocessing).
const WRAPPER_LAYOUT: &str = "6: TLS init functions; dynamic shared arrays (named in the source or the headers it includes) defined before the source; kernels and cluster sizes from the preprocessor";

/// Defined only when preprocessing a source to list its kernels: kernels/common/emu_cluster.h
/// then spells `QSA_CLUSTER_DIMS(x)` as `qsa_emu_cluster_dims(x)`, so the cluster size of each
/// kernel is read from the same text as its name (in the build itself the attribute is empty).
const SCAN_CLUSTERS: &str = "-DQSA_EMU_SCAN_CLUSTERS";
/// What `QSA_CLUSTER_DIMS(x)` reads in the scanned text.
const CLUSTER_MARKER: &str = "qsa_emu_cluster_dims(";

/// A kernel of a preprocessed source: its name and the blocks of one cluster along x
/// (`QSA_CLUSTER_DIMS`; 1 without).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelDecl {
    pub name: String,
    pub cluster: u32,
}

/// Compiler flags. No -ffast-math: the kernels' float semantics (NaN, -0) are under test.
const CXX_FLAGS: &[&str] = &[
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-shared",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    // `#pragma unroll` is CUDA's; g++ does not know it.
    "-Wno-unknown-pragmas",
    // The runtime poisons a block's shared memory with memset over the thread-local range
    // located from a one-byte anchor (emu_blocks.h `run_cluster`); glibc's fortified memset
    // reads that as an overflow and aborts ("*** buffer overflow detected ***"). Ubuntu's g++
    // defines _FORTIFY_SOURCE=3 by default: seen on the H200 image's g++ 13.3 (2026-12-01),
    // reproduced here with `QSA_EMU_CXX` = g++ -D_FORTIFY_SOURCE=3 (tests/emu_mma.rs aborts).
    "-U_FORTIFY_SOURCE",
    "-DQSA_EMU",
];

/// The kernels a preprocessed source defines for this build: every `extern "C" void NAME(`
/// of the source file itself (QSA_KERNEL expands to `extern "C"` in the emulation branch),
/// with its cluster size: `extern "C" qsa_emu_cluster_dims(N) void NAME(` (the text is
/// preprocessed with `SCAN_CLUSTERS`) is a kernel of clusters of N blocks. Reading the
/// preprocessor's output, not the text, sees kernels made by macros (selection_attention.cu's
/// instances) and leaves out those an `#if` drops for this target (the sm_80+ tensor-core
/// scorers on sm_75, the gfx950 MFMA kernel elsewhere; the cluster top-k below sm_90).
pub fn kernel_decls(preprocessed_source: &str) -> Vec<KernelDecl> {
    let mut kernels: Vec<KernelDecl> = Vec::new();
    let mut rest = preprocessed_source;
    while let Some(i) = rest.find("extern \"C\"") {
        rest = &rest[i + "extern \"C\"".len()..];
        let mut decl = rest.trim_start();
        let mut cluster = 1;
        if let Some(dims) = decl.strip_prefix(CLUSTER_MARKER) {
            let Some((n, after)) = dims.split_once(')') else {
                continue;
            };
            // 0: not a number (an expression the preprocessor left as it is); the module
            // refuses to launch the kernel, saying so (module.rs `check_dims`).
            cluster = n.trim().trim_end_matches(['u', 'U']).parse().unwrap_or(0);
            decl = after.trim_start();
        }
        let Some(after) = decl.strip_prefix("void") else {
            continue;
        };
        if !after.starts_with(char::is_whitespace) {
            continue;
        }
        let after = after.trim_start();
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty()
            && after[name.len()..].trim_start().starts_with('(')
            && !kernels.iter().any(|k| k.name == name)
        {
            kernels.push(KernelDecl { name, cluster });
        }
    }
    kernels
}

/// The names given to QSA_DYNAMIC_SHARED(name) in a source.
pub fn dynamic_shared_names(source: &str) -> Vec<String> {
    let mut names: Vec<String> = source
        .match_indices("QSA_DYNAMIC_SHARED(")
        .filter_map(|(i, m)| {
            let rest = &source[i + m.len()..];
            let name = &rest[..rest.find(')')?];
            let ok =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            ok.then(|| name.to_string())
        })
        .filter(|n| n != "name") // the macro's own definition in portable.h
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The dynamic shared arrays of a module: named in its source `text` or in a header it
/// includes, directly or through another header (a kernel body moved into a header declares
/// its array there: selection_attention.cu's split left none in the .cu). Only those: an
/// array of another source's header would widen this module's shared window (qsa_smem_addr).
pub fn module_dynamic_shared_names(kernels_dir: &Path, text: &str) -> BackendResult<Vec<String>> {
    let common = kernels_dir.join("common");
    let mut all = text.to_string();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut todo = quoted_includes(text);
    while let Some(inc) = todo.pop() {
        let found = [kernels_dir.join(&inc), common.join(&inc)]
            .into_iter()
            .find(|p| p.is_file());
        let Some(path) = found else { continue };
        if seen.contains(&path) {
            continue;
        }
        let header = read(&path)?;
        todo.extend(quoted_includes(&header));
        all += &header;
        seen.push(path);
    }
    Ok(dynamic_shared_names(&all))
}

/// The `#include "..."` names of a source (relative to kernels/ or kernels/common/).
fn quoted_includes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("#include \""))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

/// The translation unit that becomes the module: the kernel source, the runtime, the
/// dynamic shared arrays (`dyn_names`) and the registry of `kernels`.
fn wrapper(
    source_path: &Path,
    dyn_names: &[String],
    kernels: &[KernelDecl],
) -> BackendResult<String> {
    if kernels.is_empty() {
        return Err(BackendError::Input(format!(
            "{} declares no QSA_KERNEL for this target: nothing to emulate",
            source_path.display()
        )));
    }
    let mut w = String::new();
    w += "// Generated by src/emu/compile.rs: the kernel source as an emulated module.\n";
    // The dynamic shared arrays, and for each an empty TLS init function (`_ZTH<name>`,
    // Itanium ABI): an `extern thread_local` declared inside a function body (as
    // selection_attention.cu's templates do) is reached through that init function, which
    // g++ references weakly and, in a -fvisibility=hidden build, calls without checking
    // that it exists: undefined, the call jumps to address 0.
    w += "#include \"common/portable.h\"\n";
    for d in dyn_names {
        w += &format!(
            "thread_local __attribute__((aligned(16))) unsigned char {d}[{DYN_SHARED_MAX}];\n\
             extern \"C\" void _ZTH{}{d}() {{}}\n",
            d.len()
        );
    }
    w += &format!("#include \"{}\"\n", source_path.display());
    w += "#include \"common/emu_runtime.h\"\n";
    w += "extern const qsa_emu::KernelEntry qsa_emu_kernels[] = {\n";
    for k in kernels {
        w += &format!("    QSA_EMU_ENTRY({}, {}),\n", k.name, k.cluster);
    }
    w += "};\n";
    w += &format!(
        "extern const int qsa_emu_kernel_total = {};\n",
        kernels.len()
    );
    Ok(w)
}

fn compiler() -> String {
    std::env::var("QSA_EMU_CXX").unwrap_or_else(|_| "c++".into())
}

fn target_defines(t: &EmuTarget) -> Vec<String> {
    let mut d = vec![format!("-DQSA_EMU_WAVE={}", t.wave)];
    if t.hip {
        d.push("-DQSA_EMU_HIP".into());
        // The processor macro clang defines for the target (__gfx950__, ...): the kernels'
        // matrix-core paths are chosen by it.
        if t.name.starts_with("gfx") && t.name.chars().all(|c| c.is_ascii_alphanumeric()) {
            d.push(format!("-D__{}__", t.name));
        }
    } else if let Some(arch) = t.cuda_arch {
        d.push(format!("-DQSA_EMU_CUDA_ARCH={arch}"));
    }
    d
}

fn read(path: &Path) -> BackendResult<String> {
    std::fs::read_to_string(path)
        .map_err(|e| BackendError::Device(format!("cannot read {}: {e}", path.display())))
}

/// Build (or find in `cache`) the module of `source` (a file under `kernels_dir`) for `t`.
///
/// A source that does not build because it uses what the emulator does not model (inline
/// PTX, an undeclared vendor intrinsic such as `__cvta_generic_to_shared`) is
/// `BackendError::Unsupported` naming those instructions (`unemulated`); any other build
/// failure is a `Device` error with the compiler's message.
pub fn build(
    kernels_dir: &Path,
    source: &Path,
    t: &EmuTarget,
    cache: &Path,
) -> BackendResult<PathBuf> {
    let text = read(source)?;
    let common = kernels_dir.join("common");
    let mut h = Sha256::new();
    h.update(compiler().as_bytes());
    for f in CXX_FLAGS
        .iter()
        .map(|s| s.to_string())
        .chain(target_defines(t))
    {
        h.update(f.as_bytes());
    }
    h.update(WRAPPER_LAYOUT.as_bytes());
    h.update(source.to_string_lossy().as_bytes());
    h.update(text.as_bytes());
    for header in common_headers(&common)? {
        h.update(header.to_string_lossy().as_bytes());
        h.update(read(&header)?.as_bytes());
    }
    let hash: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let stem = source
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("kernels");
    let out = cache.join(format!("{stem}-{}-{hash}.so", t.module_tag()));
    if out.is_file() {
        return Ok(out);
    }
    // What the emulator does not model, found by an earlier build of these same inputs.
    let unsupported = out.with_extension("unsupported");
    if let Ok(why) = std::fs::read_to_string(&unsupported) {
        return Err(BackendError::Unsupported(why));
    }
    std::fs::create_dir_all(cache).map_err(|e| {
        BackendError::Device(format!(
            "cannot create the emulator cache {}: {e}",
            cache.display()
        ))
    })?;
    let own = preprocess(kernels_dir, source, t)?;
    let names = module_dynamic_shared_names(kernels_dir, &text)?;
    let wrapper = wrapper(source, &names, &kernel_decls(&own))?;
    // Unique scratch names, renamed into place: concurrent builds of one module are safe.
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    let tag: String = tag.chars().filter(char::is_ascii_alphanumeric).collect();
    let cpp = cache.join(format!("{stem}-{hash}-{tag}.cpp"));
    let tmp = cache.join(format!("{stem}-{hash}-{tag}.so.tmp"));
    std::fs::write(&cpp, &wrapper)
        .map_err(|e| BackendError::Device(format!("cannot write {}: {e}", cpp.display())))?;
    let result = Command::new(compiler())
        .args(CXX_FLAGS)
        .args(target_defines(t))
        .arg("-I")
        .arg(kernels_dir)
        .arg("-o")
        .arg(&tmp)
        .arg(&cpp)
        .arg("-lpthread")
        .output();
    let _ = std::fs::remove_file(&cpp);
    let output = result.map_err(|e| no_compiler(&e))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || !stderr.trim().is_empty() {
        let _ = std::fs::remove_file(&tmp);
        if !output.status.success() {
            if let Some(needs) = unemulated(&stderr, &own) {
                let why = format!(
                    "({} for {}) needs {}: inline PTX or vendor intrinsics the emulator does not model yet (the source builds as one module, so all its kernels wait for them)",
                    source.file_name().unwrap_or(source.as_os_str()).to_string_lossy(),
                    t.name,
                    needs.join(", "),
                );
                // Remembered beside the modules (same key): the next runner process does
                // not compile it again; a changed source or header is a new key.
                let scratch = cache.join(format!("{stem}-{hash}-{tag}.unsupported.tmp"));
                if std::fs::write(&scratch, &why).is_ok() {
                    let _ = std::fs::rename(&scratch, &unsupported);
                }
                return Err(BackendError::Unsupported(why));
            }
        }
        // Warnings fail too: the kernels build warning-free on every toolchain.
        return Err(BackendError::Device(format!(
            "emulated build of {} for {} failed ({}):\n{stderr}",
            source.display(),
            t.name,
            output.status
        )));
    }
    std::fs::rename(&tmp, &out).map_err(|e| {
        BackendError::Device(format!("cannot move {} into place: {e}", out.display()))
    })?;
    Ok(out)
}

fn no_compiler(e: &std::io::Error) -> BackendError {
    BackendError::Device(format!(
        "cannot run the host C++ compiler `{}` for the emulator: {e} (install g++ or clang++, or set QSA_EMU_CXX)",
        compiler()
    ))
}

/// Every header of kernels/common (a module depends on all of them), in a stable order.
fn common_headers(common: &Path) -> BackendResult<Vec<PathBuf>> {
    let entries = std::fs::read_dir(common)
        .map_err(|e| BackendError::Device(format!("cannot list {}: {e}", common.display())))?;
    let mut headers: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "h"))
        .collect();
    headers.sort();
    Ok(headers)
}

/// The preprocessed text of `source` itself for `t` (what its `#if`s keep; the headers'
/// text left out by the preprocessor's line markers).
fn preprocess(kernels_dir: &Path, source: &Path, t: &EmuTarget) -> BackendResult<String> {
    let output = Command::new(compiler())
        .args(["-x", "c++", "-E"])
        .args(
            CXX_FLAGS
                .iter()
                .filter(|f| f.starts_with("-D") || f.starts_with("-std")),
        )
        .args(target_defines(t))
        .arg(SCAN_CLUSTERS)
        .arg("-I")
        .arg(kernels_dir)
        .arg(source)
        .output()
        .map_err(|e| no_compiler(&e))?;
    if !output.status.success() {
        return Err(BackendError::Device(format!(
            "preprocessing {} for {} failed ({}):\n{}",
            source.display(),
            t.name,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(own_text(
        &String::from_utf8_lossy(&output.stdout),
        &source.to_string_lossy(),
    ))
}

/// The lines of preprocessor output that come from `file` (`# N "file" ...` markers say
/// which file the lines after them come from).
pub fn own_text(preprocessed: &str, file: &str) -> String {
    let mut own = String::new();
    let mut inside = false;
    for line in preprocessed.lines() {
        if let Some(marker) = line.strip_prefix("# ") {
            if marker.starts_with(|c: char| c.is_ascii_digit()) {
                inside = marker.split('"').nth(1) == Some(file);
                continue;
            }
        }
        if inside {
            own += line;
            own.push('\n');
        }
    }
    own
}

/// Why a source failed to build, if only for what the emulator does not model: the
/// instruction of each inline `asm` statement the source keeps for this target, and each
/// vendor intrinsic (`__name`) the compiler found undeclared. `None` when any error is of
/// another kind (a real compile error: reported in full).
pub fn unemulated(stderr: &str, own_text: &str) -> Option<Vec<String>> {
    let mut intrinsics = Vec::new();
    for line in stderr.lines() {
        let lower = line.to_ascii_lowercase();
        let is_error = lower.contains("error:") || lower.starts_with("error");
        if !is_error {
            continue;
        }
        if lower.contains("asm")
            || lower.contains("no such instruction")
            || lower.contains("invalid instruction mnemonic")
            || lower.contains("unknown mnemonic")
        {
            continue;
        }
        let name = undeclared(line)?;
        if !intrinsics.contains(&name) {
            intrinsics.push(name);
        }
    }
    let mut needs = asm_instructions(own_text);
    for n in intrinsics {
        if !needs.contains(&n) {
            needs.push(n);
        }
    }
    (!needs.is_empty()).then_some(needs)
}

/// The identifier of an "undeclared" error (g++: `'x' was not declared in this scope`;
/// clang: `use of undeclared identifier 'x'`) if it is a vendor intrinsic (starts `__`).
fn undeclared(line: &str) -> Option<String> {
    if !(line.contains("was not declared") || line.contains("undeclared identifier")) {
        return None;
    }
    let start = line.find(['\'', '\u{2018}'])?;
    let rest = &line[start..];
    let rest = rest.trim_start_matches(['\'', '\u{2018}']);
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    name.starts_with("__").then_some(name)
}

/// The first word of each inline `asm` statement's template: `cp.async.cg.shared.global`,
/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`, ... in source order, once each.
pub fn asm_instructions(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find("asm") {
        let at = from + i;
        from = at + 3;
        let before_ok =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if !before_ok {
            continue;
        }
        let mut rest = text[at + 3..].trim_start();
        for q in ["volatile", "__volatile__"] {
            if let Some(r) = rest.strip_prefix(q) {
                rest = r.trim_start();
            }
        }
        let Some(rest) = rest.strip_prefix('(') else {
            continue;
        };
        let Some(literal) = rest.trim_start().strip_prefix('"') else {
            continue;
        };
        let word: String = literal
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\\' && *c != ';')
            .collect();
        if !word.is_empty() && !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// A thread-local symbol of a module: its offset in the module's TLS block and its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSymbol {
    pub name: String,
    pub offset: u64,
    pub size: u64,
}

/// The TLS symbols of a shared library, from `readelf -sW` (binutils, beside the compiler).
pub fn tls_symbols(lib: &Path) -> BackendResult<Vec<TlsSymbol>> {
    let out = Command::new("readelf")
        .arg("-sW")
        .arg(lib)
        .output()
        .map_err(|e| BackendError::Device(format!("cannot run readelf (binutils): {e}")))?;
    if !out.status.success() {
        return Err(BackendError::Device(format!(
            "readelf -sW {} failed: {}",
            lib.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let mut syms: Vec<TlsSymbol> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // Num: Value Size Type Bind Vis Ndx Name
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || f[3] != "TLS" || f[6] == "UND" {
            continue;
        }
        let offset = u64::from_str_radix(f[1], 16).ok();
        let size = match f[2].strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => f[2].parse().ok(),
        };
        if let (Some(offset), Some(size)) = (offset, size) {
            let s = TlsSymbol {
                name: f[7].to_string(),
                offset,
                size,
            };
            if !syms.contains(&s) {
                syms.push(s); // .symtab and .dynsym list the exported ones twice
            }
        }
    }
    Ok(syms)
}

/// The mangled prefix of function-local statics of the extern "C" function `kernel`.
pub fn local_static_prefix(kernel: &str) -> String {
    format!("_ZZ{}{kernel}E", kernel.len())
}

#[cfg(test)]
#[path = "compile_tests.rs"]
mod tests;
