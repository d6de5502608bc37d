//! `--tags` and `--skip-tags`: which tasks a run selects, by Ansible's rules
//! (`Taggable.evaluate_tags`). With no selection every task runs but those
//! tagged `never`, as ansible-runner runs upstream's operators.

use minijinja::Value;
use minijinja::value::ValueKind;

use enka_template::{Context, Templar};

/// The tags a run selects and skips.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSelection {
    only: Vec<String>,
    skip: Vec<String>,
}

impl Default for TagSelection {
    fn default() -> Self {
        TagSelection {
            only: vec!["all".to_owned()],
            skip: Vec::new(),
        }
    }
}

/// Tags as Taggable.evaluate_tags has them: each templated with `ctx`
/// when it is a template, lists flattened, strings split at commas; one
/// that does not template stays as written.
pub fn evaluate<'a>(
    templar: &Templar,
    ctx: &Context,
    written: impl Iterator<Item = &'a String>,
) -> Vec<String> {
    let mut tags = Vec::new();
    for tag in written {
        if !enka_template::is_possibly_template(tag) {
            tags.push(tag.clone());
            continue;
        }
        match templar.template_value(&Value::from(tag.as_str()), ctx) {
            Ok(value) if value.kind() == ValueKind::Seq => {
                for item in value.try_iter().into_iter().flatten() {
                    tags.push(enka_template::pyrepr::to_text(&item));
                }
            }
            Ok(value) => tags.extend(
                enka_template::pyrepr::to_text(&value)
                    .split(',')
                    .map(|t| t.trim().to_owned()),
            ),
            Err(_) => tags.push(tag.clone()),
        }
    }
    tags
}

impl TagSelection {
    /// From `--tags` and `--skip-tags` values (each may be a comma list);
    /// no `--tags` means `all`.
    pub fn new(tags: &[String], skip_tags: &[String]) -> Self {
        let split = |values: &[String]| -> Vec<String> {
            values
                .iter()
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let mut only = split(tags);
        if only.is_empty() {
            only.push("all".to_owned());
        }
        TagSelection {
            only,
            skip: split(skip_tags),
        }
    }

    /// The tags selected (`ansible_run_tags`): `all` when none were given.
    pub fn run_tags(&self) -> &[String] {
        &self.only
    }

    /// The tags skipped (`ansible_skip_tags`).
    pub fn skip_tags(&self) -> &[String] {
        &self.skip
    }

    /// Whether a task whose tags (its own and those it inherits) are `tags`
    /// runs.
    pub fn selects<'a>(&self, tags: impl Iterator<Item = &'a str> + Clone) -> bool {
        let untagged = tags.clone().next().is_none();
        let has = |tag: &str| {
            if untagged {
                tag == "untagged"
            } else {
                tags.clone().any(|t| t == tag)
            }
        };
        let meets = |wanted: &[String]| wanted.iter().any(|w| has(w));
        let only = |tag: &str| self.only.iter().any(|t| t == tag);
        let skip = |tag: &str| self.skip.iter().any(|t| t == tag);
        let mut runs = has("always")
            || (only("all") && !has("never"))
            || meets(&self.only)
            || (only("tagged") && !untagged && !has("never"));
        if runs && !self.skip.is_empty() {
            if skip("all") {
                if !has("always") || skip("always") {
                    runs = false;
                }
            } else if meets(&self.skip) || (skip("tagged") && !untagged) {
                runs = false;
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(selection: &TagSelection, tags: &[&str]) -> bool {
        selection.selects(tags.iter().copied())
    }

    #[test]
    fn by_default_everything_runs_but_never() {
        let all = TagSelection::default();
        assert!(runs(&all, &[]));
        assert!(runs(&all, &["web"]));
        assert!(!runs(&all, &["never"]));
        assert!(!runs(&all, &["never", "debug"]));
        assert!(runs(&all, &["always"]));
    }

    #[test]
    fn tags_select_and_skip_as_ansible() {
        let web = TagSelection::new(&["web,db".to_owned()], &[]);
        assert!(runs(&web, &["db"]));
        assert!(!runs(&web, &[]));
        assert!(runs(&web, &["always"]));
        assert!(runs(&web, &["never", "web"]));
        let tagged = TagSelection::new(&["tagged".to_owned()], &[]);
        assert!(runs(&tagged, &["x"]));
        assert!(!runs(&tagged, &[]));
        let untagged = TagSelection::new(&["untagged".to_owned()], &[]);
        assert!(runs(&untagged, &[]));
        assert!(!runs(&untagged, &["x"]));
        let skip = TagSelection::new(&[], &["web".to_owned()]);
        assert!(!runs(&skip, &["web"]));
        assert!(runs(&skip, &[]));
        let skip_all = TagSelection::new(&[], &["all".to_owned()]);
        assert!(!runs(&skip_all, &[]));
        assert!(runs(&skip_all, &["always"]));
        let skip_always = TagSelection::new(&[], &["always".to_owned()]);
        assert!(!runs(&skip_always, &["always"]));
    }
}
