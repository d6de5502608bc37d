//! `kubernetes.core.k8s_exec`: runs a command in a container.

use minijinja::Value;

use super::{Args, ModuleContext, ModuleError, Output};
use crate::catalogue;
use enka_kube::Error as KubeError;

pub async fn run(args: &Args<'_>, ctx: &mut ModuleContext<'_>) -> Result<Output, ModuleError> {
    let namespace = args
        .str("namespace")?
        .or_else(|| ctx.owner.and_then(|o| o.namespace.clone()))
        .unwrap_or_else(|| "default".into());
    let pod = args.required_str("pod")?;
    let container = args.str("container")?;
    let command = match args.get("command") {
        Some(v) if v.kind() == minijinja::value::ValueKind::Seq => v
            .try_iter()
            .map_err(|e| e.to_string())?
            .map(|x| enka_template::pyrepr::to_text(&x))
            .collect(),
        Some(v) => shell_words(&enka_template::pyrepr::to_text(&v))?,
        None => return Err("missing required arguments: command".into()),
    };
    let cluster = ctx.cluster()?.clone();
    let out = ctx
        .api(cluster.exec(&namespace, &pod, container.as_deref(), &command))
        .await
        .map_err(|e| format!("Failed to execute on pod {pod} due to : {}", refusal(&e)))?;
    let rc = out.return_code.unwrap_or(-1);
    let lines = |s: &str| s.lines().map(Value::from).collect::<Vec<_>>();
    let mut output = Output::changed(true)
        .with("stdout", out.stdout.as_str())
        .with("stderr", out.stderr.as_str())
        .with("stdout_lines", lines(&out.stdout))
        .with("stderr_lines", lines(&out.stderr))
        .with("rc", rc)
        .with("return_code", rc);
    if rc != 0 {
        // kubernetes.core returns the exit code alone, and Ansible fails a
        // result whose `rc` is not 0: no `msg` (upstream's Failure
        // condition then says "unknown playbook failure").
        output = output.with("failed", true);
    }
    Ok(output)
}

/// How the Python client words the API server's refusal: a refused
/// websocket handshake as its websocket library reports it (status 0, the
/// handshake's status line, headers and body), anything else as it came.
fn refusal(err: &KubeError) -> String {
    let KubeError::Api {
        code,
        answer: Some(answer),
        ..
    } = err
    else {
        return err.to_string();
    };
    let mut headers = String::from("{");
    for (index, (name, value)) in answer.headers.iter().enumerate() {
        if index > 0 {
            headers.push_str(", ");
        }
        enka_template::pyrepr::write_str_repr(&mut headers, name);
        headers.push_str(": ");
        enka_template::pyrepr::write_str_repr(&mut headers, value);
    }
    headers.push('}');
    format!(
        "(0)\nReason: Handshake status {code} {} -+-+- {headers} -+-+- {}\n",
        err.http_reason().unwrap_or_default(),
        answer.body
    )
}

/// Splits a command line as kubernetes.core does (`shlex.split`).
fn shell_words(text: &str) -> Result<Vec<String>, String> {
    enka_template::pyshlex::split(text, false)
        .map_err(|_| "command has an unterminated quote".to_owned())
}

/// The module as the catalogue lists it.
pub(crate) const MODULE: catalogue::ModuleSpec = catalogue::ModuleSpec {
    name: "k8s_exec",
    aliases: &[],
    collections: catalogue::KUBERNETES,
    params: &["namespace", "pod", "container", "command"],
    any_args: false,
    free_form: catalogue::FreeForm::No,
    requires: &[
        catalogue::Requirement::OneOf(&["pod"]),
        catalogue::Requirement::OneOf(&["command"]),
    ],
    expressions: &[],
    uses_cluster: true,
    check_mode_through: Some("kubernetes.core.k8s_exec"),
    run: catalogue::Run::Later(|args, ctx| Box::pin(run(args, ctx))),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlex() {
        assert_eq!(
            shell_words("echo 'a b' \"c d\" e\\ f").unwrap(),
            ["echo", "a b", "c d", "e f"]
        );
        assert!(shell_words("echo 'oops").is_err());
    }
}
