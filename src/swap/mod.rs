//! The swap supervisor: keeps a node that runs with swap from freezing. Thrash detection
//! (thrash.rs) watches every running container's memory stalls and swap-ins; the guard
//! (guard.rs) throttles a thrasher, puts back what it changed once the thrash is over and,
//! set to `kill`, ends the one the throttle did not calm; the offload (offload.rs) moves
//! cold memory of calm Burstable containers into swap ahead of need. Their decisions are
//! pure (policy::thrash, policy::guard, policy::offload); this module keeps their state,
//! pacing and counters (board.rs), reads and writes cgroup files through `cgroup::control`,
//! keeps the guard's records beside the container's (store), and reaches pods only through
//! `Pods`, which the pod service implements.

mod board;
pub(crate) mod guard;
mod knob;
mod offload;
mod pod_throttle;
mod pods;
mod supervisor;
#[cfg(test)]
mod tests;
mod thrash;

use std::sync::Arc;

pub use board::{GuardReport, ThrashReport};
pub use guard::{verdict, REASON};
pub use pods::{ContainerFacts, Pods};
pub use supervisor::Supervisor;

/// Starts thrash detection (with the guard) and the offload, for the daemon's life; each
/// returns at once where its settings or the node leave it off.
pub fn start(supervisor: &Arc<Supervisor>, pods: Arc<dyn Pods>) {
    tokio::spawn(thrash::watch(supervisor.clone(), pods.clone()));
    tokio::spawn(offload::run(supervisor.clone(), pods));
}
