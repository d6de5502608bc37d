//! The memory budget of one render: what a template builds (strings,
//! lists, its output) may not hold more than [`Options::memory_budget`]
//! bytes at once, so that `('x' * 10**8) ~ …` or a doubling loop fails its
//! own task instead of the operator's pod.
//!
//! What a render holds is measured, not guessed: the binary's allocator
//! reports every allocation to [`count`], which keeps, per thread, the bytes
//! allocated minus the bytes freed. A render runs on one thread from start to end (no await
//! inside), so that count's growth since the render began is what the render
//! holds. The places where a template can grow a value faster than by its
//! own text (`*`, `~`, `+`, the output, filters that expand their input) ask
//! [`check`] first, with the size they are about to build: nothing past the
//! budget is ever allocated by them. Without an allocator that counts (a
//! library user's binary, these unit tests) the sizes about to be built are
//! still checked.
//!
//! [`Options::memory_budget`]: crate::Options::memory_budget

use std::cell::Cell;

use minijinja::Value;
use minijinja::value::ValueKind;

use crate::error::Cause;

/// The default budget of one reconcile: what it keeps and what each of its
/// renders holds, the largest output a render may produce
/// ([`crate::MAX_OUTPUT_BYTES`]). Measured on the catalogue
/// (tests/catalogue), whose hundred objects, hostile ones among them,
/// reconcile at once in a debug build: at 24 MiB enka peaked at 124 MiB, at
/// 32 MiB at 133, over the scaffold's 128 MiB manager limit
/// (config/manager/manager.yaml); this leaves room.
pub const DEFAULT_MEMORY_BUDGET: usize = crate::MAX_OUTPUT_BYTES;

thread_local! {
    /// Bytes this thread allocated minus the bytes it freed.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The render running on this thread: its count at the start, and its
    /// budget.
    static SCOPE: Cell<Option<(isize, usize)>> = const { Cell::new(None) };
}

/// Records that this thread allocated (`delta` > 0) or freed bytes: the
/// binary's global allocator calls it for every allocation.
pub fn count(delta: isize) {
    // `try_with`: an allocation may come while the thread's locals are torn
    // down; it is not counted then.
    let _ = LIVE.try_with(|live| live.set(live.get().wrapping_add(delta)));
}

/// The budget of the render running on this thread, until dropped.
pub(crate) struct Scope {
    outer: Option<(isize, usize)>,
}

/// Starts measuring a render with `budget` bytes; a render nested in another
/// (a variable templated lazily) counts against the outer one's.
pub(crate) fn enter(budget: usize) -> Scope {
    let outer = SCOPE.get();
    if outer.is_none() {
        SCOPE.set(Some((LIVE.get(), budget)));
    }
    Scope { outer }
}

impl Drop for Scope {
    fn drop(&mut self) {
        SCOPE.set(self.outer);
    }
}

/// What the current render holds now, in bytes (0 outside a render).
pub(crate) fn held() -> usize {
    SCOPE.get().map_or(0, |(start, _)| {
        LIVE.get().saturating_sub(start).max(0) as usize
    })
}

/// Fails when building `adding` more bytes would take the current render
/// past its budget; `what` names what was being built.
pub(crate) fn check(adding: usize, what: &str) -> Result<(), minijinja::Error> {
    let Some((_, budget)) = SCOPE.get() else {
        return Ok(());
    };
    let total = held().saturating_add(adding);
    if total <= budget {
        return Ok(());
    }
    Err(Cause::MemoryBudget.error(
        minijinja::ErrorKind::InvalidOperation,
        format!(
            "{what} would take the template's memory to {}, over the {} the reconcile has \
             left of its memory budget (the operator's --reconcile-memory-budget)",
            human(total),
            human(budget)
        ),
    ))
}

/// Bytes as a person reads them: `96.0 MiB`.
pub fn human(bytes: usize) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Bytes a list of `items` values takes (its items' own contents apart).
pub(crate) fn list_bytes(items: usize) -> usize {
    items.saturating_mul(std::mem::size_of::<Value>())
}

/// About how many bytes `value` takes, counted until past `cap` (a value
/// larger than the cap is only counted that far): its strings and one
/// value's size for each item and key.
pub fn size_of(value: &Value, cap: usize) -> usize {
    let mut total = 0usize;
    add_size(value, cap, &mut total);
    total
}

fn add_size(value: &Value, cap: usize, total: &mut usize) {
    *total = total.saturating_add(std::mem::size_of::<Value>());
    if *total > cap {
        return;
    }
    match value.kind() {
        ValueKind::String | ValueKind::Bytes => {
            *total = total.saturating_add(value.len().unwrap_or(0));
        }
        ValueKind::Seq | ValueKind::Iterable => {
            for item in value.try_iter().into_iter().flatten() {
                add_size(&item, cap, total);
                if *total > cap {
                    return;
                }
            }
        }
        ValueKind::Map => {
            for key in value.try_iter().into_iter().flatten() {
                add_size(&key, cap, total);
                if let Ok(item) = value.get_item(&key) {
                    add_size(&item, cap, total);
                }
                if *total > cap {
                    return;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_measures_what_its_thread_holds_and_nests() {
        let scope = enter(1024);
        let inner = enter(1 << 40);
        // The inner render keeps the outer budget.
        assert!(check(2048, "a string").is_err());
        drop(inner);
        assert!(check(512, "a string").is_ok());
        let err = check(4096, "a string of 4096 bytes").unwrap_err();
        assert!(
            err.to_string()
                .contains("a string of 4096 bytes would take")
        );
        drop(scope);
        assert!(check(1 << 40, "anything").is_ok(), "no render, no budget");
    }

    #[test]
    fn a_values_size_counts_its_text_and_stops_past_the_cap() {
        let text = Value::from("x".repeat(1000));
        let list = Value::from(vec![text.clone(); 10]);
        assert!(size_of(&list, usize::MAX) >= 10_000);
        assert!(size_of(&list, 2_000) < 4_000);
        let map = Value::from_iter([("k", text)]);
        assert!(size_of(&map, usize::MAX) >= 1_000);
    }
}
