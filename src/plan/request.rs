//! `qsa plan`: the launch sequence of one call, from the same code that launches it
//! (`gpu::<family>::launch_plan`, executed by the runner through `gpu::launch::PlannedCall`).
//! The side-by-side benches (bench/*.py) read it as JSON and launch it with cupy, so no
//! launch rule lives in Python. A shape comes from a matrix case or from the command line,
//! since the benches time shapes that are not cases.

use crate::dispatch::{Switches, TargetCaps, Vendor, KNOWN_SWITCHES};
use crate::gpu::launch::{props_of, LaunchPlan, PlanArg, Step};
use crate::gpu::{attention, scores, topk};
use crate::matrix::{ActiveMode, FamilyName, Matrix};
use crate::problem::{AttnDtype, GradDtype, KvLayout, HEAD_DIM};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The keys of `--attention` (a matrix case's attention fields, by the same names); the
/// fuzzer's dictionary takes its words from here, so a new key reaches it.
pub const ATTENTION_KEYS: [&str; 10] = [
    "batch",
    "q_len",
    "kv_len",
    "hq",
    "hkv",
    "t",
    "dtype",
    "scale",
    "kv_layout",
    "do_dtype",
];

/// The command line of `qsa plan` (also parsed by tests that replay a bench's requests).
#[derive(clap::Args, Clone, Debug)]
pub struct PlanArgs {
    /// The matrix file (its target's wave, shared memory and multiprocessors, its variants).
    #[arg(long, default_value = "matrix.yaml")]
    pub matrix: PathBuf,
    /// Extra cases (a YAML file with a `cases:` list); repeatable.
    #[arg(long = "cases")]
    pub cases_files: Vec<PathBuf>,
    /// GPU target from the matrix (sm_90, gfx906, ...).
    #[arg(long)]
    pub target: String,
    /// The shape of a matrix case.
    #[arg(long)]
    pub case: Option<String>,
    /// A top-k shape: nq=N,n=N,k=N[,capacity=N (default n)][,active=0|1].
    #[arg(long, value_name = "KEY=N,...")]
    pub topk: Option<String>,
    /// A scores shape: nq=N,heads=N,blocks=N.
    #[arg(long, value_name = "KEY=N,...")]
    pub scores: Option<String>,
    /// A selection-attention shape: q_len=N,kv_len=N,hq=N,hkv=N,t=N[,batch=1][,dtype=bf16|f16]
    /// [,scale=X (default 1/sqrt(128))].
    #[arg(long, value_name = "KEY=V,...")]
    pub attention: Option<String>,
    /// The matrix variant whose switches apply (auto: the engine's dispatch).
    #[arg(long, default_value = "auto")]
    pub variant: String,
    /// A switch on top of the variant's, e.g. QSA_ATTN_SPLITS=4 (repeatable; an unknown
    /// switch is an error that lists the known ones, src/dispatch/mod.rs).
    #[arg(long = "switch", value_name = "KEY=VALUE")]
    pub switches: Vec<String>,
    /// Selection attention: plan the backward pass (its setup runs the forward once).
    #[arg(long)]
    pub backward: bool,
    /// Print JSON (what the benches read) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A call's shape, as `launch_plan` takes it.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Topk(topk::TopkCall),
    Scores(scores::ScoresCall),
    Attention(attention::AttnCall),
}

impl Shape {
    fn family(&self) -> FamilyName {
        match self {
            Shape::Topk(_) => FamilyName::Topk,
            Shape::Scores(_) => FamilyName::Scores,
            Shape::Attention(_) => FamilyName::Attention,
        }
    }
}

/// A resolved request: the target's capabilities, the switches in force and the shape.
pub struct Request {
    pub target: String,
    pub caps: TargetCaps,
    pub variant: String,
    pub switches: Switches,
    pub shape: Shape,
    pub backward: bool,
}

/// Resolve `a` against its matrix. Every mistake is an error naming it and the fix.
pub fn resolve(a: &PlanArgs) -> Result<Request, String> {
    let mut m = Matrix::load(&a.matrix).map_err(|e| e.to_string())?;
    for f in &a.cases_files {
        m.add_cases_file(f).map_err(|e| e.to_string())?;
    }
    let gpus: Vec<&str> = m
        .targets
        .iter()
        .filter(|t| t.vendor != Vendor::Cpu)
        .map(|t| t.name.as_str())
        .collect();
    let target = m
        .target(&a.target)
        .filter(|t| t.vendor != Vendor::Cpu)
        .ok_or_else(|| {
            format!(
                "--target {}: not a GPU target of {}; pick one of: {}",
                crate::echo::value(&a.target),
                a.matrix.display(),
                gpus.join(", ")
            )
        })?;
    let given = [&a.case, &a.topk, &a.scores, &a.attention]
        .iter()
        .filter(|x| x.is_some())
        .count();
    if given != 1 {
        return Err(
            "give exactly one shape: --case NAME, --topk ..., --scores ... or --attention ..."
                .into(),
        );
    }
    let shape = if let Some(name) = &a.case {
        case_shape(&m, name)?
    } else if let Some(s) = &a.topk {
        let v = fields(s, "--topk", &["nq", "n", "k", "capacity", "active"])?;
        let n = need(&v, "--topk", "n")?;
        Shape::Topk(topk::TopkCall {
            nq: need(&v, "--topk", "nq")?,
            n,
            capacity: opt(&v, "--topk", "capacity")?.unwrap_or(n),
            k: need(&v, "--topk", "k")?,
            has_active: opt(&v, "--topk", "active")?.unwrap_or(0) != 0,
        })
    } else if let Some(s) = &a.scores {
        let v = fields(s, "--scores", &["nq", "heads", "blocks"])?;
        Shape::Scores(scores::ScoresCall {
            nq: need(&v, "--scores", "nq")?,
            heads: need(&v, "--scores", "heads")?,
            blocks: need(&v, "--scores", "blocks")?,
        })
    } else {
        let s = a.attention.as_deref().unwrap_or_default();
        let v = fields(s, "--attention", &ATTENTION_KEYS)?;
        let dtype = match v.get("dtype").map(String::as_str) {
            None | Some("bf16") => AttnDtype::Bf16,
            Some("f16") => AttnDtype::F16,
            Some(other) => {
                return Err(format!(
                    "--attention dtype={}: expected bf16 or f16",
                    crate::echo::value(other)
                ))
            }
        };
        let kv_layout = match v.get("kv_layout").map(String::as_str) {
            None | Some("nhd") => KvLayout::Nhd,
            Some("hnd") => KvLayout::Hnd,
            Some(other) => {
                return Err(format!(
                    "--attention kv_layout={}: expected nhd ([batch, kv_len, hkv, D]) or hnd \
                     ([batch, hkv, kv_len, D])",
                    crate::echo::value(other)
                ))
            }
        };
        let do_dtype = match v.get("do_dtype").map(String::as_str) {
            None | Some("f32") => GradDtype::F32,
            Some("bf16") => GradDtype::Bf16,
            Some(other) => {
                return Err(format!(
                    "--attention do_dtype={}: expected f32 or bf16 (the dtype the backward's \
                     upstream gradient dO arrives in)",
                    crate::echo::value(other)
                ))
            }
        };
        let scale = match v.get("scale") {
            None => 1.0 / (HEAD_DIM as f32).sqrt(),
            Some(x) => x.parse::<f32>().map_err(|_| {
                format!(
                    "--attention scale={}: expected a number",
                    crate::echo::value(x)
                )
            })?,
        };
        Shape::Attention(attention::AttnCall {
            batch: opt(&v, "--attention", "batch")?.unwrap_or(1),
            q_len: need(&v, "--attention", "q_len")?,
            kv_len: need(&v, "--attention", "kv_len")?,
            hq: need(&v, "--attention", "hq")?,
            hkv: need(&v, "--attention", "hkv")?,
            t: need(&v, "--attention", "t")?,
            dtype,
            scale,
            kv_layout,
            do_dtype,
        })
    };
    let family = shape.family();
    let variant = m.variant(family, &a.variant).ok_or_else(|| {
        let names: Vec<&str> = m
            .variants
            .iter()
            .filter(|v| v.family == family)
            .map(|v| v.name.as_str())
            .collect();
        format!(
            "--variant {}: not a {} variant of {}; pick one of: {}",
            crate::echo::value(&a.variant),
            family.name(),
            a.matrix.display(),
            names.join(", ")
        )
    })?;
    let mut vars = variant.switches().vars().clone();
    for kv in &a.switches {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--switch {}: expected KEY=VALUE", crate::echo::value(kv)))?;
        if !KNOWN_SWITCHES.iter().any(|(name, _)| *name == k) {
            let names: Vec<&str> = KNOWN_SWITCHES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "--switch {}: unknown switch; known: {}",
                crate::echo::value(k),
                names.join(", ")
            ));
        }
        vars.insert(k.to_string(), v.to_string());
    }
    if a.backward && family != FamilyName::Attention {
        return Err("--backward applies to selection attention only".into());
    }
    Ok(Request {
        target: target.name.clone(),
        caps: target.caps(),
        variant: a.variant.clone(),
        switches: Switches::new(vars),
        shape,
        backward: a.backward,
    })
}

fn case_shape(m: &Matrix, name: &str) -> Result<Shape, String> {
    let case = m.cases.iter().find(|c| c.name == name).ok_or_else(|| {
        format!(
            "--case {}: no such case in the matrix (cases: {})",
            crate::echo::value(name),
            m.cases
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    Ok(if let Some(s) = &case.topk {
        Shape::Topk(topk::TopkCall {
            nq: s.queries,
            n: s.n,
            capacity: s.capacity,
            k: s.k,
            has_active: s.active != ActiveMode::None || case.inputs.contains_key("active"),
        })
    } else if let Some(s) = &case.scores {
        Shape::Scores(scores::ScoresCall {
            nq: s.queries,
            heads: s.heads,
            blocks: s.blocks,
        })
    } else {
        let s = case.attention.as_ref().ok_or("a case without a shape")?;
        Shape::Attention(attention::AttnCall {
            batch: s.batch,
            q_len: s.q_len,
            kv_len: s.kv_len,
            hq: s.hq,
            hkv: s.hkv,
            t: s.t,
            dtype: s.dtype,
            scale: s.scale.unwrap_or(1.0 / (HEAD_DIM as f32).sqrt()),
            kv_layout: s.kv_layout,
            do_dtype: s.do_dtype,
        })
    })
}

fn fields(s: &str, flag: &str, keys: &[&str]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            format!(
                "{flag} {}: expected KEY=VALUE pairs separated by commas",
                crate::echo::value(s)
            )
        })?;
        if !keys.contains(&k) {
            return Err(format!(
                "{flag}: unknown key {}; expected {}",
                crate::echo::value(k),
                keys.join(", ")
            ));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

fn opt(v: &BTreeMap<String, String>, flag: &str, key: &str) -> Result<Option<usize>, String> {
    v.get(key)
        .map(|x| {
            x.parse::<usize>().map_err(|_| {
                format!(
                    "{flag} {key}={}: expected a whole number",
                    crate::echo::value(x)
                )
            })
        })
        .transpose()
}

fn need(v: &BTreeMap<String, String>, flag: &str, key: &str) -> Result<usize, String> {
    opt(v, flag, key)?.ok_or_else(|| format!("{flag}: {key}=N is missing"))
}

/// The plan of a resolved request: the very function the runner's launch goes through.
pub fn launch_plan(r: &Request) -> Result<LaunchPlan, String> {
    let props = props_of(&r.caps);
    let plan = match &r.shape {
        Shape::Topk(s) => topk::launch_plan(&r.caps, &props, &r.switches, s),
        Shape::Scores(s) => scores::launch_plan(&r.caps, &props, &r.switches, s),
        Shape::Attention(s) => attention::launch_plan(&r.caps, &props, &r.switches, s, r.backward),
    };
    plan.map_err(|e| format!("{}: {e}", r.target))
}

/// The JSON the benches read: the request, the target's figures the plan used, the plan.
pub fn to_json(r: &Request, plan: &LaunchPlan) -> serde_json::Value {
    let shape = match &r.shape {
        Shape::Topk(s) => serde_json::json!({
            "nq": s.nq, "n": s.n, "capacity": s.capacity, "k": s.k, "active": s.has_active,
        }),
        Shape::Scores(s) => serde_json::json!({
            "nq": s.nq, "heads": s.heads, "blocks": s.blocks,
        }),
        Shape::Attention(s) => serde_json::json!({
            "batch": s.batch, "q_len": s.q_len, "kv_len": s.kv_len, "hq": s.hq, "hkv": s.hkv,
            "t": s.t, "dtype": s.dtype.name(), "scale": s.scale, "kv_layout": s.kv_layout.name(),
            "do_dtype": s.do_dtype.name(),
        }),
    };
    let mut v = serde_json::json!({
        "qsa": env!("CARGO_PKG_VERSION"),
        "target": {
            "name": r.target,
            "wave": r.caps.wave,
            "shared_per_block": r.caps.shared_per_block,
            "multiprocessors": r.caps.multiprocessors,
        },
        "family": r.shape.family().name(),
        "shape": shape,
        "backward": r.backward,
        "variant": r.variant,
        "switches": r.switches.vars(),
    });
    if let (Some(obj), Ok(serde_json::Value::Object(p))) =
        (v.as_object_mut(), serde_json::to_value(plan))
    {
        obj.extend(p);
    }
    v
}

fn arg_text(a: &PlanArg) -> String {
    match a {
        PlanArg::Buffer(n) => (*n).to_string(),
        PlanArg::Null => "null".into(),
        PlanArg::I32(v) => v.to_string(),
        PlanArg::U32(v) => format!("{v}u"),
        PlanArg::I64(v) => format!("{v}i64"),
        PlanArg::F32(v) => format!("{v}f"),
    }
}

fn step_text(s: &Step) -> String {
    match s {
        Step::Zero { buffer } => format!("  zero {buffer}"),
        Step::Launch {
            kernel,
            grid,
            block,
            shared_bytes,
            args,
        } => format!(
            "  {kernel} grid {grid:?} block {block:?} shared {shared_bytes} B\n    ({})",
            args.iter().map(arg_text).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A table for people.
pub fn to_text(r: &Request, plan: &LaunchPlan) -> String {
    let mut out = format!(
        "{} {} (variant {}{}) -> {} in {}\nbuffers:\n",
        r.target,
        r.shape.family().name(),
        r.variant,
        if r.backward { ", backward" } else { "" },
        plan.dispatched,
        plan.module
    );
    for b in &plan.buffers {
        out.push_str(&format!(
            "  {:<10} {:>14} B  {}\n",
            b.name,
            b.bytes,
            b.role.name()
        ));
    }
    for (name, steps) in [("setup (once)", &plan.setup), ("call", &plan.call)] {
        if !steps.is_empty() {
            out.push_str(&format!("{name}:\n"));
            for s in steps {
                out.push_str(&step_text(s));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: PlanArgs,
    }

    fn args(line: &str) -> PlanArgs {
        Wrap::try_parse_from(std::iter::once("plan").chain(line.split_whitespace()))
            .unwrap()
            .args
    }

    fn err(line: &str) -> String {
        match resolve(&args(line)).and_then(|r| launch_plan(&r)) {
            Ok(_) => panic!("`{line}` planned"),
            Err(e) => e,
        }
    }

    #[test]
    fn mistakes_name_the_problem_and_the_fix() {
        let cases = [
            ("--target cpu --topk nq=1,n=8,k=1", "not a GPU target"),
            ("--target sm_9 --topk nq=1,n=8,k=1", "pick one of: sm_75"),
            ("--target sm_90", "give exactly one shape"),
            (
                "--target sm_90 --topk nq=1,n=8,k=1 --scores nq=1,heads=1,blocks=1",
                "give exactly one shape",
            ),
            ("--target sm_90 --topk nq=1,n=8", "--topk: k=N is missing"),
            ("--target sm_90 --topk nq=1,n=8,k=1,m=2", "unknown key m"),
            ("--target sm_90 --topk nq=1,n=x,k=1", "n=x: expected a whole number"),
            ("--target sm_90 --topk nq=1,n=8,k=1 --variant simt", "pick one of: auto"),
            (
                "--target sm_90 --topk nq=1,n=8,k=1 --switch QSA_TOPK=wide",
                "unknown switch",
            ),
            ("--target sm_90 --topk nq=1,n=8,k=1 --backward", "selection attention only"),
            ("--target sm_90 --case nope", "no such case"),
            ("--target sm_90 --topk nq=1,n=9,capacity=8,k=1", "n = 9 > capacity = 8"),
            (
                "--target gfx906 --attention q_len=64,kv_len=200000,hq=4,hkv=4,t=2048",
                "at most t = 69 here, or force QSA_ATTN_KERNEL=gather",
            ),
            (
                "--target sm_90 --attention q_len=1,kv_len=64,hq=3,hkv=2,t=1",
                "not a multiple of hkv",
            ),
            (
                "--target sm_90 --attention q_len=1,kv_len=64,hq=2,hkv=2,t=1,dtype=f32",
                "expected bf16 or f16",
            ),
            (
                "--target sm_90 --attention q_len=1,kv_len=64,hq=2,hkv=2,t=1 --switch QSA_ATTN_NBUF=3",
                "QSA_ATTN_NBUF=3: expected a whole number from 1 to 2",
            ),
        ];
        for (line, want) in cases {
            let e = err(line);
            assert!(e.contains(want), "`{line}`: {e}");
        }
    }

    /// Every (case, variant, GPU target) of matrix.yaml: the plan dispatches to the kernel
    /// the dispatch snapshot predicts, or both refuse.
    #[test]
    fn plans_agree_with_the_dispatch_table() {
        let m = Matrix::load(std::path::Path::new("matrix.yaml")).unwrap();
        let mut n = 0;
        for t in m.targets.iter().filter(|t| t.vendor != Vendor::Cpu) {
            for case in m.cases.iter().filter(|c| c.runs_on(t)) {
                for v in &case.variants {
                    for backward in [false, true] {
                        if backward && case.attention.is_none() {
                            continue;
                        }
                        let mut line =
                            format!("--target {} --case {} --variant {v}", t.name, case.name);
                        if backward {
                            line.push_str(" --backward");
                        }
                        let planned = resolve(&args(&line)).and_then(|r| launch_plan(&r));
                        let predicted = crate::plan::predicted_kernel(&m, t, case, v, backward);
                        match (&planned, &predicted) {
                            (Ok(p), Ok(k)) => assert_eq!(&p.dispatched, k, "{line}"),
                            (Err(_), Err(_)) => {}
                            _ => panic!(
                                "{line}: plan {:?} vs dispatch {predicted:?}",
                                planned.map(|p| p.dispatched)
                            ),
                        }
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 100, "{n} plans");
    }
}
