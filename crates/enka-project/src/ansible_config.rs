//! The configuration file Ansible reads, found where Ansible looks for it
//! (`ANSIBLE_CONFIG`, the working directory's `ansible.cfg`,
//! `~/.ansible.cfg`, `/etc/ansible/ansible.cfg`; the first that exists):
//! enka reads it only to know whether a setting it does not implement is
//! in force, and then leaves that work to Ansible.

use std::path::{Path, PathBuf};

/// The text of the configuration file Ansible would read from `base_dir`,
/// its working directory, if there is one.
pub(crate) fn text(base_dir: &Path) -> Option<String> {
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
