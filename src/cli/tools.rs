//! The developer's commands (`check`, `test`, `diff`, `playbook`,
//! `template`): each takes its flags and returns the exit code.

use std::process::ExitCode;

use super::{CheckArgs, DiffArgs, PlaybookArgs, TemplateArgs, TestArgs, multi_thread_runtime};

/// `enka check`: see [`crate::check`].
pub(super) fn check(args: CheckArgs) -> ExitCode {
    let project = args.project;
    let report = crate::check::check(&crate::check::CheckOptions {
        ansible: project.ansible(),
        watches_file: project.watches_file,
        roles_path: project.ansible_roles_path,
        collections_path: project.ansible_collections_path,
    });
    for diagnostic in &report.diagnostics.0 {
        eprintln!("{}\n", diagnostic.render());
    }
    for watch in &report.watches {
        println!("{}", watch.render());
    }
    for (location, plugin) in &report.python_plugins {
        println!("{location}: {plugin} runs through Ansible (not in enka)");
    }
    println!("{}", report.summary);
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `enka test`: see [`crate::molecule`].
pub(super) fn test(args: TestArgs) -> ExitCode {
    let (templates, migration) =
        match crate::semantics::template_options(&args.semantics, &args.migration) {
            Ok(chosen) => chosen,
            Err(code) => return code,
        };
    let options = crate::molecule::TestOptions {
        templates,
        watches_file: args.watches_file,
        scenario: args.scenario,
        filters: args.filters,
        ansible: Some(crate::worker::Config::from_env()),
        keep_namespace: args.keep_namespace,
        verbosity: args.verbose,
    };
    let Some(runtime) = multi_thread_runtime() else {
        return ExitCode::from(2);
    };
    let summary = runtime.block_on(async {
        let config = kube::Config::infer().await.map_err(|e| {
            crate::molecule::TestError::Kube(format!(
                "cannot connect to Kubernetes (kubeconfig or in-cluster): {e}"
            ))
        })?;
        crate::molecule::run(&options, config).await
    });
    if let Some(migration) = migration {
        migration.finish();
    }
    match summary {
        Ok(summary) => {
            for name in &summary.failed {
                println!("FAILED: {name}");
            }
            println!(
                "{} passed, {} failed",
                summary.passed.len(),
                summary.failed.len()
            );
            if summary.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("enka test: {err}");
            ExitCode::from(2)
        }
    }
}

/// `enka diff`: see [`crate::operator::diff`].
pub(super) fn diff(args: DiffArgs) -> ExitCode {
    use crate::operator::diff::{DiffOptions, Subject};
    let subject = match (args.file, args.name) {
        (Some(file), _) => Subject::File(file),
        (None, Some(name)) => Subject::Live {
            kind: args.kind,
            name,
            namespace: args.namespace.clone(),
        },
        (None, None) => unreachable!("clap requires --file or --name"),
    };
    let (templates, migration) =
        match crate::semantics::template_options(&args.semantics, &args.migration) {
            Ok(chosen) => chosen,
            Err(code) => return code,
        };
    let project = args.project;
    let options = DiffOptions {
        templates,
        ansible: Some(project.ansible()),
        watches_file: project.watches_file,
        roles_path: project.ansible_roles_path,
        collections_path: project.ansible_collections_path,
        subject,
        timeout: args.reconcile_timeout,
    };
    let Some(runtime) = multi_thread_runtime() else {
        return ExitCode::from(2);
    };
    let namespace = args.namespace;
    let report = runtime.block_on(async {
        let mut config = kube::Config::infer().await.map_err(|e| {
            crate::operator::diff::DiffError::Kube(format!(
                "cannot connect to Kubernetes (kubeconfig or in-cluster): {e}"
            ))
        })?;
        if let Some(namespace) = namespace {
            config.default_namespace = namespace;
        }
        crate::operator::diff::diff(&options, config).await
    });
    if let Some(migration) = migration {
        migration.finish();
    }
    match report {
        Ok(report) => {
            if args.output == "json" {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.render());
            }
            if report.changes.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(err) => {
            eprintln!("enka diff: {err}");
            ExitCode::from(2)
        }
    }
}

/// `enka playbook`: see [`crate::playbook`].
pub(super) fn playbook(args: PlaybookArgs) -> ExitCode {
    let (templates, migration) =
        match crate::semantics::template_options(&args.semantics, &args.migration) {
            Ok(chosen) => chosen,
            Err(code) => return code,
        };
    let options = crate::playbook::PlaybookOptions {
        templates,
        playbooks: args.playbooks,
        inventory: args.inventory,
        extra_vars: args.extra_vars,
        verbosity: args.verbose,
        tags: args.tags,
        skip_tags: args.skip_tags,
        limit: args.limit,
        vault_password_files: args.vault_password_files,
        vault_ids: args.vault_ids,
        events_file: args.events_file,
        check: args.check,
        diff: args.diff,
        start_at_task: args.start_at_task,
        force_handlers: args.force_handlers,
        listings: crate::playbook::Listings {
            tasks: args.list_tasks,
            tags: args.list_tags,
            hosts: args.list_hosts,
        },
        forks: args.forks,
        connection: args.connection,
        cluster: None,
    };
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let code = runtime.block_on(crate::playbook::run(options));
            if let Some(migration) = migration {
                migration.finish();
            }
            ExitCode::from(code)
        }
        Err(err) => {
            eprintln!("enka: cannot start the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `enka template`: see [`crate::evaluate`].
pub(super) fn template(args: TemplateArgs) -> ExitCode {
    use crate::evaluate::{EvaluateError, EvaluateOptions, Source};
    let source = match (args.template, args.when, args.file) {
        (Some(text), _, _) => Source::Template(text),
        (_, Some(condition), _) => Source::Condition(condition),
        (_, _, Some(path)) => Source::File(path),
        // clap requires one of the three.
        (None, None, None) => return ExitCode::from(2),
    };
    let options = EvaluateOptions {
        source,
        custom_resource: args.cr,
        vars_files: args.vars_files,
        watches_file: args.watches_file,
        semantics: match crate::semantics::for_command(&args.semantics) {
            Ok((semantics, _)) => semantics,
            Err(code) => return code,
        },
    };
    match crate::evaluate::evaluate(&options) {
        Ok(evaluated) if args.output == "json" => {
            println!(
                "{}",
                serde_json::json!({"type": evaluated.type_name, "value": evaluated.value})
            );
            ExitCode::SUCCESS
        }
        Ok(evaluated) => {
            println!("{}: {}", evaluated.type_name, evaluated.value);
            ExitCode::SUCCESS
        }
        Err(err @ EvaluateError::Template(_)) => {
            eprintln!("enka template: {err}");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("enka template: {err}");
            ExitCode::from(2)
        }
    }
}
