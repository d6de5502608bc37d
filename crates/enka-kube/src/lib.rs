//! The Kubernetes API as the modules see it.
//!
//! Modules talk to a [`Cluster`]: the real one ([`client::KubeCluster`],
//! over one shared `kube::Client` with a discovery cache) in the operator,
//! or an in-memory one ([`memory::MemoryCluster`]) for the engine's
//! benchmark. Objects travel as JSON, the way roles see them.
//!
//! It stands on `enka-template` only (the `k8s` lookup is a template
//! lookup plugin, and kubernetes.core's failure texts are Python reprs);
//! the modules, the engine and the operator stand on it.

#![forbid(unsafe_code)]

pub mod cache;
#[cfg(test)]
mod canned;
pub mod client;
pub mod deadline;
pub mod dry_run;
pub mod event;
mod exec;
pub mod instrument;
pub mod lookup;
pub mod memory;
pub mod object;
pub mod python;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value as Json;

/// The server-side timeout of each watch request, after which kube-runtime
/// watches again from where it was; with no event for this long plus 5 s,
/// kube-runtime takes the connection for dead and reconnects. client-go
/// uses 5 to 10 minutes; one minute bounds how long a watch on a silently
/// lost connection misses events, for one cheap re-watch a minute (served
/// from the API server's watch cache, no relist).
pub const WATCH_TIMEOUT_SECONDS: u32 = 60;

/// A boxed future, so the trait is object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A resource type, as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural, used in URLs.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

/// An object a run wrote as a dependent of its owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dependent {
    /// Its kind.
    pub resource: Resource,
    /// Its namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Its name; `None` for one made with `generateName`.
    pub name: Option<String>,
    /// Its fingerprint (see [`object::WatchedObject::dependent_fingerprint`])
    /// as the API server last answered the run for it, when the run has one:
    /// a new dependent watch whose first list holds something else knows the
    /// object changed after the run saw it, as upstream's watch, started at
    /// the run's first write, sees that change as an update.
    pub seen: Option<u64>,
}

impl Dependent {
    /// Whether `other` names the same object.
    pub fn same_object(&self, other: &Dependent) -> bool {
        self.resource == other.resource
            && self.namespace == other.namespace
            && self.name == other.name
    }

    /// Adds `dependent` to `list`, or updates what the list knows of it.
    pub fn merge_into(list: &mut Vec<Dependent>, dependent: Dependent) {
        match list.iter_mut().find(|d| d.same_object(&dependent)) {
            Some(known) => known.seen = dependent.seen.or(known.seen),
            None => list.push(dependent),
        }
    }
}

impl Resource {
    /// The kube-rs description of this kind, for dynamic `Api`s.
    pub fn api_resource(&self) -> kube::api::ApiResource {
        kube::api::ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// How a patch is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchType {
    /// JSON merge patch (RFC 7386).
    Merge,
    /// Strategic merge patch (built-in types only).
    Strategic,
    /// JSON patch (RFC 6902).
    Json,
    /// Server-side apply.
    Apply {
        /// The field manager.
        field_manager: String,
        /// Take over conflicting fields.
        force: bool,
    },
}

/// An API failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The server answered with a failure status.
    #[error("{message} (HTTP {code}, {reason})")]
    Api {
        /// HTTP status.
        code: u16,
        /// Kubernetes reason (`NotFound`, `Conflict`, `Invalid`, …).
        reason: String,
        /// The server's message.
        message: String,
        /// The answer as it came, when it came from an API server: what
        /// kubernetes.core quotes in its failure messages.
        answer: Option<Arc<Answer>>,
    },
    /// No such resource type on the server.
    #[error(
        "Failed to find exact match for {api_version}.{kind} by [kind, name, singularName, shortNames]"
    )]
    UnknownKind {
        /// The apiVersion asked for.
        api_version: String,
        /// The kind asked for.
        kind: String,
    },
    /// The request did not get an answer.
    #[error("request to the API server failed: {0}")]
    Transport(String),
}

/// An API server's failure answer as it came: its headers in order and its
/// body as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Header names and values, as sent.
    pub headers: Vec<(String, String)>,
    /// The body (a `Status` object as JSON, as the server wrote it).
    pub body: String,
}

impl Error {
    /// The HTTP status, for API errors.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The error an API server's failure `answer` with HTTP `code` says: its
    /// `Status` read for the reason and message (a body that is no `Status`
    /// is the message itself, as kube reads it).
    pub fn from_answer(code: u16, answer: Answer) -> Self {
        let status: Option<kube::core::Status> = serde_json::from_str(&answer.body).ok();
        let (reason, message) = match status {
            Some(status) => (status.reason, status.message),
            None => (String::new(), answer.body.trim().to_owned()),
        };
        Error::Api {
            code,
            reason,
            message,
            answer: Some(Arc::new(answer)),
        }
    }

    /// What the API server answers for an object that is not there: its
    /// `Status`, `details` included, as it writes it (clients quote that
    /// body; a read that found nothing has none to keep).
    pub fn not_found(resource: &Resource, name: &str) -> Self {
        let qualified = if resource.group.is_empty() {
            resource.plural.clone()
        } else {
            format!("{}.{}", resource.plural, resource.group)
        };
        let message = format!("{qualified} \"{name}\" not found");
        let status = kube::core::Status {
            details: Some(kube::core::response::StatusDetails {
                name: name.to_owned(),
                group: resource.group.clone(),
                kind: resource.plural.clone(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 0,
            }),
            ..kube::core::Status::failure(&message, "NotFound").with_code(404)
        };
        Error::Api {
            code: 404,
            reason: "NotFound".into(),
            message,
            answer: Some(Arc::new(Answer {
                headers: Vec::new(),
                body: status_text(&status),
            })),
        }
    }

    /// The answer's HTTP reason phrase (`Unprocessable Entity`), as Python's
    /// HTTP client reports it.
    pub fn http_reason(&self) -> Option<&'static str> {
        self.code()
            .and_then(|code| http::StatusCode::from_u16(code).ok())
            .and_then(|status| status.canonical_reason())
    }

    /// Whether the object was not found.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// Whether the write lost a race (`409 Conflict`).
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }
}

/// Converts a `kube` error into the modules' error.
pub fn api_error(err: kube::Error) -> Error {
    match err {
        kube::Error::Api(status) => Error::Api {
            answer: Some(Arc::new(Answer {
                headers: Vec::new(),
                body: status_text(&status),
            })),
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        },
        other => Error::Transport(other.to_string()),
    }
}

/// A `Status` as the API server writes it, for an answer kube read for us
/// and kept only parsed: Go's field order and its escaping of `<`, `>` and
/// `&`, a newline at the end.
pub fn status_text(status: &kube::core::Status) -> String {
    let mut object = serde_json::Map::new();
    object.insert("kind".into(), "Status".into());
    object.insert("apiVersion".into(), "v1".into());
    object.insert("metadata".into(), serde_json::json!({}));
    object.insert("status".into(), "Failure".into());
    if !status.message.is_empty() {
        object.insert("message".into(), status.message.clone().into());
    }
    if !status.reason.is_empty() {
        object.insert("reason".into(), status.reason.clone().into());
    }
    if let Some(details) = status
        .details
        .as_ref()
        .and_then(|d| serde_json::to_value(d).ok())
        .filter(|d| d.as_object().is_some_and(|d| !d.is_empty()))
    {
        object.insert("details".into(), details);
    }
    if status.code != 0 {
        object.insert("code".into(), status.code.into());
    }
    let text = serde_json::Value::Object(object).to_string();
    let escaped = text
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    format!("{escaped}\n")
}

/// The custom resource a run is for: objects the run creates are owned by
/// it (or annotated with it, across namespaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `group/version` of the owner.
    pub api_version: String,
    /// Its API group.
    pub group: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Whether the references injected name it the dependents' controller.
    /// Upstream's do not; a shard's do, since timebertt's sharder assigns a
    /// dependent to the shard of its controller.
    pub controller: bool,
}

impl Owner {
    /// The owner described by an object read from the API, of the kind
    /// `resource` (which names its version even where a list's items
    /// carry no `apiVersion`).
    pub fn from_object(object: &Json, resource: &kube::discovery::ApiResource) -> Self {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let namespace = text("/metadata/namespace");
        Owner {
            api_version: resource.api_version.clone(),
            group: resource.group.clone(),
            kind: resource.kind.clone(),
            name: text("/metadata/name"),
            uid: text("/metadata/uid"),
            namespace: (!namespace.is_empty()).then_some(namespace),
            controller: false,
        }
    }

    /// The same owner, named the controller of its dependents when
    /// `controller` is true.
    pub fn controlling(self, controller: bool) -> Self {
        Owner { controller, ..self }
    }
}

/// What `k8s_exec` got back.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit code, when the process finished.
    pub return_code: Option<i32>,
}

/// The Kubernetes API as modules use it.
pub trait Cluster: Send + Sync + fmt::Debug {
    /// Discovers the resource for `api_version` and `kind` (cached; a miss
    /// refreshes discovery once).
    fn resource<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, Error>>;

    /// Reads one object; `None` when it does not exist.
    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Json>, Error>>;

    /// Lists objects, optionally filtered by label and field selectors.
    fn list<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
        field_selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Json>, Error>>;

    /// Creates an object.
    fn create<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        object: &'a Json,
    ) -> BoxFuture<'a, Result<Json, Error>>;

    /// Patches an object or its `subresource` (such as `status`).
    #[allow(clippy::too_many_arguments)]
    fn patch<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        patch: &'a Json,
        kind: &'a PatchType,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, Error>>;

    /// Replaces an object or its `subresource` (optimistic concurrency by
    /// `metadata.resourceVersion`).
    fn replace<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        object: &'a Json,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, Error>>;

    /// Deletes an object; `false` when it did not exist.
    fn delete<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
        options: Option<&'a Json>,
    ) -> BoxFuture<'a, Result<bool, Error>>;

    /// Reads a pod's log.
    fn logs<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        container: Option<&'a str>,
        since_seconds: Option<i64>,
        tail_lines: Option<i64>,
        previous: bool,
    ) -> BoxFuture<'a, Result<String, Error>>;

    /// Runs a command in a pod's container.
    fn exec<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        container: Option<&'a str>,
        command: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, Error>>;

    /// The API server's `/version` document.
    fn server_version(&self) -> BoxFuture<'_, Result<Json, Error>>;

    /// The names of the API groups the server serves (not the core group),
    /// as kubernetes.core's `cluster_info='api_groups'` lists them.
    fn api_groups(&self) -> BoxFuture<'_, Result<Vec<String>, Error>>;
}
