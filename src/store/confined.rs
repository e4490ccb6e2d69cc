//! Files a request or an image names, opened so that neither a symbolic link nor a special
//! file gets the runtime anywhere else: inside a root with `openat2(RESOLVE_IN_ROOT)`, beneath
//! a directory with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, and never blocking on a FIFO
//! (`O_NONBLOCK`; anything but a regular file is refused before it is read).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    #[error("{0} is not a regular file")]
    NotRegular(String),
    #[error("{what} is larger than {limit} bytes")]
    TooLarge { what: String, limit: u64 },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

impl ConfinedError {
    fn io(what: &Path) -> impl FnOnce(io::Error) -> ConfinedError + '_ {
        move |source| ConfinedError::Io { what: what.display().to_string(), source }
    }
}

fn kind_of(file: &File) -> io::Result<&'static str> {
    let t = file.metadata()?.file_type();
    Ok(if t.is_file() {
        "file"
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else {
        "special file"
    })
}

/// Reads a regular file of at most `limit` bytes from an open descriptor.
fn read_regular_fd(file: File, what: &Path, limit: u64) -> Result<Vec<u8>, ConfinedError> {
    let kind = kind_of(&file).map_err(ConfinedError::io(what))?;
    if kind != "file" {
        return Err(ConfinedError::NotRegular(format!("{} (a {kind})", what.display())));
    }
    let mut bytes = Vec::new();
    // /proc files report size 0 and may never end: the read itself is bounded.
    file.take(limit + 1).read_to_end(&mut bytes).map_err(ConfinedError::io(what))?;
    if bytes.len() as u64 > limit {
        return Err(ConfinedError::TooLarge { what: what.display().to_string(), limit });
    }
    Ok(bytes)
}

const READ: OFlag = OFlag::O_RDONLY.union(OFlag::O_NONBLOCK).union(OFlag::O_NOCTTY).union(OFlag::O_CLOEXEC);

/// A host file named by a request (a Localhost seccomp profile): symbolic links followed,
/// but it must be a regular file of at most `limit` bytes.
pub fn read_host_file(path: &Path, limit: u64) -> Result<Vec<u8>, ConfinedError> {
    crate::blocking::check("reading a file a request names");
    let fd = nix::fcntl::open(path, READ, Mode::empty()).map_err(|e| ConfinedError::io(path)(e.into()))?;
    read_regular_fd(File::from(fd), path, limit)
}

/// `rel` inside `root` as the container would see it (`root` as `/`: absolute links and
/// `..` stay inside); Ok(None) when it does not exist.
pub fn read_in_root(root: &Path, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, ConfinedError> {
    crate::blocking::check("reading a file of a container's root");
    let dir = open_dir(root).map_err(ConfinedError::io(root))?;
    let how = OpenHow::new().flags(READ).resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let shown = root.join(rel.trim_start_matches('/'));
    match openat2(dir.as_fd(), rel, how) {
        Ok(fd) => read_regular_fd(File::from(fd), &shown, limit).map(Some),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(ConfinedError::io(&shown)(e.into())),
    }
}

/// Where `rel` inside `root` leads as the container would see it (`root` as `/`: absolute
/// links and `..` stay inside): the host path it resolves to, always beneath `root`;
/// Ok(None) when it does not exist.
pub fn resolve_in_root(root: &Path, rel: &str) -> io::Result<Option<std::path::PathBuf>> {
    crate::blocking::check("resolving a path inside a root");
    let dir = open_dir(root)?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = match openat2(dir.as_fd(), rel, how) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // The kernel's own name for what was opened; a root that was itself reached through a
    // link is compared by its own resolved name.
    let resolved = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)))?;
    let base = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dir)))?;
    if !resolved.starts_with(&base) {
        return Err(io::Error::other(format!("{rel} resolved to {} outside {}", resolved.display(), base.display())));
    }
    Ok(Some(resolved))
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(path, flags, Mode::empty())?)
}

/// Opens `rel` (plain names only) beneath `base` for appending, creating it (`mode`) and
/// the directories on the way (0700). No component may be a symbolic link, so a directory
/// swapped for a link after the path was checked cannot send the file elsewhere.
pub fn append_beneath(base: &Path, rel: &Path, mode: u32) -> io::Result<File> {
    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", rel.display()),
            )),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, dirs)) = names.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty log path"));
    };
    let beneath = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS;
    let mut dir = open_dir(base)?;
    for name in dirs {
        match nix::sys::stat::mkdirat(dir.as_fd(), *name, Mode::from_bits_truncate(super::private::DIR)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let how = OpenHow::new().flags(OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC).resolve(beneath);
        dir = openat2(dir.as_fd(), *name, how)?;
    }
    let how = OpenHow::new()
        .flags(
            OFlag::O_WRONLY
                | OFlag::O_APPEND
                | OFlag::O_CREAT
                | OFlag::O_CLOEXEC
                | OFlag::O_NOFOLLOW
                | OFlag::O_NONBLOCK,
        )
        .mode(Mode::from_bits_truncate(mode))
        .resolve(beneath);
    let file = File::from(openat2(dir.as_fd(), *last, how)?);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file", rel.display())));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn reads_stay_in_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("root"), dir.path().join("secret"));
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(&outside, "host secret").unwrap();
        std::fs::write(root.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
        symlink(&outside, root.join("etc/group")).unwrap(); // absolute: means <root>/<outside>
        symlink("../../../../../../secret", root.join("etc/shadow")).unwrap();
        nix::unistd::mkfifo(&root.join("etc/fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let read = |rel: &str| read_in_root(&root, rel, 1 << 20);
        assert_eq!(read("etc/passwd").unwrap().unwrap(), b"root:x:0:0::/root:/bin/sh\n");
        assert!(read("etc/group").unwrap().is_none(), "an absolute link resolves inside the root");
        assert!(read("etc/shadow").unwrap().is_none(), "`..` stops at the root");
        assert!(read("etc/missing").unwrap().is_none());
        assert!(matches!(read("etc/fifo"), Err(ConfinedError::NotRegular(_))), "a FIFO is refused, not waited on");
        assert!(matches!(read("etc"), Err(ConfinedError::NotRegular(_))));
        assert!(matches!(read_in_root(&root, "etc/passwd", 4), Err(ConfinedError::TooLarge { .. })));
    }

    #[test]
    fn host_files_must_be_regular_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let file = dir.path().join("profile.json");
        std::fs::write(&file, "{}").unwrap();
        symlink(&file, dir.path().join("link.json")).unwrap();
        assert_eq!(read_host_file(&dir.path().join("link.json"), 16).unwrap(), b"{}");
        for (path, limit) in [(fifo.as_path(), 16), (Path::new("/dev/zero"), 16), (dir.path(), 16)] {
            assert!(matches!(read_host_file(path, limit), Err(ConfinedError::NotRegular(_))), "{}", path.display());
        }
        assert!(matches!(read_host_file(&file, 1), Err(ConfinedError::TooLarge { .. })));
        let proc_file = Path::new("/proc/self/status");
        assert!(matches!(read_host_file(proc_file, 8), Err(ConfinedError::TooLarge { .. })), "bounded without a size");
    }

    #[test]
    fn appends_never_follow_a_link_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let (base, elsewhere) = (dir.path().join("pod"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        let file = append_beneath(&base, Path::new("c/0.log"), 0o640).unwrap();
        drop(file);
        assert!(base.join("c/0.log").is_file());
        symlink(&elsewhere, base.join("swapped")).unwrap();
        assert!(append_beneath(&base, Path::new("swapped/0.log"), 0o640).is_err());
        symlink(elsewhere.join("x.log"), base.join("c/1.log")).unwrap();
        assert!(append_beneath(&base, Path::new("c/1.log"), 0o640).is_err());
        assert!(append_beneath(&base, Path::new("../escape.log"), 0o640).is_err());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
