//! Whether tmpfs takes the `noswap` option (Linux 6.4+, sometimes backported): decided once
//! at start-up from the kernel version, else by mounting a scratch tmpfs with it.

use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::config::NoswapMode;
use crate::model::node::{DecidedBy, KernelVersion, NoswapState, NoswapSupport};

/// Mounting a scratch tmpfs with `noswap`; a trait so the decision is tested without mounts.
pub trait MountProbe {
    fn mount_noswap(&self) -> Result<(), Errno>;
}

/// Mounts under a scratch directory, then unmounts and removes it.
pub struct ScratchMount {
    pub dir: PathBuf,
}

impl MountProbe for ScratchMount {
    fn mount_noswap(&self) -> Result<(), Errno> {
        use nix::mount::{mount, umount2, MntFlags, MsFlags};
        crate::store::private::create_dir_all(&self.dir).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))?;
        let result = mount(Some("swapcri-probe"), &self.dir, Some("tmpfs"), MsFlags::empty(), Some("size=4k,noswap"));
        if result.is_ok() {
            let _ = umount2(&self.dir, MntFlags::MNT_DETACH);
        }
        let _ = std::fs::remove_dir(&self.dir);
        result
    }
}

pub fn decide(mode: NoswapMode, kernel_release: &str, probe: &dyn MountProbe) -> NoswapSupport {
    let by_config =
        |state| NoswapSupport { state, decided_by: DecidedBy::Config, detail: "runtime.tmpfs_noswap".into() };
    match mode {
        NoswapMode::On => return by_config(NoswapState::Supported),
        NoswapMode::Off => return by_config(NoswapState::Unsupported),
        NoswapMode::Auto => {}
    }
    if KernelVersion::parse(kernel_release).is_some_and(|v| v.at_least(6, 4)) {
        return NoswapSupport {
            state: NoswapState::Supported,
            decided_by: DecidedBy::KernelVersion,
            detail: kernel_release.to_string(),
        };
    }
    let (state, detail) = match probe.mount_noswap() {
        Ok(()) => (NoswapState::Supported, format!("kernel {kernel_release}: a tmpfs mounted with noswap")),
        // tmpfs refuses options it does not know with EINVAL.
        Err(Errno::EINVAL) => {
            (NoswapState::Unsupported, format!("kernel {kernel_release}: tmpfs refused noswap (EINVAL)"))
        }
        Err(e) => (NoswapState::Unknown, format!("kernel {kernel_release}: the probe mount failed: {e}")),
    };
    NoswapSupport { state, decided_by: DecidedBy::MountProbe, detail }
}

pub fn probe(mode: NoswapMode, kernel_release: &str, run_root: &Path) -> NoswapSupport {
    let result = decide(mode, kernel_release, &ScratchMount { dir: run_root.join("noswap-probe") });
    match result.state {
        NoswapState::Supported => {
            tracing::info!(decided_by = ?result.decided_by, detail = %result.detail, "tmpfs noswap supported")
        }
        NoswapState::Unsupported => tracing::warn!(
            detail = %result.detail,
            "tmpfs noswap unsupported: memory-backed volumes (/dev/shm, secrets, Memory emptyDirs) may be swapped to disk"
        ),
        NoswapState::Unknown => tracing::warn!(detail = %result.detail, "tmpfs noswap support unknown; not using it"),
    }
    result
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    struct Fake {
        result: Result<(), Errno>,
        called: Cell<bool>,
    }

    impl MountProbe for Fake {
        fn mount_noswap(&self) -> Result<(), Errno> {
            self.called.set(true);
            self.result
        }
    }

    #[test]
    fn decisions() {
        use NoswapState::*;
        let cases = [
            (NoswapMode::Auto, "6.4.0", Err(Errno::EINVAL), Supported, DecidedBy::KernelVersion, false),
            (NoswapMode::Auto, "6.12.9+bpo-amd64", Err(Errno::EINVAL), Supported, DecidedBy::KernelVersion, false),
            (NoswapMode::Auto, "6.18.0", Ok(()), Supported, DecidedBy::KernelVersion, false),
            (NoswapMode::Auto, "6.1.0-56-amd64", Err(Errno::EINVAL), Unsupported, DecidedBy::MountProbe, true),
            (NoswapMode::Auto, "6.1.0-56-amd64", Ok(()), Supported, DecidedBy::MountProbe, true),
            (NoswapMode::Auto, "6.3.13", Err(Errno::EPERM), Unknown, DecidedBy::MountProbe, true),
            (NoswapMode::Auto, "garbage", Err(Errno::EINVAL), Unsupported, DecidedBy::MountProbe, true),
            (NoswapMode::On, "5.10.0", Err(Errno::EINVAL), Supported, DecidedBy::Config, false),
            (NoswapMode::Off, "6.18.0", Ok(()), Unsupported, DecidedBy::Config, false),
        ];
        for (mode, release, result, state, by, probed) in cases {
            let fake = Fake { result, called: Cell::new(false) };
            let got = decide(mode, release, &fake);
            assert_eq!((got.state, got.decided_by, fake.called.get()), (state, by, probed), "{mode:?} {release}");
        }
    }
}
