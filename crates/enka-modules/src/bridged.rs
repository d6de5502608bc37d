//! Actions enka has no native code for, run by Ansible in the worker.
//!
//! enka has already done everything task keywords ask (conditions, loops,
//! templating the arguments, `environment`); what crosses to the worker is
//! the action's name, its final arguments and the little else an action
//! plugin reads (search path, check mode, timeout). The one exception is
//! `template`: enka renders the file with the same templating every other
//! task gets, and the worker hands the text to the copy action exactly as
//! `ansible.builtin.template` does.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use minijinja::Value;
use serde_json::{Map, Value as Json, json};

use super::{AnsibleAction, ModuleContext, Output};

pub(super) async fn run(
    action: &AnsibleAction,
    args: &Value,
    ctx: &mut ModuleContext<'_>,
) -> Result<Output, crate::ModuleError> {
    let Some(worker) = ctx.ansible.cloned() else {
        return Err(crate::ModuleError::NoWorker {
            action: action.name.to_string(),
        });
    };
    // An action named by a template (`action: "{{ prefix }}file"`) is
    // known only now, as Task.post_validate templates `action`.
    let templated_name;
    let module: &str = if enka_template::is_possibly_template(&action.name) {
        templated_name = ctx
            .ctx
            .templar()
            .template_str(&action.name, ctx.ctx)
            .map_err(|err| err.ansible_message())
            .map(|name| enka_template::pyrepr::to_text(&name))?;
        &templated_name
    } else {
        &action.name
    };
    let with_stats_names = stats_names_templated(action, args, ctx)?;
    let args = with_stats_names.as_ref().unwrap_or(args);
    let args =
        enka_template::convert::to_json(args).map_err(|e| format!("arguments of {module}: {e}"))?;
    let mut request = json!({
        "op": "run",
        "module": module,
        "args": args,
        "collections": &*action.collections,
        "check_mode": ctx.check_mode,
        "diff": ctx.diff,
        "no_log": ctx.no_log,
        "environment": enka_template::convert::to_json(&ctx.environment).unwrap_or(Json::Null),
        "search_path": search_path(ctx),
        "vars": task_vars(ctx)?,
    });
    let timeout = ctx
        .deadline
        .map(|deadline| deadline.saturating_duration_since(Instant::now()));
    if let Some(timeout) = timeout {
        request["timeout"] = json!(timeout.as_secs_f64().max(0.001));
    }
    if let Some(own) = ctx.task_timeout {
        request["task_timeout"] = json!(own.as_secs());
    }
    if let Some(asynchronous) = ctx.asynchronous {
        request["async"] = json!(asynchronous.seconds);
        request["poll"] = json!(asynchronous.poll);
    }
    if action.is_builtin("template") {
        let src = request["args"]["src"].as_str().map(str::to_owned);
        if let Some(src) = src {
            let (path, text) =
                enka_template::render_template_file(ctx.ctx, &src).map_err(|err| {
                    match err.python_exception() {
                        // The template action's words for what Jinja raised.
                        Some((class, text)) => format!("{class}: {text}"),
                        None => format!("template {src}: {err}"),
                    }
                })?;
            request["rendered"] = Json::from(text);
            request["source_path"] = Json::from(path.to_string_lossy().as_ref());
        }
    }
    let answer = worker
        .call_async(request, timeout)
        .await
        .map_err(|err| err.to_string())?;
    let Some(Json::Object(result)) = answer.get("result").cloned() else {
        return Err(
            enka_worker::WorkerError::Protocol("an answer without a result".to_owned()).into(),
        );
    };
    Ok(registered(result))
}

/// set_stats templates the names of its `data` (its action plugin would do
/// it in the worker, with none of the task's variables): its arguments with
/// them templated; `None` for any other action.
fn stats_names_templated(
    action: &AnsibleAction,
    args: &Value,
    ctx: &ModuleContext<'_>,
) -> Result<Option<Value>, crate::ModuleError> {
    let Ok(data) = args.get_attr("data") else {
        return Ok(None);
    };
    if !action.is_builtin("set_stats") || data.kind() != minijinja::value::ValueKind::Map {
        return Ok(None);
    }
    let data = ctx
        .templar
        .template_keys(&data, ctx.ctx)
        .map_err(|err| err.ansible_message())?;
    Ok(Some(Value::from_pairs(
        enka_template::convert::entries(args)
            .into_iter()
            .map(|(k, v)| {
                if k.as_str() == Some("data") {
                    (k, data.clone())
                } else {
                    (k, v)
                }
            }),
    )))
}

/// What Ansible's search for `files/` and `templates/` starts from: the
/// role, then the directory of the task's file.
fn search_path(ctx: &ModuleContext<'_>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    if let Some(role) = ctx.role_path {
        paths.push(role.to_string_lossy().into_owned());
    }
    if let Some(dir) = ctx.task.file.parent().filter(|d| !d.as_os_str().is_empty()) {
        let dir = dir.to_string_lossy().into_owned();
        if !paths.contains(&dir) {
            paths.push(dir);
        }
    }
    if paths.is_empty() {
        paths.push(ctx.base_dir.to_string_lossy().into_owned());
    }
    paths
}

/// The variables an action plugin reads itself (most read none).
fn task_vars(ctx: &ModuleContext<'_>) -> Result<Json, crate::ModuleError> {
    let mut vars = Map::new();
    vars.insert("playbook_dir".into(), path_json(ctx.base_dir));
    if let Some(role) = ctx.role_path {
        vars.insert("role_path".into(), path_json(role));
    }
    vars.insert("ansible_check_mode".into(), Json::from(ctx.check_mode));
    for (name, value_for_omit) in FORWARDED_VARS {
        if ctx.ctx.vars().get(name).is_none() {
            continue;
        }
        let value = ctx
            .templar
            .template_str(&format!("{{{{ {name} }}}}"), ctx.ctx)
            .map_err(|err| {
                format!(
                    "Error while resolving value for '{name}': {}",
                    err.ansible_message()
                )
            })?;
        // An omitted one is as if unset, or what its reader takes for
        // omitted (AnsiballZ's `value_for_omit=0`).
        if value.as_str() == Some(ctx.templar.omit()) {
            if let Some(stand_in) = value_for_omit {
                vars.insert((*name).into(), Json::from(*stand_in));
            }
            continue;
        }
        let value = enka_template::convert::to_json(&value).map_err(|e| format!("{name}: {e}"))?;
        vars.insert((*name).into(), value);
    }
    Ok(Json::Object(vars))
}

/// Variables the action, its shell plugin or AnsiballZ's wrapper read
/// themselves: where async job files and temporary files go, the module's
/// interpreter (the worker checks it exists; modules run in its own
/// Python), and the open-files limit the wrapper sets; with what an
/// omitted one stands for, if not for unset.
const FORWARDED_VARS: &[(&str, Option<i64>)] = &[
    ("ansible_async_dir", None),
    ("ansible_remote_tmp", None),
    ("ansible_python_interpreter", None),
    ("ansible_python_module_rlimit_nofile", Some(0)),
];

fn path_json(path: &Path) -> Json {
    Json::from(path.to_string_lossy().as_ref())
}

/// The worker's result as a task registers it; facts a module returns
/// become variables, unsafe like the rest of the result.
fn registered(mut result: Map<String, Json>) -> Output {
    let mut output = Output::default();
    if let Some(Json::Array(events)) = result.remove("_enka_async_events") {
        output.async_events = events.iter().filter_map(async_event).collect();
    }
    if let Some(Json::Object(facts)) = result.get("ansible_facts") {
        for (name, value) in facts {
            output.plain_facts.push((
                Arc::from(name.as_str()),
                enka_template::convert::from_json(value),
            ));
        }
    }
    output.fields = result
        .into_iter()
        .map(|(key, value)| (key, enka_template::convert::from_json(&value)))
        .collect();
    output
}

/// One of the worker's notes on waiting for a background job.
fn async_event(event: &Json) -> Option<crate::AsyncEvent> {
    let kind = match event["event"].as_str()? {
        "poll" => crate::AsyncEventKind::Poll,
        "ok" => crate::AsyncEventKind::Ok,
        "failed" => crate::AsyncEventKind::Failed,
        _ => return None,
    };
    Some(crate::AsyncEvent {
        kind,
        jid: event["jid"].as_str().unwrap_or_default().to_owned(),
        started: enka_template::convert::from_json(&event["started"]),
        finished: enka_template::convert::from_json(&event["finished"]),
    })
}
