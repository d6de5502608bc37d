//! Real operators on simulated nodes, side by side: the memcached workload
//! from create to its Deployment Available, awx-operator from its own sample
//! to its end, upstream's advanced-molecule-operator from its samples to
//! theirs. Each side runs alone on a control plane of its own with kwok's
//! nodes, kube-scheduler and kube-controller-manager (the other scenarios keep
//! the lighter one, where the API server's load is the operators' alone).
//!
//! Per side: wall time from the first create to the end (every custom resource
//! `Successful` or `Failure`; for memcached, the Deployment Available), the
//! operator's CPU with its child processes, its peak resident set with them,
//! and the requests it sent to the API server by verb and resource, as the
//! API server's audit log has them: each operator runs as the control
//! plane's audited user (`kube_env::AUDITED_USER`), so upstream's proxied
//! role requests count, which its `rest_client_requests_total` leaves out.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube_env::{AuditMark, KubeEnv, Options};

use crate::Plan;
use crate::operator::{Flavour, Operator};
use crate::projects::{self, Project};
use crate::report::Row;
use crate::scenarios::{PerReconcile, mib, per_reconcile};
use crate::usage::PeakSampler;
use crate::workload::{self, Observer, Until};

/// How long one side may take to reach its end.
const LIMIT: Duration = Duration::from_secs(900);

/// One operator project on both sides.
#[derive(Debug)]
pub struct RealRun {
    pub subject: &'static str,
    /// What the wall time is of, for the table.
    pub what: String,
    pub enka: RealSide,
    pub upstream: Option<RealSide>,
}

/// One side's figures from the first create to the end.
#[derive(Debug)]
pub struct RealSide {
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub peak_tree_rss_bytes: u64,
    pub api_requests: f64,
    /// The requests by `VERB resource`, divided as `api_requests` is.
    pub requests: BTreeMap<String, f64>,
    /// How the custom resources ended: `Successful` or `Failure`, counted.
    pub ends: BTreeMap<String, usize>,
    /// The reconciles to the end and their average wall time.
    pub runs: PerReconcile,
    /// enka only: seconds inside each module's calls (`enka_module_duration_seconds`).
    pub module_seconds: BTreeMap<String, f64>,
    /// enka only: seconds in each task, retries and their delays included
    /// (`enka_task_duration_seconds`).
    pub task_seconds: BTreeMap<String, f64>,
}

/// A project to run and the custom resources its samples create.
struct Subject {
    name: &'static str,
    what: String,
    project: Project,
    /// `(apiVersion, kind, name)` of each sample custom resource.
    resources: Vec<(String, String, String)>,
}

/// Every real-operator run the plan asks for, on a control plane with nodes.
pub async fn run(plan: &Plan, log_dir: &Path) -> Vec<RealRun> {
    let env = KubeEnv::start(Options::default().nodes(kube_env::SHARED_NODES))
        .await
        .unwrap_or_else(|e| panic!("starting the control plane with nodes: {e}"));
    let client = env.client().expect("a client");
    let mut runs = vec![memcached_available(plan, &env, &client, log_dir).await];
    let Some(shared) = crate::support::shared_operators() else {
        eprintln!(
            "bench: no ../shared/operators here: awx-operator and advanced-molecule left out"
        );
        return runs;
    };
    let mut subjects = vec![awx(&shared)];
    if !plan.smoke {
        subjects.push(advanced_molecule(&shared));
    }
    for subject in &subjects {
        projects::install_crds(&env, &subject.project.crds, "bench");
        let upstream = if plan.upstream {
            Some(side(&env, &client, subject, Flavour::Upstream, log_dir).await)
        } else {
            None
        };
        let enka = side(&env, &client, subject, Flavour::Enka, log_dir).await;
        runs.push(RealRun {
            subject: subject.name,
            what: subject.what.clone(),
            enka,
            upstream,
        });
    }
    runs
}

fn awx(shared: &Path) -> Subject {
    let project = projects::awx(shared);
    Subject {
        name: "awx-operator",
        what: "its AWX sample (managed database) → Failure at the role's first k8s_exec, which needs a kubelet"
            .into(),
        resources: sample_resources(&project.samples),
        project,
    }
}

/// Every sample but two that never end: FinalizerConcurrencyTest's playbook
/// Ansible refuses to load, and upstream never ends that run
/// (docs/compatibility.md); SelectorTest's sample lacks the label its watch
/// selects on, so neither operator reconciles it.
fn advanced_molecule(shared: &Path) -> Subject {
    let mut project = projects::advanced_molecule(shared);
    project.samples.retain(|p| {
        let name = p.to_string_lossy();
        !name.contains("finalizerconcurrencytest") && !name.contains("selectortest")
    });
    Subject {
        name: "advanced-molecule",
        what: format!(
            "its {} samples (all but FinalizerConcurrencyTest and SelectorTest) → each Successful or Failure",
            project.samples.len()
        ),
        resources: sample_resources(&project.samples),
        project,
    }
}

/// `(apiVersion, kind, name)` of every document in `samples`.
fn sample_resources(samples: &[PathBuf]) -> Vec<(String, String, String)> {
    let documents = samples.iter().flat_map(|p| projects::documents(p));
    documents
        .filter_map(|value| {
            let field = |pointer: &str| value.pointer(pointer)?.as_str().map(str::to_owned);
            Some((
                field("/apiVersion")?,
                field("/kind")?,
                field("/metadata/name")?,
            ))
        })
        .collect()
}

/// What an operator has used so far, to subtract.
struct Mark {
    cpu_seconds: f64,
    metrics: String,
    audit: AuditMark,
}

async fn mark(env: &KubeEnv, operator: &Operator) -> Mark {
    Mark {
        cpu_seconds: operator.usage().tree_cpu_seconds,
        metrics: operator.metrics().await,
        audit: env.audit_mark(),
    }
}

/// The operator's environment: the audited user's kubeconfig, so the API
/// server counts every request it or its children send.
fn audited_env<'a>(env: &'a KubeEnv, more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let kubeconfig = env.audited_kubeconfig().to_str().expect("a UTF-8 path");
    let mut vars = vec![("KUBECONFIG", kubeconfig)];
    vars.extend_from_slice(more);
    vars
}

impl Mark {
    /// The side's figures between `self` and `after`; CPU and requests
    /// divided by `per`.
    fn side_to(&self, env: &KubeEnv, after: &Mark, seconds: f64, peak: u64, per: f64) -> RealSide {
        let requests: BTreeMap<String, f64> = env
            .audited_requests(self.audit)
            .unwrap_or_else(|e| panic!("reading the audit log: {e}"))
            .into_iter()
            .map(|(key, count)| (key, count as f64 / per))
            .collect();
        let cpu_seconds = after.cpu_seconds - self.cpu_seconds;
        let spent = |metric: &str, label: &str| {
            let before = seconds_by(&self.metrics, metric, label);
            let mut spent = seconds_by(&after.metrics, metric, label);
            for (key, seconds) in &mut spent {
                *seconds -= before.get(key).copied().unwrap_or(0.0);
            }
            spent.retain(|_, seconds| *seconds > 0.0);
            spent
        };
        RealSide {
            seconds,
            cpu_seconds: cpu_seconds / per,
            peak_tree_rss_bytes: peak,
            api_requests: requests.values().sum(),
            requests,
            ends: BTreeMap::new(),
            runs: per_reconcile(&self.metrics, &after.metrics, cpu_seconds),
            module_seconds: spent("enka_module_duration_seconds_sum", "module"),
            task_seconds: spent("enka_task_duration_seconds_sum", "task"),
        }
    }
}

/// The samples of `metric` (a histogram's `_sum`) added up by `label`.
fn seconds_by(metrics: &str, metric: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(metric).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let name = crate::scenarios::label_value(rest, label);
        let value = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let (false, Some(value)) = (name.is_empty(), value) {
            *out.entry(name).or_insert(0.0) += value;
        }
    }
    out
}

/// One side of a subject: its operator started and idle, the samples
/// created, every custom resource at its end.
async fn side(
    env: &KubeEnv,
    client: &Client,
    subject: &Subject,
    flavour: Flavour,
    log_dir: &Path,
) -> RealSide {
    let namespace = format!("real-{}-{}", subject.name, flavour.name());
    workload::create_namespace(client, &namespace).await;
    let namespaces_before = namespace_names(client).await;
    let project = &subject.project;
    let project_env: Vec<(&str, &str)> = project
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let env_vars = audited_env(env, &project_env);
    let args: Vec<&str> = project.args.iter().map(String::as_str).collect();
    let operator = Operator::start_with_args(
        flavour,
        env,
        &project.watches,
        &namespace,
        &env_vars,
        &args,
        log_dir,
    )
    .await;
    crate::scenarios::settle(&operator).await;
    let before = mark(env, &operator).await;
    let sampler = PeakSampler::start(operator.pid());
    let started = Instant::now();
    for sample in &project.samples {
        let path = sample.display().to_string();
        crate::support::kubectl(env, &["create", "-n", &namespace, "-f", &path]);
    }
    let ends = await_ends(client, &namespace, &subject.resources, &operator).await;
    let seconds = started.elapsed().as_secs_f64();
    let after = mark(env, &operator).await;
    let side = RealSide {
        ends,
        ..before.side_to(env, &after, seconds, sampler.finish(), 1.0)
    };
    eprintln!(
        "bench: {:9} {}: at its end in {:.1} s ({:?}); {:.2} CPU s, peak {:.0} MiB with child processes, {:.0} API requests",
        flavour.name(),
        subject.name,
        side.seconds,
        side.ends,
        side.cpu_seconds,
        mib(side.peak_tree_rss_bytes),
        side.api_requests
    );
    eprintln!(
        "bench: {:9} {}: requests {:?}",
        flavour.name(),
        subject.name,
        side.requests
    );
    // Each request, as the API server's audit log has it, beside the logs.
    if let Ok(events) = env.audited_events(before.audit) {
        let path = log_dir.join(format!("audit-{}-{}.jsonl", flavour.name(), subject.name));
        let _ = std::fs::write(path, events);
    }
    operator.stop();
    clean_up(client, &namespace, &namespaces_before).await;
    side
}

/// Polls until every resource has a `Successful` or `Failure` condition;
/// how many ended each way.
async fn await_ends(
    client: &Client,
    namespace: &str,
    resources: &[(String, String, String)],
    operator: &Operator,
) -> BTreeMap<String, usize> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut ends = BTreeMap::new();
        for (api_version, kind, name) in resources {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                namespace,
                &projects::resource(api_version, kind),
            );
            let object = api.get_opt(name).await.ok().flatten();
            if let Some(end) = object.as_ref().and_then(end_of) {
                *ends.entry(end).or_insert(0) += 1;
            }
        }
        if ends.values().sum::<usize>() == resources.len() {
            return ends;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} custom resources at their end after {LIMIT:?}:\n{}",
            ends.values().sum::<usize>(),
            resources.len(),
            operator.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `Successful` or `Failure`, whichever condition of the object is true.
fn end_of(object: &DynamicObject) -> Option<String> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .filter(|c| c["status"] == "True")
        .filter_map(|c| c["type"].as_str())
        .find(|t| *t == "Successful" || *t == "Failure")
        .map(str::to_owned)
}

async fn namespace_names(client: &Client) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .expect("listing namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// Deletes the run's namespace and any its operator made (cluster-scoped
/// dependents such as advanced-molecule's `externalnamespace`), so the
/// other side starts from the same cluster.
async fn clean_up(client: &Client, namespace: &str, before: &[String]) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let mut doomed = vec![namespace.to_owned()];
    doomed.extend(
        namespace_names(client)
            .await
            .into_iter()
            .filter(|n| !before.contains(n)),
    );
    for name in &doomed {
        let _ = api.delete(name, &DeleteParams::background()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while namespace_names(client)
        .await
        .iter()
        .any(|n| doomed.contains(n))
    {
        assert!(
            Instant::now() < deadline,
            "namespaces {doomed:?} not gone after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The memcached workload on nodes: create → Deployment Available, one
/// Memcached at a time, as the latency rows but to the point a user waits
/// for. `seconds` is the median sample.
async fn memcached_available(
    plan: &Plan,
    env: &KubeEnv,
    client: &Client,
    log_dir: &Path,
) -> RealRun {
    crate::support::install_crd(client, workload::CRD).await;
    crate::scenarios::warm_up(client, &workload::memcached_resource()).await;
    let samples = plan.available_crs;
    let upstream = if plan.upstream {
        Some(available_side(env, client, Flavour::Upstream, samples, log_dir).await)
    } else {
        None
    };
    let enka = available_side(env, client, Flavour::Enka, samples, log_dir).await;
    RealRun {
        subject: "memcached",
        what: format!(
            "create → Deployment Available, median of {samples}; CPU and requests per Memcached"
        ),
        enka,
        upstream,
    }
}

async fn available_side(
    env: &KubeEnv,
    client: &Client,
    flavour: Flavour,
    samples: usize,
    log_dir: &Path,
) -> RealSide {
    let namespace = format!("real-memcached-{}", flavour.name());
    workload::create_namespace(client, &namespace).await;
    let observer = Observer::start(client, &namespace).await;
    let watches = crate::support::repo_path(workload::WATCHES);
    let env_vars = audited_env(env, &[]);
    let operator = Operator::start(flavour, env, &watches, &namespace, &env_vars, log_dir).await;
    crate::scenarios::settle(&operator).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &workload::memcached_resource());
    let before = mark(env, &operator).await;
    let sampler = PeakSampler::start(operator.pid());
    let mut latency = Vec::with_capacity(samples);
    for i in 0..samples {
        let names = [format!("available-{i:03}")];
        let started = Instant::now();
        workload::create_memcached(&api, &names[0], 1).await;
        let available = observer.await_all(&names, Until::Available, LIMIT).await;
        latency.push(available.duration_since(started));
        observer.await_all(&names, Until::Successful, LIMIT).await;
        crate::scenarios::settle(&operator).await;
        tokio::time::sleep(crate::scenarios::IDLE_BEFORE_SAMPLE).await;
    }
    let after = mark(env, &operator).await;
    let median = workload::percentile(&latency, 50.0).as_secs_f64();
    let side = RealSide {
        ends: BTreeMap::from([("Available".to_owned(), samples)]),
        ..before.side_to(env, &after, median, sampler.finish(), samples.max(1) as f64)
    };
    eprintln!(
        "bench: {:9} memcached on nodes: create → Available p50 {:.0} ms, p99 {:.0} ms",
        flavour.name(),
        side.seconds * 1e3,
        workload::percentile(&latency, 99.0).as_secs_f64() * 1e3
    );
    operator.stop();
    side
}

/// The table's rows: per project, each figure for both sides.
pub fn rows(runs: &[RealRun]) -> Vec<Row> {
    let mut rows = Vec::new();
    for run in runs {
        let mut both = |metric: &str, label: &str, figure: &dyn Fn(&RealSide) -> f64| {
            rows.push(Row {
                metric: format!("real_{}_{metric}", run.subject.replace('-', "_")),
                what: format!("{} on nodes: {label}", run.subject),
                enka: Some(figure(&run.enka)),
                upstream: run.upstream.as_ref().map(figure),
            });
        };
        if run.subject == "memcached" {
            both(
                "available_p50_ms",
                "create → Deployment Available, p50 (ms)",
                &|s| s.seconds * 1e3,
            );
            both("cpu_ms", "operator CPU per Memcached (ms)", &|s| {
                s.cpu_seconds * 1e3
            });
            both("api_requests", "API requests per Memcached", &|s| {
                s.api_requests
            });
        } else {
            both(
                "end_seconds",
                "samples created → at their end (s)",
                &|s| s.seconds,
            );
            both(
                "cpu_seconds",
                "operator CPU with child processes (s)",
                &|s| s.cpu_seconds,
            );
            both("api_requests", "API requests", &|s| s.api_requests);
            both("reconciles", "reconciles to the end", &|s| s.runs.runs);
        }
        both(
            "peak_rss_mib",
            "peak RSS with child processes (MiB)",
            &|s| mib(s.peak_tree_rss_bytes),
        );
    }
    rows
}

/// Panics on a figure that cannot be right, or where the two sides did not
/// reach the same end.
pub fn check(runs: &[RealRun], plan: &Plan) {
    if plan.runs("real") {
        assert!(!runs.is_empty(), "real: nothing ran");
    }
    for run in runs {
        for (name, side) in [
            ("enka", Some(&run.enka)),
            ("upstream", run.upstream.as_ref()),
        ] {
            let Some(side) = side else { continue };
            assert!(side.seconds > 0.0, "{name} {}: {side:?}", run.subject);
            assert!(
                side.cpu_seconds > 0.0,
                "{name} {}: no CPU: {side:?}",
                run.subject
            );
            assert!(
                side.peak_tree_rss_bytes > 0,
                "{name} {}: no RSS",
                run.subject
            );
            assert!(
                side.api_requests >= 1.0,
                "{name} {}: no API requests counted; does the operator run as the audited user?",
                run.subject
            );
            assert!(
                side.runs.runs >= 1.0,
                "{name} {}: no reconcile",
                run.subject
            );
        }
        if let Some(upstream) = &run.upstream {
            assert_eq!(
                run.enka.ends, upstream.ends,
                "{}: enka and upstream did not reach the same end",
                run.subject
            );
        }
    }
}

/// The section of docs/benchmarks.md on real operators: what ran, and where
/// each side's time went.
pub fn markdown(runs: &[RealRun]) -> String {
    let mut md = String::new();
    if runs.is_empty() {
        return md;
    }
    md.push_str(
        "\n## Real operators on simulated nodes\n\n\
         The `on nodes` rows ran on a control plane of their own: kube-apiserver, etcd, \
         kube-controller-manager, kube-scheduler and kwok's three simulated nodes (tools/kube-env, as \
         `make kube-env NODES=3`), so Deployments become Available, claims are bound and Jobs complete; \
         no container runs. Each side ran alone on its own namespace, from creating the samples (with \
         `kubectl create`) to every custom resource's `Successful` or `Failure` condition. CPU counts \
         the operator and every process under it, alive or exited (upstream's ansible-runner and \
         ansible-playbook, enka's Ansible worker and the modules it forks); peak RSS is the operator with its children, sampled every \
         100 ms; API requests are what the API server's audit log has of the operator's user (each \
         operator runs with a user of its own; upstream's Ansible tasks reach the API server through its \
         proxy, with its credentials, so theirs count; its own `rest_client_requests_total` leaves them \
         out), from the samples' create to the end, the operators' start-up lists and watches not \
         included.\n\n",
    );
    for run in runs {
        let _ = writeln!(
            md,
            "- **{}**: {}. Ended: {:?}.",
            run.subject, run.what, run.enka.ends
        );
    }
    md.push_str(
        "\n### Where the time goes\n\n\
         Reconcile counts differ where one side's runs outlast the events between them: the work queue holds \
         a key once, so events that arrive during a run (a Deployment's status settling, kwok readying Pods) \
         cause one more run after it; upstream's runs of seconds absorb events that enka, done in \
         milliseconds, meets one run each.\n\n",
    );
    for run in runs {
        md.push_str(&time_spent(run));
    }
    md.push_str("\n### Requests by verb and resource\n");
    for run in runs {
        md.push_str(&requests_table(run));
    }
    md.push_str(SECTION_END);
    md
}

/// Where the real operators' section ends, for `make bench-real` to find.
const SECTION_END: &str = "\n<!-- end of the real operators' section -->\n";

/// One project's requests side by side, with why enka sends more.
fn requests_table(run: &RealRun) -> String {
    let per = if run.subject == "memcached" {
        " per Memcached"
    } else {
        ""
    };
    let title = format!("{}{per}", run.subject);
    let upstream = run.upstream.as_ref().map(|side| &side.requests);
    crate::requests::side_by_side(&title, &run.enka.requests, upstream)
}

/// One project's time on each side, from the operators' own metrics.
fn time_spent(run: &RealRun) -> String {
    let mut md = String::new();
    let enka = &run.enka;
    let top = |spent: &BTreeMap<String, f64>| {
        let mut spent: Vec<(&String, &f64)> = spent.iter().collect();
        spent.sort_by(|a, b| b.1.total_cmp(a.1));
        spent
            .iter()
            .take(3)
            .map(|(name, seconds)| format!("`{name}` {seconds:.2} s"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = write!(
        md,
        "- **{}**: enka {:.1} s to the end over {:.0} reconciles of {:.2} s each; its slowest tasks \
         (retries and their delays included): {}; inside modules: {}",
        run.subject,
        enka.seconds,
        enka.runs.runs,
        enka.runs.wall_seconds,
        top(&enka.task_seconds),
        top(&enka.module_seconds)
    );
    if let Some(wait) = enka.runs.api_wait_seconds {
        let _ = write!(
            md,
            "; waiting on the API server {:.2} s in all",
            wait * enka.runs.runs
        );
    }
    if let Some(upstream) = &run.upstream {
        let _ = write!(
            md,
            ". Upstream {:.1} s over {:.0} reconciles of {:.2} s each, {:.1} CPU s against enka's {:.2}: \
             every reconcile starts ansible-runner, which starts ansible-playbook, which imports \
             ansible-core, loads the roles and runs each task's module in a Python process of its own",
            upstream.seconds,
            upstream.runs.runs,
            upstream.runs.wall_seconds,
            upstream.cpu_seconds,
            enka.cpu_seconds
        );
    }
    md.push_str(".\n");
    md
}

/// `doc` (docs/benchmarks.md) with the table's real-operator rows and the
/// real operators' section replaced by `runs`'; `None` when the page has
/// no such row or section to replace.
pub fn splice(doc: &str, runs: &[RealRun]) -> Option<String> {
    let mut out = doc.to_owned();
    for row in rows(runs) {
        let start = out.find(&format!("\n| {} |", row.what))? + 1;
        let end = start + out[start..].find('\n')?;
        out.replace_range(start..end, &row.table_line());
    }
    const HEADING: &str = "\n## Real operators on simulated nodes";
    let start = out.find(HEADING)?;
    // A page from before the section had its end marked ends it where the
    // seed's paragraph begins.
    let end = match out[start..].find(SECTION_END) {
        Some(at) => start + at + SECTION_END.len(),
        None => start + out[start..].find("\nThe seed song's")?,
    };
    let mut section = markdown(runs);
    section.insert_str(
        section.len() - SECTION_END.len(),
        "\nThe `on nodes` rows and this section were last made by `make bench-real` alone, after the rest \
         of the page.\n",
    );
    out.replace_range(start..end, &section);
    Some(out)
}
