//! Swap devices and the block devices under them, resolved through sysfs: a swap file to
//! its filesystem's device, a partition to its whole disk, dm-crypt/LVM/md to the physical
//! disks below (`slaves/`), zram to nothing. Roots are parameters so tests use fixture trees.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One active swap area (a line of /proc/swaps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwapArea {
    pub filename: String,
    /// "partition" or "file".
    pub kind: String,
    pub size_bytes: u64,
}

/// A whole disk the io protection can name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disk {
    pub name: String,
    /// "MAJ:MIN".
    pub dev: String,
    pub rotational: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Backing {
    Disks {
        disks: Vec<Disk>,
        encrypted: bool,
        stacked: Vec<String>,
    },
    /// Compressed RAM: no disk under it.
    Zram {
        device: String,
    },
    Unresolved {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwapDevice {
    pub area: SwapArea,
    pub backing: Backing,
}

/// Parses /proc/swaps (sizes are KiB).
pub fn parse_swaps(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let filename = words.next()?.replace("\\040", " ");
            let kind = words.next()?.to_string();
            let size_kib: u64 = words.next()?.parse().ok()?;
            Some(SwapArea { filename, kind, size_bytes: size_kib * 1024 })
        })
        .collect()
}

/// Where the machine's files are: `/` normally, a fixture tree in tests.
#[derive(Debug, Clone)]
pub struct Roots {
    pub proc: PathBuf,
    pub sys: PathBuf,
    /// Prefix for paths named in /proc/swaps and /proc/mounts.
    pub fs: PathBuf,
}

impl Roots {
    pub fn host() -> Self {
        Roots { proc: "/proc".into(), sys: "/sys".into(), fs: "/".into() }
    }

    fn host_path(&self, path: &str) -> PathBuf {
        self.fs.join(path.trim_start_matches('/'))
    }
}

/// The "MAJ:MIN" of a block device node (its rdev) or of the filesystem holding a file
/// (its dev).
pub fn device_of(path: &Path, block_node: bool) -> io::Result<String> {
    let meta = std::fs::metadata(path)?;
    let dev = if block_node { meta.rdev() } else { meta.dev() };
    Ok(format!("{}:{}", nix::sys::stat::major(dev), nix::sys::stat::minor(dev)))
}

/// The block device name for "MAJ:MIN" (`/sys/class/block/<name>/dev`).
pub fn name_of(sys: &Path, dev: &str) -> Option<String> {
    std::fs::read_dir(sys.join("class/block")).ok()?.flatten().find_map(|e| {
        let found = std::fs::read_to_string(e.path().join("dev")).ok()?;
        (found.trim() == dev).then(|| e.file_name().to_string_lossy().into_owned())
    })
}

fn read_trim(path: PathBuf) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The whole disk a partition belongs to (`/sys/block/<disk>/<partition>` exists).
fn disk_of_partition(sys: &Path, name: &str) -> Option<String> {
    std::fs::read_dir(sys.join("block"))
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|disk| sys.join("block").join(disk).join(name).is_dir())
}

struct Walk {
    disks: Vec<Disk>,
    encrypted: bool,
    stacked: Vec<String>,
    zram: Option<String>,
}

fn walk(sys: &Path, name: &str, out: &mut Walk, depth: usize) {
    if depth > 16 {
        return;
    }
    if sys.join("class/block").join(name).join("partition").exists() {
        if let Some(disk) = disk_of_partition(sys, name) {
            return walk(sys, &disk, out, depth + 1);
        }
    }
    if name.starts_with("zram") {
        out.zram = Some(name.to_string());
        return;
    }
    let slaves: Vec<String> = std::fs::read_dir(sys.join("block").join(name).join("slaves"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if !slaves.is_empty() {
        out.stacked.push(name.to_string());
        if read_trim(sys.join("block").join(name).join("dm/uuid")).is_some_and(|u| u.starts_with("CRYPT-")) {
            out.encrypted = true;
        }
        for slave in slaves {
            walk(sys, &slave, out, depth + 1);
        }
        return;
    }
    let Some(dev) = read_trim(sys.join("class/block").join(name).join("dev")) else { return };
    if out.disks.iter().any(|d| d.dev == dev) {
        return;
    }
    let rotational = read_trim(sys.join("block").join(name).join("queue/rotational")).map(|r| r == "1");
    out.disks.push(Disk { name: name.to_string(), dev, rotational });
}

/// The disks under a block device given by name.
pub fn backing_of_name(sys: &Path, name: &str) -> Backing {
    let mut out = Walk { disks: Vec::new(), encrypted: false, stacked: Vec::new(), zram: None };
    walk(sys, name, &mut out, 0);
    match (out.zram, out.disks.is_empty()) {
        (Some(device), true) => Backing::Zram { device },
        (_, false) => Backing::Disks { disks: out.disks, encrypted: out.encrypted, stacked: out.stacked },
        (None, true) => Backing::Unresolved { reason: format!("no disk found under {name}") },
    }
}

/// Resolves every active swap area to what backs it.
pub fn swap_devices(roots: &Roots) -> Vec<SwapDevice> {
    let text = std::fs::read_to_string(roots.proc.join("swaps")).unwrap_or_default();
    parse_swaps(&text)
        .into_iter()
        .map(|area| {
            let path = roots.host_path(&area.filename);
            let backing = match device_of(&path, area.kind == "partition") {
                Err(e) => Backing::Unresolved { reason: format!("{}: {e}", path.display()) },
                Ok(dev) => match name_of(&roots.sys, &dev) {
                    Some(name) => backing_of_name(&roots.sys, &name),
                    None => Backing::Unresolved { reason: format!("no block device {dev} in sysfs") },
                },
            };
            SwapDevice { area, backing }
        })
        .collect()
}

/// The whole disks ("MAJ:MIN") under the active swap areas, each once.
pub fn swap_disks(roots: &Roots) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for swap in swap_devices(roots) {
        if let Backing::Disks { disks, .. } = swap.backing {
            out.extend(disks.into_iter().map(|d| d.dev));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
pub mod fixture {
    //! A small sysfs: vda (partitions vda1, vda2), sdb under dm-0 (dm-crypt) under md0... as
    //! the tests need.
    use std::path::Path;

    pub fn block(sys: &Path, name: &str, dev: &str, rotational: Option<&str>) {
        let class = sys.join("class/block").join(name);
        std::fs::create_dir_all(&class).unwrap();
        std::fs::write(class.join("dev"), format!("{dev}\n")).unwrap();
        if let Some(r) = rotational {
            std::fs::create_dir_all(sys.join("block").join(name).join("queue")).unwrap();
            std::fs::write(sys.join("block").join(name).join("queue/rotational"), format!("{r}\n")).unwrap();
        }
    }

    pub fn partition(sys: &Path, disk: &str, name: &str, dev: &str) {
        block(sys, name, dev, None);
        std::fs::write(sys.join("class/block").join(name).join("partition"), "1\n").unwrap();
        std::fs::create_dir_all(sys.join("block").join(disk).join(name)).unwrap();
    }

    pub fn stacked(sys: &Path, name: &str, dev: &str, slaves: &[&str], crypt: bool) {
        block(sys, name, dev, None);
        let dir = sys.join("block").join(name);
        for s in slaves {
            std::fs::create_dir_all(dir.join("slaves").join(s)).unwrap();
        }
        if crypt {
            std::fs::create_dir_all(dir.join("dm")).unwrap();
            std::fs::write(dir.join("dm/uuid"), "CRYPT-LUKS2-abc-swap\n").unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::*;
    use super::*;

    #[test]
    fn parses_proc_swaps() {
        let text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/vda2   partition\t1048572\t0\t-2\n/swap\\040file  file  524284 12 -3\n/dev/zram0 partition 4194300 0 100\n";
        let areas = parse_swaps(text);
        assert_eq!(areas.len(), 3);
        assert_eq!(
            areas[0],
            SwapArea { filename: "/dev/vda2".into(), kind: "partition".into(), size_bytes: 1048572 * 1024 }
        );
        assert_eq!(areas[1].filename, "/swap file");
        assert!(parse_swaps("Filename Type Size Used Priority\n").is_empty());
    }

    #[test]
    fn resolves_partitions_stacks_and_zram_to_disks() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        block(sys, "vda", "254:0", Some("0"));
        partition(sys, "vda", "vda2", "254:2");
        block(sys, "sdb", "8:16", Some("1"));
        partition(sys, "sdb", "sdb1", "8:17");
        block(sys, "sdc", "8:32", Some("0"));
        stacked(sys, "md0", "9:0", &["sdb1", "sdc"], false);
        stacked(sys, "dm-0", "253:0", &["md0"], true);
        block(sys, "zram0", "252:0", Some("0"));

        let disk =
            |name: &str, dev: &str, rot: bool| Disk { name: name.into(), dev: dev.into(), rotational: Some(rot) };
        assert_eq!(
            backing_of_name(sys, "vda2"),
            Backing::Disks { disks: vec![disk("vda", "254:0", false)], encrypted: false, stacked: vec![] }
        );
        let Backing::Disks { mut disks, encrypted, stacked } = backing_of_name(sys, "dm-0") else { panic!() };
        disks.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(disks, vec![disk("sdb", "8:16", true), disk("sdc", "8:32", false)]);
        assert!(encrypted);
        assert_eq!(stacked, vec!["dm-0", "md0"]);
        assert_eq!(backing_of_name(sys, "zram0"), Backing::Zram { device: "zram0".into() });
        assert_eq!(name_of(sys, "8:17").as_deref(), Some("sdb1"));
        assert_eq!(name_of(sys, "1:1"), None);
    }
}
