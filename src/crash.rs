//! Crash points for `hack/churn.sh`: in a build with the `crash-points` feature, the daemon
//! kills itself with SIGKILL when it reaches the point named by `SWAPCRI_CRASH_AT`, so a
//! crash can be placed in the middle of a request rather than left to luck. In any other
//! build `point` does nothing.

/// The points a request passes, in the order it passes them.
pub const POINTS: &[&str] = &[
    "sandbox-after-namespaces",
    "sandbox-after-network",
    "container-after-runtime-create",
    "container-remove-after-runtime-delete",
    "sandbox-stop-after-containers",
    "pull-after-layers",
    "image-remove-after-index",
];

#[inline]
pub fn point(name: &'static str) {
    debug_assert!(POINTS.contains(&name), "unknown crash point {name}");
    #[cfg(feature = "crash-points")]
    if std::env::var("SWAPCRI_CRASH_AT").is_ok_and(|at| at == name) {
        eprintln!("swapcri: crash point {name}: SIGKILL");
        let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
    }
}
