//! Id-mapped bind mounts (mount_setattr with MOUNT_ATTR_IDMAP, Linux 5.12): a directory seen
//! through a pod's user namespace, so files owned by host root appear owned by the
//! container's root. Image layers are mapped this way before overlayfs stacks them.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

fn cstring(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

/// A detached copy of the mount at `source`, mapped through `userns` (and read-only when
/// asked). Dropping it without attaching it discards it.
fn mapped_tree(source: &Path, userns: &File, readonly: bool) -> std::io::Result<OwnedFd> {
    let path = cstring(source)?;
    let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC as libc::c_uint;
    // SAFETY: open_tree with a valid C string; the result is a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by the kernel and is ours alone.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut attr: libc::mount_attr = unsafe { std::mem::zeroed() };
    attr.attr_set = libc::MOUNT_ATTR_IDMAP | if readonly { libc::MOUNT_ATTR_RDONLY } else { 0 };
    attr.userns_fd = userns.as_raw_fd() as u64;
    let empty = c"";
    // SAFETY: mount_setattr on our descriptor with a properly sized mount_attr.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &mut attr as *mut libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(tree)
}

/// Mounts `source` at `target` (an existing directory) through `userns`.
pub fn bind_mapped(source: &Path, target: &Path, userns: &File, readonly: bool) -> std::io::Result<()> {
    let tree = mapped_tree(source, userns, readonly)?;
    let to = cstring(target)?;
    let empty = c"";
    // SAFETY: move_mount of our detached tree onto a path given as a C string.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `dir`'s filesystem takes id-mapped mounts: maps it through `userns` and drops
/// the result.
pub fn check(dir: &Path, userns: &File) -> std::io::Result<()> {
    mapped_tree(dir, userns, true).map(drop)
}
