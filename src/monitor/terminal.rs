//! Terminal sizes: the resize channel carries JSON objects `{"Width":W,"Height":H}` one after
//! another, cut anywhere by the transport; a size is applied to a pty with TIOCSWINSZ.

use std::os::fd::{AsRawFd, BorrowedFd};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    #[serde(rename = "Width")]
    pub width: u16,
    #[serde(rename = "Height")]
    pub height: u16,
}

/// Longest unfinished message kept; anything longer is not a size and is dropped.
const MAX_PENDING: usize = 4096;

/// Turns the bytes of a resize channel into sizes.
#[derive(Default)]
pub struct SizeDecoder {
    pending: Vec<u8>,
}

impl SizeDecoder {
    /// The complete sizes in `data` (with what earlier calls left unfinished).
    pub fn feed(&mut self, data: &[u8]) -> Vec<TerminalSize> {
        self.pending.extend_from_slice(data);
        let mut sizes = Vec::new();
        let mut consumed = 0;
        let mut stream = serde_json::Deserializer::from_slice(&self.pending).into_iter::<serde_json::Value>();
        loop {
            match stream.next() {
                Some(Ok(value)) => {
                    consumed = stream.byte_offset();
                    // A well-formed message that is not a size is skipped, not fatal.
                    if let Ok(size) = serde_json::from_value::<TerminalSize>(value) {
                        sizes.push(size);
                    }
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(_)) => {
                    // Garbage: drop everything received so far and start again.
                    consumed = self.pending.len();
                    break;
                }
                None => {
                    consumed = self.pending.len();
                    break;
                }
            }
        }
        self.pending.drain(..consumed);
        if self.pending.len() > MAX_PENDING {
            self.pending.clear();
        }
        sizes
    }
}

nix::ioctl_write_ptr_bad!(tiocswinsz, libc::TIOCSWINSZ, libc::winsize);

/// Sets the window size of the pty `fd` (master or slave); the kernel signals SIGWINCH to
/// the terminal's foreground process group.
pub fn set_size(fd: BorrowedFd<'_>, size: TerminalSize) -> nix::Result<()> {
    let ws = libc::winsize { ws_row: size.height, ws_col: size.width, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: fd is a valid open descriptor for the duration of the call; ws outlives it.
    unsafe { tiocswinsz(fd.as_raw_fd(), &ws) }.map(|_| ())
}

/// Raw mode (no echo, no line editing, no signals): a pty that only relays bytes.
pub fn make_raw(fd: BorrowedFd<'_>) -> nix::Result<()> {
    use nix::sys::termios;
    let mut attrs = termios::tcgetattr(fd)?;
    termios::cfmakeraw(&mut attrs);
    termios::tcsetattr(fd, termios::SetArg::TCSANOW, &attrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(width: u16, height: u16) -> TerminalSize {
        TerminalSize { width, height }
    }

    #[test]
    fn decodes_sizes_cut_anywhere() {
        let cases: &[(&[&str], &[TerminalSize])] = &[
            (&[r#"{"Width":80,"Height":24}"#], &[size(80, 24)]),
            (&[r#"{"Width":80,"Height":24}{"Width":100,"Height":40}"#], &[size(80, 24), size(100, 40)]),
            (&[r#"{"Width":8"#, r#"0,"Height":24}"#], &[size(80, 24)]),
            (&[r#"{"Width":1,"Height":2}"#, " \n", r#"{"Height":3,"Width":4}"#], &[size(1, 2), size(4, 3)]),
            (&[r#"{"Other":1}{"Width":5,"Height":6}"#], &[size(5, 6)]),
            (&[r#"{"Width":-1,"Height":6}"#], &[]),
            (&["not json", r#"{"Width":7,"Height":8}"#], &[size(7, 8)]),
        ];
        for (chunks, want) in cases {
            let mut decoder = SizeDecoder::default();
            let got: Vec<_> = chunks.iter().flat_map(|c| decoder.feed(c.as_bytes())).collect();
            assert_eq!(&got, want, "chunks {chunks:?}");
        }
    }

    #[test]
    fn an_endless_message_is_dropped() {
        let mut decoder = SizeDecoder::default();
        let mut endless = String::from("{\"Width\":\"");
        endless.push_str(&"x".repeat(MAX_PENDING + 10));
        assert!(decoder.feed(endless.as_bytes()).is_empty());
        assert!(decoder.pending.is_empty());
        assert_eq!(decoder.feed(br#"{"Width":3,"Height":4}"#), vec![size(3, 4)]);
    }

    #[test]
    fn sets_the_size_of_a_pty() {
        let pty = nix::pty::openpty(None, None).unwrap();
        use std::os::fd::AsFd;
        set_size(pty.master.as_fd(), size(132, 43)).unwrap();
        let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: valid fd and a winsize to fill.
        assert_eq!(unsafe { libc::ioctl(pty.slave.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) }, 0);
        assert_eq!((ws.ws_col, ws.ws_row), (132, 43));
    }
}
