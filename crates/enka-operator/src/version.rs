//! What `enka version` prints, with the fields of `ansible-operator version`.

/// The commit enka was built from (`ENKA_GIT_COMMIT` at build time, set by
/// the Makefile and the Dockerfile), else `unknown` as upstream prints.
pub const COMMIT: &str = match option_env!("ENKA_GIT_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// The Kubernetes API version enka's types are generated for (the
/// k8s-openapi feature in Cargo.toml).
pub const KUBERNETES_VERSION: &str = "v1.36";

/// The line `<name> version` prints: upstream's keys in upstream's order,
/// `go version` says there is none.
pub fn line(name: &str) -> String {
    format!(
        "{name} version: {:?}, commit: {COMMIT:?}, kubernetes version: {KUBERNETES_VERSION:?}, go version: {:?}, GOOS: {:?}, GOARCH: {:?}",
        concat!("v", env!("CARGO_PKG_VERSION")),
        "n/a (enka is written in Rust)",
        std::env::consts::OS,
        go_arch(std::env::consts::ARCH),
    )
}

/// Go's GOARCH spelling of Rust's architecture names.
fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_line_has_upstreams_keys_in_order() {
        let line = super::line("ansible-operator");
        let keys = [
            "ansible-operator version: \"v",
            ", commit: \"",
            ", kubernetes version: \"v1.36\"",
            ", go version: \"",
            ", GOOS: \"",
            ", GOARCH: \"",
        ];
        let mut at = 0;
        for key in keys {
            let found = line[at..]
                .find(key)
                .unwrap_or_else(|| panic!("{key} in {line}"));
            at += found + key.len();
        }
    }
}
