use std::process::ExitCode;

use std::alloc::{GlobalAlloc, Layout};

use clap::Parser;
use enka::cli::Cli;
use enka::template::budget;

// Reconciles allocate many small, short-lived values (template values, JSON
// from the API); mimalloc cuts the engine's time per reconcile by about a
// quarter against glibc's allocator (see benches/engine.rs). Built without
// transparent huge pages: they made an idle enka resident in 2 MiB steps
// (9 MiB of heap instead of under 2).
//
// Every allocation is also counted per thread, so a render can tell what it
// holds and stop at its memory budget (enka-template's `budget`).
#[global_allocator]
static ALLOCATOR: Counting = Counting(mimalloc::MiMalloc);

/// mimalloc, reporting what each thread allocates and frees.
struct Counting(mimalloc::MiMalloc);

// SAFETY: every call goes to mimalloc unchanged; the count is a
// const-initialised thread local without a destructor, which never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { self.0.alloc(layout) };
        if !ptr.is_null() {
            budget::count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { self.0.alloc_zeroed(layout) };
        if !ptr.is_null() {
            budget::count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.dealloc(ptr, layout) };
        budget::count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            budget::count(new_size as isize - layout.size() as isize);
        }
        moved
    }
}

/// How long freed pages stay resident before mimalloc returns them to the
/// system. mimalloc 3 waits a second, and only purges when the thread that
/// freed them allocates again: a tokio worker that parks after a burst of
/// reconciles never does, so an idle operator kept its burst's peak (the
/// sharded load bench: replicas holding about a third of the objects each
/// peaked at 40-42 MiB, as one holding all did; 27-29 MiB with 10 ms).
/// mimalloc 2's 10 ms cost nothing measurable in benches/engine.rs.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (the same in
/// mimalloc 2 and 3, which keep retired options' numbers); libmimalloc-sys
/// 0.1.49 names only the options before it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    // SAFETY: sets one of mimalloc's options, which it reads atomically; a
    // MIMALLOC_PURGE_DELAY in the environment still wins (set_default).
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
    enka::template::quiet_render_panics();
    Cli::parse().run()
}

#[cfg(test)]
mod tests {
    use super::MI_OPTION_PURGE_DELAY;

    /// The option number is written by hand: it must still name
    /// `purge_delay`, whose default in the bundled mimalloc 3 is 1000 ms (no
    /// option next to it defaults to that), or the binary would set some
    /// other option.
    #[test]
    fn the_option_number_names_purge_delay() {
        // SAFETY: reads one of mimalloc's options.
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(default, 1000);
        }
    }
}
