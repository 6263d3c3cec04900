//! Crashes inside a check: a panic becomes the check's `crashed` record with the panic's
//! message and location, never backtrace frames (a backtrace, when `RUST_BACKTRACE` asks for
//! one, still goes to stderr, after the one-line message).
//!
//! Also the test-only crash switch `QSA_TEST_CRASH` (below): the tests of the journal and of
//! xtask's restart need a runner that dies at a chosen check, the way the OOM killer or a
//! hung driver would make it die. Nothing else reads it.

use crate::journal::Unit;
use std::io::Write as _;
use std::sync::Mutex;

/// The first panic message since the last `catch` began (a panic in a worker thread comes
/// first; the scope's re-panic on the main thread would only say "a scoped thread panicked").
static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replace the default panic hook: record "panicked at FILE:LINE:COL: MESSAGE" for `catch`
/// and print it as one line on stderr; print a backtrace after it only if RUST_BACKTRACE
/// asks for one. Call once, early, from the binary (tests may call it too).
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = payload_text(info.payload());
        let line = match info.location() {
            Some(l) => format!(
                "panicked at {}:{}:{}: {msg}",
                l.file(),
                l.line(),
                l.column()
            ),
            None => format!("panicked: {msg}"),
        };
        if let Ok(mut slot) = FIRST_PANIC.lock() {
            slot.get_or_insert(line.clone());
        }
        // Never eprintln! here: a closed stderr would panic inside the hook and abort.
        let mut err = std::io::stderr().lock();
        let thread = std::thread::current();
        let _ = writeln!(err, "qsa: thread '{}' {line}", thread.name().unwrap_or("?"));
        let bt = std::backtrace::Backtrace::capture();
        if bt.status() == std::backtrace::BacktraceStatus::Captured {
            let _ = writeln!(err, "{bt}");
        }
    }));
}

fn payload_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

/// Run `f`; a panic becomes `Err("panicked at FILE:LINE:COL: MESSAGE")` (the location is
/// known when `install_panic_hook` ran, otherwise the message alone).
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    if let Ok(mut slot) = FIRST_PANIC.lock() {
        *slot = None;
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        FIRST_PANIC
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .unwrap_or_else(|| format!("panicked: {}", payload_text(payload.as_ref())))
    })
}

/// TEST ONLY. `QSA_TEST_CRASH="SUITE/CASE/DIST=HOW"` makes the runner crash as it starts
/// that unit (DIST "-" for bench): HOW is `panic` (a panicking check), `kill` (SIGKILL, what
/// the OOM killer sends), `abort` (SIGABRT, a crash in a driver) or `hang` (sleeps until
/// killed: xtask's timeout). Used by tests/runner_cli.rs and xtask's tests; a supervisor
/// (xtask) restarts the runner with `--resume`, which skips the unit, so it fires once.
pub struct TestCrash {
    unit: Unit,
    how: String,
}

impl TestCrash {
    pub fn from_env() -> Option<TestCrash> {
        let spec = std::env::var("QSA_TEST_CRASH").ok()?;
        let parsed = spec.split_once('=').and_then(|(u, how)| {
            let mut it = u.splitn(3, '/');
            let suite = it.next()?;
            let suite = crate::matrix::Suite::ALL
                .into_iter()
                .find(|s| s.name() == suite)?;
            Some(TestCrash {
                unit: Unit {
                    suite,
                    case: it.next()?.to_string(),
                    dist: it.next()?.to_string(),
                },
                how: how.to_string(),
            })
        });
        if parsed.is_none() {
            eprintln!("qsa: ignoring QSA_TEST_CRASH=`{spec}`: expected SUITE/CASE/DIST=panic|kill|abort|hang");
        }
        parsed
    }

    /// Crash here if `unit` is the one named.
    pub fn fire(&self, unit: &Unit) {
        if &self.unit != unit {
            return;
        }
        eprintln!("qsa: QSA_TEST_CRASH: {} at {unit}", self.how);
        match self.how.as_str() {
            "panic" => panic!("QSA_TEST_CRASH planted a panic in {unit}"),
            "abort" => std::process::abort(),
            "kill" => {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &std::process::id().to_string()])
                    .status();
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
            "hang" => loop {
                std::thread::sleep(std::time::Duration::from_secs(60));
            },
            other => eprintln!("qsa: QSA_TEST_CRASH: unknown HOW `{other}`"),
        }
    }
}
