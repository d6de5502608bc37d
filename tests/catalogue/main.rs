//! The bad-input catalogue: every input an operator runtime meets from its
//! users that is wrong, hostile or merely unusual, each checked for a clear
//! error naming file, line and task, a Failure condition and an Event on the
//! resource where there is one, and no harm to anything else.
//!
//! Two groups. `load`: broken projects (watches.yaml and roles), which
//! `enka check` and `enka run` must both refuse with the same message and no
//! panic. `runtime`: one enka on tests/catalogue/project, where each custom
//! resource carries one bad input in `spec.case`; all are created at once,
//! next to good ones that must still succeed.

#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../integration/enka.rs"]
mod enka;

#[path = "../integration/runner.rs"]
mod runner;

mod hostile;
mod load;
mod runtime;

use std::time::{Duration, Instant};

use kube_env::KubeEnv;

/// The longest one case may take; the slowest waits for the 3 s reconcile
/// timeout.
const CASE_LIMIT: Duration = Duration::from_secs(90);

fn main() {
    let started = Instant::now();
    let filters = runner::filters();
    runner::main(async {
        let env = KubeEnv::start(kube_env::Options::default().controller_manager(false))
            .await
            .unwrap_or_else(|e| panic!("the catalogue's control plane could not start: {e}"));
        eprintln!(
            "catalogue: control plane up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let env = std::sync::Arc::new(env);
        let mut cases = load::cases(&env);
        let ctx = runtime::Ctx::start(env.clone()).await;
        cases.extend(runtime::cases(&ctx).await);
        cases.extend(hostile::cases(&ctx).await);
        let (passed, ran) = runner::run(
            "catalogue",
            "bad inputs handled",
            cases,
            &filters,
            CASE_LIMIT,
            || ctx.log(),
        )
        .await;
        ctx.assert_unharmed().await;
        (passed, ran)
    });
}
