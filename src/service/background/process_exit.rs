//! The exit of a process we watch (a pod's PID-namespace holder, a container's monitor),
//! through a pidfd, or by looking at it every 250 ms where pidfds are missing.

use std::time::Duration;

use tokio::io::unix::AsyncFd;

use crate::model::sandbox::ProcessRef;

/// Where pidfds are missing (kernels before 5.3), how often the process is looked at instead.
const POLL: Duration = Duration::from_millis(250);

/// Returns when the process exits (at once when it is gone already).
pub(in crate::service) async fn exit_of(process: ProcessRef) {
    let Some(fd) = process.pidfd() else {
        // Gone already, or no pidfds on this kernel.
        return poll_exit(process).await;
    };
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open until it is dropped.
    match unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) } {
        // A pidfd turns readable when its process exits.
        Ok(fd) => {
            let _ = fd.readable().await;
        }
        Err(_) => poll_exit(process).await,
    }
}

async fn poll_exit(process: ProcessRef) {
    while process.is_alive() {
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_exit_of_a_process_is_seen_at_once() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let process = ProcessRef::of(child.id() as i32).unwrap();
        let waiting = tokio::spawn(exit_of(process));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "the process still runs");
        child.kill().unwrap();
        // Reaped by its parent (this test) or not, a killed process has exited.
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(1), waiting).await.expect("seen within a second").unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
        let _ = child.wait();
    }

    #[tokio::test]
    async fn a_process_that_is_gone_or_reused_has_exited() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        tokio::time::timeout(Duration::from_secs(1), exit_of(ProcessRef { pid, start_time: 1 })).await.unwrap();
        // A live pid with another start time is another process.
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        let other = ProcessRef { start_time: me.start_time + 1, ..me };
        tokio::time::timeout(Duration::from_secs(1), exit_of(other)).await.unwrap();
    }
}
