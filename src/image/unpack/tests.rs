//! Layer unpacking. These tests create device nodes, trusted xattrs and foreign owners,
//! so they need root (hack/test.sh runs them as root).

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use super::*;

/// Builds a tar archive in memory, entry by entry.
struct Layer {
    builder: tar::Builder<Vec<u8>>,
}

impl Layer {
    fn new() -> Self {
        Layer { builder: tar::Builder::new(Vec::new()) }
    }

    fn header(kind: tar::EntryType, mode: u32) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_700_000_000);
        h.set_size(0);
        h
    }

    /// Writes the name bytes directly, so hostile paths the tar crate would refuse get in.
    fn raw(mut self, mut h: tar::Header, name: &str, data: &[u8]) -> Self {
        let old = h.as_old_mut();
        old.name = [0; 100];
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(data.len() as u64);
        h.set_cksum();
        self.builder.append(&h, data).unwrap();
        self
    }

    fn file(self, name: &str, data: &[u8]) -> Self {
        self.raw(Self::header(tar::EntryType::Regular, 0o644), name, data)
    }

    fn owned_file(self, name: &str, mode: u32, uid: u64, data: &[u8]) -> Self {
        let mut h = Self::header(tar::EntryType::Regular, mode);
        h.set_uid(uid);
        h.set_gid(uid);
        self.raw(h, name, data)
    }

    fn dir(self, name: &str) -> Self {
        self.raw(Self::header(tar::EntryType::Directory, 0o755), name, b"")
    }

    fn link(self, kind: tar::EntryType, name: &str, target: &str) -> Self {
        let mut h = Self::header(kind, 0o777);
        h.set_link_name(target).unwrap();
        self.raw(h, name, b"")
    }

    fn device(self, name: &str, major: u32, minor: u32) -> Self {
        let mut h = Self::header(tar::EntryType::Char, 0o666);
        h.set_device_major(major).unwrap();
        h.set_device_minor(minor).unwrap();
        self.raw(h, name, b"")
    }

    fn file_with_xattrs(mut self, name: &str, xattrs: &[(&str, &[u8])]) -> Self {
        let pax: Vec<(String, &[u8])> = xattrs.iter().map(|(k, v)| (format!("SCHILY.xattr.{k}"), *v)).collect();
        self.builder.append_pax_extensions(pax.iter().map(|(k, v)| (k.as_str(), *v))).unwrap();
        self.file(name, b"x")
    }

    fn finish(self) -> Vec<u8> {
        self.builder.into_inner().unwrap()
    }
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture { dir: tempfile::tempdir().unwrap() }
    }

    fn dest(&self) -> PathBuf {
        self.dir.path().join("layer")
    }

    /// Writes the blob, unpacks it and returns the result.
    fn unpack(&self, tar: &[u8], compression: Compression) -> Result<LayerStats, UnpackError> {
        let blob = self.dir.path().join("blob");
        fs::write(&blob, compressed(tar, compression)).unwrap();
        unpack_layer(&blob, &self.dest(), &Digest::of(tar), &UnpackBudget::new(&super::super::PullLimits::default()))
    }
}

#[test]
fn compression_is_detected_from_magic_bytes() {
    let cases: [(&[u8], Compression); 4] = [
        (&[0x1f, 0x8b, 8, 0], Compression::Gzip),
        (&[0x28, 0xb5, 0x2f, 0xfd], Compression::Zstd),
        (b"etc/", Compression::None),
        (b"", Compression::None),
    ];
    for (prefix, expected) in cases {
        assert_eq!(detect_compression(prefix), expected);
    }
}

#[test]
fn clean_path_rejects_parent_components() {
    let cases = [
        ("etc/passwd", Some("etc/passwd")),
        ("./etc/./passwd", Some("etc/passwd")),
        ("/abs/file", Some("abs/file")),
        ("../evil", None),
        ("a/../../evil", None),
        ("./", Some("")),
    ];
    for (input, expected) in cases {
        assert_eq!(clean_path(Path::new(input)), expected.map(PathBuf::from), "{input}");
    }
}

#[test]
fn root_unpacks_files_links_and_metadata_for_every_compression() {
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let fx = Fixture::new();
        let tar = Layer::new()
            .dir("./")
            .dir("./bin/")
            .owned_file("./bin/tool", 0o4755, 1000, b"#!/bin/sh\n")
            .link(tar::EntryType::Symlink, "./bin/sh", "tool")
            .link(tar::EntryType::Link, "./bin/tool2", "bin/tool")
            .device("./dev-null", 1, 3)
            .finish();
        let stats = fx.unpack(&tar, compression).unwrap();
        let dest = fx.dest();
        let tool = fs::metadata(dest.join("bin/tool")).unwrap();
        assert_eq!(tool.mode() & 0o7777, 0o4755, "{compression:?}");
        assert_eq!((tool.uid(), tool.gid()), (1000, 1000));
        assert_eq!(fs::read(dest.join("bin/tool")).unwrap(), b"#!/bin/sh\n");
        assert_eq!(fs::read_link(dest.join("bin/sh")).unwrap(), PathBuf::from("tool"));
        assert_eq!(fs::metadata(dest.join("bin/tool2")).unwrap().ino(), tool.ino());
        let null = fs::symlink_metadata(dest.join("dev-null")).unwrap();
        assert!(null.file_type().is_char_device());
        assert_eq!(null.rdev(), makedev(1, 3));
        assert_eq!(null.mode() & 0o7777, 0o666);
        // root, bin, tool (with its hard link), sh, dev-null
        assert_eq!(stats.inodes, 5);
        assert!(stats.disk_bytes > 0);
    }
}

#[test]
fn root_whiteouts_become_overlay_whiteouts() {
    let fx = Fixture::new();
    let tar = Layer::new()
        .file("etc/.wh.removed", b"")
        .dir("opaque/")
        .file("opaque/.wh..wh..opq", b"")
        .file("opaque/kept", b"new")
        .finish();
    fx.unpack(&tar, Compression::Gzip).unwrap();
    let dest = fx.dest();
    let whiteout = fs::symlink_metadata(dest.join("etc/removed")).unwrap();
    assert!(whiteout.file_type().is_char_device());
    assert_eq!(whiteout.rdev(), makedev(0, 0));
    assert!(!dest.join("etc/.wh.removed").exists());
    assert_eq!(xattr::get(dest.join("opaque"), OPAQUE_XATTR).unwrap(), Some(b"y".to_vec()));
    assert!(!dest.join("opaque/.wh..wh..opq").exists());
    assert_eq!(fs::read(dest.join("opaque/kept")).unwrap(), b"new");
}

#[test]
fn root_hostile_entries_are_rejected_and_write_nothing_outside() {
    struct Case {
        name: &'static str,
        tar: Vec<u8>,
    }
    let cases = [
        Case { name: "parent traversal", tar: Layer::new().file("../evil", b"x").finish() },
        Case { name: "nested traversal", tar: Layer::new().file("a/../../evil", b"x").finish() },
        Case {
            name: "symlink to outside then write through it",
            tar: Layer::new().link(tar::EntryType::Symlink, "out", "../outside").file("out/evil", b"x").finish(),
        },
        Case {
            name: "absolute symlink then write through it",
            tar: Layer::new().link(tar::EntryType::Symlink, "out", "/").file("out/evil", b"x").finish(),
        },
        Case {
            name: "hard link to a host file",
            tar: Layer::new().link(tar::EntryType::Link, "passwd", "/etc/passwd").finish(),
        },
        Case { name: "whiteout of the parent", tar: Layer::new().file("a/.wh...", b"").finish() },
    ];
    for case in cases {
        let fx = Fixture::new();
        fs::create_dir(fx.dir.path().join("outside")).unwrap();
        let result = fx.unpack(&case.tar, Compression::None);
        assert!(result.is_err(), "{}: accepted", case.name);
        assert!(!fx.dir.path().join("evil").exists(), "{}", case.name);
        assert!(!fx.dir.path().join("outside/evil").exists(), "{}", case.name);
        assert!(!Path::new("/evil").exists(), "{}", case.name);
    }
}

#[test]
fn root_wrong_diff_id_is_rejected() {
    let fx = Fixture::new();
    let tar = Layer::new().file("a", b"1").finish();
    let blob = fx.dir.path().join("blob");
    fs::write(&blob, &tar).unwrap();
    let err = unpack_layer(&blob, &fx.dest(), &Digest::of(b"something else"), &budget()).unwrap_err();
    assert!(matches!(err, UnpackError::DiffId { .. }), "{err}");
    assert!(err.is_corruption());
}

#[test]
fn truncated_archive_is_corruption() {
    let fx = Fixture::new();
    let tar = Layer::new().file("a", &[7u8; 4096]).finish();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&tar).unwrap();
    let gz = enc.finish().unwrap();
    let blob = fx.dir.path().join("blob");
    fs::write(&blob, &gz[..gz.len() / 2]).unwrap();
    let err = unpack_layer(&blob, &fx.dest(), &Digest::of(&tar), &budget()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

fn budget() -> UnpackBudget {
    UnpackBudget::new(&super::super::PullLimits::default())
}

#[test]
fn only_user_and_capability_xattrs_are_kept() {
    let fx = Fixture::new();
    let cap = [1u8, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let tar = Layer::new()
        .file_with_xattrs(
            "f",
            &[
                ("user.note", b"kept"),
                ("security.capability", &cap),
                ("trusted.overlay.redirect", b"/etc"),
                ("trusted.overlay.opaque", b"y"),
                ("security.selinux", b"system_u:object_r:shadow_t:s0"),
            ],
        )
        .finish();
    fx.unpack(&tar, Compression::None).unwrap();
    let f = fx.dest().join("f");
    let mut names: Vec<String> = xattr::list(&f).unwrap().map(|n| n.to_string_lossy().into_owned()).collect();
    names.sort();
    // The node may add its own security label (SELinux); only the layer's are counted.
    names.retain(|n| {
        n != "security.selinux" || xattr::get(&f, n).unwrap().as_deref() == Some(&b"system_u:object_r:shadow_t:s0"[..])
    });
    assert_eq!(names, ["security.capability", "user.note"]);
    assert_eq!(xattr::get(&f, "user.note").unwrap(), Some(b"kept".to_vec()));
}

#[test]
fn a_decompression_bomb_stops_at_the_layer_cap() {
    let fx = Fixture::new();
    let tar = Layer::new().file("zeros", &vec![0u8; 4 << 20]).finish();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&tar).unwrap();
    let gz = enc.finish().unwrap();
    assert!(gz.len() < 64 << 10, "{}", gz.len());
    let blob = fx.dir.path().join("blob");
    fs::write(&blob, &gz).unwrap();
    let limits = super::super::PullLimits { layer_unpacked_bytes: 1 << 20, ..Default::default() };
    let err = unpack_layer(&blob, &fx.dest(), &Digest::of(&tar), &UnpackBudget::new(&limits)).unwrap_err();
    assert!(matches!(err, UnpackError::TooLarge(hit) if hit.setting == "image.max_layer_unpacked_bytes"), "{err}");
    let written: u64 = walk_sizes(&fx.dest());
    assert!(written <= 1 << 20, "{written} bytes written past the cap");
}

fn walk_sizes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let m = e.metadata().unwrap();
                    if m.is_dir() {
                        walk_sizes(&e.path())
                    } else {
                        m.len()
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The bytes of `tar` compressed the named way.
fn compressed(tar: &[u8], compression: Compression) -> Vec<u8> {
    match compression {
        Compression::None => tar.to_vec(),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(tar).unwrap();
            enc.finish().unwrap()
        }
        Compression::Zstd => zstd::encode_all(tar, 3).unwrap(),
    }
}

/// Sends `bytes` through a blob channel in chunks of `size`, then `last` (an error) if any.
fn sent_in_chunks(bytes: Vec<u8>, size: usize, last: Option<&'static str>) -> crate::image::source::ChunkReader {
    let (tx, rx) = crate::image::source::blob_channel();
    std::thread::spawn(move || {
        for chunk in bytes.chunks(size) {
            if tx.blocking_send(Ok(bytes::Bytes::copy_from_slice(chunk))).is_err() {
                return;
            }
        }
        if let Some(why) = last {
            let _ = tx.blocking_send(Err(io::Error::other(why)));
        }
    });
    rx
}

#[test]
fn root_a_layer_streamed_in_chunks_of_any_size_unpacks_as_from_a_file() {
    let tar = Layer::new().file("a", &[7u8; 70_000]).file("b", b"2").finish();
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        // One byte at a time: the magic number comes over several reads.
        for size in [1, 3, 4096, 1 << 20] {
            let fx = Fixture::new();
            let reader = sent_in_chunks(compressed(&tar, compression), size, None);
            let stats = unpack_layer_from(reader, &fx.dest(), &Digest::of(&tar), &budget())
                .unwrap_or_else(|e| panic!("{compression:?} in chunks of {size}: {e}"));
            assert!(stats.inodes >= 2, "{compression:?} {size}");
            assert_eq!(fs::read(fx.dest().join("a")).unwrap(), vec![7u8; 70_000]);
        }
    }
}

#[test]
fn root_a_stream_that_ends_in_an_error_fails_the_unpack() {
    // The whole archive arrives, then the fetch's verdict (a digest mismatch, say).
    let tar = Layer::new().file("a", b"1").finish();
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let fx = Fixture::new();
        let reader = sent_in_chunks(compressed(&tar, compression), 512, Some("blob digest mismatch"));
        let err = unpack_layer_from(reader, &fx.dest(), &Digest::of(&tar), &budget()).unwrap_err();
        assert!(err.to_string().contains("blob digest mismatch"), "{compression:?}: {err}");
    }
}
