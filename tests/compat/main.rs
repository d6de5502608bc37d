//! `make compat`: upstream ansible-operator's own test operators, in spirit.
//!
//! tests/compat/memcached-operator and tests/compat/advanced-operator are
//! our own projects, written to use each feature the way upstream's
//! memcached-molecule-operator and advanced-molecule-operator use it
//! (ansible-operator-plugins v1.42, see
//! ../shared/reference/upstream-ansible-operator.md §8). Each scenario
//! asserts what upstream's molecule task asserts, against a real control
//! plane with kube-controller-manager, and the run ends with
//! `compat: X of Y scenarios pass`.
//!
//! Scenarios run one after another, in this order: some follow on from the
//! ones before (the memcached sample lives from the first to the last of
//! its group). Arguments filter scenarios by name.

#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../integration/enka.rs"]
mod enka;

#[path = "../integration/runner.rs"]
mod runner;

mod advanced;
mod cluster;
mod memcached;
mod porting;

use std::time::{Duration, Instant};

use cluster::Ctx;
use runner::Scenario;

macro_rules! scenarios {
    ($ctx:expr; $($name:literal => $run:path,)*) => {
        vec![$(($name.to_owned(), Box::pin($run($ctx.clone())) as _),)*]
    };
}

/// The longest one scenario may take, `until` and requeue waits included.
const SCENARIO_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    let started = Instant::now();
    runner::main(async {
        let ctx = Ctx::start().await;
        eprintln!(
            "compat: control plane and both operators up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let all: Vec<Scenario> = scenarios![ctx;
            "memcached: Deployment from size, custom status, edits reverted" => memcached::deployment_and_custom_status,
            "memcached: osdk_metric served on /metrics" => memcached::osdk_metric_on_metrics,
            "memcached: blacklisted kind not watched" => memcached::blacklisted_kind_is_not_watched,
            "memcached: core Secret watch, manageStatus false, recovery after restart" => memcached::core_secret_watch_survives_restart,
            "foo: empty role succeeds" => memcached::empty_role_succeeds,
            "memfin: finalizer role as a playbook" => memcached::finalizer_role_as_playbook,
            "collectiontest: collection-qualified role" => advanced::collection_qualified_role,
            "statustest: k8s_status fields and conditions" => advanced::k8s_status_fields_and_conditions,
            "secretstest: __secret, with_dict, string definition, meta: end_play, selector" => advanced::core_secret_raw_var_with_dict_end_play,
            "selectortest: selector" => advanced::selector,
            "casetest: snakeCaseParameters false" => advanced::snake_case_parameters_false,
            "reconciliationtest: requeue_after" => advanced::requeue_after,
            "clusterannotationtest: cluster-scoped and cross-namespace dependents" => advanced::cluster_scoped_and_cross_namespace_dependents,
            "finalizervarstest: finalizer with vars only" => advanced::finalizer_with_vars,
            "includetest: include_role tasks_from, lookup('template') with include and indent" => advanced::include_role_tasks_from_and_template_lookup,
            "polltest: k8s_info until" => advanced::k8s_info_until,
            // Last of all: kube-controller-manager's garbage collector learns of
            // a new CRD on its 30 s discovery resync, and this one needs it.
            "memcached: finalizer role on delete, dependents collected" => memcached::finalizer_role_on_delete,
            "porting: the README's porting guide" => porting::readme_porting_guide,
        ];
        runner::run(
            "compat",
            "scenarios",
            all,
            &runner::filters(),
            SCENARIO_LIMIT,
            || ctx.logs(),
        )
        .await
    });
}
