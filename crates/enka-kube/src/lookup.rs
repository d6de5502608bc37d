//! `lookup('kubernetes.core.k8s', …)` and `query('k8s', …)`.
//!
//! Templates render synchronously, so the API calls block the current
//! worker thread (`block_in_place`), which the operator's multi-threaded
//! runtime allows.

use std::future::Future;
use std::sync::Arc;

use minijinja::{Error, ErrorKind, Value};
use serde_json::Value as Json;

use super::{Cluster, Error as KubeError};
use enka_template::{Context, LookupPlugin, convert, pyrepr};

/// The `k8s` lookup over a cluster.
#[derive(Debug)]
pub struct K8sLookup {
    cluster: Arc<dyn Cluster>,
}

impl K8sLookup {
    /// A lookup that reads from `cluster`.
    pub fn new(cluster: Arc<dyn Cluster>) -> Self {
        K8sLookup { cluster }
    }
}

fn failure(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

fn block_on<F: Future>(future: F) -> Result<F::Output, Error> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| handle.block_on(future)))
        }
        Ok(_) => Err(failure(
            "lookup('k8s') needs the operator's multi-threaded runtime",
        )),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(future))
            .map_err(|e| failure(format!("lookup('k8s'): {e}"))),
    }
}

impl K8sLookup {
    /// `cluster_info='version'` (`{"kubernetes": <the /version document>}`)
    /// or `cluster_info='api_groups'` (the served group names), as
    /// kubernetes.core's lookup returns them.
    fn cluster_info(&self, what: &str) -> Result<Vec<Value>, Error> {
        let cluster = self.cluster.clone();
        let value: Result<Json, KubeError> = match what {
            "version" => block_on(async move {
                let version = cluster.server_version().await?;
                Ok(serde_json::json!({ "kubernetes": version }))
            })?,
            "api_groups" => block_on(async move { Ok(Json::from(cluster.api_groups().await?)) })?,
            other => {
                return Err(failure(format!(
                    "lookup('k8s', cluster_info={other:?}): cluster_info must be 'version' or 'api_groups'"
                )));
            }
        };
        let value =
            value.map_err(|e| failure(format!("lookup('k8s', cluster_info={what:?}): {e}")))?;
        Ok(vec![convert::from_json(&value)])
    }
}

impl LookupPlugin for K8sLookup {
    fn run(
        &self,
        ctx: &Context,
        terms: &[Value],
        kwargs: &[(String, Value)],
    ) -> Result<Vec<Value>, Error> {
        let opt = |name: &str| {
            kwargs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v)
                .filter(|v| !v.is_none() && !v.is_undefined())
                .map(pyrepr::to_text)
        };
        if let Some(info) = opt("cluster_info") {
            return self.cluster_info(&info);
        }
        let _ = terms;
        let kind = opt("kind").ok_or_else(|| failure("lookup('k8s') needs kind="))?;
        let api_version = opt("api_version").unwrap_or_else(|| "v1".to_owned());
        let name = opt("resource_name");
        let namespace = opt("namespace");
        let labels = opt("label_selector");
        let fields = opt("field_selector");
        let cluster = self.cluster.clone();
        let result: Result<Vec<Json>, KubeError> = block_on(async move {
            let resource = cluster.resource(&api_version, &kind).await?;
            let ns = if resource.namespaced {
                namespace.as_deref()
            } else {
                None
            };
            match &name {
                Some(name) => Ok(cluster
                    .get(&resource, ns, name)
                    .await?
                    .into_iter()
                    .collect()),
                None => {
                    cluster
                        .list(&resource, ns, labels.as_deref(), fields.as_deref())
                        .await
                }
            }
        })?;
        let objects = result.map_err(|e| {
            failure(match ctx.templar().options().semantics {
                // 2.19 words the plugin's failure itself, around the
                // exception's text (`plugin_failure` in enka-template).
                enka_template::Semantics::Ansible219 => super::python::exception_text(&e),
                enka_template::Semantics::Ansible218 => {
                    super::python::unhandled_in_lookup("k8s", &e)
                }
            })
        })?;
        Ok(objects
            .into_iter()
            .map(|o| convert::json_view(Arc::new(o)))
            .collect())
    }
}
