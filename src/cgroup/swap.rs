//! Swap figures of one cgroup v2 group, from the kernel's own files: usage, limit and peak
//! (`memory.swap.current`, `.max`, `.peak`), the limit's events (`memory.swap.events`:
//! `high` times the group went past `memory.swap.high`, `max` times it hit
//! `memory.swap.max`, `fail` swap-outs refused because the limit or the device was full),
//! swap traffic and zswap from `memory.stat`, and zswap's compressed size
//! (`memory.zswap.current`). What a kernel does not have (the peak before 6.5, zswap without
//! CONFIG_ZSWAP, the per-group `pswpin` of older kernels) is None, never zero.

use std::path::Path;

use super::files::{keyed, limit, number, read};
use crate::model::cgroup_stats::{SwapEvents, SwapStats, ZswapStats};

fn events(text: &str) -> SwapEvents {
    let count = |key| keyed(text, key).unwrap_or(0);
    SwapEvents { high: count("high"), max: count("max"), fail: count("fail") }
}

/// The swap figures of the group in `dir`, with its `memory.stat` already read; None where
/// the group has no swap accounting (cgroup v1, `swapaccount=0`, no swap controller).
pub fn read_swap(dir: &Path, memory_stat: &str) -> Option<SwapStats> {
    let usage_bytes = number(dir, "memory.swap.current")?;
    let zswap_current = number(dir, "memory.zswap.current");
    let zswapped = keyed(memory_stat, "zswapped");
    let zswap = (zswap_current.is_some() || zswapped.is_some()).then(|| ZswapStats {
        compressed_bytes: zswap_current,
        original_bytes: zswapped.unwrap_or(0),
        pages_in: keyed(memory_stat, "zswpin").unwrap_or(0),
        pages_out: keyed(memory_stat, "zswpout").unwrap_or(0),
    });
    Some(SwapStats {
        usage_bytes,
        limit_bytes: limit(dir, "memory.swap.max"),
        peak_bytes: number(dir, "memory.swap.peak"),
        events: read(dir, "memory.swap.events").map(|t| events(&t)),
        anon_refaults: keyed(memory_stat, "workingset_refault_anon"),
        pages_in: keyed(memory_stat, "pswpin"),
        pages_out: keyed(memory_stat, "pswpout"),
        zswap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (f, text) in files {
            std::fs::write(dir.path().join(f), text).unwrap();
        }
        dir
    }

    /// memory.stat of a 6.12 kernel with zswap, trimmed.
    const STAT_612: &str = "anon 1048576\nfile 0\nzswap 20480\nzswapped 81920\nworkingset_refault_anon 321\nworkingset_refault_file 5\npswpin 300\npswpout 900\nzswpin 7\nzswpout 20\n";
    /// memory.stat of a 6.1 kernel without zswap, trimmed.
    const STAT_61: &str = "anon 1048576\nfile 0\nworkingset_refault_anon 12\nworkingset_refault_file 5\n";

    #[test]
    fn the_figures_each_kernel_has() {
        let cases: [(&str, Vec<(&str, &str)>, &str, SwapStats); 3] = [
            (
                "6.12 with zswap",
                vec![
                    ("memory.swap.current", "4096000\n"),
                    ("memory.swap.max", "8192000\n"),
                    ("memory.swap.peak", "6000000\n"),
                    ("memory.swap.events", "high 3\nmax 2\nfail 1\n"),
                    ("memory.zswap.current", "20480\n"),
                ],
                STAT_612,
                SwapStats {
                    usage_bytes: 4096000,
                    limit_bytes: Some(8192000),
                    peak_bytes: Some(6000000),
                    events: Some(SwapEvents { high: 3, max: 2, fail: 1 }),
                    anon_refaults: Some(321),
                    pages_in: Some(300),
                    pages_out: Some(900),
                    zswap: Some(ZswapStats {
                        compressed_bytes: Some(20480),
                        original_bytes: 81920,
                        pages_in: 7,
                        pages_out: 20,
                    }),
                },
            ),
            (
                "6.1: no peak, no zswap, no pswpin",
                vec![
                    ("memory.swap.current", "0\n"),
                    ("memory.swap.max", "max\n"),
                    ("memory.swap.events", "max 0\nfail 0\n"),
                ],
                STAT_61,
                SwapStats {
                    usage_bytes: 0,
                    limit_bytes: None,
                    peak_bytes: None,
                    events: Some(SwapEvents { high: 0, max: 0, fail: 0 }),
                    anon_refaults: Some(12),
                    pages_in: None,
                    pages_out: None,
                    zswap: None,
                },
            ),
            (
                "usage alone",
                vec![("memory.swap.current", "1\n")],
                "",
                SwapStats { usage_bytes: 1, ..Default::default() },
            ),
        ];
        for (name, files, stat, want) in cases {
            let dir = group(&files);
            assert_eq!(read_swap(dir.path(), stat), Some(want), "{name}");
        }
    }

    #[test]
    fn no_swap_accounting_is_none() {
        let dir = group(&[("memory.swap.max", "max\n"), ("memory.swap.peak", "0\n")]);
        assert_eq!(read_swap(dir.path(), STAT_612), None);
    }

    #[test]
    fn available_is_limit_minus_usage() {
        let s = |usage, limit| SwapStats { usage_bytes: usage, limit_bytes: limit, ..Default::default() };
        assert_eq!(s(10, Some(30)).available_bytes(), Some(20));
        assert_eq!(s(40, Some(30)).available_bytes(), Some(0));
        assert_eq!(s(10, None).available_bytes(), None);
    }
}
