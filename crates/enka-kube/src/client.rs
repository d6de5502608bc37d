//! [`Cluster`] over one shared `kube::Client`, with a discovery cache.
//!
//! Discovery is per group-version: the first use of a kind fetches its
//! group-version's resource list once; a kind the cache does not know
//! refreshes that group-version once (a CRD may have been installed since).
//! Reads by name and lists of kinds enka watches come from its watch caches
//! ([`WatchCaches`]); every write of a cached object is noted there.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::api::{
    Api, DeleteParams, DynamicObject, GetParams, ListParams, LogParams, Patch, PatchParams,
    PostParams,
};
use kube::core::{GroupVersion, Request};
use kube::discovery::{self, Scope};
use kube::{Client, Error as KubeError};
use serde_json::Value as Json;

use super::cache::WatchCaches;
use super::{Answer, BoxFuture, Cluster, Error, ExecOutput, PatchType, Resource, api_error};

/// How long a read waits for the first list of a watch started for its
/// kind before it asks the API server instead.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(10);

/// The Kubernetes API through `kube`.
pub struct KubeCluster {
    client: Client,
    discovery: Mutex<HashMap<(String, String), Vec<Resource>>>,
    field_manager: String,
    /// Every write is a server-side dry run (`dryRun=All`): validated,
    /// defaulted and admitted as a real one, answered with the object as it
    /// would be, and never stored (`enka diff`).
    dry_run: bool,
    caches: std::sync::Arc<WatchCaches>,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), api_version.to_owned()),
    }
}

impl KubeCluster {
    /// A cluster over `client`; writes use `field_manager`.
    pub fn new(client: Client, field_manager: &str) -> Self {
        KubeCluster {
            client,
            discovery: Mutex::new(HashMap::new()),
            field_manager: field_manager.to_owned(),
            dry_run: false,
            caches: std::sync::Arc::default(),
        }
    }

    /// Like [`KubeCluster::new`], every write a server-side dry run.
    pub fn dry_run(client: Client, field_manager: &str) -> Self {
        KubeCluster {
            dry_run: true,
            ..KubeCluster::new(client, field_manager)
        }
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whether a store holding every object of `resource` in `namespace`
    /// has its first list in, a watch started for it if none is there and
    /// `start` says so (waited for as long as [`FIRST_LIST_WAIT`]);
    /// `false`: the API server answers.
    async fn informed(&self, resource: &Resource, namespace: Option<&str>, start: bool) -> bool {
        let Some(store) = self
            .caches
            .store_for_reads(&self.client, resource, namespace, start)
        else {
            return false;
        };
        let listed = tokio::time::timeout(FIRST_LIST_WAIT, store.wait_until_ready()).await;
        matches!(listed, Ok(Ok(())))
    }

    /// The watch caches reads and lists are served from.
    pub fn watch_caches(&self) -> &std::sync::Arc<WatchCaches> {
        &self.caches
    }

    /// Reads one object from the API server itself, never a cache: after a
    /// conflict, which says the cache and the server disagree.
    pub async fn get_from_server(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, Error> {
        let request = self
            .requests(resource, namespace)
            .get(name, &GetParams::default());
        match self.send(request).await {
            Ok(object) => Ok(Some(object)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Notes a write's outcome in the watch caches, so that a read of the
    /// object right after it sees it (a dry run stores nothing). A refusal
    /// (4xx) changed nothing; a write without an answer may have been made.
    fn note_write(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        outcome: &Result<Json, Error>,
    ) {
        if self.dry_run {
            return;
        }
        match outcome {
            Ok(object) => {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Json::as_str)
                    .unwrap_or(name);
                self.caches.wrote(resource, namespace, name, object);
            }
            Err(err) if err.code().is_some_and(|code| code < 500) => {}
            Err(_) => self.caches.unsure(resource, namespace, name),
        }
    }

    fn cached(&self, group: &str, version: &str, kind: &str) -> Option<Resource> {
        let cache = self.discovery.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(&(group.to_owned(), version.to_owned()))?
            .iter()
            .find(|r| r.kind == kind)
            .cloned()
    }

    async fn refresh(&self, group: &str, version: &str) -> Result<(), Error> {
        let gv = GroupVersion::gv(group, version);
        let api_group = match discovery::pinned_group(&self.client, &gv).await {
            Ok(g) => g,
            // An unknown group-version is an empty one.
            Err(KubeError::Api(status)) if status.code == 404 => {
                self.discovery
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((group.to_owned(), version.to_owned()), Vec::new());
                return Ok(());
            }
            Err(err) => return Err(api_error(err)),
        };
        let resources = api_group
            .versioned_resources(version)
            .into_iter()
            .map(|(ar, caps)| Resource {
                group: ar.group.clone(),
                version: ar.version.clone(),
                kind: ar.kind.clone(),
                plural: ar.plural.clone(),
                namespaced: caps.scope == Scope::Namespaced,
            })
            .collect();
        self.discovery
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((group.to_owned(), version.to_owned()), resources);
        Ok(())
    }

    /// The one kind named `kind` in a `v1` of any API group; none when no
    /// group or several serve it (kubernetes.core refuses an ambiguous one).
    async fn in_any_group(&self, kind: &str) -> Result<Option<Resource>, Error> {
        // Found once, remembered under a group no API server has.
        if let Some(resource) = self.cached(ANY_GROUP, "v1", kind) {
            return Ok(Some(resource));
        }
        let groups = self.client.list_api_groups().await.map_err(api_error)?;
        let mut found = Vec::new();
        for group in groups.groups {
            if !group.versions.iter().any(|v| v.version == "v1") {
                continue;
            }
            let known = self
                .discovery
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&(group.name.clone(), "v1".to_owned()));
            if !known {
                self.refresh(&group.name, "v1").await?;
            }
            found.extend(self.cached(&group.name, "v1", kind));
        }
        if found.len() != 1 {
            return Ok(None);
        }
        let resource = found.remove(0);
        self.discovery
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((ANY_GROUP.to_owned(), "v1".to_owned()))
            .or_default()
            .push(resource.clone());
        Ok(Some(resource))
    }

    /// A dynamic `Api` for `resource`: in `namespace` when the kind is
    /// namespaced and one is given, across the cluster otherwise.
    pub fn api<K>(&self, resource: &Resource, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::DynamicResourceScope>,
        K::DynamicType: From<kube::api::ApiResource>,
    {
        let ar = K::DynamicType::from(resource.api_resource());
        match (resource.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        }
    }
}

/// The discovery cache's key for kinds a bare `v1` found in some group.
const ANY_GROUP: &str = "*";

/// The longest a module's API request may wait for its answer. kube's
/// client has no read timeout (its watches idle for minutes), so a
/// connection to an API server that stopped answering would hold the task
/// until the reconcile timeout; a module call fails after this instead.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl KubeCluster {
    /// Requests on `resource`'s collection, sent and answered as plain JSON:
    /// the objects the engine handles are JSON already, and going through
    /// `DynamicObject` both ways cost a copy and two conversions per call.
    fn requests(&self, resource: &Resource, namespace: Option<&str>) -> Request {
        Request::new(
            self.api::<DynamicObject>(resource, namespace)
                .resource_url(),
        )
    }

    async fn send(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<Json, Error> {
        let request =
            request.map_err(|e| Error::Transport(format!("cannot build the request: {e}")))?;
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange(&self.client, request)).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::Transport(format!(
                "no answer within {}s (the API server or the connection stalled)",
                REQUEST_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// Sends `request` and reads the answer as JSON; a failure status keeps the
/// answer's headers and body as they came (kube's own `request` parses them
/// into a `Status` and drops the rest).
async fn exchange(client: &Client, request: http::Request<Vec<u8>>) -> Result<Json, Error> {
    use http_body_util::BodyExt;
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(api_error)?;
    let status = response.status();
    let failed = status.is_client_error() || status.is_server_error();
    // Only a failure's headers are quoted; a success's are not copied.
    let headers = if failed {
        response
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| Error::Transport(format!("reading the answer: {e}")))?
        .to_bytes();
    if failed {
        return Err(Error::from_answer(
            status.as_u16(),
            Answer {
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            },
        ));
    }
    serde_json::from_slice(&body)
        .map_err(|e| Error::Transport(format!("the API server's answer is not JSON: {e}")))
}

/// A PATCH of `name` (or of its subresource) in `requests`' collection.
fn patch_request<P: serde::Serialize>(
    requests: &Request,
    subresource: Option<&str>,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
    match subresource {
        Some(subresource) => requests.patch_subresource(subresource, name, params, patch),
        None => requests.patch(name, params, patch),
    }
}

fn body(object: &Json) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(object)
        .map_err(|e| Error::Transport(format!("cannot encode the object: {e}")))
}

impl Cluster for KubeCluster {
    fn resource<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, Error>> {
        Box::pin(async move {
            let (group, version) = split_api_version(api_version);
            if let Some(resource) = self.cached(&group, &version, kind) {
                return Ok(resource);
            }
            self.refresh(&group, &version).await?;
            if let Some(resource) = self.cached(&group, &version, kind) {
                return Ok(resource);
            }
            // A bare `v1` names any group's v1 to kubernetes.core (its
            // discovery searches every group for the version): `kind:
            // Deployment` with the default api_version finds apps/v1.
            if api_version == "v1"
                && let Some(resource) = self.in_any_group(kind).await?
            {
                return Ok(resource);
            }
            Err(Error::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
        })
    }

    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Json>, Error>> {
        Box::pin(async move {
            if let Some(object) = self.caches.get(resource, namespace, name) {
                return Ok(Some(object));
            }
            // A kind's watch starts at the second read of one of its
            // objects (see the cache's notes); until then, and on a miss,
            // the API server answers.
            let addressable = !resource.namespaced || namespace.is_some();
            if addressable {
                let start = self.caches.read_again(resource, namespace, name);
                if self.informed(resource, namespace, start).await
                    && let Some(object) = self.caches.get(resource, namespace, name)
                {
                    return Ok(Some(object));
                }
            }
            // A miss goes to the API server, as upstream's proxy sends it:
            // an object made a moment ago may not be in the cache yet.
            self.get_from_server(resource, namespace, name).await
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
            let cached = || {
                self.caches
                    .list(resource, namespace, label_selector, field_selector)
            };
            if let Some(items) = cached() {
                return Ok(items);
            }
            let by_fields = field_selector.is_some_and(|fields| !fields.trim().is_empty());
            if !by_fields
                && self.informed(resource, namespace, true).await
                && let Some(items) = cached()
            {
                return Ok(items);
            }
            // Else from the API server's watch cache (a field selector, a
            // kind that cannot be watched): a consistent list waits for the
            // cache to catch up with etcd (about 100 ms on a quiet cluster),
            // and roles are written to tolerate a cache that is a moment
            // behind.
            let mut params = ListParams::default().match_any();
            if let Some(labels) = label_selector {
                params = params.labels(labels);
            }
            if let Some(fields) = field_selector {
                params = params.fields(fields);
            }
            let request = self.requests(resource, namespace).list(&params);
            let list = self.send(request).await?;
            Ok(match list {
                Json::Object(mut list) => match list.remove("items") {
                    Some(Json::Array(items)) => items,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            })
        })
    }

    fn create<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        object: &'a Json,
    ) -> BoxFuture<'a, Result<Json, Error>> {
        Box::pin(async move {
            // The object's managedFields name enka as what created it, as
            // they name it for what it patches and replaces.
            let params = PostParams {
                dry_run: self.dry_run,
                field_manager: Some(self.field_manager.clone()),
            };
            let request = self
                .requests(resource, namespace)
                .create(&params, body(object)?);
            let created = self.send(request).await;
            let name = object.pointer("/metadata/name").and_then(Json::as_str);
            self.note_write(resource, namespace, name.unwrap_or_default(), &created);
            created
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
            let params = match kind {
                PatchType::Apply {
                    field_manager,
                    force,
                } => {
                    let params = PatchParams::apply(field_manager);
                    if *force { params.force() } else { params }
                }
                _ => PatchParams {
                    field_manager: Some(self.field_manager.clone()),
                    ..PatchParams::default()
                },
            };
            let params = PatchParams {
                dry_run: self.dry_run,
                ..params
            };
            let requests = self.requests(resource, namespace);
            let to = |patch| patch_request(&requests, subresource, name, &params, patch);
            let request = match kind {
                PatchType::Merge => to(&Patch::Merge(patch)),
                PatchType::Strategic => to(&Patch::Strategic(patch)),
                PatchType::Apply { .. } => to(&Patch::Apply(patch)),
                PatchType::Json => {
                    let ops: json_patch::Patch =
                        serde_json::from_value(patch.clone()).map_err(|e| Error::Api {
                            answer: None,
                            code: 422,
                            reason: "Invalid".into(),
                            message: format!("not a JSON patch: {e}"),
                        })?;
                    patch_request(
                        &requests,
                        subresource,
                        name,
                        &params,
                        &Patch::<()>::Json(ops),
                    )
                }
            };
            let patched = self.send(request).await;
            self.note_write(resource, namespace, name, &patched);
            patched
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
            let params = PostParams {
                field_manager: Some(self.field_manager.clone()),
                dry_run: self.dry_run,
            };
            let requests = self.requests(resource, namespace);
            let body = body(object)?;
            let request = match subresource {
                Some(subresource) => requests.replace_subresource(subresource, name, &params, body),
                None => requests.replace(name, &params, body),
            };
            let replaced = self.send(request).await;
            self.note_write(resource, namespace, name, &replaced);
            replaced
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
            let mut params = DeleteParams::background();
            if let Some(options) = options {
                match options.get("propagationPolicy").and_then(Json::as_str) {
                    Some("Foreground") => params = DeleteParams::foreground(),
                    Some("Orphan") => params = DeleteParams::orphan(),
                    _ => {}
                }
                if let Some(grace) = options.get("gracePeriodSeconds").and_then(Json::as_u64) {
                    params.grace_period_seconds = u32::try_from(grace).ok();
                }
            }
            params.dry_run = self.dry_run;
            let deleted = match self
                .api::<DynamicObject>(resource, namespace)
                .delete(name, &params)
                .await
            {
                Ok(_) => Ok(true),
                Err(KubeError::Api(status)) if status.code == 404 => Ok(false),
                Err(err) => Err(api_error(err)),
            };
            match &deleted {
                _ if self.dry_run => {}
                Ok(_) => self.caches.deleted(resource, namespace, name),
                Err(err) if err.code().is_some_and(|code| code < 500) => {}
                Err(_) => self.caches.unsure(resource, namespace, name),
            }
            deleted
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
        Box::pin(async move {
            let pods: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(self.client.clone(), namespace);
            let params = LogParams {
                container: container.map(str::to_owned),
                since_seconds,
                tail_lines,
                previous,
                ..LogParams::default()
            };
            pods.logs(pod, &params).await.map_err(api_error)
        })
    }

    fn exec<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        container: Option<&'a str>,
        command: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, Error>> {
        Box::pin(async move {
            super::exec::exec(&self.client, namespace, pod, container, command).await
        })
    }

    fn server_version(&self) -> BoxFuture<'_, Result<Json, Error>> {
        Box::pin(async move {
            let version = self.client.apiserver_version().await.map_err(api_error)?;
            serde_json::to_value(version).map_err(|e| Error::Transport(e.to_string()))
        })
    }

    fn api_groups(&self) -> BoxFuture<'_, Result<Vec<String>, Error>> {
        Box::pin(async move {
            let groups = self.client.list_api_groups().await.map_err(api_error)?;
            Ok(groups.groups.into_iter().map(|g| g.name).collect())
        })
    }
}
