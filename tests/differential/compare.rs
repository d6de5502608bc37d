//! The two runs of a subject side by side: per step, every object either
//! side has, equal or with a unified diff of its normalised JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::Value as Json;
use similar::TextDiff;

use crate::scenario::Settled;

/// The outcome for one subject.
pub struct Comparison {
    /// Distinct objects equal at every step they appear in.
    pub equal: usize,
    /// Objects that differ at some step (or exist on one side only).
    pub differing: BTreeSet<String>,
    /// Human-readable report: per step, the differing objects' diffs.
    pub report: String,
    /// Seconds each side took to settle, summed over the steps.
    pub settle_upstream: f64,
    pub settle_enka: f64,
    /// Steps a side did not settle within its limit.
    pub unsettled: Vec<String>,
}

pub fn compare(upstream: &[Settled], enka: &[Settled]) -> Comparison {
    let mut report = String::new();
    let mut differing: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut unsettled = Vec::new();
    for (index, (theirs, ours)) in upstream.iter().zip(enka).enumerate() {
        let _ = writeln!(
            report,
            "## step {}: {} (settled: upstream {:.1} s, enka {:.1} s)",
            index + 1,
            theirs.step,
            theirs.seconds,
            ours.seconds
        );
        for (side, settled) in [("upstream", theirs), ("enka", ours)] {
            if !settled.quiet {
                unsettled.push(format!("{side}: step {} ({})", index + 1, settled.step));
                let waiting = if settled.snapshot.workloads_pending.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; workloads not at their end: {}",
                        settled.snapshot.workloads_pending.join(", ")
                    )
                };
                let _ = writeln!(
                    report,
                    "   {side} was still changing objects at the step's limit{waiting}"
                );
            }
        }
        let keys: BTreeSet<&String> = theirs
            .snapshot
            .objects
            .keys()
            .chain(ours.snapshot.objects.keys())
            .collect();
        for key in keys {
            seen.insert(key.clone());
            let left = theirs.snapshot.objects.get(key);
            let right = ours.snapshot.objects.get(key);
            match (left, right) {
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) => {
                    differing.insert(key.clone());
                    let _ = writeln!(report, "-- {key}: differs");
                    report.push_str(&unified(a, b));
                }
                (Some(_), None) => {
                    differing.insert(key.clone());
                    let _ = writeln!(report, "-- {key}: only upstream has it");
                }
                (None, Some(_)) => {
                    differing.insert(key.clone());
                    let _ = writeln!(report, "-- {key}: only enka has it");
                }
                (None, None) => {}
            }
        }
    }
    if upstream.len() != enka.len() {
        let _ = writeln!(
            report,
            "steps: upstream ran {}, enka {}",
            upstream.len(),
            enka.len()
        );
    }
    Comparison {
        equal: seen.len() - differing.len(),
        differing,
        report,
        settle_upstream: upstream.iter().map(|s| s.seconds).sum(),
        settle_enka: enka.iter().map(|s| s.seconds).sum(),
        unsettled,
    }
}

/// `--- upstream` / `+++ enka` of two objects' pretty JSON.
fn unified(upstream: &Json, enka: &Json) -> String {
    let a = pretty(upstream);
    let b = pretty(enka);
    TextDiff::from_lines(&a, &b)
        .unified_diff()
        .context_radius(3)
        .header("upstream", "enka")
        .to_string()
}

fn pretty(value: &Json) -> String {
    let mut text = serde_json::to_string_pretty(&sorted(value)).unwrap_or_default();
    text.push('\n');
    text
}

/// Keys in order, so the diff shows content, not map order.
fn sorted(value: &Json) -> Json {
    match value {
        Json::Object(fields) => {
            let ordered: BTreeMap<&String, Json> =
                fields.iter().map(|(k, v)| (k, sorted(v))).collect();
            Json::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Json::Array(items) => Json::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}
