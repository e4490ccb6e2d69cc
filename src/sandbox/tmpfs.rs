//! Mounting a tmpfs from the option list policy builds (flags and data split here).

use std::path::Path;

use nix::mount::{mount, umount2, MntFlags, MsFlags};

/// Mounts a tmpfs at `target` with options such as `nosuid`, `mode=1777`, `size=65536k`.
pub fn mount_tmpfs(target: &Path, options: &[String]) -> std::io::Result<()> {
    let mut flags = MsFlags::empty();
    let mut data = Vec::new();
    for option in options {
        match option.as_str() {
            "nosuid" => flags |= MsFlags::MS_NOSUID,
            "nodev" => flags |= MsFlags::MS_NODEV,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            "ro" => flags |= MsFlags::MS_RDONLY,
            other => data.push(other.to_string()),
        }
    }
    crate::store::private::create_dir_all(target)?;
    mount(Some("shm"), target, Some("tmpfs"), flags, Some(data.join(",").as_str()))?;
    Ok(())
}

/// Detaches whatever is mounted at `target`; nothing mounted is fine.
pub fn unmount(target: &Path) -> std::io::Result<()> {
    match umount2(target, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
