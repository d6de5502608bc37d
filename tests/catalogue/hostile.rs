//! Generated hostile custom resources: what a user with `create` on the
//! watched kind can write, in every shape that has broken an operator
//! runtime: template syntax in every string, control and bidirectional
//! characters, deep nesting, many keys, huge strings, YAML and JSON bombs
//! inside string fields, a name that collides with an object the operator
//! does not own. All are created at once (seeded, so a failure replays),
//! next to good objects, on the real control plane, through a role that
//! copies the payload with `set_fact` and writes it back
//! (`tasks/cases/hostile.yml`).
//!
//! Each must end Successful or Failed within the wait (no stalled kind),
//! copies must come back verbatim (never templated), the colliding object
//! must not be adopted, enka must not exit or panic, and its memory must
//! stay bounded.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use crate::runner::Scenario;
use crate::runtime::{Ctx, NAMESPACE, WAIT, await_any_end, await_condition, status_mib};

/// The seed of the generator; `ENKA_HOSTILE_SEED` replays another run.
fn seed() -> u64 {
    std::env::var("ENKA_HOSTILE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// Resident memory enka may reach after every hostile object (it is about
/// 40 MiB without them; an alias bomb expanded to 1 GB).
const MEMORY_BOUND_MIB: u64 = 512;

enum Check {
    /// Successful, and the copy written back equals the payload.
    Verbatim,
    /// Successful or Failed, whichever; if Successful, the copy is verbatim.
    Ends,
    /// Failed, its Failure condition saying that it is nested too deep. No
    /// client built on serde_json reads the object whole (this test's
    /// neither): its status is read alone.
    TooDeep,
}

struct Hostile {
    name: String,
    spec: Value,
    check: Check,
}

const TEMPLATES: &[&str] = &[
    "{{ lookup('env', 'HOME') }}",
    "{{ lookup('file', '/var/run/secrets/kubernetes.io/serviceaccount/token') }}",
    "{% for x in range(1000000000) %}{{ x }}{% endfor %}",
    "{{ 7 * 6 }}",
    "{# comment #}{{ '' }}",
    "{% raw %}{{ raw }}{% endraw %}",
    "{{ query('k8s', kind='Secret') }}",
];

const ODD_TEXT: &[&str] = &[
    "\u{1}\u{7}\u{1b}[31mred\u{1b}[0m",
    "right-to-left \u{202e}txt.exe",
    "line\u{2028}separator\r\nand\ttabs",
    "😀 emoji and ÄÖÜ and 中文",
    "yes",
    "0777",
    "~",
    "- not: a list",
];

fn random_text(rng: &mut impl Rng) -> String {
    let pool = if rng.random_bool(0.5) {
        TEMPLATES
    } else {
        ODD_TEXT
    };
    pool[rng.random_range(0..pool.len())].to_owned()
}

/// A random document of depth at most `depth`, every string hostile.
fn random_payload(rng: &mut impl Rng, depth: u32) -> Value {
    match (depth, rng.random_range(0..4)) {
        (0, _) | (_, 0) => json!(random_text(rng)),
        (_, 1) => Value::Array(
            (0..rng.random_range(1..4))
                .map(|_| random_payload(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.random_range(1..4) {
                map.insert(random_text(rng), random_payload(rng, depth - 1));
            }
            Value::Object(map)
        }
    }
}

fn nested(levels: usize) -> Value {
    (0..levels).fold(
        json!("bottom"),
        |inner, i| json!({ format!("k{i}"): inner }),
    )
}

fn generate(seed: u64) -> Vec<Hostile> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut add = |name: &str, spec: Value, check: Check| {
        out.push(Hostile {
            name: format!("hostile-{name}"),
            spec,
            check,
        });
    };
    for i in 0..6 {
        let payload = random_payload(&mut rng, 4);
        add(
            &format!("templates-{i}"),
            json!({ "payload": payload }),
            Check::Verbatim,
        );
    }
    let every_odd: Vec<&str> = ODD_TEXT.to_vec();
    add("odd-text", json!({ "payload": every_odd }), Check::Verbatim);
    add("deep", json!({ "payload": nested(100) }), Check::Ends);
    // Past serde_json's 128 levels: the one object fails, its kind goes on
    // (it used to fail every list of the kind, issue 15 item 8).
    add(
        "too-deep",
        json!({ "payload": nested(300) }),
        Check::TooDeep,
    );
    let many: Map<String, Value> = (0..20_000).map(|i| (format!("key{i}"), json!(i))).collect();
    add("many-keys", json!({ "payload": many }), Check::Ends);
    add(
        "huge-string",
        json!({ "payload": "x".repeat(900 * 1024) }),
        Check::Ends,
    );
    let mut bomb = String::from(
        "a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n",
    );
    for level in 1..9 {
        let prev = level - 1;
        bomb.push_str(&format!(
            "{}: &{} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
            (b'a' + level) as char,
            (b'a' + level) as char,
            p = (b'a' + prev) as char
        ));
    }
    add("yaml-bomb", json!({ "yaml_text": bomb }), Check::Ends);
    let long_alias = format!(
        "a: &a \"{}\"\nb: [{}]\n",
        "x".repeat(10_000),
        vec!["*a"; 30_000].join(", ")
    );
    add(
        "yaml-long-alias",
        json!({ "yaml_text": long_alias }),
        Check::Ends,
    );
    add(
        "yaml-deep",
        json!({ "yaml_text": format!("{}1{}", "[".repeat(20_000), "]".repeat(20_000)) }),
        Check::Ends,
    );
    add(
        "yaml-deep-block",
        json!({ "yaml_text": (0..1_000).map(|i| format!("{}a:\n", " ".repeat(i))).collect::<String>() }),
        Check::Ends,
    );
    add(
        "json-deep",
        json!({ "json_text": format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)) }),
        Check::Ends,
    );
    add(
        "collide",
        json!({ "payload": "mine now?" }),
        Check::Verbatim,
    );
    out
}

/// Creates the colliding ConfigMap and every hostile object at once, and
/// returns one scenario per object plus one for enka's memory.
pub async fn cases(ctx: &Arc<Ctx>) -> Vec<Scenario> {
    let seed = seed();
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client(), NAMESPACE);
    let theirs: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "hostile-collide-out"},
        "data": {"owner": "someone else"},
    }))
    .expect("a ConfigMap");
    config_maps
        .create(&PostParams::default(), &theirs)
        .await
        .expect("creating the ConfigMap the hostile object collides with");
    let hostile = generate(seed);
    for case in &hostile {
        ctx.create(&case.name, "hostile", case.spec.clone()).await;
    }
    let mut scenarios: Vec<Scenario> = Vec::new();
    for case in hostile {
        let ctx = ctx.clone();
        scenarios.push((
            format!("hostile (seed {seed}): {}", case.name),
            Box::pin(async move { check(&ctx, case).await }),
        ));
    }
    let ctx = ctx.clone();
    scenarios.push((
        format!("hostile (seed {seed}): enka's memory stays under {MEMORY_BOUND_MIB} MiB"),
        Box::pin(async move {
            let rss = status_mib(ctx.enka_pid().await, "VmRSS").unwrap_or(0);
            assert!(rss < MEMORY_BOUND_MIB, "enka is resident at {rss} MiB");
            println!("catalogue: after the hostile objects enka is resident at {rss} MiB");
        }),
    ));
    scenarios
}

async fn check(ctx: &Ctx, case: Hostile) {
    if let Check::TooDeep = case.check {
        let message = await_failure_of_deep(ctx, &case.name).await;
        assert!(
            message.contains("nested more than 128 levels deep"),
            "{}: the Failure condition does not say why: {message}",
            case.name
        );
        return;
    }
    let ended = await_any_end(&ctx.inputs(), &case.name).await;
    let copy = || async {
        let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client(), NAMESPACE);
        let out = config_maps
            .get(&format!("{}-out", case.name))
            .await
            .expect("the output ConfigMap");
        let text = out
            .data
            .unwrap_or_default()
            .get("copied")
            .cloned()
            .unwrap_or_default();
        let value: Value = serde_json::from_str(&text).expect("the copy is JSON");
        (value, out.metadata.owner_references)
    };
    match (&case.check, ended.as_str()) {
        (Check::Verbatim, "Successful") | (Check::Ends, "Successful") => {
            if case.spec.get("payload").is_some() {
                let (copied, owners) = copy().await;
                assert_eq!(
                    copied,
                    as_set_fact_stores(&case.spec["payload"]),
                    "the copy is not verbatim"
                );
                if case.name == "hostile-collide" {
                    assert!(
                        owners.is_none(),
                        "the colliding ConfigMap was adopted: {owners:?}"
                    );
                }
            }
        }
        (Check::Ends, "Failure") => {}
        (Check::Verbatim, other) => {
            let object = await_condition(&ctx.inputs(), &case.name, other, WAIT).await;
            panic!("{} should succeed: {:?}", case.name, object.data["status"]);
        }
        (_, other) => panic!("{}: unexpected end {other}", case.name),
    }
}

/// What `set_fact` stores for a value: ansible-core's set_fact action turns
/// a string that reads as a boolean (`yes`, `False`, …) into one, on the
/// value itself, not inside lists and dicts.
fn as_set_fact_stores(payload: &Value) -> Value {
    match payload.as_str().map(str::to_ascii_lowercase).as_deref() {
        Some("yes" | "true") => json!(true),
        Some("no" | "false") => json!(false),
        _ => payload.clone(),
    }
}

/// The message of the Failure condition of an object too deep for
/// serde_json's `Value`: its JSON is read with every field but `status`
/// skipped, which serde_json does without a depth limit.
async fn await_failure_of_deep(ctx: &Ctx, name: &str) -> String {
    #[derive(serde::Deserialize)]
    struct StatusOnly {
        #[serde(default)]
        status: Value,
    }
    let url = format!("{}/{name}", ctx.inputs().resource_url());
    crate::support::eventually(&format!("{name}: Failure=True"), WAIT, || async {
        let request = http::Request::get(url.as_str()).body(Vec::new()).ok()?;
        let text = ctx.client().request_text(request).await.ok()?;
        let object: StatusOnly = serde_json::from_str(&text).ok()?;
        object.status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Failure" && c["status"] == "True")
            .and_then(|c| c["message"].as_str().map(str::to_owned))
    })
    .await
}
