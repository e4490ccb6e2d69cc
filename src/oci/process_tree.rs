//! Descendants of a process, from /proc, to kill what an exec left behind.

use std::collections::HashMap;

/// All descendants of `root` (not `root` itself).
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(c);
            stack.push(c);
        }
    }
    out
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split_whitespace().nth(1)?.parse().ok()
}

/// SIGKILLs `root` and everything below it (children first are found before the kill).
pub fn kill_tree(root: i32) {
    let all = descendants(root);
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(root), nix::sys::signal::Signal::SIGKILL);
    for pid in all {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_kills_a_process_tree() {
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30 & sleep 30 & wait"]).spawn().unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while descendants(pid).len() < 2 {
            assert!(std::time::Instant::now() < deadline, "children did not appear");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let below = descendants(pid);
        kill_tree(pid);
        child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        for p in below {
            let state = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            assert!(state.is_empty() || state.contains(") Z "), "{p} still running: {state}");
        }
    }
}
