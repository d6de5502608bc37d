//! `watches.yaml`: which kinds to watch and what runs for them, with
//! upstream's fields, defaults and environment expansion.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use minijinja::Value;

use crate::role::{Diagnostic, Diagnostics, Location, RolePaths, Target};
use enka_template::convert::from_yaml;
use enka_yaml::{self as yaml, Node};

/// A group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}, Kind={}", self.version, self.kind)
        } else {
            write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
        }
    }
}

impl Gvk {
    /// `group/version` (or `version` for core).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// A label selector (`matchLabels`, `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    /// Exact label matches.
    pub match_labels: Vec<(String, String)>,
    /// Set-based requirements.
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    pub values: Vec<String>,
}

impl Selector {
    /// The selector in the API's string syntax, for list and watch calls.
    pub fn to_query(&self) -> String {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r.operator.as_str() {
                "In" => format!("{} in ({})", r.key, r.values.join(",")),
                "NotIn" => format!("{} notin ({})", r.key, r.values.join(",")),
                "Exists" => r.key.clone(),
                _ => format!("!{}", r.key),
            });
        }
        parts.join(",")
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// `finalizer:`.
#[derive(Debug, Clone)]
pub struct Finalizer {
    /// The finalizer name added to objects.
    pub name: String,
    /// Its own role or playbook; `None` runs the watch's target.
    pub target: Option<Target>,
    /// Vars added on finalizer runs.
    pub vars: Vec<(String, Value)>,
}

/// One entry of `watches.yaml`.
#[derive(Debug, Clone)]
pub struct Watch {
    /// What to watch.
    pub gvk: Gvk,
    /// The role or playbook that reconciles it.
    pub target: Target,
    /// `vars`.
    pub vars: Vec<(String, Value)>,
    /// `reconcilePeriod`; `None` (or zero) means the flag's value.
    pub reconcile_period: Option<Duration>,
    /// `manageStatus` (default true).
    pub manage_status: bool,
    /// `watchDependentResources` (default true).
    pub watch_dependent_resources: bool,
    /// `watchClusterScopedResources` (default false).
    pub watch_cluster_scoped_resources: bool,
    /// `finalizer`.
    pub finalizer: Option<Finalizer>,
    /// `blacklist`: dependent kinds never watched.
    pub blacklist: Vec<Gvk>,
    /// `selector`.
    pub selector: Selector,
    /// `snakeCaseParameters` (default true).
    pub snake_case_parameters: bool,
    /// `markUnsafe` (default false).
    pub mark_unsafe: bool,
    /// `watchAnnotationsChanges` (default false).
    pub watch_annotations_changes: bool,
    /// `maxRunnerArtifacts` (accepted; enka writes no artifacts).
    pub max_runner_artifacts: u32,
    /// enka extension: template strings that come from the custom resource,
    /// as upstream does (default false).
    pub template_custom_resource: bool,
    /// Where the entry is.
    pub location: Location,
}

const FIELDS: &[&str] = &[
    "group",
    "version",
    "kind",
    "role",
    "playbook",
    "vars",
    "reconcilePeriod",
    "manageStatus",
    "watchDependentResources",
    "watchClusterScopedResources",
    "finalizer",
    "blacklist",
    "selector",
    "snakeCaseParameters",
    "markUnsafe",
    "watchAnnotationsChanges",
    "maxRunnerArtifacts",
    "templateCustomResource",
];

/// Go's `os.Expand` with upstream's mapping: set variables are replaced,
/// unset ones become `${NAME}`.
pub fn expand_env(text: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut j = 0;
    let special =
        |c: u8| matches!(c, b'*' | b'#' | b'$' | b'@' | b'!' | b'?' | b'-') || c.is_ascii_digit();
    let alnum = |c: u8| c == b'_' || c.is_ascii_alphanumeric();
    while j < b.len() {
        if b[j] == b'$' && j + 1 < b.len() {
            out.push_str(&text[i..j]);
            let rest = &b[j + 1..];
            let (name, width): (&str, usize) = if rest[0] == b'{' {
                if rest.len() > 2 && special(rest[1]) && rest[2] == b'}' {
                    (&text[j + 2..j + 3], 3)
                } else {
                    match rest.iter().position(|&c| c == b'}') {
                        Some(1) => ("", 2),
                        Some(end) => (&text[j + 2..j + 1 + end], end + 1),
                        None => ("", 1),
                    }
                }
            } else if special(rest[0]) {
                (&text[j + 1..j + 2], 1)
            } else {
                let n = rest.iter().take_while(|&&c| alnum(c)).count();
                (&text[j + 1..j + 1 + n], n)
            };
            if name.is_empty() && width == 0 {
                out.push('$');
            } else if !name.is_empty() {
                match lookup(name) {
                    Some(value) => out.push_str(&value),
                    None => {
                        out.push_str("${");
                        out.push_str(name);
                        out.push('}');
                    }
                }
            }
            j += width;
            i = j + 1;
        }
        j += 1;
    }
    if i <= text.len() {
        out.push_str(&text[i.min(text.len())..]);
    }
    out
}

/// Go's `time.ParseDuration` (with units ns, us, ms, s, m, h; `0` alone).
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text == "0" {
        return Some(Duration::ZERO);
    }
    if text.starts_with('-') {
        return None;
    }
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.parse::<f64>().is_ok() {
        return None;
    }
    enka_template::time::parse_duration(text)
}

/// Loads and validates a watches file. Role and playbook targets are
/// returned unresolved; the project loader resolves them.
pub fn load(path: &Path) -> (Vec<Watch>, Diagnostics) {
    let mut diagnostics = Diagnostics::default();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            diagnostics.push(Diagnostic::error(
                Location::file(path),
                format!("cannot read the watches file: {err}"),
            ));
            return (Vec::new(), diagnostics);
        }
    };
    let expanded = expand_env(&text, |name| std::env::var(name).ok());
    parse(&expanded, path, &mut diagnostics)
}

/// Parses watches from text (after environment expansion).
pub fn parse(text: &str, path: &Path, diagnostics: &mut Diagnostics) -> (Vec<Watch>, Diagnostics) {
    let file: Arc<Path> = Arc::from(path);
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut own = Diagnostics::default();
    let node = match yaml::load_one(text) {
        Ok(Some(node)) => node,
        Ok(None) => {
            own.push(Diagnostic::error(
                Location::file(path),
                "the watches file is empty".to_owned(),
            ));
            diagnostics.extend(own.clone());
            return (Vec::new(), own);
        }
        Err(err) => {
            own.push(Diagnostic::error(
                Location::new(&file, err.pos),
                format!("YAML syntax error: {}", err.message),
            ));
            diagnostics.extend(own.clone());
            return (Vec::new(), own);
        }
    };
    let Some(entries) = node.as_seq() else {
        own.push(Diagnostic::error(
            Location::new(&file, node.pos),
            "the watches file must be a list of watches".to_owned(),
        ));
        diagnostics.extend(own.clone());
        return (Vec::new(), own);
    };
    let mut watches: Vec<Watch> = Vec::new();
    for entry in entries {
        if let Some(watch) = parse_watch(entry, &file, &base_dir, &mut own) {
            if let Some(previous) = watches.iter().find(|w| w.gvk == watch.gvk) {
                own.push(Diagnostic::error(
                    watch.location.clone(),
                    format!(
                        "duplicate GVK: {} (first at {})",
                        watch.gvk, previous.location
                    ),
                ));
                continue;
            }
            watches.push(watch);
        }
    }
    diagnostics.extend(own.clone());
    (watches, own)
}

/// The value of a field, matching the key case-insensitively as upstream's
/// JSON decoding does.
fn field<'a>(node: &'a Node, name: &str) -> Option<&'a Node> {
    node.as_map()?
        .iter()
        .rev()
        .find(|(k, _)| k.key_string().eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

fn string_field(
    node: &Node,
    name: &str,
    file: &Arc<Path>,
    diags: &mut Diagnostics,
) -> Option<String> {
    let value = field(node, name)?;
    match &value.value {
        yaml::Value::Str(s) => Some(s.clone()),
        yaml::Value::Null => None,
        _ => {
            diags.push(Diagnostic::error(
                Location::new(file, value.pos),
                format!("{name} must be a string, not a {}", value.type_name()),
            ));
            None
        }
    }
}

fn bool_field(
    node: &Node,
    name: &str,
    default: bool,
    file: &Arc<Path>,
    diags: &mut Diagnostics,
) -> bool {
    match field(node, name) {
        None => default,
        Some(v) => match v.value {
            yaml::Value::Bool(b) => b,
            yaml::Value::Null => default,
            _ => {
                diags.push(Diagnostic::error(
                    Location::new(file, v.pos),
                    format!("{name} must be a boolean, not a {}", v.type_name()),
                ));
                default
            }
        },
    }
}

fn vars_field(
    node: &Node,
    name: &str,
    file: &Arc<Path>,
    diags: &mut Diagnostics,
) -> Vec<(String, Value)> {
    match field(node, name) {
        None => Vec::new(),
        Some(v) => match v.as_map() {
            Some(entries) => entries
                .iter()
                .map(|(k, v)| (k.key_string(), from_yaml(v)))
                .collect(),
            None if matches!(v.value, yaml::Value::Null) => Vec::new(),
            None => {
                diags.push(Diagnostic::error(
                    Location::new(file, v.pos),
                    format!("{name} must be a mapping"),
                ));
                Vec::new()
            }
        },
    }
}

fn parse_target(
    node: &Node,
    what: &str,
    file: &Arc<Path>,
    base_dir: &Path,
    diags: &mut Diagnostics,
) -> Option<Target> {
    if let Some(playbook) = string_field(node, "playbook", file, diags) {
        let path = if Path::new(&playbook).is_absolute() {
            PathBuf::from(&playbook)
        } else {
            base_dir.join(&playbook)
        };
        if !path.is_file() {
            let pos = field(node, "playbook").map_or(node.pos, |n| n.pos);
            diags.push(Diagnostic::error(
                Location::new(file, pos),
                format!("{what}playbook {playbook} was not found"),
            ));
            return None;
        }
        return Some(Target::Playbook(enka_template::normalize_path(&path)));
    }
    string_field(node, "role", file, diags).map(Target::Role)
}

fn parse_watch(
    node: &Node,
    file: &Arc<Path>,
    base_dir: &Path,
    diags: &mut Diagnostics,
) -> Option<Watch> {
    let location = Location::new(file, node.pos);
    let Some(entries) = node.as_map() else {
        diags.push(Diagnostic::error(
            location,
            "each watch must be a mapping".to_owned(),
        ));
        return None;
    };
    for (k, _) in entries {
        let key = k.key_string();
        if !FIELDS.iter().any(|f| f.eq_ignore_ascii_case(&key)) {
            diags.push(Diagnostic::warning(
                Location::new(file, k.pos),
                format!("unknown key '{key}' in watch (ignored, as upstream does)"),
            ));
        }
    }
    let errors_before = diags.errors().count();
    let group = string_field(node, "group", file, diags).unwrap_or_default();
    let version = string_field(node, "version", file, diags).unwrap_or_default();
    let kind = string_field(node, "kind", file, diags).unwrap_or_default();
    if version.is_empty() {
        diags.push(Diagnostic::error(
            location.clone(),
            "version must not be empty".to_owned(),
        ));
    }
    if kind.is_empty() {
        diags.push(Diagnostic::error(
            location.clone(),
            "kind must not be empty".to_owned(),
        ));
    }
    let target = parse_target(node, "", file, base_dir, diags);
    if target.is_none() && field(node, "playbook").is_none() {
        diags.push(Diagnostic::error(
            location.clone(),
            "must specify Role or Playbook".to_owned(),
        ));
    }
    let reconcile_period = reconcile_period(node, file, diags);
    let finalizer =
        field(node, "finalizer").and_then(|f| parse_finalizer(f, file, base_dir, diags));
    let blacklist = blacklist(node, file, diags);
    let selector = field(node, "selector")
        .map(|s| parse_selector(s, file, diags))
        .unwrap_or_default();
    let max_runner_artifacts = match field(node, "maxRunnerArtifacts").map(|v| &v.value) {
        Some(yaml::Value::Int(n)) if *n > 0 => u32::try_from(*n).unwrap_or(20),
        _ => 20,
    };
    let watch = Watch {
        gvk: Gvk {
            group,
            version,
            kind,
        },
        target: target.clone().unwrap_or(Target::Role(String::new())),
        vars: vars_field(node, "vars", file, diags),
        reconcile_period,
        manage_status: bool_field(node, "manageStatus", true, file, diags),
        watch_dependent_resources: bool_field(node, "watchDependentResources", true, file, diags),
        watch_cluster_scoped_resources: bool_field(
            node,
            "watchClusterScopedResources",
            false,
            file,
            diags,
        ),
        finalizer,
        blacklist,
        selector,
        snake_case_parameters: bool_field(node, "snakeCaseParameters", true, file, diags),
        mark_unsafe: bool_field(node, "markUnsafe", false, file, diags),
        watch_annotations_changes: bool_field(node, "watchAnnotationsChanges", false, file, diags),
        max_runner_artifacts,
        template_custom_resource: bool_field(node, "templateCustomResource", false, file, diags),
        location,
    };
    (diags.errors().count() == errors_before && target.is_some()).then_some(watch)
}

/// `reconcilePeriod`: a Go duration; zero is none.
fn reconcile_period(node: &Node, file: &Arc<Path>, diags: &mut Diagnostics) -> Option<Duration> {
    match field(node, "reconcilePeriod") {
        None => None,
        Some(v) => match &v.value {
            yaml::Value::Str(s) => match parse_go_duration(s) {
                Some(d) if d.is_zero() => None,
                Some(d) => Some(d),
                None => {
                    diags.push(Diagnostic::error(
                        Location::new(file, v.pos),
                        format!("reconcilePeriod: invalid duration {s:?}"),
                    ));
                    None
                }
            },
            _ => {
                diags.push(Diagnostic::error(
                    Location::new(file, v.pos),
                    "reconcilePeriod must be a duration string such as \"30s\" or \"1m\""
                        .to_owned(),
                ));
                None
            }
        },
    }
}

/// `finalizer`: its name, and its own role or playbook and vars.
fn parse_finalizer(
    f: &Node,
    file: &Arc<Path>,
    base_dir: &Path,
    diags: &mut Diagnostics,
) -> Option<Finalizer> {
    let floc = Location::new(file, f.pos);
    let Some(name) = string_field(f, "name", file, diags).filter(|n| !n.is_empty()) else {
        diags.push(Diagnostic::error(
            floc,
            "finalizer must have name".to_owned(),
        ));
        return None;
    };
    let target = parse_target(f, "finalizer ", file, base_dir, diags);
    let vars = vars_field(f, "vars", file, diags);
    Some(Finalizer { name, target, vars })
}

/// `blacklist`: the kinds whose dependents are not watched.
fn blacklist(node: &Node, file: &Arc<Path>, diags: &mut Diagnostics) -> Vec<Gvk> {
    field(node, "blacklist")
        .and_then(Node::as_seq)
        .map(|items| {
            items
                .iter()
                .map(|item| Gvk {
                    group: string_field(item, "group", file, diags).unwrap_or_default(),
                    version: string_field(item, "version", file, diags).unwrap_or_default(),
                    kind: string_field(item, "kind", file, diags).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parse_selector(node: &Node, file: &Arc<Path>, diags: &mut Diagnostics) -> Selector {
    let mut selector = Selector::default();
    if let Some(labels) = field(node, "matchLabels").and_then(Node::as_map) {
        selector.match_labels = labels
            .iter()
            .map(|(k, v)| (k.key_string(), v.key_string()))
            .collect();
    }
    if let Some(exprs) = field(node, "matchExpressions").and_then(Node::as_seq) {
        for expr in exprs {
            let key = string_field(expr, "key", file, diags).unwrap_or_default();
            let operator = string_field(expr, "operator", file, diags).unwrap_or_default();
            let values: Vec<String> = field(expr, "values")
                .and_then(Node::as_seq)
                .map(|v| v.iter().map(Node::key_string).collect())
                .unwrap_or_default();
            let valid = match operator.as_str() {
                "In" | "NotIn" => !values.is_empty(),
                "Exists" | "DoesNotExist" => values.is_empty(),
                _ => false,
            };
            if key.is_empty() || !valid {
                diags.push(Diagnostic::error(
                    Location::new(file, expr.pos),
                    format!("invalid selector requirement: key {key:?}, operator {operator:?}, values {values:?}"),
                ));
                continue;
            }
            selector.match_expressions.push(Requirement {
                key,
                operator,
                values,
            });
        }
    }
    selector
}

/// The role search paths for a project whose watches file is `watches_file`.
pub fn role_paths(
    watches_file: &Path,
    roles_path: &[PathBuf],
    collections_path: &[PathBuf],
) -> RolePaths {
    let base_dir = watches_file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let base_dir = std::fs::canonicalize(&base_dir).unwrap_or(base_dir);
    let mut paths = RolePaths::from_env(&base_dir);
    paths.roles_path.splice(0..0, roles_path.iter().cloned());
    paths
        .collections_path
        .splice(0..0, collections_path.iter().cloned());
    paths
}

/// The targets (roles and playbooks) that the watches run.
pub fn targets(watches: &[Watch]) -> Vec<Target> {
    let mut targets = Vec::new();
    for watch in watches {
        let mut add = |t: &Target| {
            if !targets.contains(t) {
                targets.push(t.clone());
            }
        };
        add(&watch.target);
        if let Some(Some(t)) = watch.finalizer.as_ref().map(|f| f.target.as_ref()) {
            add(t);
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> (Vec<Watch>, Diagnostics) {
        let mut all = Diagnostics::default();
        parse(text, Path::new("/nowhere/watches.yaml"), &mut all)
    }

    #[test]
    fn env_expansion_like_os_expand() {
        let env = |name: &str| match name {
            "NS" => Some("prod".to_owned()),
            _ => None,
        };
        assert_eq!(
            expand_env("a $NS ${NS} $NOPE ${NOPE}", env),
            "a prod prod ${NOPE} ${NOPE}"
        );
        assert_eq!(expand_env("$$", env), "${$}");
        assert_eq!(expand_env("cost: 5$", env), "cost: 5$");
        assert_eq!(expand_env("x${}y", env), "xy");
        assert_eq!(expand_env("$ x", env), "$ x");
    }

    #[test]
    fn seed_watch_with_defaults() {
        let (watches, diags) = parse_text(
            "---\n- version: v1beta2\n  group: zundokokiyoshi.kaitoy.github.com\n  kind: Hikawa\n  role: hikawa\n  watchDependentResources: false\n  manageStatus: false\n",
        );
        assert!(!diags.has_errors(), "{diags:?}");
        let w = &watches[0];
        assert_eq!(
            w.gvk.api_version(),
            "zundokokiyoshi.kaitoy.github.com/v1beta2"
        );
        assert!(matches!(&w.target, Target::Role(r) if r == "hikawa"));
        assert!(!w.manage_status && !w.watch_dependent_resources);
        assert!(w.snake_case_parameters && !w.mark_unsafe && !w.watch_cluster_scoped_resources);
        assert_eq!(w.max_runner_artifacts, 20);
        assert_eq!(w.reconcile_period, None);
    }

    #[test]
    fn yaml_1_1_booleans_and_case_insensitive_keys() {
        let (watches, diags) = parse_text(
            "- version: v1\n  kind: Secret\n  role: r\n  MANAGESTATUS: no\n  watchDependentResources: off\n",
        );
        assert!(!diags.has_errors(), "{diags:?}");
        assert!(!watches[0].manage_status);
        assert!(!watches[0].watch_dependent_resources);
        assert_eq!(watches[0].gvk.group, "");
    }

    /// Upstream's structs carry no JSON tags, and Go's encoding/json (what
    /// sigs.k8s.io/yaml decodes through) matches every key, nested ones too,
    /// case-insensitively; of two keys that match, the later wins.
    #[test]
    fn nested_keys_match_as_gos_json_decoder_matches_them() {
        let (watches, diags) = parse_text(
            "- Version: v1\n  GROUP: g\n  Kind: K\n  Role: r\n  manageStatus: true\n  ManageStatus: false\n  Selector:\n    MATCHLABELS: {a: b}\n    MatchExpressions:\n    - {Key: c, OPERATOR: Exists}\n  Finalizer:\n    NAME: g/finalizer\n    Vars: {state: absent}\n  BlackList:\n  - {GROUP: apps, Version: v1, KIND: Deployment}\n",
        );
        assert!(!diags.has_errors(), "{diags:?}");
        assert!(diags.0.is_empty(), "no key is unknown: {diags:?}");
        let w = &watches[0];
        assert!(!w.manage_status);
        assert_eq!(w.selector.to_query(), "a=b,c");
        assert_eq!(w.finalizer.as_ref().unwrap().name, "g/finalizer");
        assert_eq!(w.finalizer.as_ref().unwrap().vars[0].0, "state");
        assert_eq!(
            (w.blacklist[0].group.as_str(), w.blacklist[0].kind.as_str()),
            ("apps", "Deployment")
        );
    }

    #[test]
    fn errors_and_warnings_name_their_line() {
        let (_, diags) = parse_text(
            "- version: v1\n  kind: A\n  role: r\n  maxWorkers: 3\n- version: v1\n  kind: A\n  role: r\n- kind: B\n  role: r\n- version: v1\n  kind: C\n- version: v1\n  kind: D\n  role: r\n  reconcilePeriod: 5\n",
        );
        let messages: Vec<String> = diags.0.iter().map(ToString::to_string).collect();
        let has = |needle: &str| messages.iter().any(|m| m.contains(needle));
        assert!(
            has("watches.yaml:4:3: warning: unknown key 'maxWorkers'"),
            "{messages:#?}"
        );
        assert!(
            has("watches.yaml:5:3: error: duplicate GVK: v1, Kind=A"),
            "{messages:#?}"
        );
        assert!(has("version must not be empty"), "{messages:#?}");
        assert!(has("must specify Role or Playbook"), "{messages:#?}");
        assert!(
            has("watches.yaml:15:20: error: reconcilePeriod must be a duration string"),
            "{messages:#?}"
        );
    }

    #[test]
    fn durations_selectors_finalizers_blacklists() {
        let (watches, diags) = parse_text(
            "- version: v1\n  group: g\n  kind: K\n  role: r\n  reconcilePeriod: 1m30s\n  selector:\n    matchLabels: {a: b}\n    matchExpressions:\n    - {key: c, operator: Exists}\n  finalizer:\n    name: g/finalizer\n    vars: {state: absent}\n  blacklist:\n  - {group: apps, version: v1, kind: Deployment}\n",
        );
        assert!(!diags.has_errors(), "{diags:?}");
        let w = &watches[0];
        assert_eq!(w.reconcile_period, Some(Duration::from_secs(90)));
        assert_eq!(w.selector.to_query(), "a=b,c");
        let f = w.finalizer.as_ref().unwrap();
        assert_eq!(f.name, "g/finalizer");
        assert!(f.target.is_none());
        assert_eq!(f.vars[0].0, "state");
        assert_eq!(w.blacklist[0].kind, "Deployment");
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("10"), None);
    }
}
