//! JUnit XML: one testsuite per (target, suite), one testcase per record; skipped targets
//! get a testsuite with one skipped testcase carrying the reason. Seed, device and target
//! status are properties, so a CI viewer shows where and how it ran.

use super::TargetReport;
use qsa::results::{Status, TargetStatus};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::collections::BTreeMap;

pub fn render(reports: &[TargetReport]) -> anyhow::Result<String> {
    let mut report = Report::new("qsa matrix");
    for tr in reports {
        let r = &tr.results;
        let props = |suite: &mut TestSuite| {
            suite.add_property(Property::new("target", r.target.as_str()));
            suite.add_property(Property::new("status", r.status_label()));
            suite.add_property(Property::new("seed", r.seed.to_string()));
            suite.add_property(Property::new(
                "device",
                if r.device.name.is_empty() {
                    "none"
                } else {
                    r.device.name.as_str()
                },
            ));
            if !r.device.driver.is_empty() {
                suite.add_property(Property::new("driver", r.device.driver.as_str()));
            }
            if let Some(u) = &tr.unstable {
                suite.add_property(Property::new("unstable", u.as_str()));
            }
        };
        // Emulated and PTX targets list their checks like a run; the `status` property tells
        // them apart.
        if !matches!(
            r.status,
            TargetStatus::Run | TargetStatus::RunPtx | TargetStatus::Emulated
        ) {
            let mut suite = TestSuite::new(r.target.as_str());
            props(&mut suite);
            let mut status = if r.status == TargetStatus::Failed {
                TestCaseStatus::non_success(NonSuccessKind::Error)
            } else {
                TestCaseStatus::skipped()
            };
            status.set_message(format!("{}: {}", r.status_label(), r.reason));
            suite.add_test_case(TestCase::new(
                format!("{} (whole target)", r.target),
                status,
            ));
            add_notes(&mut suite, tr);
            report.add_test_suite(suite);
            continue;
        }
        let mut by_suite: BTreeMap<&str, Vec<&qsa::results::Record>> = BTreeMap::new();
        for rec in &r.records {
            by_suite.entry(rec.suite.name()).or_default().push(rec);
        }
        for (suite_name, recs) in by_suite {
            let mut suite = TestSuite::new(format!("{}.{suite_name}", r.target));
            props(&mut suite);
            for rec in recs {
                let name = format!("{}/{}/{}/{}", rec.case, rec.dist, rec.variant, rec.check);
                let mut status = match rec.status {
                    Status::Pass => TestCaseStatus::success(),
                    Status::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
                    Status::Error | Status::Crashed => {
                        TestCaseStatus::non_success(NonSuccessKind::Error)
                    }
                    Status::Skip | Status::Unsupported => TestCaseStatus::skipped(),
                };
                if rec.status != Status::Pass {
                    let prefix = if rec.status == Status::Unsupported {
                        "not supported: "
                    } else {
                        ""
                    };
                    status.set_message(format!("{prefix}{}", rec.message));
                    status.set_description(format!("reproduce: {}", rec.repro));
                }
                let mut tc = TestCase::new(name, status);
                tc.set_classname(format!("{}.{}.{}", r.target, suite_name, rec.case));
                if let Some(k) = &rec.dispatched {
                    tc.add_property(Property::new("dispatched", k.as_str()));
                }
                if let Some(m) = rec.metrics.get("median_us") {
                    tc.add_property(Property::new("median_us", format!("{m:.3}")));
                }
                suite.add_test_case(tc);
            }
            report.add_test_suite(suite);
        }
        if !tr.notes.is_empty() {
            let mut suite = TestSuite::new(format!("{}.gates", r.target));
            props(&mut suite);
            add_notes(&mut suite, tr);
            report.add_test_suite(suite);
        }
    }
    Ok(report.to_string()?)
}

fn add_notes(suite: &mut TestSuite, tr: &TargetReport) {
    for n in &tr.notes {
        let mut status = if n.failed {
            TestCaseStatus::non_success(NonSuccessKind::Failure)
        } else {
            TestCaseStatus::success()
        };
        if n.failed {
            status.set_message(n.message.clone());
            if !n.repro.is_empty() {
                status.set_description(format!("reproduce: {}", n.repro));
            }
        }
        let mut tc = TestCase::new(format!("{}/{}", n.kind, n.name), status);
        tc.set_classname(format!("{}.gates.{}", tr.results.target, n.kind));
        if !n.diff.is_empty() {
            tc.set_system_out(n.diff.clone());
        }
        suite.add_test_case(tc);
    }
}
