//! Runs named scenarios one after another for a `harness = false` test
//! binary (tests/compat, tests/catalogue): each in its own task, so a
//! panic fails that scenario alone, with a time limit, printing a line per
//! scenario and `<title>: X of Y <what> pass` at the end.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

pub type Scenario = (String, Pin<Box<dyn Future<Output = ()> + Send>>);

/// Runs `scenarios` whose names contain one of `filters` (all when empty);
/// `on_failure` returns what to print after a failure (operator logs).
/// Returns how many passed and how many ran.
pub async fn run<F, Fut>(
    title: &str,
    what: &str,
    scenarios: Vec<Scenario>,
    filters: &[String],
    limit: Duration,
    on_failure: F,
) -> (usize, usize)
where
    F: Fn() -> Fut,
    Fut: Future<Output = String>,
{
    let started = Instant::now();
    let (mut passed, mut ran) = (0, 0);
    for (name, scenario) in scenarios {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let began = Instant::now();
        let failure = match tokio::time::timeout(limit, tokio::spawn(scenario)).await {
            Ok(Ok(())) => None,
            Ok(Err(join)) => Some(panic_message(join)),
            Err(_) => Some(format!("did not finish within {limit:?}")),
        };
        let seconds = began.elapsed().as_secs_f64();
        match failure {
            None => {
                passed += 1;
                println!("{title}: ok      {name} ({seconds:.1} s)");
            }
            Some(reason) => {
                println!("{title}: FAILED  {name} ({seconds:.1} s): {reason}");
                eprintln!("{}", on_failure().await);
            }
        }
    }
    println!(
        "{title}: {passed} of {ran} {what} pass ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    (passed, ran)
}

/// The body of a `harness = false` main: runs `suite` (which returns how
/// many scenarios passed and ran) on a multi-thread runtime, drops the
/// runtime (stopping the operators and control plane it holds), and exits
/// with 1 unless every scenario ran and passed.
pub fn main<F>(suite: F)
where
    F: Future<Output = (usize, usize)>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let (passed, ran) = runtime.block_on(suite);
    drop(runtime);
    if passed != ran || ran == 0 {
        std::process::exit(1);
    }
}

/// Arguments that are not flags: scenario name filters.
pub fn filters() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect()
}

fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".to_owned()),
        Err(join) => join.to_string(),
    }
}
