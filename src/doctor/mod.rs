//! `swapcri doctor`: checks a node against the Kubernetes swap guidance and says what to do.
//! Every check reads below a root directory, so each is tested on a fixture tree.

mod checks;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde::Serialize;

pub use checks::run_checks;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    /// What was found.
    pub found: String,
    /// What to do (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub advice: String,
}

/// Where the node's files are and what the operator told us.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub root: PathBuf,
    /// The system daemons' cgroup, relative to the cgroup root.
    pub system_cgroup: String,
    /// kubelet's hard eviction threshold for memory.available, in bytes.
    pub eviction_threshold: Option<u64>,
    /// The configured cgroup driver.
    pub cgroup_driver: crate::config::CgroupDriver,
    /// swapcri's state directory, for the records kept aside (None: not checked).
    pub state_root: Option<PathBuf>,
}

impl Inputs {
    pub fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }
}

/// kubelet's `evictionHard: memory.available` from a KubeletConfiguration (YAML), in bytes;
/// a percentage is of `mem_total`.
pub fn eviction_from_kubelet_config(text: &str, mem_total: u64) -> Option<u64> {
    let line = text.lines().find(|l| l.trim_start().starts_with("memory.available:"))?;
    let value = line.split_once(':')?.1.trim().trim_matches(|c| c == '"' || c == '\'');
    parse_threshold(value, mem_total)
}

/// "100Mi", "1G", "5%" (of `mem_total`).
pub fn parse_threshold(value: &str, mem_total: u64) -> Option<u64> {
    match value.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().ok().map(|p| (mem_total as f64 * p / 100.0) as u64),
        None => crate::policy::memory::parse_quantity(value),
    }
}

pub fn render_text(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let tag = match c.status {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("[{tag:>4}] {:<26} {}\n", c.name, c.found));
        if !c.advice.is_empty() {
            out.push_str(&format!("       {:<26} -> {}\n", "", c.advice));
        }
    }
    out
}

pub fn failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.status == Status::Fail)
}

/// Formats bytes for people.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
