//! The exit watch: every live container's record is kept current, so that the list and
//! status calls answer from memory. A container's exit is picked up when its monitor writes
//! the exit record (an inotify watch on the record's directory), when the monitor ends (its
//! pidfd; one that died without a record leaves the container Unknown), and, for anything
//! missed, by a look at every live container each `RECONCILE`. Each pick-up sends the
//! lifecycle event to subscribers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::io::unix::AsyncFd;
use tokio::sync::broadcast;
use tokio::task::JoinSet;

use crate::model::ids::ContainerId;
use crate::model::sandbox::ProcessRef;
use crate::service::background::process_exit::exit_of;
use crate::service::owners::events::Event;
use crate::service::pod_service::PodService;

/// How often every live container is looked at, for an exit no notification brought.
const RECONCILE: Duration = Duration::from_secs(10);
/// The same without inotify (the records are then looked at this often).
const RECONCILE_WITHOUT_INOTIFY: Duration = Duration::from_secs(1);
/// The file whose arrival in a container's record directory is its exit.
const EXIT_FILE: &str = "exit.json";

/// An inotify instance as tokio registers it.
struct InotifyFd(Inotify);

impl std::os::fd::AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

/// The containers watched, and their inotify watches.
#[derive(Default)]
struct Watched {
    by_id: HashMap<ContainerId, Option<WatchDescriptor>>,
    by_watch: HashMap<WatchDescriptor, ContainerId>,
}

impl PodService {
    /// A subscription to lifecycle events.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Event> {
        self.registry.subscribe_events()
    }

    /// Keeps live containers' records current, for the daemon's life.
    pub(in crate::service) async fn watch_exits(self: Arc<Self>) {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
            .map_err(std::io::Error::from)
            // SAFETY: the AsyncFd owns the Inotify, whose descriptor stays open until it is dropped.
            .and_then(|i| {
                unsafe { AsyncFd::register_with_interest(InotifyFd(i), tokio::io::Interest::READABLE) }
                    .map_err(|e| e.into_parts().1)
            })
            .inspect_err(|e| tracing::warn!(error = %e, "no inotify: container exits are looked for every second"))
            .ok();
        let period = if inotify.is_some() { RECONCILE } else { RECONCILE_WITHOUT_INOTIFY };
        let mut reconcile = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        reconcile.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut watched = Watched::default();
        let mut monitors = JoinSet::new();
        loop {
            self.watch_new(inotify.as_ref().map(|fd| &fd.get_ref().0), &mut watched, &mut monitors);
            tokio::select! {
                () = self.exit_wake.wait() => {}
                Some(Ok(id)) = monitors.join_next() => {
                    self.registry.refresh(&id);
                }
                ready = async { inotify.as_ref()?.readable().await.ok() }, if inotify.is_some() => {
                    if let Some(mut guard) = ready {
                        if let Ok(Ok(events)) = guard.try_io(|fd| fd.get_ref().0.read_events().map_err(std::io::Error::from)) {
                            for event in events {
                                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                                    // Notifications were lost: look at every container.
                                    for id in watched.by_id.keys() {
                                        self.registry.refresh(id);
                                    }
                                    continue;
                                }
                                let Some(id) = watched.by_watch.get(&event.wd).cloned() else { continue };
                                if event.name.as_deref().is_some_and(|n| n == EXIT_FILE) {
                                    self.registry.refresh(&id);
                                }
                            }
                        }
                    }
                }
                _ = reconcile.tick() => {
                    for id in watched.by_id.keys() {
                        self.registry.refresh(id);
                    }
                }
            }
            self.forget_settled(inotify.as_ref().map(|fd| &fd.get_ref().0), &mut watched);
        }
    }

    /// Starts watching the live containers not watched yet: their record directory, their
    /// monitor; then looks once, for an exit recorded before the watch.
    fn watch_new(&self, inotify: Option<&Inotify>, watched: &mut Watched, monitors: &mut JoinSet<ContainerId>) {
        for (id, monitor) in self.live_monitors() {
            if watched.by_id.contains_key(&id) {
                continue;
            }
            let dir = self.registry.exit_file(&id).with_file_name("");
            let watch = inotify.and_then(|i| {
                i.add_watch(
                    &dir,
                    AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_ONLYDIR,
                )
                .inspect_err(|e| tracing::debug!(container = %id, error = %e, "no inotify watch on the record"))
                .ok()
            });
            if let Some(wd) = watch {
                watched.by_watch.insert(wd, id.clone());
            }
            watched.by_id.insert(id.clone(), watch);
            let watched_id = id.clone();
            monitors.spawn(async move {
                exit_of(monitor).await;
                watched_id
            });
            self.registry.refresh(&id);
        }
    }

    /// Stops watching containers that exited or were removed.
    fn forget_settled(&self, inotify: Option<&Inotify>, watched: &mut Watched) {
        let live: std::collections::HashSet<ContainerId> = self.live_monitors().into_iter().map(|(id, _)| id).collect();
        watched.by_id.retain(|id, watch| {
            if live.contains(id) {
                return true;
            }
            if let Some(wd) = watch.take() {
                watched.by_watch.remove(&wd);
                // Gone with its directory already when the container was removed.
                if let Some(inotify) = inotify {
                    let _ = inotify.rm_watch(wd);
                }
            }
            false
        });
    }

    /// Created and running containers with their monitors.
    fn live_monitors(&self) -> Vec<(ContainerId, ProcessRef)> {
        let state = self.registry.read();
        state
            .containers
            .values()
            .filter(|c| c.status.state.is_live())
            .filter_map(|c| Some((c.meta.id.clone(), c.status.monitor?)))
            .collect()
    }
}
