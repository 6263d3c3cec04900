//! What serde cannot check in a matrix: dangling names, impossible shapes, duplicates; every
//! error names the file, the line (by the file's structure) and the field.

use super::*;

impl Matrix {
    pub(super) fn validate(&self) -> Result<(), MatrixError> {
        let (path, src) = (self.path.as_path(), self.source.as_str());
        if self.version != 1 {
            return Err(err_at(
                path,
                src,
                "version",
                "version",
                format!(
                    "version {} is not supported: this qsa reads version 1",
                    self.version
                ),
            ));
        }
        if self.gates.error_ratio.is_nan() || self.gates.error_ratio < 1.0 {
            return Err(err_at(
                path,
                src,
                "gates.error_ratio",
                "gates.error_ratio",
                "must be a number >= 1.0".into(),
            ));
        }
        let b = &self.gates.bench;
        if b.min_reps == 0
            || b.min_reps > b.max_reps
            || b.max_seconds.is_nan()
            || b.max_seconds <= 0.0
        {
            return Err(err_at(
                path,
                src,
                "gates.bench",
                "gates.bench",
                format!(
                    "need 1 <= min_reps ({}) <= max_reps ({}) and max_seconds > 0",
                    b.min_reps, b.max_reps
                ),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, t) in self.targets.iter().enumerate() {
            if !seen.insert(&t.name) {
                return Err(err_at(
                    path,
                    src,
                    &format!("targets[{i}].name"),
                    "targets.name",
                    format!("target `{}` is declared twice", echo::value(&t.name)),
                ));
            }
            self.check_target(i, t)?;
        }
        if !self.targets.iter().any(|t| t.vendor == Vendor::Cpu) {
            return Err(err_at(
                path,
                src,
                "targets",
                "targets",
                "a `cpu` target is required: it is the embedded default that always runs".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, v) in self.variants.iter().enumerate() {
            let at = format!("variants[{i}].name");
            if !seen.insert((v.family, &v.name)) {
                return Err(err_at(
                    path,
                    src,
                    &at,
                    "variants.name",
                    format!(
                        "variant `{}` of family {} is declared twice",
                        echo::value(&v.name),
                        v.family.name()
                    ),
                ));
            }
            for key in v.env.keys() {
                if !KNOWN_SWITCHES.iter().any(|(k, _)| k == key) {
                    let known: Vec<&str> = KNOWN_SWITCHES.iter().map(|(k, _)| *k).collect();
                    return Err(err_at(
                        path,
                        src,
                        &format!("variants[{i}].env.{key}"),
                        "variants.env",
                        format!(
                            "unknown switch `{}` in variant `{}`: known switches are {}",
                            echo::value(key),
                            echo::value(&v.name),
                            known.join(", ")
                        ),
                    ));
                }
            }
            if let Err(e) = crate::dispatch::scores::check_switches(&v.switches()) {
                return Err(err_at(
                    path,
                    src,
                    &format!("variants[{i}].env"),
                    "variants.env",
                    format!("variant `{}`: {e}", echo::value(&v.name)),
                ));
            }
        }
        for (family, name) in &self.baselines {
            if self.variant(*family, name).is_none() {
                return Err(err_at(
                    path,
                    src,
                    &format!("baselines.{}", family.name()),
                    "baselines",
                    format!(
                        "baseline `{}` of {} is not a declared variant of that family",
                        echo::value(name),
                        family.name()
                    ),
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.cases.iter().enumerate() {
            if !seen.insert(&c.name) {
                return Err(err_at(
                    path,
                    src,
                    &format!("cases[{i}].name"),
                    "cases.name",
                    format!("case `{}` is declared twice", echo::value(&c.name)),
                ));
            }
            self.check_case(c, i, path, src)?;
        }
        Ok(())
    }

    fn check_target(&self, i: usize, t: &Target) -> Result<(), MatrixError> {
        let (path, src) = (self.path.as_path(), self.source.as_str());
        let name = echo::value(&t.name);
        let valid_name = t.name == "cpu" || t.name.starts_with("sm_") || t.name.starts_with("gfx");
        if !valid_name {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].name"),
                "targets.name",
                format!(
                    "`{}` is not a target name: use `cpu`, `sm_<NN>` (NVIDIA) or `gfx<NNN>` (AMD)",
                    name
                ),
            ));
        }
        let vendor_ok = matches!(
            (t.vendor, t.name.as_str()),
            (Vendor::Cpu, "cpu") | (Vendor::Nvidia, _) | (Vendor::Amd, _)
        ) && (t.vendor != Vendor::Nvidia || t.name.starts_with("sm_"))
            && (t.vendor != Vendor::Amd || t.name.starts_with("gfx"));
        if !vendor_ok {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].vendor"),
                "targets.vendor",
                format!("target `{}` cannot have vendor {:?}", name, t.vendor),
            ));
        }
        let want_tc = match t.vendor {
            Vendor::Nvidia => Toolchain::Cuda,
            Vendor::Amd => Toolchain::Hip,
            Vendor::Cpu => Toolchain::None,
        };
        if t.toolchain != want_tc {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].toolchain"),
                "targets.toolchain",
                format!(
                    "target `{}` ({:?}) needs toolchain {:?}",
                    name, t.vendor, want_tc
                ),
            ));
        }
        if t.is_gpu() {
            match t.wave {
                Some(32) | Some(64) => {}
                other => {
                    return Err(err_at(
                        path,
                        src,
                        &format!("targets[{i}].wave"),
                        "targets.wave",
                        format!("target `{}`: wave must be 32 or 64, got {other:?}", name),
                    ))
                }
            }
            if t.shared_per_block.unwrap_or(0) < 16 * 1024 || t.multiprocessors.unwrap_or(0) == 0 {
                return Err(err_at(path, src, &format!("targets[{i}].shared_per_block"), "targets.shared_per_block", format!(
                    "GPU target `{}` needs shared_per_block (bytes, >= 16384) and multiprocessors (> 0)",
                    name
                )));
            }
        }
        if t.runs_on.is_empty() {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].runs_on"),
                "targets.runs_on",
                format!("target `{}` needs at least one runner label", name),
            ));
        }
        if !(t.bench_tolerance > 0.0 && t.bench_tolerance < 1.0) {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].bench_tolerance"),
                "targets.bench_tolerance",
                format!("target `{}`: bench_tolerance must be in (0, 1)", name),
            ));
        }
        Ok(())
    }
}
