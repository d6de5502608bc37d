//! `kubernetes.core.k8s`: create, patch, apply, replace or delete objects.

use minijinja::Value;
use minijinja::value::ValueKind;
use serde_json::{Value as Json, json};

use super::client_apply;
use super::k8s_common::{self as common, WaitCondition};
use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;
use enka_kube::{PatchType, Resource};

/// The field manager enka applies with.
pub const FIELD_MANAGER: &str = "enka";

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
    let state = args
        .one_of("state", &["present", "absent", "patched"])?
        .unwrap_or_else(|| "present".into());
    let definitions = definitions(args, ctx)?;
    if definitions.is_empty() {
        // kubernetes.core drops a source's empty YAML documents: a template
        // whose `{% if %}` rendered nothing ("\n") applies nothing. Only an
        // empty definition string, or none at all, fails.
        let text_given = args
            .get("definition")
            .or_else(|| args.get("resource_definition"))
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()));
        if text_given || args.get("src").is_some() || args.get("template").is_some() {
            let none =
                Value::from_pairs([(Value::from("results"), Value::from(Vec::<Value>::new()))]);
            return Ok(Output::changed(false).with("result", none));
        }
        return Err("no definition: give definition, src, template, or kind and name".into());
    }
    let options = Options::from_args(args)?;
    let mut results = Vec::with_capacity(definitions.len());
    for definition in definitions {
        results.push(apply_one(ctx, &state, definition, &options).await?);
    }
    // kubernetes.core returns one definition's result as the task's, and
    // several as `result.results`, each whole.
    if results.len() == 1
        && let Some(one) = results.pop()
    {
        return Ok(one.into_output());
    }
    let changed = results.iter().any(|one| one.changed);
    let results: Vec<Value> = results
        .into_iter()
        .map(|one| one.into_output().into_value())
        .collect();
    Ok(Output::changed(changed).with(
        "result",
        Value::from_pairs([(Value::from("results"), Value::from(results))]),
    ))
}

struct Options {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    apply: bool,
    /// `server_side_apply` was given: the apply is the API server's; else a
    /// plain `apply: true` is kubernetes.core's client-side apply.
    server_side: bool,
    /// How an apply treats fields another manager owns: kubernetes.core's
    /// `server_side_apply.force_conflicts` (false by default); a plain
    /// `apply: true` is a client-side apply, which overwrites them.
    force_conflicts: bool,
    /// `server_side_apply.field_manager`, else enka's.
    field_manager: String,
    force: bool,
    merge_types: Vec<String>,
    wait: bool,
    wait_timeout: std::time::Duration,
    wait_sleep: std::time::Duration,
    wait_condition: Option<WaitCondition>,
    delete_options: Option<Json>,
}

impl Options {
    fn from_args(args: &Args<'_>) -> Result<Self, String> {
        let (wait, wait_timeout, wait_sleep, wait_condition) = common::wait_args(args)?;
        let merge_types: Vec<String> = args
            .list("merge_type")?
            .iter()
            .map(enka_template::pyrepr::to_text)
            .collect();
        for m in &merge_types {
            if !matches!(m.as_str(), "json" | "merge" | "strategic-merge") {
                return Err(format!(
                    "value of merge_type must be one or more of: json, merge, strategic-merge. Got no match for: {m}"
                ));
            }
        }
        let server_side = args.map("server_side_apply")?;
        let server_side_field = |key: &str| {
            server_side
                .as_ref()
                .and_then(|m| m.get_attr(key).ok())
                .filter(|v| !v.is_undefined() && !v.is_none())
        };
        let force_conflicts = match server_side_field("force_conflicts") {
            Some(v) => enka_template::to_bool(&v),
            None => server_side.is_none(),
        };
        let field_manager = server_side_field("field_manager")
            .map(|v| enka_template::pyrepr::to_text(&v))
            .unwrap_or_else(|| FIELD_MANAGER.to_owned());
        Ok(Options {
            force_conflicts,
            field_manager,
            api_version: args.str("api_version")?.or(args.str("version")?),
            kind: args.str("kind")?,
            name: args.str("name")?,
            namespace: args.str("namespace")?,
            apply: args.bool("apply", false)? || server_side.is_some(),
            server_side: server_side.is_some(),
            force: args.bool("force", false)?,
            merge_types,
            wait,
            wait_timeout,
            wait_sleep,
            wait_condition,
            delete_options: args
                .map("delete_options")?
                .map(|v| common::to_json(&v))
                .transpose()?,
        })
    }
}

/// Definitions from `definition` (mapping, list, or YAML text with one or
/// more documents), `resource_definition`, `src`, `template`, or the short
/// form (`kind`, `api_version`, `name`, `namespace`).
fn definitions(args: &Args<'_>, ctx: &ModuleContext<'_>) -> Result<Vec<Json>, String> {
    let raw = args
        .get("definition")
        .or_else(|| args.get("resource_definition"));
    let mut values: Vec<Value> = Vec::new();
    match raw {
        Some(v) => values.extend(expand(&v)?),
        None => {
            if let Some(src) = args.str("src")? {
                let path = find_file(ctx, "files", &src)
                    .ok_or_else(|| format!("src file {src} not found in the role or project"))?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("could not read {}: {e}", path.display()))?;
                values.extend(expand(&Value::from(text))?);
            } else if let Some(template) = args.get("template") {
                // A path, a mapping with `path`, or a list of either
                // (kubernetes.core renders each and applies them all).
                let entries: Vec<Value> = match template.kind() {
                    ValueKind::Seq => template
                        .try_iter()
                        .map(Iterator::collect)
                        .unwrap_or_default(),
                    _ => vec![template],
                };
                for entry in entries {
                    let path = match entry.kind() {
                        ValueKind::Map => entry
                            .get_attr("path")
                            .ok()
                            .filter(|v| !v.is_undefined() && !v.is_none())
                            .map(|v| enka_template::pyrepr::to_text(&v)),
                        _ => Some(enka_template::pyrepr::to_text(&entry)),
                    }
                    .ok_or("template needs a path")?;
                    let (_, text) = enka_template::render_template_file(ctx.ctx, &path)
                        .map_err(|e| format!("template {path}: {e}"))?;
                    values.extend(expand(&Value::from(text))?);
                }
            } else if let (Some(kind), Some(name)) = (args.str("kind")?, args.str("name")?) {
                values.push(Value::from_pairs([
                    (
                        Value::from("apiVersion"),
                        Value::from(args.str("api_version")?.unwrap_or_else(|| "v1".into())),
                    ),
                    (Value::from("kind"), Value::from(kind)),
                    (
                        Value::from("metadata"),
                        Value::from_pairs([(Value::from("name"), Value::from(name))]),
                    ),
                ]));
            } else if args.str("kind")?.is_some() && args.str("state")?.as_deref() == Some("absent")
            {
                return Err(
                    "state=absent with only kind needs name (or label_selectors with delete_all)"
                        .to_owned(),
                );
            }
        }
    }
    values.iter().map(common::to_json).collect()
}

fn expand(value: &Value) -> Result<Vec<Value>, String> {
    match value.kind() {
        ValueKind::Map => Ok(vec![value.clone()]),
        ValueKind::Seq => {
            let mut out = Vec::new();
            for item in value.try_iter().map_err(|e| e.to_string())? {
                out.extend(expand(&item)?);
            }
            Ok(out)
        }
        ValueKind::String => {
            let docs = enka_yaml::load_all(value.as_str().unwrap_or_default())
                .map_err(|e| format!("definition is not valid YAML: {e}"))?;
            let mut out = Vec::new();
            for doc in docs {
                let v = enka_template::convert::from_yaml(&doc);
                if !v.is_none() {
                    out.extend(expand(&v)?);
                }
            }
            Ok(out)
        }
        ValueKind::None => Ok(Vec::new()),
        _ => Err(format!(
            "definition must be a mapping, a list or YAML text, got {}",
            enka_template::pyrepr::type_name(value)
        )),
    }
}

fn find_file(ctx: &ModuleContext<'_>, subdir: &str, name: &str) -> Option<std::path::PathBuf> {
    enka_template::find_needle(&ctx.search_path(), subdir, name)
}

/// One definition's result, as kubernetes.core's runner shapes it.
struct One {
    result: Value,
    changed: bool,
    /// `create`, `update`, `replace`, `apply` or `delete`; none when
    /// nothing was done (`state: patched` of an object that is not there).
    method: Option<&'static str>,
    warnings: Vec<String>,
    /// Whole seconds waited, when the task waits.
    duration: Option<u64>,
}

impl One {
    fn new(result: Value, changed: bool, method: &'static str) -> Self {
        One {
            result,
            changed,
            method: Some(method),
            warnings: Vec::new(),
            duration: None,
        }
    }

    /// Nothing done, with the warning that says why.
    fn nothing(warning: String) -> Self {
        One {
            result: empty_object(),
            changed: false,
            method: None,
            warnings: vec![warning],
            duration: None,
        }
    }

    fn into_output(self) -> Output {
        let mut output = Output::changed(self.changed).with("result", self.result);
        if let Some(method) = self.method {
            output = output.with("method", method);
        }
        if let Some(duration) = self.duration {
            output = output.with("duration", duration);
        }
        if !self.warnings.is_empty() {
            output = output.with("warnings", self.warnings);
        }
        output
    }
}

fn empty_object() -> Value {
    Value::from_pairs(std::iter::empty::<(Value, Value)>())
}

fn meta_str<'a>(object: &'a Json, field: &str) -> Option<&'a str> {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Json::as_str)
}

async fn apply_one(
    ctx: &mut ModuleContext<'_>,
    state: &str,
    mut definition: Json,
    options: &Options,
) -> Result<One, ModuleError> {
    if !definition.is_object() {
        return Err("each definition must be a mapping".into());
    }
    let api_version = definition
        .get("apiVersion")
        .and_then(Json::as_str)
        .map(str::to_owned)
        .or_else(|| options.api_version.clone())
        .unwrap_or_else(|| "v1".to_owned());
    let kind = definition
        .get("kind")
        .and_then(Json::as_str)
        .map(str::to_owned)
        .or_else(|| options.kind.clone())
        .ok_or("definition has no kind")?;
    let cluster = ctx.cluster()?.clone();
    let resource: Resource = ctx
        .api(cluster.resource(&api_version, &kind))
        .await
        .map_err(|e| common::refused("find the resource", &e))?;
    complete_definition(&mut definition, &api_version, &kind, options);
    let namespace = common::namespace_for(
        &resource,
        meta_str(&definition, "namespace"),
        options.namespace.as_deref(),
        ctx.owner,
    );
    match &namespace {
        Some(ns) => definition["metadata"]["namespace"] = Json::String(ns.clone()),
        None => {
            if let Some(meta) = definition["metadata"].as_object_mut() {
                meta.remove("namespace");
            }
        }
    }
    let name = meta_str(&definition, "name").map(str::to_owned);
    let ns = namespace.as_deref();
    let is_owner = match (&name, ctx.owner) {
        (Some(n), Some(owner)) => common::is_owner(owner, &resource, ns, n),
        _ => false,
    };

    // Objects the role owns are dependents whose watch reconciles the owner.
    if ctx.owner.is_some() && !is_owner && state != "absent" {
        let dependent = enka_kube::Dependent {
            resource: resource.clone(),
            namespace: ns.map(str::to_owned),
            name: name.clone(),
            seen: None,
        };
        enka_kube::Dependent::merge_into(&mut ctx.dependents, dependent);
    }
    let existing = match &name {
        Some(n) => ctx
            .api(cluster.get(&resource, ns, n))
            .await
            .map_err(|e| common::refused("retrieve requested object", &e))?,
        None => None,
    };

    let target = Target {
        cluster: &cluster,
        resource: &resource,
        ns,
        kind: &kind,
        name: name.as_deref(),
    };
    if state == "absent" {
        return delete_one(ctx, &target, existing, options).await;
    }
    let (result, changed, method) = match existing {
        None if state == "patched" => {
            // kubernetes.core warns and does nothing.
            return Ok(One::nothing(format!(
                "resource 'kind={kind},name={}' was not found but will not be created as 'state' parameter has been set to 'patched'",
                name.as_deref().unwrap_or("None")
            )));
        }
        None => create_one(ctx, &target, definition, options, is_owner).await?,
        Some(existing) => update_one(ctx, &target, existing, definition, options, is_owner).await?,
    };
    note_seen(ctx, &result);
    if !options.wait {
        return Ok(One::new(common::view(result), changed, method));
    }
    wait_one(ctx, &target, result, changed, method, options).await
}

/// The definition with the task's `api_version`, `kind` and `name` where
/// it has none, and a `metadata` mapping.
fn complete_definition(definition: &mut Json, api_version: &str, kind: &str, options: &Options) {
    if definition.get("metadata").is_none_or(|m| !m.is_object()) {
        definition["metadata"] = json!({});
    }
    definition["apiVersion"] = Json::String(api_version.to_owned());
    definition["kind"] = Json::String(kind.to_owned());
    if meta_str(definition, "name").is_none()
        && let Some(name) = &options.name
    {
        definition["metadata"]["name"] = Json::String(name.clone());
    }
}

/// Creates an object that is not there (as an apply when the task
/// applies): the annotation records the definition as the role wrote it,
/// and the owner reference is added after, as upstream's proxy adds it.
async fn create_one(
    ctx: &mut ModuleContext<'_>,
    target: &Target<'_>,
    mut definition: Json,
    options: &Options,
    is_owner: bool,
) -> Result<(Json, bool, &'static str), ModuleError> {
    if options.apply && !options.server_side {
        definition = client_apply::annotated(&definition);
    }
    if let (Some(owner), false) = (ctx.owner, is_owner) {
        common::inject_owner(&mut definition, owner, target.ns);
    }
    if target.name.is_none() && meta_str(&definition, "generateName").is_none() {
        return Err("definition has no metadata.name".into());
    }
    // kubernetes.core's apply creates what is not there as an
    // apply: its method and its words on failure say so.
    let (method, action) = if options.apply {
        ("apply", "apply object")
    } else {
        ("create", "create object")
    };
    let created = ctx
        .api(
            target
                .cluster
                .create(target.resource, target.ns, &definition),
        )
        .await
        .map_err(|e| common::refused(action, &e))?;
    Ok((created, true, method))
}

/// Brings an existing object to the definition: a replace under `force`, a
/// client-side or server-side apply, or kubernetes.core's patch; no write
/// when nothing would change. An object the role did not create is never
/// adopted (the garbage collector would delete it with the custom
/// resource); one it owns keeps its owner through a replace or an apply.
async fn update_one(
    ctx: &mut ModuleContext<'_>,
    target: &Target<'_>,
    existing: Json,
    mut definition: Json,
    options: &Options,
    is_owner: bool,
) -> Result<(Json, bool, &'static str), ModuleError> {
    let name = target.name.unwrap_or_default();
    let (cluster, resource, ns) = (target.cluster, target.resource, target.ns);
    let keeps_owner = ctx
        .owner
        .filter(|owner| !is_owner && common::owned_by(&existing, owner));
    Ok(if options.force {
        if let Some(owner) = keeps_owner {
            common::inject_owner(&mut definition, owner, ns);
        }
        if let Some(rv) = meta_str(&existing, "resourceVersion") {
            definition["metadata"]["resourceVersion"] = Json::String(rv.to_owned());
        }
        let replaced = ctx
            .api(cluster.replace(resource, ns, name, &definition, None))
            .await
            .map_err(|e| common::refused("replace object", &e))?;
        let changed = common::changed(&existing, &replaced);
        (replaced, changed, "replace")
    } else if options.apply && !options.server_side {
        // A merge patch: an owner reference the object has stays.
        match client_apply::patch_for(&existing, &definition)? {
            None => (existing, false, "apply"),
            Some(patch) => {
                let applied = ctx
                    .api(cluster.patch(resource, ns, name, &patch, &PatchType::Merge, None))
                    .await
                    .map_err(|e| common::refused("apply object", &e))?;
                let changed = common::changed(&existing, &applied);
                (applied, changed, "apply")
            }
        }
    } else if options.apply {
        if let Some(owner) = keeps_owner {
            common::inject_owner(&mut definition, owner, ns);
        }
        let kind = PatchType::Apply {
            field_manager: options.field_manager.clone(),
            force: options.force_conflicts,
        };
        let applied = ctx
            .api(cluster.patch(resource, ns, name, &definition, &kind, None))
            .await
            .map_err(|e| common::refused("apply object", &e))?;
        let changed = common::changed(&existing, &applied);
        (applied, changed, "apply")
    } else if common::is_subset(&definition, &existing) {
        // Nothing to change: no write at all.
        (existing, false, "update")
    } else {
        let patched = patch(
            ctx,
            cluster,
            resource,
            ns,
            name,
            &definition,
            &options.merge_types,
        )
        .await?;
        let changed = common::changed(&existing, &patched);
        (patched, changed, "update")
    })
}

/// The object one definition names, where it lives.
struct Target<'a> {
    cluster: &'a std::sync::Arc<dyn enka_kube::Cluster>,
    resource: &'a Resource,
    ns: Option<&'a str>,
    kind: &'a str,
    name: Option<&'a str>,
}

impl Target<'_> {
    /// kubernetes.core's words for a wait that timed out.
    fn timed_out(&self) -> String {
        format!(
            "\"{}\" \"{}\": Timed out waiting on resource",
            self.kind,
            self.name.unwrap_or("None")
        )
    }

    /// Reads the object again (for a wait), and whether `ready` holds.
    async fn check(
        &self,
        ready: impl Fn(Option<&Json>) -> bool,
    ) -> Result<(bool, Option<Json>), enka_kube::Error> {
        let object = match self.name {
            Some(name) => self.cluster.get(self.resource, self.ns, name).await?,
            None => None,
        };
        Ok((ready(object.as_ref()), object))
    }
}

/// `state: absent`: deletes the object if it is there, and with `wait`
/// waits until it is gone.
async fn delete_one(
    ctx: &mut ModuleContext<'_>,
    target: &Target<'_>,
    existing: Option<Json>,
    options: &Options,
) -> Result<One, ModuleError> {
    let Some(name) = target.name else {
        return Err("state=absent needs a name".into());
    };
    let Some(existing) = existing else {
        return Ok(One::new(empty_object(), false, "delete"));
    };
    let deleted = ctx
        .api(target.cluster.delete(
            target.resource,
            target.ns,
            name,
            options.delete_options.as_ref(),
        ))
        .await
        .map_err(|e| common::refused("delete object", &e))?;
    let mut one = One::new(common::view(existing), deleted, "delete");
    if deleted && options.wait {
        let waited = common::wait_for(ctx, options.wait_timeout, options.wait_sleep, || {
            target.check(|object| object.is_none())
        })
        .await
        .map_err(|e| common::refused("retrieve requested object", &e))?;
        one.duration = Some(waited.seconds);
        if !waited.ready {
            return Err(timed_out(target, one));
        }
    }
    Ok(one)
}

/// `wait`: reads the object until it is ready (or `wait_condition` holds),
/// as kubernetes.core's waiter does.
async fn wait_one(
    ctx: &mut ModuleContext<'_>,
    target: &Target<'_>,
    written: Json,
    changed: bool,
    method: &'static str,
    options: &Options,
) -> Result<One, ModuleError> {
    let target = Target {
        name: meta_str(&written, "name").or(target.name),
        ..*target
    };
    let condition = options.wait_condition.as_ref();
    let waited = common::wait_for(ctx, options.wait_timeout, options.wait_sleep, || {
        target.check(|object| object.is_some_and(|o| common::ready(o, condition)))
    })
    .await
    .map_err(|e| common::refused("retrieve requested object", &e))?;
    let mut one = One::new(
        common::view(waited.last.unwrap_or(Json::Null)),
        changed,
        method,
    );
    one.duration = Some(waited.seconds);
    if !waited.ready {
        return Err(timed_out(&target, one));
    }
    Ok(one)
}

/// kubernetes.core's `ResourceTimeout`: the failed result carries what the
/// task did and the object as last read.
fn timed_out(target: &Target<'_>, one: One) -> ModuleError {
    let msg = target.timed_out();
    ModuleError::Result(Box::new(one.into_output().with("msg", msg)))
}

async fn patch(
    ctx: &mut ModuleContext<'_>,
    cluster: &std::sync::Arc<dyn enka_kube::Cluster>,
    resource: &Resource,
    ns: Option<&str>,
    name: &str,
    definition: &Json,
    merge_types: &[String],
) -> Result<Json, ModuleError> {
    // kubernetes.core tries each merge type in turn (strategic merge, then
    // merge, unless the task names them), going on after any refusal and
    // reporting the last: a value the API server refuses is quoted in the
    // merge patch's words. Strategic merge is not tried where it cannot
    // apply (the API server would answer 415).
    let order: Vec<PatchType> = if merge_types.is_empty() {
        if common::supports_strategic_merge(resource) {
            vec![PatchType::Strategic, PatchType::Merge]
        } else {
            vec![PatchType::Merge]
        }
    } else {
        merge_types
            .iter()
            .filter_map(|m| match m.as_str() {
                "strategic-merge" => {
                    common::supports_strategic_merge(resource).then_some(PatchType::Strategic)
                }
                "merge" => Some(PatchType::Merge),
                "json" => Some(PatchType::Json),
                _ => None,
            })
            .collect()
    };
    let mut last_error = None;
    for kind in &order {
        match ctx
            .api(cluster.patch(resource, ns, name, definition, kind, None))
            .await
        {
            Ok(object) => return Ok(object),
            Err(err) => last_error = Some(err),
        }
    }
    Err(match last_error {
        Some(err) => common::refused("patch object", &err),
        None => "no merge_type applies to this resource".into(),
    })
}

/// Remembers the object as the API server answered the run, for the
/// dependent watch's first list (see `Dependent::seen`). Only an answer of
/// the server carries managedFields; a copy from a watch cache does not, and
/// is not remembered.
fn note_seen(ctx: &mut ModuleContext<'_>, object: &Json) {
    if object.pointer("/metadata/managedFields").is_none() {
        return;
    }
    let Ok(watched) = enka_kube::object::WatchedObject::from_json_text(&object.to_string()) else {
        return;
    };
    let (namespace, name) = (
        watched.metadata.namespace.clone(),
        watched.metadata.name.clone(),
    );
    let kind = watched.types.as_ref().map(|t| t.kind.as_str());
    let fingerprint = watched.dependent_fingerprint();
    if let Some(dependent) = ctx.dependents.iter_mut().find(|d| {
        name.is_some()
            && d.name == name
            && d.namespace == namespace
            && Some(d.resource.kind.as_str()) == kind
    }) {
        dependent.seen = Some(fingerprint);
    }
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s",
    aliases: &[],
    collections: catalogue::KUBERNETES,
    params: &[
        "state",
        "definition",
        "resource_definition",
        "src",
        "template",
        "kind",
        "api_version",
        "version",
        "name",
        "namespace",
        "label_selectors",
        "apply",
        "server_side_apply",
        "merge_type",
        "force",
        "wait",
        "wait_condition",
        "wait_timeout",
        "wait_sleep",
        "validate",
        "append_hash",
        "continue_on_error",
        "delete_options",
        "generate_name",
        "delete_all",
        "hidden_fields",
    ],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: Some("kubernetes.core.k8s"),
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};
