//! Blocking work (file writes with fsync, directory removal, bundles, record scans) runs off
//! the async workers, so a slow disk delays the call that writes, never every other call.
//!
//! `run` moves a borrowed piece of work off the worker in place (`block_in_place`), `spawn`
//! hands an owned one to the blocking pool, `fan_out` spreads a list's blocking reads over
//! a few threads. Each marks the thread while the work runs, and the blocking primitives
//! call `check`: in debug builds (every test run) blocking work found on
//! an async thread without the mark panics, naming what it was. Nothing else in the crate
//! calls `spawn_blocking` or `block_in_place` (a test below reads the sources; clippy's
//! `disallowed-methods` says the same), so the mark is the whole story.

use std::cell::Cell;

use tokio::runtime::{Handle, RuntimeFlavor};

thread_local! {
    static OFF_ASYNC: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as running blocking work until dropped (nesting keeps the outer mark).
struct Mark(bool);

impl Mark {
    fn set() -> Mark {
        Mark(OFF_ASYNC.with(|m| m.replace(true)))
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        OFF_ASYNC.with(|m| m.set(self.0));
    }
}

/// Runs `f`, which blocks, without holding up an async worker: on the multi-thread runtime
/// the worker hands its other tasks to a new thread first. A current-thread runtime (tests)
/// has no other worker to hand them to, so there it runs in place.
#[allow(clippy::disallowed_methods)]
pub fn run<T>(f: impl FnOnce() -> T) -> T {
    let multi_thread = Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    let marked = || {
        let _mark = Mark::set();
        f()
    };
    if multi_thread && !OFF_ASYNC.with(Cell::get) {
        tokio::task::block_in_place(marked)
    } else {
        marked()
    }
}

/// Starts owned blocking work on the blocking pool; the handle awaits its result.
#[allow(clippy::disallowed_methods)]
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> tokio::task::JoinHandle<T> {
    tokio::task::spawn_blocking(move || {
        let _mark = Mark::set();
        f()
    })
}

/// Items each thread of [`fan_out`] takes at the least: below that a thread's start costs
/// more than it saves.
const FAN_OUT_MIN_ITEMS: usize = 8;

/// Maps `items` through `f` (blocking reads: a listing's cgroup and /proc files), spread
/// over as many threads as the node gives this process (at most 4), in order. Called from
/// blocking work; a short list stays on the calling thread.
pub fn fan_out<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let threads = cores.min(items.len() / FAN_OUT_MIN_ITEMS).max(1);
    if threads == 1 {
        return items.into_iter().map(f).collect();
    }
    let per_thread = items.len().div_ceil(threads);
    let mut items = items.into_iter();
    let chunks: Vec<Vec<T>> = (0..threads).map(|_| items.by_ref().take(per_thread).collect()).collect();
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    let _mark = Mark::set();
                    chunk.into_iter().map(f).collect::<Vec<R>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|part| part.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

/// Whether blocking work may run on this thread: outside any async runtime (helper
/// processes, the command-line tools), or inside `run` or `spawn`.
pub fn allowed() -> bool {
    OFF_ASYNC.with(Cell::get) || Handle::try_current().is_err()
}

/// Called by the blocking primitives: in debug builds, blocking work on an async worker
/// panics with what it was, so a test that reaches it fails.
#[track_caller]
pub fn check(what: &str) {
    if cfg!(debug_assertions) && !allowed() {
        panic!("blocking work on an async worker: {what} (wrap it in crate::blocking::run or spawn)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_outside_any_runtime() {
        check("a write with no runtime");
    }

    #[tokio::test]
    async fn refused_on_a_worker_and_allowed_inside_run_and_spawn() {
        assert!(!allowed());
        let caught = std::panic::catch_unwind(|| check("a bare write"));
        assert_eq!(caught.is_err(), cfg!(debug_assertions), "debug builds notice blocking work on the worker");
        run(|| check("a write in run"));
        spawn(|| check("a write in spawn")).await.unwrap();
        assert!(!allowed(), "the mark ends with the work");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn run_nests_and_frees_the_worker() {
        let inner = run(|| {
            check("outer");
            run(|| {
                check("inner");
                7
            })
        });
        assert_eq!(inner, 7);
        assert!(!allowed());
        // While one task blocks in `run`, another still makes progress.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = tokio::spawn(async move { tx.send(()).unwrap() });
        run(|| rx.recv_timeout(std::time::Duration::from_secs(5)).expect("the other task never ran"));
        other.await.unwrap();
    }

    #[test]
    fn fan_out_keeps_the_order_and_every_item() {
        for len in [0, 1, 7, 8, 17, 110, 1000] {
            let items: Vec<usize> = (0..len).collect();
            let doubled = fan_out(items, |n| {
                check("a read on a fan-out thread");
                n * 2
            });
            assert_eq!(doubled, (0..len).map(|n| n * 2).collect::<Vec<_>>(), "{len} items");
        }
    }

    /// Work handed off any other way would run unmarked and trip `check`.
    #[test]
    fn only_this_module_hands_work_off() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![src.clone()];
        let mut offenders = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") && path != src.join("blocking.rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if ["spawn_blocking(", "block_in_place("].iter().any(|call| text.contains(call)) {
                        offenders.push(path.display().to_string());
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "use crate::blocking::{{run, spawn}} in {offenders:?}");
    }
}
