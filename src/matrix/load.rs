//! Reading matrix.yaml and `--cases` files: the text, serde's parse (its errors located
//! and clipped), relative `.npy` paths resolved; `validate.rs` then checks what serde cannot.

use super::*;

impl Matrix {
    /// Read, parse and validate a matrix file.
    pub fn load(path: &Path) -> Result<Matrix, MatrixError> {
        let source = read_source(path)?;
        Self::parse(path, &source)
    }

    /// Parse and validate matrix text (`path` is used in messages only).
    pub fn parse(path: &Path, source: &str) -> Result<Matrix, MatrixError> {
        let mut m: Matrix = serde_yaml::from_str(source).map_err(|e| yaml_error(path, &e))?;
        m.path = path.to_owned();
        m.source = source.to_owned();
        resolve_inputs(&mut m.cases, path);
        m.validate()?;
        Ok(m)
    }

    /// Add the cases of another file (`--cases FILE`): a YAML file with one key, `cases`.
    /// The added cases are validated against this matrix's targets and variants; `.npy`
    /// input paths are resolved relative to that file.
    pub fn add_cases_file(&mut self, path: &Path) -> Result<usize, MatrixError> {
        let source = read_source(path)?;
        self.add_cases_text(path, &source)
    }

    /// `add_cases_file` on text already read (`path` names it in messages and is the base of
    /// relative `.npy` paths).
    pub fn add_cases_text(&mut self, path: &Path, source: &str) -> Result<usize, MatrixError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct CasesFile {
            cases: Vec<Case>,
        }
        let source = source.to_owned();
        let file: CasesFile = serde_yaml::from_str(&source).map_err(|e| yaml_error(path, &e))?;
        let mut cases = file.cases;
        resolve_inputs(&mut cases, path);
        let n = cases.len();
        for (i, case) in cases.iter().enumerate() {
            self.check_case(case, i, path, &source)?;
            if self.cases.iter().any(|c| c.name == case.name) {
                let where_ = if self.added_cases.contains(&case.name) {
                    "in a cases file read before (or earlier in this one)".to_string()
                } else {
                    format!("in {}", self.path.display())
                };
                return Err(err_at(
                    path,
                    &source,
                    &format!("cases[{i}].name"),
                    "cases.name",
                    format!(
                        "case `{}` already exists {where_}: give it another name",
                        echo::value(&case.name)
                    ),
                ));
            }
            self.added_cases.insert(case.name.clone());
            self.cases.push(case.clone());
        }
        Ok(n)
    }
}

/// The text of a matrix or cases file, or an error naming it.
fn read_source(path: &Path) -> Result<String, MatrixError> {
    std::fs::read_to_string(path).map_err(|e| MatrixError {
        path: path.to_owned(),
        line: None,
        field: "(file)".into(),
        message: format!("cannot read: {e}"),
    })
}

/// Relative `.npy` paths of `cases` are relative to the file that declares them.
fn resolve_inputs(cases: &mut [Case], file: &Path) {
    let base = file.parent().unwrap_or(Path::new("."));
    for case in cases {
        for p in case.inputs.values_mut() {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
}

fn yaml_error(path: &Path, e: &serde_yaml::Error) -> MatrixError {
    let line = e.location().map(|l| l.line());
    // serde's message reads "cases[3].topk: unknown field `quries`, expected one of ...":
    // the part before the first ": " is the field path, the rest says what would be valid.
    // It can quote the input (a whole file of random text is one "invalid type: string"),
    // so both parts are clipped.
    let text = e.to_string();
    let (field, message) = match text.split_once(": ") {
        Some((f, m)) if !f.contains(' ') => (echo::clip(f, 100), echo::clip(m, 300)),
        _ => ("(syntax)".to_string(), echo::clip(&text, 300)),
    };
    MatrixError {
        path: path.to_owned(),
        line,
        field,
        message,
    }
}
