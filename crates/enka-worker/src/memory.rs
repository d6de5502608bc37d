//! How much memory each worker process may hold: `--ansible-worker-memory-limit`.
//!
//! Inside a container the operator's pod has a memory limit, and a worker
//! that passes it gets the whole pod killed. By default (`auto`) the workers
//! share three quarters of that limit (enka keeps the rest), each its part
//! of it; outside a container each may hold 1 GiB.

/// What `auto` gives each worker when no container limit is found.
const UNCONTAINED: u64 = 1 << 30;

/// The least `auto` gives a worker: a worker holds some 35 MiB of data
/// before its first task.
const FLOOR: u64 = 96 << 20;

/// The limit `setting` names for each of `size` workers: `auto`, a
/// Kubernetes quantity (`256Mi`, `1G`, bytes), or `0` for none.
pub fn limit_for(setting: &str, size: usize) -> Result<Option<u64>, String> {
    let setting = setting.trim();
    if setting == "auto" {
        let per_worker = container_limit()
            .map(|limit| (limit / 4 * 3) / size.max(1) as u64)
            .map_or(UNCONTAINED, |share| share.max(FLOOR));
        return Ok(Some(per_worker));
    }
    let bytes = quantity(setting).ok_or_else(|| {
        format!("{setting:?} is not a memory quantity (auto, 0, or a quantity such as 256Mi)")
    })?;
    Ok((bytes > 0).then_some(bytes))
}

/// A Kubernetes memory quantity in bytes: binary (Ki, Mi, Gi, Ti) or
/// decimal (k, M, G, T) suffixes, or none.
pub fn quantity(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit: u64 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// The memory limit of the cgroup this process is in (v2's `memory.max`,
/// else v1's `memory.limit_in_bytes`), when it has one.
fn container_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .and_then(|text| text.trim().parse::<u64>().ok())
    // v1 says "no limit" with a number near the largest page-aligned i64.
    .filter(|limit| *limit < 1 << 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_refusals() {
        assert_eq!(limit_for("256Mi", 2), Ok(Some(256 << 20)));
        assert_eq!(limit_for("1G", 1), Ok(Some(1_000_000_000)));
        assert_eq!(limit_for("4096", 1), Ok(Some(4096)));
        assert_eq!(limit_for("0", 1), Ok(None));
        assert!(limit_for("lots", 1).is_err());
        assert!(limit_for("12Qi", 1).is_err());
        let auto = limit_for("auto", 2).unwrap().unwrap();
        assert!(auto >= FLOOR, "{auto}");
    }
}
