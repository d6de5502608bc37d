//! Bad inputs met while running: one enka on tests/catalogue/project, one
//! custom resource per case, all created at once next to a good one. A case
//! that must fail shows a Failure condition and a ReconcileFailed Event, both
//! naming the task, its file and line, and saying what went wrong; a case
//! that must work (hostile but valid input) succeeds with the right output.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube_env::KubeEnv;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::enka::Enka;
use crate::runner::Scenario;
use crate::support::{eventually, install_crd, repo_path};

const PROJECT: &str = "tests/catalogue/project";
pub(crate) const NAMESPACE: &str = "catalogue";
/// Every run is bounded by this (`--reconcile-timeout`), which is what ends
/// the endless `until`.
const RECONCILE_TIMEOUT: &str = "3s";
/// The password of the Secret the no_log cases read; it must appear in no
/// log line, condition or Event.
const PASSWORD: &str = "catalogue-hunter2-5c1f";
pub(crate) const WAIT: Duration = Duration::from_secs(60);
/// Each Ansible worker's memory: `memory_hog` allocates past it.
const MEMORY_LIMIT: &str = "--ansible-worker-memory-limit=256Mi";

/// The memory limit of config/manager/manager.yaml: the templates and
/// results of every case, bad ones included, must fit it.
const MANAGER_MEMORY_LIMIT_MIB: u64 = 128;

/// A memory `field` of `pid`'s /proc status (`VmRSS`, or `VmHWM`: the
/// most it was ever resident), in MiB.
pub(crate) fn status_mib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb / 1024)
}

/// What a case must come to.
enum Expect {
    /// A Failure naming `task` at its line in the case file, saying `says`.
    Failure {
        task: &'static str,
        says: &'static str,
    },
    /// Successful, and the output ConfigMap's `key` is `value`.
    Output { key: &'static str, value: Value },
    /// Successful, nothing else to read.
    Success,
}

struct Case {
    name: &'static str,
    spec: Value,
    expect: Expect,
}

/// The cases that must fail: name (its file under tasks/cases), spec, the
/// failing task, and what the message must say.
const FAILURES: &[(&str, &str, &str, &str)] = &[
    (
        "undefined_variable",
        r#"{}"#,
        "Print a variable nobody set",
        "'no_such_variable' is undefined",
    ),
    (
        "undefined_attribute",
        r#"{"settings": {"present": 1}}"#,
        "Read a field the custom resource does not have",
        "'dict object' has no attribute 'missing'",
    ),
    (
        "loop_over_number",
        r#"{"size": 3}"#,
        "Loop over what should be a list",
        "Invalid data passed to 'loop', it requires a list, got this instead: 3",
    ),
    (
        "loop_over_string",
        r#"{"name": "abc"}"#,
        "Loop over a string",
        "Invalid data passed to 'loop', it requires a list, got this instead: abc",
    ),
    (
        "with_dict_over_list",
        r#"{"items": [1, 2]}"#,
        "with_dict over a list",
        "with_dict expects a dict, got list",
    ),
    (
        "join_a_number",
        r#"{"size": 3}"#,
        "Join what should be a list",
        "cannot join value of type number",
    ),
    (
        "int_of_nonsense",
        r#"{"size": "lots"}"#,
        "Replicas from a field that is not a number",
        "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas",
    ),
    (
        "definition_not_a_mapping",
        r#"{"size": 3}"#,
        "A definition that is a number",
        "definition must be a mapping, a list or YAML text, got int",
    ),
    (
        "invalid_object",
        r#"{}"#,
        "A ConfigMap whose data is not strings",
        "cannot unmarshal object into Go struct field ConfigMap.data of type string",
    ),
    (
        "missing_namespace",
        r#"{}"#,
        "A ConfigMap in a namespace that does not exist",
        r#""reason":"NotFound","details":{"name":"no-such-namespace-here""#,
    ),
    (
        "unknown_kind",
        r#"{}"#,
        "An object of a kind the cluster does not serve",
        "nowhere.example.com/v1.Unicorn",
    ),
    (
        "status_of_missing_object",
        r#"{}"#,
        "Status of an object that is not there",
        "Failed to retrieve requested object",
    ),
    (
        "memory_hog",
        r#"{}"#,
        "Allocate without end in a module",
        "the Ansible worker's memory limit of 256 MiB was reached",
    ),
    (
        "fail_module",
        r#"{"size": 7}"#,
        "Refuse on purpose",
        "size 7 is not allowed",
    ),
    (
        "assert_failed",
        r#"{"size": 7}"#,
        "Check the size",
        "size must be 100",
    ),
    (
        "division_by_zero",
        r#"{"size": 2}"#,
        "Divide by zero",
        "ZeroDivisionError: division by zero",
    ),
    (
        "bad_from_yaml",
        r#"{}"#,
        "Parse YAML that is not",
        "from_yaml: 2:1:",
    ),
    (
        "bad_from_json",
        r#"{}"#,
        "Parse JSON that is not",
        "Expecting value: line 1 column 6 (char 5)",
    ),
    (
        "bad_b64decode",
        r#"{}"#,
        "Decode base64 that is not",
        "Invalid base64-encoded string: number of data characters (9) cannot be 1 more than a multiple of 4",
    ),
    (
        "bad_regex",
        r#"{}"#,
        "Search with a broken regular expression",
        "invalid regular expression \"(unclosed\"",
    ),
    (
        "huge_number",
        r#"{}"#,
        "Raise to a huge power",
        "unable to calculate 10 ** 100000",
    ),
    (
        "huge_string",
        r#"{}"#,
        "Build a string far over the output limit",
        "repeating a value would take the template's memory to 38.",
    ),
    (
        "template_memory_budget",
        r#"{}"#,
        "Build a value past the reconcile's memory budget",
        "MiB, over the 16.0 MiB the reconcile has left of its memory budget (the operator's --reconcile-memory-budget) (in template \"{{ ('x' * 10**8)",
    ),
    (
        "registered_memory_budget",
        r#"{}"#,
        "Keep results past the reconcile's memory budget",
        "memory budget (the operator's --reconcile-memory-budget)",
    ),
    (
        "endless_template_loop",
        r#"{}"#,
        "A template loop that would not end",
        "exceeded its evaluation budget",
    ),
    (
        "endless_until",
        r#"{}"#,
        "Wait for something that never comes",
        "the reconcile timeout (--reconcile-timeout) ended the until loop",
    ),
    (
        "recursive_include",
        r#"{}"#,
        "Include this file again, forever",
        "includes nested deeper than 32 levels",
    ),
    (
        "missing_include",
        r#"{"name": "nope"}"#,
        "Include a file that is not there",
        "Could not find or access",
    ),
    (
        "missing_role",
        r#"{"name": "nope"}"#,
        "Include a role that is not there",
        "role nope is not part of the loaded project",
    ),
    (
        "missing_template",
        r#"{}"#,
        "Read a template that is not there",
        "the template file no_such.j2 could not be found",
    ),
    (
        "missing_vars_file",
        r#"{"name": "nope"}"#,
        "Load a vars file that is not there",
        "Could not find or access 'nope.yml'",
    ),
    (
        "set_fact_undefined",
        r#"{}"#,
        "Set a fact from nothing",
        "'not_defined_anywhere' is undefined",
    ),
    (
        "until_undefined",
        r#"{}"#,
        "An until condition on a field that is not there",
        // As ansible-playbook 2.18.19: the condition fails on the first
        // attempt, it does not poll.
        "The conditional check 'polled.nope.deeper == 1' failed. The error was: error while evaluating conditional (polled.nope.deeper == 1): 'dict object' has no attribute 'nope'",
    ),
    (
        "bad_requeue_time",
        r#"{"name": "soon"}"#,
        "Requeue after a time that is not one",
        "invalid duration \"soon\"",
    ),
    (
        "bad_label_selector",
        r#"{}"#,
        "List with a broken label selector",
        "unable to parse requirement",
    ),
    (
        "wait_times_out",
        r#"{}"#,
        "Wait for a condition that never comes",
        "Timed out waiting on resource",
    ),
    (
        "scale_missing",
        r#"{}"#,
        "Scale a Deployment that is not there",
        "Failed to retrieve requested object: b'",
    ),
    (
        "file_outside_project",
        r#"{}"#,
        "Read a file that is not there",
        "The 'file' lookup had an issue accessing the file '/nonexistent/enka-catalogue.txt'",
    ),
    (
        "file_traversal",
        r#"{}"#,
        "Climb to a file that is not there",
        "The 'file' lookup had an issue accessing the file '../../../../../../../../nonexistent/enka-catalogue.txt'",
    ),
    (
        "template_outside_project",
        r#"{}"#,
        "Render a template that is not there",
        "the template file /nonexistent/enka-catalogue.j2 could not be found",
    ),
    (
        "pipe_without_opt_in",
        r#"{}"#,
        "Run a command that fails",
        "lookup_plugin.pipe(exit 3) returned 3",
    ),
    (
        "src_outside_project",
        r#"{}"#,
        "Apply a file that is not there",
        "src file /nonexistent/enka-catalogue.yml not found",
    ),
    (
        "secret_not_logged",
        r#"{}"#,
        "Use its value, then fail",
        "hidden due to the fact that 'no_log: true' was specified",
    ),
];

fn failure(name: &'static str, spec: Value, task: &'static str, says: &'static str) -> Case {
    Case {
        name,
        spec,
        expect: Expect::Failure { task, says },
    }
}

fn table() -> Vec<Case> {
    let blob = "x".repeat(1024 * 1024);
    let mut nested = json!({"bottom": true});
    for level in (1..=100).rev() {
        nested = json!({ format!("k{level}"): nested });
    }
    let mut cases: Vec<Case> = FAILURES
        .iter()
        .map(|(name, spec, task, says)| {
            failure(
                name,
                serde_json::from_str(spec).expect("a spec"),
                task,
                says,
            )
        })
        .collect();
    cases.extend([
        Case {
            name: "cr_jinja_not_templated",
            spec: json!({"message": "{{ lookup('env', 'HOME') }} {% raw %}{{ x }}{% endraw %}"}),
            expect: Expect::Output {
                key: "message",
                value: json!("{{ lookup('env', 'HOME') }} {% raw %}{{ x }}{% endraw %}"),
            },
        },
        Case {
            name: "large_cr",
            spec: json!({ "blob": blob }),
            expect: Expect::Output {
                key: "length",
                value: json!((1024 * 1024).to_string()),
            },
        },
        Case {
            name: "deep_cr",
            spec: json!({ "nested": nested }),
            expect: Expect::Output {
                key: "top",
                value: json!("k1"),
            },
        },
        Case {
            name: "odd_keys",
            spec: json!({"odd": {"camelCase": 1, "HTTPServer": 2, "a-b": 3, "x.y": 4, "ÄÖ": 5}}),
            expect: Expect::Output {
                key: "keys",
                // upstream's paramconv: `-` is a delimiter, HTTP a word, and
                // a key that does not start with A-Z gets no `_`.
                value: json!("a_b,camel_case,http_server,x.y,äö"),
            },
        },
        Case {
            name: "secret_read",
            spec: json!({}),
            expect: Expect::Success,
        },
    ]);
    cases
}

pub struct Ctx {
    _env: Arc<KubeEnv>,
    client: Client,
    enka: Mutex<Enka>,
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("catalogue.enka.dev", "v1", "BadInput"),
        "badinputs",
    )
}

impl Ctx {
    /// Installs the CRD, makes the namespace and the Secrets the no_log
    /// cases read, and starts enka with a short reconcile timeout.
    pub async fn start(env: Arc<KubeEnv>) -> Arc<Ctx> {
        let client = env.client().expect("a client");
        install_crd(&client, &format!("{PROJECT}/config/crd.yaml")).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace =
            serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("a Namespace");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("creating the namespace");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
        for owner in ["secret_not_logged", "secret_read"] {
            let secret = serde_json::from_value(json!({
                "metadata": {"name": format!("{}-secret", owner.replace('_', "-"))},
                "stringData": {"password": PASSWORD},
            }))
            .expect("a Secret");
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .expect("creating a Secret");
        }
        let flag = format!("--reconcile-timeout={RECONCILE_TIMEOUT}");
        let mut enka = Enka::start_with_args(
            &env,
            &format!("{PROJECT}/watches.yaml"),
            NAMESPACE,
            &[],
            &[&flag, MEMORY_LIMIT],
            "-catalogue",
        );
        enka.await_ready().await;
        Arc::new(Ctx {
            _env: env,
            client,
            enka: Mutex::new(enka),
        })
    }

    /// A client of the catalogue's control plane.
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// enka's process id.
    pub(crate) async fn enka_pid(&self) -> u32 {
        self.enka.lock().await.pid()
    }

    pub(crate) fn inputs(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NAMESPACE, &resource())
    }

    pub(crate) async fn create(&self, name: &str, case: &str, mut spec: Value) {
        spec["case"] = json!(case);
        let mut object = DynamicObject::new(name, &resource());
        object.data = json!({ "spec": spec });
        // Sent as text, and the answer left undecoded: an object nested
        // deeper than serde_json's limit is a case too.
        let body = serde_json::to_vec(&object).expect("the object as JSON");
        let request = http::Request::post(self.inputs().resource_url())
            .header("content-type", "application/json")
            .body(body)
            .expect("a request");
        self.client
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }

    /// The end of enka's log, for failure messages.
    pub async fn log(&self) -> String {
        self.enka.lock().await.log()
    }

    /// After every case: a custom resource made now still succeeds at once,
    /// enka never exited, nothing panicked, and the Secret's password is in
    /// no line of its log, debug lines included.
    pub async fn assert_unharmed(&self) {
        self.create("good-after", "good", json!({})).await;
        await_condition(
            &self.inputs(),
            "good-after",
            "Successful",
            Duration::from_secs(10),
        )
        .await;
        let peak = status_mib(self.enka_pid().await, "VmHWM").unwrap_or(u64::MAX);
        assert!(
            peak < MANAGER_MEMORY_LIMIT_MIB,
            "enka peaked at {peak} MiB, over the scaffold manager's {MANAGER_MEMORY_LIMIT_MIB} MiB limit"
        );
        println!("catalogue: enka's peak RSS over every case is {peak} MiB");
        let mut enka = self.enka.lock().await;
        assert!(enka.exited().is_none(), "enka exited:\n{}", enka.log());
        let log = enka.full_log();
        assert!(!log.contains("panicked"), "enka panicked:\n{log}");
        assert!(
            !log.contains(PASSWORD),
            "the Secret's password reached the log"
        );
        println!(
            "catalogue: after every case, a new object still succeeds; enka never exited; no panic, no secret in {} log lines",
            log.lines().count()
        );
    }
}

/// Creates every case's custom resource at once, next to a good one, and
/// returns one scenario per case that checks what it came to.
pub async fn cases(ctx: &Arc<Ctx>) -> Vec<Scenario> {
    let table = table();
    ctx.create("good", "good", json!({})).await;
    for case in &table {
        ctx.create(&case.name.replace('_', "-"), case.name, case.spec.clone())
            .await;
    }
    let mut scenarios: Vec<Scenario> = vec![(
        "runtime: a good object next to all the bad ones".to_owned(),
        Box::pin({
            let ctx = ctx.clone();
            async move {
                await_condition(&ctx.inputs(), "good", "Successful", WAIT).await;
            }
        }),
    )];
    for case in table {
        let ctx = ctx.clone();
        scenarios.push((
            format!("runtime: {}", case.name),
            Box::pin(async move { check(&ctx, case).await }),
        ));
    }
    scenarios
}

async fn check(ctx: &Ctx, case: Case) {
    let name = case.name.replace('_', "-");
    match case.expect {
        Expect::Failure { task, says } => {
            let object = await_condition(&ctx.inputs(), &name, "Failure", WAIT).await;
            let failure = condition(&object, "Failure").expect("a Failure condition");
            let message = failure["message"].as_str().unwrap_or_default();
            let file = format!("roles/catalogue/tasks/cases/{}.yml", case.name);
            let line = task_line(&file, task);
            let at = format!("{file}:{line}:3");
            // The condition says what upstream's does (the failed results'
            // msg, `unknown playbook failure` for a result without one);
            // the Event below names the task, where it is and what went
            // wrong in enka's words.
            assert!(!message.is_empty(), "an empty Failure message");
            assert!(
                !message.contains(PASSWORD),
                "the password is in the condition"
            );
            let events = await_event(ctx, &name).await;
            assert!(
                events
                    .iter()
                    .any(|e| e.contains(&format!("task \"{task}\""))
                        && e.contains(&at)
                        && e.contains(says)),
                "no ReconcileFailed Event names the task at {at} and says {says:?}: {events:?}"
            );
            assert!(
                events.iter().all(|e| !e.contains(PASSWORD)),
                "the password is in an Event"
            );
        }
        Expect::Output { key, value } => {
            await_condition(&ctx.inputs(), &name, "Successful", WAIT).await;
            let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), NAMESPACE);
            let out = config_maps
                .get(&format!("{name}-out"))
                .await
                .expect("the output ConfigMap");
            let got = out.data.unwrap_or_default().get(key).cloned();
            assert_eq!(got.as_ref().map(|s| json!(s)), Some(value));
        }
        Expect::Success => {
            await_condition(&ctx.inputs(), &name, "Successful", WAIT).await;
        }
    }
}

/// The line of `- name: <task>` in a case file of the project.
fn task_line(file: &str, task: &str) -> usize {
    let path = repo_path(&format!("{PROJECT}/{file}"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .position(|l| l.trim_start() == format!("- name: {task}"))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no task {task:?} in {file}"))
}

fn condition(object: &DynamicObject, kind: &str) -> Option<Value> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
        .cloned()
}

/// Which of Successful and Failure `name` comes to first.
pub(crate) async fn await_any_end(api: &Api<DynamicObject>, name: &str) -> String {
    eventually(&format!("{name}: Successful or Failure"), WAIT, || async {
        let object = api.get_opt(name).await.ok()??;
        ["Successful", "Failure"]
            .into_iter()
            .find(|kind| condition(&object, kind).is_some())
            .map(str::to_owned)
    })
    .await
}

pub(crate) async fn await_condition(
    api: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    limit: Duration,
) -> DynamicObject {
    eventually(&format!("{name}: {kind}=True"), limit, || async {
        let object = api.get_opt(name).await.ok()??;
        condition(&object, kind).map(|_| object)
    })
    .await
}

/// The messages of the ReconcileFailed Events of `name`, once there is one.
async fn await_event(ctx: &Ctx, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    eventually(
        &format!("a ReconcileFailed Event on {name}"),
        WAIT,
        || async {
            let list = events.list(&params).await.ok()?;
            let messages: Vec<String> = list
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("ReconcileFailed"))
                .filter_map(|e| e.message)
                .collect();
            (!messages.is_empty()).then_some(messages)
        },
    )
    .await
}
