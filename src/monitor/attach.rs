//! Attach: the monitor holds the container's stdio, so a client (a streaming session of the
//! daemon, before or after a daemon restart) connects to the monitor's attach socket to get
//! the output live and to write to stdin.
//!
//! Wire format: the client sends one JSON line (`Hello`), then frames
//! `[kind u8][length u32 big-endian][payload]` both ways: stdout/stderr from the monitor;
//! stdin data, end of stdin and a terminal size from the client.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::log::Stream;
use crate::monitor::terminal::{self, TerminalSize};

pub const OUT_STDOUT: u8 = 1;
pub const OUT_STDERR: u8 = 2;
pub const IN_STDIN: u8 = 0;
pub const IN_CLOSE_STDIN: u8 = 1;
pub const IN_RESIZE: u8 = 2;

/// Frames larger than this are refused (a broken or hostile client).
pub const MAX_FRAME: usize = 1 << 20;

/// Output queued for one client; a client that falls this far behind is dropped so the
/// container's output (and its log) never waits for it.
const QUEUE: usize = 1024;

/// What a client wants, sent first.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Hello {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

pub fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A terminal size as a resize frame's payload.
pub fn size_payload(size: TerminalSize) -> [u8; 4] {
    let (w, h) = (size.width.to_be_bytes(), size.height.to_be_bytes());
    [w[0], w[1], h[0], h[1]]
}

fn size_from(payload: &[u8]) -> Option<TerminalSize> {
    match payload {
        [w0, w1, h0, h1] => {
            Some(TerminalSize { width: u16::from_be_bytes([*w0, *w1]), height: u16::from_be_bytes([*h0, *h1]) })
        }
        _ => None,
    }
}

/// Reads one frame: kind and payload; None at end of stream or on a malformed frame.
pub fn read_frame(from: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    from.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return None;
    }
    let mut payload = vec![0u8; len];
    from.read_exact(&mut payload).ok()?;
    Some((head[0], payload))
}

/// Where clients' input goes.
pub enum Stdin {
    /// The container was created without stdin.
    None,
    /// The write end of the container's stdin pipe; taken away when stdin is closed.
    Pipe(Mutex<Option<File>>),
    /// The pty master of a terminal container.
    Terminal(File),
}

struct Client {
    id: u64,
    hello: Hello,
    queue: SyncSender<Vec<u8>>,
    writer: std::thread::JoinHandle<()>,
}

/// The attached clients of one container.
pub struct Hub {
    clients: Mutex<Vec<Client>>,
    stdin: Stdin,
    stdin_once: bool,
    next_id: Mutex<u64>,
}

impl Hub {
    pub fn new(stdin: Stdin, stdin_once: bool) -> Arc<Hub> {
        Arc::new(Hub { clients: Mutex::default(), stdin, stdin_once, next_id: Mutex::new(0) })
    }

    /// Hands output to every client that wants this stream.
    pub fn broadcast(&self, stream: Stream, data: &[u8]) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.is_empty() {
            return;
        }
        let kind = match stream {
            Stream::Stdout => OUT_STDOUT,
            Stream::Stderr => OUT_STDERR,
        };
        let bytes = frame(kind, data);
        clients.retain(|c| {
            let wanted = match stream {
                Stream::Stdout => c.hello.stdout,
                Stream::Stderr => c.hello.stderr,
            };
            if !wanted {
                return true;
            }
            match c.queue.try_send(bytes.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    eprintln!("attach client {} is too slow; dropped", c.id);
                    false
                }
                Err(TrySendError::Disconnected(_)) => false,
            }
        });
    }

    /// Serves the attach socket in the background.
    pub fn serve(self: &Arc<Self>, path: &Path) {
        let _ = std::fs::remove_file(path);
        let listener = match UnixListener::bind(path) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("attach socket {}: {e}", path.display());
                return;
            }
        };
        let hub = self.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let hub = hub.clone();
                std::thread::spawn(move || hub.handle(conn));
            }
        });
    }

    fn handle(self: Arc<Self>, conn: UnixStream) {
        let mut reader = BufReader::new(match conn.try_clone() {
            Ok(c) => c,
            Err(_) => return,
        });
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        let Ok(hello) = serde_json::from_str::<Hello>(line.trim()) else { return };
        let id = {
            let mut next = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        if hello.stdout || hello.stderr {
            let (queue, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUE);
            let mut out = match conn.try_clone() {
                Ok(c) => c,
                Err(_) => return,
            };
            let writer = std::thread::spawn(move || {
                for bytes in rx {
                    if out.write_all(&bytes).is_err() {
                        break;
                    }
                }
                let _ = out.shutdown(std::net::Shutdown::Write);
            });
            self.clients.lock().unwrap_or_else(|p| p.into_inner()).push(Client { id, hello, queue, writer });
        }
        while let Some((kind, payload)) = read_frame(&mut reader) {
            match kind {
                IN_STDIN if hello.stdin => self.write_stdin(&payload),
                IN_CLOSE_STDIN if hello.stdin => self.close_stdin(),
                IN_RESIZE => {
                    if let (Stdin::Terminal(master), Some(size)) = (&self.stdin, size_from(&payload)) {
                        let _ = terminal::set_size(master.as_fd(), size);
                    }
                }
                _ => {}
            }
        }
        // The client hung up: stop sending to it.
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).retain(|c| c.id != id);
    }

    fn write_stdin(&self, data: &[u8]) {
        match &self.stdin {
            Stdin::None => {}
            Stdin::Pipe(pipe) => {
                if let Some(pipe) = pipe.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                    let _ = pipe.write_all(data);
                }
            }
            Stdin::Terminal(master) => {
                let _ = (&*master).write_all(data);
            }
        }
    }

    /// A client ended its stdin: with stdin_once the container's stdin ends too (end of
    /// file on a pipe, the end-of-file character on a terminal).
    fn close_stdin(&self) {
        if !self.stdin_once {
            return;
        }
        match &self.stdin {
            Stdin::None => {}
            Stdin::Pipe(pipe) => drop(pipe.lock().unwrap_or_else(|p| p.into_inner()).take()),
            Stdin::Terminal(master) => {
                let _ = (&*master).write_all(&[0x04]);
            }
        }
    }

    /// The container exited and its output is drained: clients get what is queued, then
    /// end of stream.
    pub fn finish(&self, wait: Duration) {
        let clients = std::mem::take(&mut *self.clients.lock().unwrap_or_else(|p| p.into_inner()));
        let deadline = Instant::now() + wait;
        for client in clients {
            drop(client.queue);
            while !client.writer.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(path: &Path, hello: Hello) -> UnixStream {
        let mut conn = UnixStream::connect(path).unwrap();
        conn.write_all(format!("{}\n", serde_json::to_string(&hello).unwrap()).as_bytes()).unwrap();
        conn
    }

    fn wait_for_clients(hub: &Hub, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while hub.clients.lock().unwrap().len() != n {
            assert!(Instant::now() < deadline, "never {n} clients");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn fans_output_out_and_takes_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let (stdin_r, stdin_w) = nix::unistd::pipe().unwrap();
        let hub = Hub::new(Stdin::Pipe(Mutex::new(Some(File::from(stdin_w)))), true);
        let path = dir.path().join("attach");
        hub.serve(&path);
        let mut both = connect(&path, Hello { stdin: true, stdout: true, stderr: true });
        let mut only_err = connect(&path, Hello { stdin: false, stdout: false, stderr: true });
        wait_for_clients(&hub, 2);
        hub.broadcast(Stream::Stdout, b"out");
        hub.broadcast(Stream::Stderr, b"err");
        assert_eq!(read_frame(&mut both), Some((OUT_STDOUT, b"out".to_vec())));
        assert_eq!(read_frame(&mut both), Some((OUT_STDERR, b"err".to_vec())));
        assert_eq!(read_frame(&mut only_err), Some((OUT_STDERR, b"err".to_vec())));

        both.write_all(&frame(IN_STDIN, b"typed")).unwrap();
        both.write_all(&frame(IN_CLOSE_STDIN, b"")).unwrap();
        let mut typed = Vec::new();
        File::from(stdin_r).read_to_end(&mut typed).unwrap(); // ends: stdin_once closed the pipe
        assert_eq!(typed, b"typed");

        drop(only_err);
        wait_for_clients(&hub, 1);
        hub.finish(Duration::from_secs(2));
        assert_eq!(read_frame(&mut both), None, "end of stream after finish");
    }

    #[test]
    fn resizes_a_terminal_and_ignores_bad_frames() {
        let dir = tempfile::tempdir().unwrap();
        let pty = nix::pty::openpty(None, None).unwrap();
        let hub = Hub::new(Stdin::Terminal(File::from(pty.master)), false);
        let path = dir.path().join("attach");
        hub.serve(&path);
        let mut conn = connect(&path, Hello { stdin: true, stdout: true, stderr: false });
        wait_for_clients(&hub, 1);
        conn.write_all(&frame(IN_RESIZE, &size_payload(TerminalSize { width: 90, height: 30 }))).unwrap();
        conn.write_all(&frame(IN_STDIN, b"x\n")).unwrap();
        let mut slave = File::from(pty.slave);
        let mut b = [0u8; 1];
        slave.read_exact(&mut b).unwrap(); // the resize frame was handled before this byte
        let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: valid fd and a winsize to fill.
        assert_eq!(unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&slave), libc::TIOCGWINSZ, &mut ws) }, 0);
        assert_eq!((ws.ws_col, ws.ws_row, b[0]), (90, 30, b'x'));
        // A frame claiming more than the limit ends that client only.
        let mut huge = vec![IN_STDIN];
        huge.extend_from_slice(&((MAX_FRAME as u32) + 1).to_be_bytes());
        conn.write_all(&huge).unwrap();
        wait_for_clients(&hub, 0);
    }
}
