//! The CRI log format: `<RFC3339Nano> <stdout|stderr> <F|P> <content>\n`, one record per
//! line; a line longer than the limit is split into partial (P) records ending with a
//! full (F) one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::store::private;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Splits one stream's bytes into log records; keeps the unfinished line between calls.
pub struct LineFramer {
    pending: Vec<u8>,
    max_line: usize,
}

impl LineFramer {
    pub fn new(max_line: usize) -> Self {
        LineFramer { pending: Vec::new(), max_line: max_line.max(1) }
    }

    /// Feeds bytes; calls `emit(content, partial)` for every complete record.
    pub fn feed(&mut self, mut data: &[u8], emit: &mut dyn FnMut(&[u8], bool)) {
        while !data.is_empty() {
            match data.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.push(&data[..i], emit);
                    emit(&self.pending, false);
                    self.pending.clear();
                    data = &data[i + 1..];
                }
                None => {
                    self.push(data, emit);
                    data = &[];
                }
            }
        }
    }

    fn push(&mut self, mut bytes: &[u8], emit: &mut dyn FnMut(&[u8], bool)) {
        while self.pending.len() + bytes.len() > self.max_line {
            let room = self.max_line - self.pending.len();
            self.pending.extend_from_slice(&bytes[..room]);
            emit(&self.pending, true);
            self.pending.clear();
            bytes = &bytes[room..];
        }
        self.pending.extend_from_slice(bytes);
    }

    /// At end of stream, an unterminated line is written as a partial record: a reader
    /// (kubelet's, for a termination message taken from the log) then gets the stream's
    /// bytes back exactly, with no newline the container never wrote.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&[u8], bool)) {
        if !self.pending.is_empty() {
            emit(&self.pending, true);
            self.pending.clear();
        }
    }
}

/// The container's log file; reopened (after rotation) on request.
pub struct CriLog {
    path: PathBuf,
    base: Option<PathBuf>,
    file: File,
}

impl CriLog {
    /// Opens `path`; with `base` (the pod's log directory) it is opened beneath it.
    pub fn open(path: &Path, base: Option<&Path>) -> io::Result<CriLog> {
        let base = base.filter(|b| path.starts_with(b)).map(Path::to_path_buf);
        Ok(CriLog { path: path.to_path_buf(), file: open_append(path, base.as_deref())?, base })
    }

    pub fn reopen(&mut self) -> io::Result<()> {
        self.file = open_append(&self.path, self.base.as_deref())?;
        Ok(())
    }

    pub fn record(&mut self, stream: Stream, content: &[u8], partial: bool) -> io::Result<()> {
        let mut line = Vec::with_capacity(content.len() + 48);
        line.extend_from_slice(timestamp().as_bytes());
        line.push(b' ');
        line.extend_from_slice(stream.name().as_bytes());
        line.extend_from_slice(if partial { b" P " } else { b" F " });
        line.extend_from_slice(content);
        line.push(b'\n');
        self.file.write_all(&line)
    }
}

fn open_append(path: &Path, base: Option<&Path>) -> io::Result<File> {
    let file = match base.and_then(|b| Some((b, path.strip_prefix(b).ok()?))) {
        Some((base, rel)) => {
            private::create_dir_all(base)?;
            crate::store::confined::append_beneath(base, rel, private::LOG)?
        }
        None => {
            if let Some(dir) = path.parent() {
                private::create_dir_all(dir)?;
            }
            // Never through a symbolic link at the end.
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(private::LOG)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(path)?
        }
    };
    // A log written by an earlier version may be readable by everyone.
    let mode = file.metadata()?.permissions().mode() & 0o7777;
    if mode & !private::LOG != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & private::LOG))?;
    }
    Ok(file)
}

pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// The messages of a CRI log, partial lines joined: what `kubectl logs` shows. Lines that
/// are not in the CRI format are kept as they are.
pub fn messages(log: &str) -> String {
    let mut out = String::new();
    for line in log.lines() {
        let mut parts = line.splitn(4, ' ');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(_), Some("stdout" | "stderr"), Some(tag @ ("F" | "P")), message) => {
                out.push_str(message.unwrap_or(""));
                if tag == "F" {
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_a_log() {
        let cases = [
            ("", ""),
            ("2024-01-01T00:00:00Z stdout F hello\n", "hello\n"),
            ("t stdout P ab\nt stderr F cd\nt stdout F \n", "abcd\n\n"),
            ("t stdout F with spaces  kept\n", "with spaces  kept\n"),
            ("not a cri line\n", "not a cri line\n"),
        ];
        for (log, expected) in cases {
            assert_eq!(messages(log), expected, "{log:?}");
        }
    }

    fn frame(chunks: &[&str], max: usize) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        let mut framer = LineFramer::new(max);
        let mut emit = |c: &[u8], p: bool| out.push((String::from_utf8_lossy(c).into_owned(), p));
        for chunk in chunks {
            framer.feed(chunk.as_bytes(), &mut emit);
        }
        framer.finish(&mut emit);
        out
    }

    #[test]
    fn framing() {
        let f = |s: &str| (s.to_string(), false);
        let p = |s: &str| (s.to_string(), true);
        let cases: Vec<(Vec<&str>, usize, Vec<(String, bool)>)> = vec![
            (vec!["hello\nworld\n"], 100, vec![f("hello"), f("world")]),
            (vec!["hel", "lo\n"], 100, vec![f("hello")]),
            (vec!["\n\n"], 100, vec![f(""), f("")]),
            (vec!["abcdefgh\n"], 3, vec![p("abc"), p("def"), f("gh")]),
            (vec!["abcdef\n"], 3, vec![p("abc"), f("def")]),
            (vec!["ab", "cd", "e\n"], 2, vec![p("ab"), p("cd"), f("e")]),
            (vec!["ab", "\n"], 2, vec![f("ab")]),
            (vec!["no newline"], 100, vec![p("no newline")]),
            (vec!["line\nDONE"], 100, vec![f("line"), p("DONE")]),
        ];
        for (chunks, max, expected) in cases {
            assert_eq!(frame(&chunks, max), expected, "{chunks:?} max {max}");
        }
    }

    #[test]
    fn records_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c/0.log");
        let mut log = CriLog::open(&path, None).unwrap();
        log.record(Stream::Stdout, b"one", false).unwrap();
        std::fs::rename(&path, dir.path().join("rotated")).unwrap();
        log.reopen().unwrap();
        log.record(Stream::Stderr, b"two", true).unwrap();
        let rotated = std::fs::read_to_string(dir.path().join("rotated")).unwrap();
        let current = std::fs::read_to_string(&path).unwrap();
        let re = |line: &str, stream: &str, tag: &str, content: &str| {
            let mut parts = line.splitn(4, ' ');
            let ts = parts.next().unwrap();
            assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
            assert!(ts.ends_with('Z') && ts.len() == "2024-01-01T00:00:00.000000000Z".len(), "{ts}");
            assert_eq!((parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap()), (stream, tag, content));
        };
        re(rotated.trim_end(), "stdout", "F", "one");
        re(current.trim_end(), "stderr", "P", "two");
    }
}
