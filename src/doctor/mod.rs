//! `swapcri doctor`: checks a node against the Kubernetes swap guidance and says what to do.
//! Every check reads below a root directory, so each is tested on a fixture tree.

mod check;
mod checks;
#[cfg(test)]
mod tests;

pub use check::{Check, Inputs, Status};
pub use checks::run_checks;

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
