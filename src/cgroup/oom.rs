//! OOM kills of one container's memory cgroup, counted while the container runs.
//!
//! Reading `oom_kill` once the container's process has been reaped is not enough: under the
//! systemd cgroup driver the container's cgroup is a scope, and systemd removes it as soon
//! as its last process is gone, often before the process's parent has even been told of the
//! exit. So the count is read whenever the kernel says it may have changed: cgroup v2
//! notifies `memory.events` (inotify), cgroup v1 signals an eventfd registered on
//! `memory.oom_control`. The kernel rate-limits v2 notifications (one per 10 ms per file,
//! the rest deferred), and a deferred one is dropped with the cgroup; for that case the
//! parent's `memory.events` is kept as a second witness: its `oom_kill` counts every kill
//! below it, and the kills of siblings that are still there can be told apart.

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// cgroup v2: keyed event counters, `oom_kill` among them (hierarchical: a parent's
/// counts include its descendants').
pub const MEMORY_EVENTS: &str = "memory.events";
/// cgroup v1: OOM state and, since 4.13, the `oom_kill` counter.
pub const MEMORY_OOM_CONTROL: &str = "memory.oom_control";
/// cgroup v1: registers an eventfd for a control file's notifications.
const EVENT_CONTROL: &str = "cgroup.event_control";

/// OOM kills recorded for a memory cgroup: `oom_kill` in memory.events (v2) or
/// memory.oom_control (v1). None when the cgroup (or the counter) is not there.
pub fn oom_kill_count(memory_dir: &Path) -> Option<u64> {
    for file in [MEMORY_EVENTS, MEMORY_OOM_CONTROL] {
        if let Ok(text) = fs::read_to_string(memory_dir.join(file)) {
            return text.lines().find_map(|l| l.strip_prefix("oom_kill ").and_then(|v| v.trim().parse().ok()));
        }
    }
    None
}

/// The two counters of memory.events that matter here (v2); v1 has only `oom_kill`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Times the cgroup ran out of memory and the OOM killer was invoked for it: counted
    /// (and notified) before the kill.
    oom: u64,
    oom_kill: u64,
}

fn read_counts(memory_dir: &Path) -> Option<Counts> {
    let text = fs::read_to_string(memory_dir.join(MEMORY_EVENTS)).ok()?;
    let key = |k: &str| text.lines().find_map(|l| l.strip_prefix(k).and_then(|v| v.trim().parse().ok()));
    Some(Counts { oom: key("oom ").unwrap_or(0), oom_kill: key("oom_kill ")? })
}

/// What a watch learnt of one cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    /// The counts when the watch started.
    baseline: Counts,
    /// The highest counts read since (they never go down); on v1, `oom` counts the
    /// eventfd's OOM notifications instead.
    last: Counts,
    /// The cgroup could not be read at some point after the start: it is gone, and a kill
    /// after the last read may not have been counted.
    gone: bool,
}

impl Seen {
    fn record(&mut self, counts: Option<Counts>) {
        match counts {
            Some(c) => {
                self.last.oom = self.last.oom.max(c.oom);
                self.last.oom_kill = self.last.oom_kill.max(c.oom_kill);
            }
            None => self.gone = true,
        }
    }

    /// v1: `n` eventfd signals, read while the cgroup was (`present`) or was not there. The
    /// eventfd fires when the cgroup goes OOM and once more when it is removed.
    fn record_v1(&mut self, n: u64, kills: Option<u64>) {
        let ooms = if kills.is_some() { n } else { n.saturating_sub(1) };
        self.last.oom += ooms;
        self.record(kills.map(|oom_kill| Counts { oom: self.last.oom, oom_kill }));
    }
}

/// The parent's counts at the start, for the second witness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Family {
    parent: u64,
    /// Each sibling cgroup's count (the watched cgroup left out).
    siblings: BTreeMap<String, u64>,
}

impl Family {
    fn read(parent: &Path, own: &str) -> Option<Family> {
        let parent_count = oom_kill_count(parent)?;
        let mut siblings = BTreeMap::new();
        for entry in fs::read_dir(parent).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != own && entry.path().is_dir() {
                if let Some(n) = oom_kill_count(&entry.path()) {
                    siblings.insert(name, n);
                }
            }
        }
        Some(Family { parent: parent_count, siblings })
    }

    /// Kills below the parent since `self` that no sibling still present accounts for.
    fn unexplained_since(&self, now: &Family) -> u64 {
        let siblings: u64 =
            now.siblings.iter().map(|(name, n)| n.saturating_sub(self.siblings.get(name).copied().unwrap_or(0))).sum();
        now.parent.saturating_sub(self.parent).saturating_sub(siblings)
    }
}

/// Whether the container was OOM-killed. Its own `oom_kill` count decides while it could be
/// read to the end. Once the cgroup vanished, a kill the watch may have missed is inferred
/// for a container that died of SIGKILL (exit code 137, how the kernel's OOM killer ends a
/// process) from its own `oom` events (the OOM killer was invoked for this cgroup), or else
/// from the parent's count: a sibling that was OOM-killed and removed meanwhile is the one
/// case that can mistake.
fn decide(seen: &Seen, family: Option<(&Family, &Family)>, exit_code: i32) -> bool {
    if seen.last.oom_kill > seen.baseline.oom_kill {
        return true;
    }
    if !seen.gone || exit_code != 137 {
        return false;
    }
    seen.last.oom > seen.baseline.oom || family.is_some_and(|(before, after)| before.unexplained_since(after) > 0)
}

/// Counts a container's OOM kills from its creation to its exit. Started once the
/// container's process is in its cgroup, finished once it has been reaped.
pub struct OomWatch {
    dir: PathBuf,
    seen: Arc<Mutex<Seen>>,
    family: Option<Family>,
    stop: Option<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl OomWatch {
    /// Watches `memory_dir`, a cgroup v2 directory or a v1 memory cgroup. Where the kernel
    /// offers no notification (or the files are missing), the count is read at the end only.
    pub fn start(memory_dir: &Path) -> OomWatch {
        let v2 = memory_dir.join(MEMORY_EVENTS).exists();
        let baseline = match v2 {
            true => read_counts(memory_dir).unwrap_or_default(),
            false => Counts { oom: 0, oom_kill: oom_kill_count(memory_dir).unwrap_or(0) },
        };
        let seen = Arc::new(Mutex::new(Seen { baseline, last: baseline, gone: false }));
        let family = v2
            .then(|| {
                let own = memory_dir.file_name()?.to_string_lossy().into_owned();
                Family::read(memory_dir.parent()?, &own)
            })
            .flatten();
        let mut watch = OomWatch { dir: memory_dir.to_path_buf(), seen, family, stop: None, thread: None };
        let source = if v2 { Source::inotify(memory_dir) } else { Source::eventfd(memory_dir) };
        match (source, EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)) {
            (Ok(source), Ok(stop)) => {
                let stop_fd = stop.as_fd().try_clone_to_owned();
                if let Ok(stop_fd) = stop_fd {
                    let (dir, seen) = (watch.dir.clone(), watch.seen.clone());
                    let spawned = std::thread::Builder::new()
                        .name("oom-watch".into())
                        .spawn(move || source.run(&dir, &seen, &stop_fd));
                    if let Ok(handle) = spawned {
                        watch.stop = Some(stop);
                        watch.thread = Some(handle);
                    }
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!(cgroup = %memory_dir.display(), error = %e, "no OOM notifications; counting at the exit only");
            }
        }
        watch
    }

    /// Ends the watch after the container's process was reaped with `exit_code`; whether an
    /// OOM kill ended (or struck) the container.
    pub fn finish(mut self, exit_code: i32) -> bool {
        if let (Some(stop), Some(thread)) = (self.stop.take(), self.thread.take()) {
            // Notifications queued before this point are read before the thread ends.
            let _ = stop.write(1);
            let _ = thread.join();
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let kills = oom_kill_count(&self.dir);
        seen.record(kills.map(|oom_kill| Counts { oom: seen.last.oom, oom_kill }));
        let family = match (&self.family, self.dir.parent(), self.dir.file_name()) {
            (Some(before), Some(parent), Some(own)) if seen.gone => {
                Family::read(parent, &own.to_string_lossy()).map(|after| (before.clone(), after))
            }
            _ => None,
        };
        decide(&seen, family.as_ref().map(|(b, a)| (b, a)), exit_code)
    }
}

/// The kernel's least interval between two notifications of one cgroup v2 file, in ms.
const NOTIFY_INTERVAL_MS: u8 = 10;
/// Reads on a timer after a v2 notification, [`NOTIFY_INTERVAL_MS`] apart.
const REREADS: u8 = 5;

/// Where the kernel's word that the count may have changed comes from.
enum Source {
    Inotify(Inotify),
    /// An eventfd registered on memory.oom_control; also signalled when the cgroup goes.
    EventFd(EventFd),
}

impl Source {
    fn inotify(dir: &Path) -> nix::Result<Source> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)?;
        inotify.add_watch(&dir.join(MEMORY_EVENTS), AddWatchFlags::IN_MODIFY)?;
        Ok(Source::Inotify(inotify))
    }

    fn eventfd(dir: &Path) -> nix::Result<Source> {
        use std::os::fd::AsRawFd;
        let events = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        let control = fs::File::open(dir.join(MEMORY_OOM_CONTROL)).map_err(io_errno)?;
        let registration = format!("{} {}", events.as_raw_fd(), control.as_raw_fd());
        fs::write(dir.join(EVENT_CONTROL), registration).map_err(io_errno)?;
        Ok(Source::EventFd(events))
    }

    /// Reads the counts at each notification until `stop` is signalled, then once more for
    /// any notification that came with it. After a v2 notification the counts are read again
    /// on a timer for a while: the kernel holds back a second notification within
    /// [`NOTIFY_INTERVAL_MS`] (an OOM's `max`, `oom` and `oom_kill` come that close together) and
    /// drops a held one when the cgroup is removed.
    fn run(self, dir: &Path, seen: &Mutex<Seen>, stop: &std::os::fd::OwnedFd) {
        let mut rereads = 0u8;
        loop {
            let (notified, stopping) = {
                let mut fds = [PollFd::new(self.fd(), PollFlags::POLLIN), PollFd::new(stop.as_fd(), PollFlags::POLLIN)];
                let timeout = match rereads {
                    0 => PollTimeout::NONE,
                    _ => PollTimeout::from(NOTIFY_INTERVAL_MS),
                };
                match poll(&mut fds, timeout) {
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => return,
                    Ok(_) => {}
                }
                let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
                (ready(&fds[0]), ready(&fds[1]))
            };
            let signals = self.drain();
            let timed_out = !notified && !stopping && rereads > 0;
            if notified && matches!(self, Source::Inotify(_)) {
                rereads = REREADS;
            } else if timed_out {
                rereads -= 1;
            }
            if signals > 0 || notified || timed_out {
                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                match self {
                    Source::Inotify(_) => seen.record(read_counts(dir)),
                    Source::EventFd(_) => seen.record_v1(signals, oom_kill_count(dir)),
                }
            }
            if stopping {
                return;
            }
        }
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Source::Inotify(i) => i.as_fd(),
            Source::EventFd(e) => e.as_fd(),
        }
    }

    /// Consumes what is pending: how many notifications there were.
    fn drain(&self) -> u64 {
        match self {
            Source::Inotify(i) => {
                let mut n = 0;
                while let Ok(events) = i.read_events() {
                    if events.is_empty() {
                        break;
                    }
                    n += events.len() as u64;
                }
                n
            }
            Source::EventFd(e) => e.read().unwrap_or(0),
        }
    }
}

fn io_errno(e: std::io::Error) -> nix::errno::Errno {
    nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_counts_from_v1_and_v2_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(oom_kill_count(dir.path()), None);
        fs::write(dir.path().join(MEMORY_OOM_CONTROL), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").unwrap();
        assert_eq!(oom_kill_count(dir.path()), Some(2));
        fs::write(dir.path().join(MEMORY_EVENTS), "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n").unwrap();
        assert_eq!(oom_kill_count(dir.path()), Some(1));
    }

    fn family(parent: u64, siblings: &[(&str, u64)]) -> Family {
        Family { parent, siblings: siblings.iter().map(|(n, c)| (n.to_string(), *c)).collect() }
    }

    #[test]
    fn decisions() {
        let c = |oom, oom_kill| Counts { oom, oom_kill };
        let seen = |baseline, last, gone| Seen { baseline, last, gone };
        let quiet = family(3, &[("a", 1)]);
        let ours = family(4, &[("a", 1)]); // one kill below the parent, not the sibling's
        let sibling = family(4, &[("a", 2)]); // the sibling's kill
        let newcomer = family(4, &[("a", 1), ("b", 1)]); // a sibling created and killed meanwhile
        type Case<'a> = (&'a str, Seen, Option<(&'a Family, &'a Family)>, i32, bool);
        let table: &[Case] = &[
            ("own count rose", seen(c(0, 0), c(1, 1), false), None, 137, true),
            ("own count rose, cgroup gone since", seen(c(2, 2), c(3, 3), true), None, 137, true),
            ("own count rose, other exit code", seen(c(0, 0), c(1, 1), false), None, 1, true),
            ("OOM invoked, no kill, cgroup kept", seen(c(0, 0), c(1, 0), false), None, 137, false),
            ("OOM invoked, gone before the kill was read", seen(c(0, 0), c(1, 0), true), None, 137, true),
            ("OOM invoked, gone, not a SIGKILL exit", seen(c(0, 0), c(1, 0), true), None, 1, false),
            ("no kill, cgroup kept", seen(c(1, 1), c(1, 1), false), Some((&quiet, &ours)), 137, false),
            ("gone, parent saw our kill", seen(c(0, 0), c(0, 0), true), Some((&quiet, &ours)), 137, true),
            ("gone, but not a SIGKILL exit", seen(c(0, 0), c(0, 0), true), Some((&quiet, &ours)), 0, false),
            ("gone, the kill was a sibling's", seen(c(0, 0), c(0, 0), true), Some((&quiet, &sibling)), 137, false),
            ("gone, a new sibling's kill", seen(c(0, 0), c(0, 0), true), Some((&quiet, &newcomer)), 137, false),
            ("gone, parent unchanged", seen(c(0, 0), c(0, 0), true), Some((&quiet, &quiet)), 137, false),
            ("gone, no parent to ask", seen(c(0, 0), c(0, 0), true), None, 137, false),
        ];
        for (name, seen, family, exit, want) in table {
            assert_eq!(decide(seen, *family, *exit), *want, "{name}");
        }
    }

    #[test]
    fn v1_signals() {
        let table: &[(&str, u64, Option<u64>, Counts, bool)] = &[
            ("an OOM while the cgroup is there", 1, Some(0), Counts { oom: 1, oom_kill: 0 }, false),
            ("the removal alone", 1, None, Counts { oom: 0, oom_kill: 0 }, true),
            ("an OOM and the removal together", 2, None, Counts { oom: 1, oom_kill: 0 }, true),
            ("the kill already counted", 1, Some(1), Counts { oom: 1, oom_kill: 1 }, false),
        ];
        for (name, n, kills, want, gone) in table {
            let mut seen = Seen::default();
            seen.record_v1(*n, *kills);
            assert_eq!((seen.last, seen.gone), (*want, *gone), "{name}");
        }
    }

    #[test]
    fn family_reads_parent_and_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, n: u64| {
            fs::create_dir_all(dir.path().join(rel)).unwrap();
            fs::write(dir.path().join(rel).join(MEMORY_EVENTS), format!("max 9\noom 1\noom_kill {n}\n")).unwrap();
        };
        write("", 5);
        write("ours", 2);
        write("other", 3);
        fs::create_dir_all(dir.path().join("no-memory")).unwrap();
        assert_eq!(Family::read(dir.path(), "ours"), Some(family(5, &[("other", 3)])));
        assert_eq!(Family::read(&dir.path().join("missing"), "ours"), None);
    }

    /// A watch over plain files sees a change made while it runs, and keeps it once the
    /// directory is gone (inotify works on any file system; the kernel's cgroup files
    /// behave the same way for this purpose).
    #[test]
    fn watch_keeps_a_count_read_before_the_cgroup_vanished() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("ctr");
        fs::create_dir(&dir).unwrap();
        fs::write(parent.path().join(MEMORY_EVENTS), "oom_kill 0\n").unwrap();
        fs::write(dir.join(MEMORY_EVENTS), "oom 0\noom_kill 0\n").unwrap();
        let watch = OomWatch::start(&dir);
        fs::write(dir.join(MEMORY_EVENTS), "oom 1\noom_kill 1\n").unwrap();
        // The thread reads at the notification; wait for it rather than racing the removal.
        for _ in 0..200 {
            if watch.seen.lock().unwrap().last.oom_kill == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        fs::remove_dir_all(&dir).unwrap();
        assert!(watch.finish(137));
    }

    #[test]
    fn watch_without_a_kill() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(MEMORY_EVENTS), "oom 0\noom_kill 4\n").unwrap();
        let watch = OomWatch::start(dir.path());
        fs::write(dir.path().join(MEMORY_EVENTS), "max 1\noom 0\noom_kill 4\n").unwrap();
        assert!(!watch.finish(137));
    }
}
