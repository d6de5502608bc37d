//! The configuration file Ansible reads, found where Ansible looks for it
//! (`ANSIBLE_CONFIG`, the working directory's `ansible.cfg`,
//! `~/.ansible.cfg`, `/etc/ansible/ansible.cfg`; the first that exists):
//! enka reads it only to know whether a setting it does not implement is
//! in force, and then leaves that work to Ansible.

use std::path::{Path, PathBuf};

/// The text of the configuration file Ansible would read from `base_dir`,
/// its working directory, if there is one.
pub fn text(base_dir: &Path) -> Option<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let candidates = [
        std::env::var_os("ANSIBLE_CONFIG").map(|c| base_dir.join(c)),
        Some(base_dir.join("ansible.cfg")),
        home.map(|h| h.join(".ansible.cfg")),
        Some(PathBuf::from("/etc/ansible/ansible.cfg")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
        .and_then(|path| std::fs::read_to_string(path).ok())
}

/// A setting's value as Ansible reads it: its environment variable, else
/// `key = value` in the configuration file (in any section: the keys enka
/// asks for are each in one).
pub fn setting(base_dir: &Path, variable: &str, key: &str) -> Option<String> {
    if let Some(value) = std::env::var_os(variable) {
        return Some(value.to_string_lossy().into_owned());
    }
    text(base_dir)?.lines().find_map(|line| {
        let (name, value) = line.split_once(['=', ':'])?;
        (name.trim() == key).then(|| value.trim().to_owned())
    })
}

/// A boolean setting, read as Ansible's `boolean()` reads its text, with
/// its default when unset.
pub fn flag(base_dir: &Path, variable: &str, key: &str, default: bool) -> bool {
    setting(base_dir, variable, key).map_or(default, |value| {
        matches!(
            value.to_ascii_lowercase().as_str(),
            "y" | "yes" | "on" | "1" | "true" | "t" | "1.0"
        )
    })
}
