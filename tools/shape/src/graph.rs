//! The crate graph, as Cargo has it and as docs/ARCHITECTURE.md draws it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value as Json;

/// Where the table starts in docs/ARCHITECTURE.md.
const MARKER: &str = "<!-- crate graph";

/// One crate of the table: its name and the crates it may use, in order.
struct Row {
    name: String,
    uses: BTreeSet<String>,
}

/// The problems found; empty when Cargo's graph is the documented one.
pub fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let doc = root.join("docs/ARCHITECTURE.md");
    let text =
        std::fs::read_to_string(&doc).with_context(|| format!("reading {}", doc.display()))?;
    let rows = documented(&text)?;
    let cargo = cargo_graph(root)?;
    let mut problems = Vec::new();
    let mut above: BTreeSet<&str> = BTreeSet::new();
    for row in &rows {
        for used in &row.uses {
            if !above.contains(used.as_str()) {
                problems.push(format!(
                    "docs/ARCHITECTURE.md: {} uses {used}, which is not listed above it",
                    row.name
                ));
            }
        }
        above.insert(&row.name);
        match cargo.get(&row.name) {
            None => problems.push(format!(
                "docs/ARCHITECTURE.md lists {}, which is not a workspace crate",
                row.name
            )),
            Some(deps) if *deps != row.uses => problems.push(format!(
                "{} depends on [{}] in Cargo.toml, docs/ARCHITECTURE.md says [{}]",
                row.name,
                join(deps),
                join(&row.uses)
            )),
            Some(_) => {}
        }
    }
    for name in cargo.keys() {
        if !rows.iter().any(|r| &r.name == name) {
            problems.push(format!(
                "{name} is a workspace crate missing from docs/ARCHITECTURE.md"
            ));
        }
    }
    Ok(problems)
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// The table after the marker: `| \`crate\` | \`uses\`, … | job |`.
fn documented(text: &str) -> anyhow::Result<Vec<Row>> {
    let Some(start) = text.find(MARKER) else {
        bail!("docs/ARCHITECTURE.md has no `{MARKER} …` marker before its crate table");
    };
    let mut rows = Vec::new();
    for line in text[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if rows.is_empty() {
                continue;
            }
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(name), Some(uses)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let names = backticked(name);
        let [name] = names.as_slice() else {
            continue; // the header and the rule under it
        };
        rows.push(Row {
            name: name.clone(),
            uses: backticked(uses).into_iter().collect(),
        });
    }
    if rows.is_empty() {
        bail!("docs/ARCHITECTURE.md's crate table is empty");
    }
    Ok(rows)
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Each workspace crate outside `tools/` with the workspace crates it
/// depends on (normal and build dependencies; dev-dependencies too, except
/// on the test-only crates in `tools/`).
fn cargo_graph(root: &Path) -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Json = serde_json::from_slice(&out.stdout).context("reading cargo metadata")?;
    let packages = meta["packages"]
        .as_array()
        .context("no packages in cargo metadata")?;
    let tools = root.canonicalize()?.join("tools");
    let is_tool = |p: &Json| {
        p["manifest_path"]
            .as_str()
            .is_some_and(|m| Path::new(m).starts_with(&tools))
    };
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let tool_names: BTreeSet<&str> = packages
        .iter()
        .filter(|p| is_tool(p))
        .filter_map(|p| p["name"].as_str())
        .collect();
    let mut graph = BTreeMap::new();
    for package in packages.iter().filter(|p| !is_tool(p)) {
        let name = package["name"].as_str().unwrap_or_default().to_owned();
        let mut deps = BTreeSet::new();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let dev = dep["kind"].as_str() == Some("dev");
            if !members.contains(dep_name) || (dev && tool_names.contains(dep_name)) {
                continue;
            }
            deps.insert(dep_name.to_owned());
        }
        graph.insert(name, deps);
    }
    Ok(graph)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_after_the_marker_is_read() {
        let text = "intro\n<!-- crate graph -->\n| crate | uses | job |\n|---|---|---|\n\
                    | `a` | | floor |\n| `b` | `a` | above |\n\nafter | `c` | `b` |\n";
        let rows = documented(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].name, "b");
        assert_eq!(rows[1].uses, BTreeSet::from(["a".to_owned()]));
    }

    #[test]
    fn no_marker_is_an_error() {
        assert!(documented("| `a` | | x |\n").is_err());
    }
}
