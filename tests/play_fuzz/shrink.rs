//! Makes a disagreeing playbook small: drops a host, a play keyword, a
//! task, puts a block's or an include's tasks in its place, drops a
//! keyword, the handlers or the play variables, for as long as the same
//! disagreement remains.

use crate::generate::{Playbook, Task};

/// The most playbooks one shrink may try: each costs a run of both.
const ATTEMPTS: usize = 80;

/// `playbook` made as small as it stays the disagreement `kind`.
pub fn shrink(
    playbook: &Playbook,
    kind: &str,
    mut judge: impl FnMut(&Playbook) -> Option<String>,
) -> Playbook {
    let mut best = playbook.clone();
    let mut attempts = 0;
    'smaller: loop {
        for candidate in smaller(&best) {
            if attempts >= ATTEMPTS {
                return best;
            }
            attempts += 1;
            if judge(&candidate).as_deref() == Some(kind) {
                best = candidate;
                continue 'smaller;
            }
        }
        return best;
    }
}

/// Every playbook one step smaller than `playbook`, biggest steps first.
fn smaller(playbook: &Playbook) -> Vec<Playbook> {
    let mut out = Vec::new();
    if playbook.hosts.len() > 1 {
        out.push(Playbook {
            hosts: playbook.hosts[..playbook.hosts.len() - 1].to_vec(),
            ..playbook.clone()
        });
    }
    for index in 0..playbook.keywords.len() {
        let mut keywords = playbook.keywords.clone();
        keywords.remove(index);
        out.push(Playbook {
            keywords,
            ..playbook.clone()
        });
    }
    if !playbook.handlers.is_empty() {
        out.push(Playbook {
            handlers: Vec::new(),
            ..playbook.clone()
        });
    }
    for tasks in smaller_lists(&playbook.tasks) {
        out.push(Playbook {
            tasks,
            ..playbook.clone()
        });
    }
    if !playbook.vars.is_empty() {
        for index in 0..playbook.vars.len() {
            let mut vars = playbook.vars.clone();
            vars.remove(index);
            out.push(Playbook {
                vars,
                ..playbook.clone()
            });
        }
    }
    out
}

/// Every list one step smaller than `tasks`: one task dropped, one task
/// replaced by its children, a keyword dropped, or the same inside one
/// task's children.
fn smaller_lists(tasks: &[Task]) -> Vec<Vec<Task>> {
    let mut out = Vec::new();
    for index in 0..tasks.len() {
        let mut fewer = tasks.to_vec();
        fewer.remove(index);
        out.push(fewer);
        let children: Vec<Task> = tasks[index]
            .children()
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if !children.is_empty() {
            let mut flat = tasks[..index].to_vec();
            flat.extend(children);
            flat.extend_from_slice(&tasks[index + 1..]);
            out.push(flat);
        }
    }
    for index in 0..tasks.len() {
        let keywords = match &tasks[index] {
            Task::Action { keywords, .. }
            | Task::Block { keywords, .. }
            | Task::Include { keywords, .. } => keywords.len(),
        };
        for keyword in 0..keywords {
            let mut fewer = tasks.to_vec();
            fewer[index].keywords_mut().remove(keyword);
            out.push(fewer);
        }
        let lists = tasks[index].children().len();
        for list in 0..lists {
            let inner = tasks[index].children()[list].clone();
            for smaller_inner in smaller_lists(&inner) {
                let mut changed = tasks.to_vec();
                *changed[index].children_mut()[list] = smaller_inner;
                out.push(changed);
            }
        }
    }
    out
}
