//! Where each field of a YAML file is: the line of every mapping key and sequence item,
//! by its path (`cases[3].topk.n`), from the parser's event marks. serde drops spans, so
//! errors found after deserializing look their line up here by the path of the field they
//! are about: exact, never a search for text (a case named `a` is not at the first line
//! that contains an `a`, and `topk_edges` is not at `topk_edges_small`).

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Line (1-based) of each path of one YAML document.
#[derive(Debug, Default)]
pub struct Spans {
    lines: HashMap<String, usize>,
}

enum Frame {
    /// A mapping: the path of the key being read or of the value it introduces.
    Map {
        path: String,
        key: Option<String>,
    },
    Seq {
        path: String,
        index: usize,
    },
}

#[derive(Default)]
struct Collector {
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
    depth_limit_hit: bool,
}

/// Deeper than any qsa file; past it (hostile input) the rest is not indexed.
const MAX_DEPTH: usize = 64;

impl Collector {
    /// The path of a value starting now (and mark the key that introduced it as used).
    fn value_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Map { path, key }) => key.take().map(|k| join(path, &k)),
            Some(Frame::Seq { path, index }) => {
                let p = format!("{path}[{index}]");
                *index += 1;
                Some(p)
            }
        }
    }

    fn record(&mut self, path: &str, mark: Marker) {
        self.lines.entry(path.to_string()).or_insert(mark.line());
    }

    /// A scalar or alias: a key when the innermost mapping waits for one, else a value.
    fn leaf(&mut self, text: Option<String>, mark: Marker) {
        if let Some(Frame::Map {
            path,
            key: k @ None,
        }) = self.stack.last_mut()
        {
            let key = text.unwrap_or_else(|| "*".into());
            let p = join(path, &key);
            *k = Some(key);
            self.record(&p, mark);
            return;
        }
        if let Some(p) = self.value_path() {
            self.record(&p, mark);
        }
    }

    fn open(&mut self, mark: Marker, seq: bool) {
        // A collection used as a mapping key has no path of its own.
        let is_key = matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
        let path = if is_key {
            "?".to_string()
        } else {
            self.value_path().unwrap_or_default()
        };
        self.record(&path, mark);
        if self.stack.len() >= MAX_DEPTH {
            self.depth_limit_hit = true;
        }
        self.stack.push(if seq {
            Frame::Seq { path, index: 0 }
        } else {
            Frame::Map { path, key: None }
        });
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl MarkedEventReceiver for Collector {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.depth_limit_hit {
            return;
        }
        match ev {
            Event::Scalar(text, ..) => self.leaf(Some(text), mark),
            Event::Alias(_) => self.leaf(None, mark),
            Event::SequenceStart(..) => self.open(mark, true),
            Event::MappingStart(..) => self.open(mark, false),
            Event::SequenceEnd | Event::MappingEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

impl Spans {
    /// The spans of `src`'s first document; what cannot be parsed is left out (the caller
    /// then reports no line rather than a wrong one).
    pub fn of(src: &str) -> Spans {
        let mut c = Collector::default();
        let _ = Parser::new_from_str(src).load(&mut c, false);
        Spans { lines: c.lines }
    }

    /// The line of `path`, or of the nearest enclosing field that has one
    /// (`cases[3].topk.n` falls back to `cases[3].topk`, then `cases[3]`).
    pub fn line(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(l) = self.lines.get(p) {
                return Some(*l);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_items_have_their_own_lines() {
        let src = "version: 1\ncases:\n  - name: topk_edges_small\n    topk: {queries: 3,\n      n: 5}\n  - name: topk_edges\n    inputs:\n      scores: a.npy\n";
        let s = Spans::of(src);
        assert_eq!(s.line("version"), Some(1));
        assert_eq!(s.line("cases[0].name"), Some(3));
        assert_eq!(s.line("cases[0].topk.queries"), Some(4));
        assert_eq!(s.line("cases[0].topk.n"), Some(5));
        assert_eq!(s.line("cases[1]"), Some(6));
        assert_eq!(s.line("cases[1].name"), Some(6));
        assert_eq!(s.line("cases[1].inputs.scores"), Some(8));
        // Not there: the nearest enclosing field.
        assert_eq!(s.line("cases[1].topk.k"), Some(6));
        assert_eq!(s.line("nothing"), None);
    }

    #[test]
    fn broken_or_hostile_yaml_gives_no_line_and_no_panic() {
        assert_eq!(Spans::of("a: [").line("a"), Some(1));
        let deep = "[".repeat(10_000);
        let _ = Spans::of(&deep).line("x");
        let _ = Spans::of("? [a, b]\n: c\n*x : &y\n").line("c");
    }
}
