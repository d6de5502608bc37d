//! Roles: dependencies (each once per play and parameters), `vars`/`defaults`, handlers,
//! `end_role`.

use std::sync::Arc;

use enka_project::role::{Role, RoleFrom, Task, VarList};
use enka_template::Var;
use minijinja::Value;

use super::handlers::handler_list;
use super::{BoxFlow, Flow, Frame, Handlers, Runner};
use crate::scope;

impl Runner {
    /// A role as a play's `roles` or a role's dependencies list it: under
    /// its conditions, with its parameters.
    pub(super) fn run_role_ref<'a>(
        &'a mut self,
        mut frame: Frame,
        role_ref: &'a enka_project::role::RoleRef,
    ) -> BoxFlow<'a> {
        if !role_ref.when.is_empty() {
            frame.inherited.when.push(super::InheritedWhen {
                conditions: role_ref.when.clone(),
                written: None,
            });
        }
        frame.inherited.tags.extend(role_ref.tags.iter().cloned());
        self.run_role(
            frame,
            role_ref.role.clone(),
            RoleFrom::default(),
            role_ref.params.clone(),
            None,
        )
    }

    /// Runs a role's tasks with its defaults and vars in scope.
    pub(super) fn run_role<'a>(
        &'a mut self,
        mut frame: Frame,
        role: Arc<Role>,
        from: RoleFrom,
        params: VarList,
        location: Option<&'a Task>,
    ) -> BoxFlow<'a> {
        Box::pin(async move {
            // A role's parameters are visible to its dependencies too (the
            // dependency chain's params, Role.get_role_params).
            frame.scope.params = scope::push(&frame.scope.params, &params);
            // meta/main.yml dependencies first, each once per run (with the
            // same parameters), as Ansible runs them once per play.
            let role_at = frame.position.clone();
            let flow = self.run_dependencies(&frame, &role, &role_at).await;
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
            let Some(tasks) = role.tasks(&from.tasks).cloned() else {
                return match location {
                    Some(task) => Flow::Failed(self.failure(
                        task,
                        format!("role {} has no tasks/{}.yml", role.name, from.tasks),
                        Value::UNDEFINED,
                    )),
                    None => Flow::Continue,
                };
            };
            let defaults = role.defaults(&from.defaults);
            let vars = role.vars(&from.vars);
            self.warn_if_reserved(
                params
                    .iter()
                    .chain(defaults.iter())
                    .chain(vars.iter())
                    .map(|(name, _)| &**name),
            );
            frame.scope.defaults = scope::push(&frame.scope.defaults, &defaults);
            // Role.get_vars: the parents' vars, then every dependency's
            // (theirs before their own), then the role's.
            push_dependency_vars(&mut frame.scope.role_vars, &role);
            frame.scope.role_vars = scope::push(&frame.scope.role_vars, &vars);
            frame.scope.builtins = role_builtins(&frame, &role, location.is_some());
            frame.search_path = Arc::from(vec![role.path.clone(), self.project.base_dir.clone()]);
            if !role.handlers.is_empty()
                && !self
                    .handlers
                    .iter()
                    .any(|h| h.role.as_ref().is_some_and(|(_, p)| *p == role.path))
            {
                self.handlers.push(Handlers {
                    tasks: handler_list(&role.handlers),
                    frame: frame.clone(),
                    role: Some((role.name.clone(), role.path.clone())),
                });
            }
            frame.role = Some(role);
            frame.position = self.at(&role_at, 1);
            match self.run_tasks(frame, tasks).await {
                Flow::EndRole => Flow::Continue,
                flow => flow,
            }
        })
    }

    /// Whether a role entry (a play's, a dependency's) runs: a role runs
    /// once per play with the same parameters (Role.has_run) unless its
    /// meta allows duplicates. Notes the run.
    pub(super) fn runs_again(&mut self, role_ref: &enka_project::role::RoleRef) -> bool {
        let key = (role_ref.role.path.clone(), role_ref.params.clone());
        let seen = self
            .dependencies_run
            .iter()
            .any(|(path, params)| *path == key.0 && same_vars(params, &key.1));
        if !seen {
            self.dependencies_run.push(key);
        }
        !seen || role_ref.role.allow_duplicates
    }

    /// A role's `meta/main.yml` dependencies, each once per run with the
    /// same parameters (as Ansible runs them once per play), unless the
    /// dependency allows duplicates.
    async fn run_dependencies(
        &mut self,
        frame: &Frame,
        role: &Arc<Role>,
        role_at: &Arc<[u32]>,
    ) -> Flow {
        for (index, dependency) in role.dependencies.iter().enumerate() {
            if !self.runs_again(dependency) {
                continue;
            }
            let mut dep_frame = frame.clone();
            dep_frame.position = self.at(&self.at(role_at, 0), index);
            dep_frame.depth += 1;
            if dep_frame.depth > self.options.max_include_depth {
                break;
            }
            let flow = self.run_role_ref(dep_frame, dependency).await;
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
        }
        Flow::Continue
    }
}

/// Whether two parameter lists name the same variables with the same raw
/// values.
/// Pushes the `vars/main.yml` of `role`'s dependencies, as
/// `Role.get_all_dependencies` orders them (each one's own dependencies
/// first).
pub(super) fn push_dependency_vars(role_vars: &mut Option<Arc<scope::Frame>>, role: &Role) {
    for dependency in &role.dependencies {
        push_dependency_vars(role_vars, &dependency.role);
        *role_vars = scope::push(role_vars, &dependency.role.vars("main"));
    }
}

pub(super) fn same_vars(a: &VarList, b: &VarList) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && va.value == vb.value)
}

/// A role after its dependencies, theirs first, depth first (the order
/// Ansible combines their variables in); a role met twice counts once.
pub(super) fn with_dependencies(role: &Arc<Role>, out: &mut Vec<Arc<Role>>) {
    fn visit(role: &Arc<Role>, out: &mut Vec<Arc<Role>>, path: &mut Vec<std::path::PathBuf>) {
        // `path` guards against a dependency cycle.
        if out.iter().any(|seen| seen.path == role.path) || path.contains(&role.path) {
            return;
        }
        path.push(role.path.clone());
        for dependency in &role.dependencies {
            visit(&dependency.role, out, path);
        }
        path.pop();
        out.push(role.clone());
    }
    visit(role, out, &mut Vec::new());
}

/// The builtins a role's tasks see: `role_path`, `role_name`, and for a
/// role included or imported by another role the roles above it, nearest
/// first (`ansible_parent_role_names`/`_paths`).
fn role_builtins(frame: &Frame, role: &Role, included: bool) -> Arc<[(Arc<str>, Var)]> {
    let mut builtins: Vec<(Arc<str>, Var)> = frame.scope.builtins.iter().cloned().collect();
    // A role included or imported by another role sees the roles
    // above it, nearest first (`ansible_parent_role_names`/`_paths`).
    let parents = match (included, &frame.role) {
        (true, Some(parent)) => {
            let inherited = |key: &str| -> Vec<Value> {
                builtins
                    .iter()
                    .find(|(k, _)| &**k == key)
                    .and_then(|(_, v)| v.value.try_iter().ok())
                    .map(Iterator::collect)
                    .unwrap_or_default()
            };
            let mut names = vec![Value::from(parent.name.as_str())];
            names.extend(inherited("ansible_parent_role_names"));
            let mut paths = vec![Value::from(parent.path.to_string_lossy().as_ref())];
            paths.extend(inherited("ansible_parent_role_paths"));
            Some((names, paths))
        }
        _ => None,
    };
    builtins.retain(|(k, _)| {
        !matches!(
            &**k,
            "role_path"
                | "role_name"
                | "ansible_role_name"
                | "ansible_collection_name"
                | "ansible_parent_role_names"
                | "ansible_parent_role_paths"
        )
    });
    if let Some((names, paths)) = parents {
        builtins.push((
            Arc::from("ansible_parent_role_names"),
            Var::plain(Value::from(names)),
        ));
        builtins.push((
            Arc::from("ansible_parent_role_paths"),
            Var::plain(Value::from(paths)),
        ));
    }
    builtins.push((
        Arc::from("role_path"),
        Var::plain(Value::from(role.path.to_string_lossy().as_ref())),
    ));
    builtins.push((
        Arc::from("role_name"),
        Var::plain(Value::from(role.name.as_str())),
    ));
    // Role.get_name(): the collection's name before the role's, when the
    // role is a collection's (`namespace.collection.role`).
    let collection = role
        .name
        .rsplit_once('.')
        .map(|(collection, _)| collection)
        .filter(|collection| collection.contains('.'));
    builtins.push((
        Arc::from("ansible_role_name"),
        Var::plain(Value::from(role.name.as_str())),
    ));
    builtins.push((
        Arc::from("ansible_collection_name"),
        Var::plain(collection.map_or(Value::from(()), Value::from)),
    ));
    builtins.into()
}
