//! The variables of a run, exactly as upstream builds its extra vars
//! (`runner.makeParameters`): the spec (snake-cased), `ansible_operator_meta`,
//! the raw object as `_<group>_<kind>` and its spec as `_<group>_<kind>_spec`,
//! then watch vars, then finalizer vars.
//!
//! Strings that come from the custom resource are never templated: whoever
//! can write a custom resource must not be able to run Jinja in the
//! operator. Upstream templates them unless the watch sets `markUnsafe`;
//! a watch that wants upstream's behaviour sets `templateCustomResource`.

use std::sync::Arc;

use minijinja::Value;
use serde_json::{Map, Value as Json};

use crate::paramconv::to_snake;
use enka_template::{Var, convert};

/// How the custom resource's values become variables.
#[derive(Debug, Clone, Default)]
pub struct VarOptions {
    /// `snakeCaseParameters` (upstream default: true).
    pub snake_case: bool,
    /// Template strings from the custom resource (upstream's default; enka
    /// leaves it off).
    pub template_custom_resource: bool,
    /// Watch `vars`.
    pub watch_vars: Vec<(String, Value)>,
    /// Finalizer `vars`, on finalizer runs only.
    pub finalizer_vars: Vec<(String, Value)>,
}

/// `_<group>_<kind>`, with `.` and `-` turned into `_` (the core group gives
/// `__secret`).
pub fn object_var_name(group: &str, kind: &str) -> String {
    format!("_{group}_{}", kind.to_lowercase()).replace(['.', '-'], "_")
}

fn snake_keys(value: &Json) -> Json {
    match value {
        Json::Object(map) => Json::Object(
            map.iter()
                .map(|(k, v)| (to_snake(k), snake_keys(v)))
                .collect::<Map<_, _>>(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(snake_keys).collect()),
        other => other.clone(),
    }
}

/// The extra vars of a run over `object`, in upstream's order (later ones
/// win).
pub fn extra_vars(
    object: &Json,
    group: &str,
    kind: &str,
    options: &VarOptions,
) -> Vec<(Arc<str>, Var)> {
    let spec = match object.get("spec") {
        Some(spec @ Json::Object(_)) => spec.clone(),
        _ => Json::Object(Map::new()),
    };
    // Unsafe unless the watch asks for upstream's templating of them.
    let cr_var = |json: &Json| {
        if options.template_custom_resource {
            Var::templated(convert::from_json(json))
        } else {
            Var::unsafe_data(&convert::from_json_unsafe(json))
        }
    };
    // Later definitions win; an index keeps that linear in the number of
    // spec keys (a custom resource may have hundreds of thousands).
    let mut vars: Vec<(Arc<str>, Var)> = Vec::new();
    let mut index: std::collections::HashMap<Arc<str>, usize> = std::collections::HashMap::new();
    let mut set = |name: &str, var: Var| match index.get(name) {
        Some(&at) => vars[at].1 = var,
        None => {
            let name: Arc<str> = Arc::from(name);
            index.insert(name.clone(), vars.len());
            vars.push((name, var));
        }
    };
    let converted = if options.snake_case {
        snake_keys(&spec)
    } else {
        spec.clone()
    };
    if let Json::Object(map) = &converted {
        for (k, v) in map {
            set(k, cr_var(v));
        }
    }
    let meta = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Json::as_str)
            .unwrap_or_default()
    };
    set(
        "ansible_operator_meta",
        Var::plain(Value::from_pairs([
            (Value::from("name"), Value::from(meta("name"))),
            (Value::from("namespace"), Value::from(meta("namespace"))),
        ])),
    );
    let object_name = object_var_name(group, kind);
    set(&object_name, cr_var(object));
    set(&format!("{object_name}_spec"), cr_var(&spec));
    for (k, v) in &options.watch_vars {
        set(k, Var::templated(v.clone()));
    }
    for (k, v) in &options.finalizer_vars {
        set(k, Var::templated(v.clone()));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(vars: &[(Arc<str>, Var)]) -> Vec<&str> {
        vars.iter().map(|(k, _)| &**k).collect()
    }

    #[test]
    fn upstream_shape() {
        let hikawa = json!({
            "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta2",
            "kind": "Hikawa",
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {"intervalMillis": 500, "numZundokos": "3", "nested": {"innerKey": 1}}
        });
        let options = VarOptions {
            snake_case: true,
            ..VarOptions::default()
        };
        let vars = extra_vars(
            &Arc::new(hikawa),
            "zundokokiyoshi.kaitoy.github.com",
            "Hikawa",
            &options,
        );
        let mut got = names(&vars);
        got.sort_unstable();
        assert_eq!(
            got,
            [
                "_zundokokiyoshi_kaitoy_github_com_hikawa",
                "_zundokokiyoshi_kaitoy_github_com_hikawa_spec",
                "ansible_operator_meta",
                "interval_millis",
                "nested",
                "num_zundokos",
            ]
        );
        let get = |n: &str| vars.iter().find(|(k, _)| &**k == n).unwrap().1.clone();
        assert_eq!(
            get("nested").value.get_attr("inner_key").unwrap(),
            Value::from(1)
        );
        assert_eq!(
            get("_zundokokiyoshi_kaitoy_github_com_hikawa_spec")
                .value
                .get_attr("numZundokos")
                .unwrap(),
            Value::from("3")
        );
        assert!(
            !get("num_zundokos").lazy,
            "custom-resource strings are not templated by default"
        );
    }

    #[test]
    fn core_group_and_dashes() {
        assert_eq!(object_var_name("", "Secret"), "__secret");
        assert_eq!(
            object_var_name("cert-manager.k8s.io", "Certificate"),
            "_cert_manager_k8s_io_certificate"
        );
    }

    #[test]
    fn watch_and_finalizer_vars_win_and_are_templated() {
        let object = json!({"metadata": {"name": "x", "namespace": "y"}, "spec": {"size": 1}});
        let options = VarOptions {
            snake_case: true,
            watch_vars: vec![
                ("size".into(), Value::from(2)),
                ("meta".into(), Value::from("{{ ansible_operator_meta }}")),
            ],
            finalizer_vars: vec![("size".into(), Value::from(3))],
            ..VarOptions::default()
        };
        let vars = extra_vars(&Arc::new(object), "g", "K", &options);
        let size = vars.iter().find(|(k, _)| &**k == "size").unwrap();
        assert_eq!(size.1.value, Value::from(3));
        assert!(vars.iter().find(|(k, _)| &**k == "meta").unwrap().1.lazy);
    }

    /// A custom resource with many spec keys: each key became a variable by
    /// a scan of all the earlier ones (quadratic: minutes for 200 000 keys).
    /// Not a speed target; a bound on what one object can cost.
    #[test]
    fn many_spec_keys_cost_linear_time() {
        let spec: Map<String, Json> = (0..200_000)
            .map(|i| (format!("keyNumber{i}"), json!(i)))
            .collect();
        let object = json!({"metadata": {"name": "x", "namespace": "y"}, "spec": spec});
        let started = std::time::Instant::now();
        let vars = extra_vars(
            &Arc::new(object),
            "g",
            "K",
            &VarOptions {
                snake_case: true,
                ..VarOptions::default()
            },
        );
        assert_eq!(vars.len(), 200_003);
        assert!(vars.iter().any(|(k, _)| &**k == "key_number199999"));
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }
}
