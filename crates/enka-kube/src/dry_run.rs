//! The cluster of `enka diff`: every write goes to the API server as a
//! server-side dry run, and what it would have left is kept here, so the
//! rest of the run reads its own writes as it would on a real reconcile.
//!
//! The first write of an object is the API server's answer to the dry run
//! (validation, defaults and admission included). A later write of the same
//! object in the run cannot go to the server (the object is not stored, or
//! is stored as it was before the run), so it is applied here to the
//! object as the run left it: merge, JSON and apply patches as a merge
//! (RFC 7386, which is what a role's `k8s` and `k8s_status` writes mean for
//! the fields they name), replacements as given.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::Value as Json;

use super::client::KubeCluster;
use super::memory::{matches_fields, matches_labels, merge_patch};
use super::{Cluster, Error, ExecOutput, PatchType, Resource};

/// Which object a write was to: group, kind, namespace, name.
type Key = (String, String, Option<String>, String);

/// One object the run wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// Its kind.
    pub resource: Resource,
    /// Its namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The object as the run would leave it; `None` when deleted.
    pub after: Option<Json>,
}

/// See the module docs.
#[derive(Debug)]
pub struct DryRunCluster {
    inner: Arc<KubeCluster>,
    written: Mutex<BTreeMap<Key, Written>>,
    /// Keys in the order of their first write, for the report.
    order: Mutex<Vec<Key>>,
}

fn key(resource: &Resource, namespace: Option<&str>, name: &str) -> Key {
    (
        resource.group.clone(),
        resource.kind.clone(),
        namespace.filter(|_| resource.namespaced).map(str::to_owned),
        name.to_owned(),
    )
}

fn name_of(object: &Json) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Json::as_str)
}

impl DryRunCluster {
    /// Over `inner`, which must have been made with [`KubeCluster::dry_run`].
    pub fn new(inner: Arc<KubeCluster>) -> Self {
        DryRunCluster {
            inner,
            written: Mutex::new(BTreeMap::new()),
            order: Mutex::new(Vec::new()),
        }
    }

    /// Every object the run wrote, in the order of its first write.
    pub fn written(&self) -> Vec<Written> {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let order = self.order.lock().unwrap_or_else(|e| e.into_inner());
        order
            .iter()
            .filter_map(|key| written.get(key).cloned())
            .collect()
    }

    fn remembered(&self, key: &Key) -> Option<Option<Json>> {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.get(key).map(|w| w.after.clone())
    }

    fn remember(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        after: Option<Json>,
    ) {
        let key = key(resource, namespace, name);
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if !written.contains_key(&key) {
            self.order
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(key.clone());
        }
        written.insert(
            key,
            Written {
                resource: resource.clone(),
                namespace: namespace.filter(|_| resource.namespaced).map(str::to_owned),
                name: name.to_owned(),
                after,
            },
        );
    }
}

/// `object` with `subresource`'s part replaced by `with`'s (only `status`
/// is a part of the object; other subresources leave it as it is).
fn replace_part(object: &Json, with: &Json, subresource: Option<&str>) -> Json {
    match subresource {
        None => with.clone(),
        Some("status") => {
            let mut object = object.clone();
            if let (Some(map), Some(status)) = (object.as_object_mut(), with.get("status")) {
                map.insert("status".to_owned(), status.clone());
            }
            object
        }
        Some(_) => object.clone(),
    }
}

/// `object` patched by `patch` of `kind` (see the module docs).
fn apply_patch(object: &Json, patch: &Json, kind: &PatchType) -> Result<Json, Error> {
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch =
                serde_json::from_value(patch.clone()).map_err(|e| Error::Api {
                    answer: None,
                    code: 422,
                    reason: "Invalid".into(),
                    message: format!("not a JSON patch: {e}"),
                })?;
            let mut patched = object.clone();
            json_patch::patch(&mut patched, &ops).map_err(|e| Error::Api {
                answer: None,
                code: 422,
                reason: "Invalid".into(),
                message: e.to_string(),
            })?;
            Ok(patched)
        }
        _ => Ok(merge_patch(object, patch)),
    }
}

impl Cluster for DryRunCluster {
    fn resource<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, Error>> {
        self.inner.resource(api_version, kind)
    }

    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Json>, Error>> {
        Box::pin(async move {
            match self.remembered(&key(resource, namespace, name)) {
                Some(after) => Ok(after),
                None => self.inner.get(resource, namespace, name).await,
            }
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
            let live = self
                .inner
                .list(resource, namespace, label_selector, field_selector)
                .await?;
            let written: Vec<Written> = self
                .written()
                .into_iter()
                .filter(|w| {
                    w.resource.group == resource.group
                        && w.resource.kind == resource.kind
                        && (namespace.is_none() || w.namespace.as_deref() == namespace)
                })
                .collect();
            // The live objects the run did not write, as they are; the
            // ones it wrote as it left them, where they still match.
            let mut items: Vec<Json> = live
                .into_iter()
                .filter(|item| {
                    let name = name_of(item).unwrap_or_default();
                    !written.iter().any(|w| w.name == name)
                })
                .collect();
            items.extend(
                written
                    .into_iter()
                    .filter_map(|w| w.after)
                    .filter(|o| label_selector.is_none_or(|s| matches_labels(o, s)))
                    .filter(|o| field_selector.is_none_or(|s| matches_fields(o, s))),
            );
            Ok(items)
        })
    }

    fn create<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        object: &'a Json,
    ) -> BoxFuture<'a, Result<Json, Error>> {
        Box::pin(async move {
            if let Some(name) = name_of(object)
                && let Some(Some(_)) = self.remembered(&key(resource, namespace, name))
            {
                return Err(Error::Api {
                    answer: None,
                    code: 409,
                    reason: "AlreadyExists".into(),
                    message: format!("{} \"{name}\" already exists", resource.plural),
                });
            }
            let created = self.inner.create(resource, namespace, object).await?;
            if let Some(name) = name_of(&created) {
                self.remember(resource, namespace, name, Some(created.clone()));
            }
            Ok(created)
        })
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
            let patched = match self.remembered(&key(resource, namespace, name)) {
                Some(None) => return Err(Error::not_found(resource, name)),
                Some(Some(before)) => {
                    let part = apply_patch(&before, patch, kind)?;
                    replace_part(&before, &part, subresource)
                }
                None => {
                    self.inner
                        .patch(resource, namespace, name, patch, kind, subresource)
                        .await?
                }
            };
            self.remember(resource, namespace, name, Some(patched.clone()));
            Ok(patched)
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
            let replaced = match self.remembered(&key(resource, namespace, name)) {
                Some(None) => return Err(Error::not_found(resource, name)),
                Some(Some(before)) => replace_part(&before, object, subresource),
                None => {
                    self.inner
                        .replace(resource, namespace, name, object, subresource)
                        .await?
                }
            };
            self.remember(resource, namespace, name, Some(replaced.clone()));
            Ok(replaced)
        })
    }

    fn delete<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        options: Option<&'a Json>,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(async move {
            let existed = match self.remembered(&key(resource, namespace, name)) {
                Some(after) => after.is_some(),
                None => {
                    self.inner
                        .delete(resource, namespace, name, options)
                        .await?
                }
            };
            if existed {
                self.remember(resource, namespace, name, None);
            }
            Ok(existed)
        })
    }

    fn logs<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        container: Option<&'a str>,
        since_seconds: Option<i64>,
        tail_lines: Option<i64>,
        previous: bool,
    ) -> BoxFuture<'a, Result<String, Error>> {
        self.inner.logs(
            namespace,
            pod,
            container,
            since_seconds,
            tail_lines,
            previous,
        )
    }

    /// A command in a pod may change anything: `enka diff` does not run it.
    fn exec<'a>(
        &'a self,
        _namespace: &'a str,
        pod: &'a str,
        _container: Option<&'a str>,
        _command: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, Error>> {
        Box::pin(async move {
            Err(Error::Transport(format!(
                "a dry run does not run commands in pods (pod {pod})"
            )))
        })
    }

    fn server_version(&self) -> BoxFuture<'_, Result<Json, Error>> {
        self.inner.server_version()
    }

    fn api_groups(&self) -> BoxFuture<'_, Result<Vec<String>, Error>> {
        self.inner.api_groups()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn later_writes_apply_to_what_the_run_left() {
        let cr = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"old": true}});
        let patched = apply_patch(
            &cr,
            &json!({"status": {"conditions": [{"type": "Ready"}]}}),
            &PatchType::Merge,
        )
        .unwrap();
        let status_only = replace_part(&cr, &patched, Some("status"));
        assert_eq!(status_only["status"]["old"], true);
        assert_eq!(status_only["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(status_only["spec"]["x"], 1);
        let json = apply_patch(
            &cr,
            &json!([{"op": "replace", "path": "/spec/x", "value": 2}]),
            &PatchType::Json,
        )
        .unwrap();
        assert_eq!(json["spec"]["x"], 2);
        // Replacing the status leaves the spec alone.
        let replaced = replace_part(
            &cr,
            &json!({"spec": {"x": 9}, "status": {}}),
            Some("status"),
        );
        assert_eq!(replaced["spec"]["x"], 1);
        assert_eq!(replaced["status"], json!({}));
    }
}
