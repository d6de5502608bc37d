//! An in-memory [`Cluster`] for the engine's benchmark and unit tests.
//!
//! It keeps objects in a map and applies the API's basic rules (names,
//! resource versions, generations, merge patches, label selectors). It is
//! not an API server: everything that talks to Kubernetes for real is
//! tested against kube-apiserver itself.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Map, Value as Json, json};

use super::{BoxFuture, Cluster, Error, ExecOutput, PatchType, Resource};

type Key = (String, String, String, String);

/// Objects in memory.
#[derive(Debug, Default)]
pub struct MemoryCluster {
    resources: Vec<Resource>,
    objects: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<Key, Json>,
    version: u64,
    writes: u64,
}

fn resource(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Resource {
    Resource {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
    }
}

impl MemoryCluster {
    /// A cluster that knows the common built-in kinds.
    pub fn new() -> Self {
        MemoryCluster {
            resources: vec![
                resource("", "v1", "ConfigMap", "configmaps", true),
                resource("", "v1", "Secret", "secrets", true),
                resource("", "v1", "Pod", "pods", true),
                resource("", "v1", "Service", "services", true),
                resource("", "v1", "ServiceAccount", "serviceaccounts", true),
                resource("", "v1", "Event", "events", true),
                resource("", "v1", "Namespace", "namespaces", false),
                resource("apps", "v1", "Deployment", "deployments", true),
                resource("apps", "v1", "StatefulSet", "statefulsets", true),
            ],
            objects: Mutex::default(),
        }
    }

    /// Adds a kind (such as a custom resource).
    #[must_use]
    pub fn with_kind(
        mut self,
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
    ) -> Self {
        self.resources
            .push(resource(group, version, kind, plural, namespaced));
        self
    }

    /// How many writes (create, patch, replace, delete) changed something.
    pub fn writes(&self) -> u64 {
        self.state().writes
    }

    /// Every stored object of a kind, in name order.
    pub fn objects(&self, kind: &str) -> Vec<Json> {
        self.state()
            .objects
            .values()
            .filter(|o| o.get("kind").and_then(Json::as_str) == Some(kind))
            .cloned()
            .collect()
    }

    /// Stores an object as is (test setup), returning it with its metadata.
    pub fn insert(&self, object: Json) -> Result<Json, Error> {
        let api_version = object
            .get("apiVersion")
            .and_then(Json::as_str)
            .unwrap_or("v1")
            .to_owned();
        let kind = object
            .get("kind")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned();
        let resource = self.find(&api_version, &kind)?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Json::as_str)
            .map(str::to_owned);
        self.do_create(&resource, namespace.as_deref(), &object)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, api_version: &str, kind: &str) -> Result<Resource, Error> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .cloned()
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
    }

    fn key(resource: &Resource, namespace: Option<&str>, name: &str) -> Key {
        (
            resource.group.clone(),
            resource.plural.clone(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        )
    }

    fn do_create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        object: &Json,
    ) -> Result<Json, Error> {
        let mut object = object.clone();
        let name = object
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid("metadata.name: Required value"))?;
        let mut state = self.state();
        let key = Self::key(resource, namespace, &name);
        if state.objects.contains_key(&key) {
            return Err(Error::Api {
                answer: None,
                code: 409,
                reason: "AlreadyExists".into(),
                message: format!(
                    "{}.{} \"{name}\" already exists",
                    resource.plural, resource.group
                ),
            });
        }
        state.version += 1;
        state.writes += 1;
        let version = state.version;
        let meta = object
            .get_mut("metadata")
            .and_then(Json::as_object_mut)
            .ok_or_else(|| invalid("metadata must be an object"))?;
        meta.insert(
            "uid".into(),
            Json::String(format!("00000000-0000-4000-8000-{version:012}")),
        );
        meta.insert("resourceVersion".into(), Json::String(version.to_string()));
        meta.insert("generation".into(), json!(1));
        meta.insert(
            "creationTimestamp".into(),
            Json::String(enka_template::time::now_rfc3339()),
        );
        match namespace {
            Some(ns) => {
                meta.insert("namespace".into(), Json::String(ns.to_owned()));
            }
            None => {
                meta.remove("namespace");
            }
        }
        object["apiVersion"] = Json::String(resource.api_version());
        object["kind"] = Json::String(resource.kind.clone());
        state.objects.insert(key, object.clone());
        Ok(object)
    }

    fn write(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        update: impl FnOnce(&Json) -> Result<Json, Error>,
    ) -> Result<Json, Error> {
        let mut state = self.state();
        let key = Self::key(resource, namespace, name);
        let current = state
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| Error::not_found(resource, name))?;
        let mut next = update(&current)?;
        // Only the status subresource may change status, and it may change
        // nothing else.
        match subresource {
            Some("status") => {
                let status = next.get("status").cloned();
                next = current.clone();
                match status {
                    Some(s) => next["status"] = s,
                    None => {
                        if let Some(o) = next.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
            }
            _ => match current.get("status") {
                Some(s) => next["status"] = s.clone(),
                None => {
                    if let Some(o) = next.as_object_mut() {
                        o.remove("status");
                    }
                }
            },
        }
        for field in ["uid", "creationTimestamp", "name", "namespace"] {
            if let Some(v) = current.pointer(&format!("/metadata/{field}")) {
                next["metadata"][field] = v.clone();
            }
        }
        let strip = |o: &Json| {
            let mut o = o.clone();
            if let Some(meta) = o.get_mut("metadata").and_then(Json::as_object_mut) {
                meta.remove("resourceVersion");
                meta.remove("generation");
            }
            o
        };
        if strip(&next) == strip(&current) {
            return Ok(current);
        }
        let spec_changed = {
            let body = |o: &Json| {
                let mut o = o.clone();
                if let Some(map) = o.as_object_mut() {
                    map.remove("metadata");
                    map.remove("status");
                }
                o
            };
            body(&next) != body(&current)
        };
        state.version += 1;
        state.writes += 1;
        next["metadata"]["resourceVersion"] = Json::String(state.version.to_string());
        let generation = current
            .pointer("/metadata/generation")
            .and_then(Json::as_i64)
            .unwrap_or(1);
        next["metadata"]["generation"] = json!(if spec_changed {
            generation + 1
        } else {
            generation
        });
        state.objects.insert(key, next.clone());
        Ok(next)
    }
}

fn invalid(message: &str) -> Error {
    Error::Api {
        answer: None,
        code: 422,
        reason: "Invalid".into(),
        message: message.to_owned(),
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &Json, patch: &Json) -> Json {
    match patch {
        Json::Object(p) => {
            let mut out = match target {
                Json::Object(t) => t.clone(),
                _ => Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge_patch(out.get(k).unwrap_or(&Json::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Json::Object(out)
        }
        other => other.clone(),
    }
}

/// Whether `object` matches a label selector (`a=b`, `a==b`, `a!=b`, `a`,
/// `!a`, `a in (x,y)`, `a notin (x,y)`, spaces allowed).
pub fn matches_labels(object: &Json, selector: &str) -> bool {
    let labels = object.pointer("/metadata/labels").and_then(Json::as_object);
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Json::as_str);
    split_requirements(selector).iter().all(|req| {
        let req = req.trim();
        if req.is_empty() {
            return true;
        }
        if let Some((k, rest)) = req.split_once(" notin ") {
            let set = parse_set(rest);
            return label(k.trim()).is_none_or(|v| !set.contains(&v.to_owned()));
        }
        if let Some((k, rest)) = req.split_once(" in ") {
            let set = parse_set(rest);
            return label(k.trim()).is_some_and(|v| set.contains(&v.to_owned()));
        }
        if let Some((k, v)) = req.split_once("!=") {
            return label(k.trim()) != Some(v.trim());
        }
        if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
            return label(k.trim()) == Some(v.trim());
        }
        if let Some(k) = req.strip_prefix('!') {
            return label(k.trim()).is_none();
        }
        label(req).is_some()
    })
}

fn split_requirements(selector: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth -= 1;
                current.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    out.push(current);
    out
}

fn parse_set(text: &str) -> Vec<String> {
    text.trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Whether `object` matches a field selector (`a.b=c`, `a.b!=c`).
pub fn matches_fields(object: &Json, selector: &str) -> bool {
    selector
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .all(|req| {
            let (path, want, negate) = match req.split_once("!=") {
                Some((p, v)) => (p, v, true),
                None => match req.split_once("==").or_else(|| req.split_once('=')) {
                    Some((p, v)) => (p, v, false),
                    None => return true,
                },
            };
            let pointer = format!("/{}", path.trim().replace('.', "/"));
            let actual = object.pointer(&pointer).map(|v| match v {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            });
            (actual.as_deref() == Some(want.trim())) != negate
        })
}

impl Cluster for MemoryCluster {
    fn resource<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, Error>> {
        Box::pin(async move { self.find(api_version, kind) })
    }

    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Json>, Error>> {
        Box::pin(async move {
            Ok(self
                .state()
                .objects
                .get(&Self::key(resource, namespace, name))
                .cloned())
        })
    }

    fn list<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
        field_selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Json>, Error>> {
        Box::pin(async move {
            let state = self.state();
            Ok(state
                .objects
                .iter()
                .filter(|((g, p, ns, _), _)| {
                    *g == resource.group
                        && *p == resource.plural
                        && namespace.is_none_or(|n| n == ns)
                })
                .map(|(_, o)| o)
                .filter(|o| label_selector.is_none_or(|s| matches_labels(o, s)))
                .filter(|o| field_selector.is_none_or(|s| matches_fields(o, s)))
                .cloned()
                .collect())
        })
    }

    fn create<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        object: &'a Json,
    ) -> BoxFuture<'a, Result<Json, Error>> {
        Box::pin(async move { self.do_create(resource, namespace, object) })
    }

    fn patch<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        patch: &'a Json,
        kind: &'a PatchType,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, Error>> {
        Box::pin(async move {
            if *kind == PatchType::Json {
                return Err(invalid(
                    "JSON patch is not supported by the in-memory cluster",
                ));
            }
            self.write(resource, namespace, name, subresource, |current| {
                Ok(merge_patch(current, patch))
            })
        })
    }

    fn replace<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        object: &'a Json,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, Error>> {
        Box::pin(async move {
            self.write(resource, namespace, name, subresource, |current| {
                let wanted = object.pointer("/metadata/resourceVersion");
                if wanted.is_some() && wanted != current.pointer("/metadata/resourceVersion") {
                    return Err(Error::Api {
                        answer: None,
                        code: 409,
                        reason: "Conflict".into(),
                        message: "the object has been modified; please apply your changes to the latest version and try again".into(),
                    });
                }
                Ok(object.clone())
            })
        })
    }

    fn delete<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        _options: Option<&'a Json>,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(async move {
            let mut state = self.state();
            let removed = state
                .objects
                .remove(&Self::key(resource, namespace, name))
                .is_some();
            if removed {
                state.writes += 1;
            }
            Ok(removed)
        })
    }

    fn logs<'a>(
        &'a self,
        _: &'a str,
        pod: &'a str,
        _: Option<&'a str>,
        _: Option<i64>,
        _: Option<i64>,
        _: bool,
    ) -> BoxFuture<'a, Result<String, Error>> {
        Box::pin(async move {
            Err(Error::Api {
                answer: None,
                code: 400,
                reason: "BadRequest".into(),
                message: format!("pod {pod} has no node: the in-memory cluster runs no containers"),
            })
        })
    }

    fn exec<'a>(
        &'a self,
        _: &'a str,
        pod: &'a str,
        _: Option<&'a str>,
        _: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, Error>> {
        Box::pin(async move {
            Err(Error::Api {
                answer: None,
                code: 400,
                reason: "BadRequest".into(),
                message: format!("pod {pod} has no node: the in-memory cluster runs no containers"),
            })
        })
    }

    fn server_version(&self) -> BoxFuture<'_, Result<Json, Error>> {
        Box::pin(async move {
            Ok(
                serde_json::json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0-enka-memory"}),
            )
        })
    }

    fn api_groups(&self) -> BoxFuture<'_, Result<Vec<String>, Error>> {
        Box::pin(async move {
            let mut groups: Vec<String> = Vec::new();
            for resource in self.resources.iter().filter(|r| !r.group.is_empty()) {
                if !groups.contains(&resource.group) {
                    groups.push(resource.group.clone());
                }
            }
            Ok(groups)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors() {
        let o = json!({"metadata": {"labels": {"app": "x", "tier": "web"}}});
        assert!(matches_labels(&o, "app = x"));
        assert!(matches_labels(&o, "app=x,tier==web"));
        assert!(!matches_labels(&o, "app!=x"));
        assert!(matches_labels(&o, "tier in (web, db)"));
        assert!(matches_labels(&o, "env notin (prod)"));
        assert!(matches_labels(&o, "!env"));
        assert!(!matches_labels(&o, "env"));
    }

    #[test]
    fn merge_patch_rules() {
        assert_eq!(
            merge_patch(
                &json!({"a": 1, "b": {"c": 2}}),
                &json!({"b": {"c": null, "d": 3}})
            ),
            json!({"a": 1, "b": {"d": 3}})
        );
    }
}
