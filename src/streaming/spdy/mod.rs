//! SPDY/3.1 framing, as Kubernetes' remote-command and port-forward protocols use it: control
//! and data frames, and header blocks compressed with one zlib stream per direction primed
//! with the protocol's dictionary.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

pub const FLAG_FIN: u8 = 0x01;
const VERSION: u16 = 3;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// Largest frame payload accepted (the length field allows 16 MiB).
pub const MAX_PAYLOAD: usize = 1 << 24;

pub type Headers = Vec<(String, String)>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream: u32,
        associated: u32,
        priority: u8,
        flags: u8,
        headers: Headers,
    },
    SynReply {
        stream: u32,
        flags: u8,
        headers: Headers,
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    Settings {
        flags: u8,
        entries: Vec<(u8, u32, u32)>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_stream: u32,
        status: u32,
    },
    Headers {
        stream: u32,
        flags: u8,
        headers: Headers,
    },
    WindowUpdate {
        stream: u32,
        delta: u32,
    },
    Data {
        stream: u32,
        flags: u8,
        data: Vec<u8>,
    },
    /// A control frame type this endpoint ignores.
    Unknown {
        kind: u16,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpdyError {
    #[error("SPDY version {0} (only 3 is spoken)")]
    Version(u16),
    #[error("SPDY frame too short for its type")]
    Short,
    #[error("SPDY frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("SPDY header block: {0}")]
    HeaderBlock(String),
}

/// The zlib dictionary of SPDY/3 header blocks: length-prefixed words, then a run of
/// status codes, reason phrases, dates and media types.
pub fn dictionary() -> Vec<u8> {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TAIL: &str = concat!(
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
        "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
        "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
        "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
        "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
        "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
        "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
    );
    let mut dict = Vec::with_capacity(1423);
    for word in WORDS {
        dict.extend_from_slice(&(word.len() as u32).to_be_bytes());
        dict.extend_from_slice(word.as_bytes());
    }
    dict.extend_from_slice(TAIL.as_bytes());
    dict
}

/// Compresses this endpoint's header blocks (one zlib stream for the connection).
pub struct HeaderEncoder {
    zlib: Compress,
}

impl Default for HeaderEncoder {
    fn default() -> Self {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(&dictionary()).expect("a fresh zlib stream takes a dictionary");
        HeaderEncoder { zlib }
    }
}

impl HeaderEncoder {
    pub fn encode(&mut self, headers: &Headers) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (name, value) in headers {
            for part in [name.to_ascii_lowercase().as_bytes(), value.as_bytes()] {
                raw.extend_from_slice(&(part.len() as u32).to_be_bytes());
                raw.extend_from_slice(part);
            }
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(256);
            }
            let before = self.zlib.total_in();
            self.zlib.compress_vec(&raw[consumed..], &mut out, FlushCompress::Sync).expect("deflate cannot fail here");
            consumed += (self.zlib.total_in() - before) as usize;
            // Done when all input is in and the sync flush left spare room.
            if consumed == raw.len() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

/// Decompresses the peer's header blocks.
pub struct HeaderDecoder {
    zlib: Decompress,
    /// Largest decompressed block: a small compressed block may expand a thousandfold.
    max_block: usize,
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        HeaderDecoder::new(MAX_PAYLOAD)
    }
}

impl HeaderDecoder {
    pub fn new(max_block: usize) -> Self {
        HeaderDecoder { zlib: Decompress::new(true), max_block }
    }

    pub fn decode(&mut self, block: &[u8]) -> Result<Headers, SpdyError> {
        let err = |m: String| SpdyError::HeaderBlock(m);
        let mut raw = Vec::with_capacity(block.len() * 4 + 64);
        let mut consumed = 0;
        loop {
            if raw.capacity() - raw.len() < 256 {
                raw.reserve(raw.capacity().max(1024));
            }
            let before = self.zlib.total_in();
            match self.zlib.decompress_vec(&block[consumed..], &mut raw, FlushDecompress::Sync) {
                Ok(Status::StreamEnd) => return Err(err("the zlib stream ended".into())),
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.zlib.set_dictionary(&dictionary()).map_err(|e| err(e.to_string()))?;
                }
                Err(e) => return Err(err(e.to_string())),
            }
            let used = (self.zlib.total_in() - before) as usize;
            consumed += used;
            let room_left = raw.len() < raw.capacity();
            if (consumed >= block.len() || used == 0) && room_left {
                break;
            }
            if raw.len() > self.max_block {
                return Err(err(format!("header block over {} bytes", self.max_block)));
            }
        }
        parse_header_block(&raw).ok_or_else(|| err("malformed name/value block".into()))
    }
}

fn parse_header_block(raw: &[u8]) -> Option<Headers> {
    let mut cursor = Cursor(raw);
    let count = cursor.u32()?;
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = cursor.bytes()?;
        let value = cursor.bytes()?;
        headers.push((String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned()));
    }
    Some(headers)
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_at_checked(4)?;
        self.0 = rest;
        Some(u32::from_be_bytes(head.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        let (head, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(head)
    }
}

/// The payload length announced by a frame's 8-byte header.
pub fn payload_len(header: &[u8; 8]) -> usize {
    u32::from_be_bytes([0, header[5], header[6], header[7]]) as usize
}

/// Decodes one frame from its 8-byte header and payload.
pub fn decode(header: &[u8; 8], payload: &[u8], headers: &mut HeaderDecoder) -> Result<Frame, SpdyError> {
    let flags = header[4];
    if header[0] & 0x80 == 0 {
        let stream = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) & 0x7fff_ffff;
        return Ok(Frame::Data { stream, flags, data: payload.to_vec() });
    }
    let version = u16::from_be_bytes([header[0] & 0x7f, header[1]]);
    if version != VERSION {
        return Err(SpdyError::Version(version));
    }
    let kind = u16::from_be_bytes([header[2], header[3]]);
    let mut c = Cursor(payload);
    let id = |c: &mut Cursor| c.u32().map(|v| v & 0x7fff_ffff).ok_or(SpdyError::Short);
    Ok(match kind {
        SYN_STREAM => {
            let stream = id(&mut c)?;
            let associated = id(&mut c)?;
            let (pri, rest) = c.0.split_at_checked(2).ok_or(SpdyError::Short)?;
            Frame::SynStream { stream, associated, priority: pri[0] >> 5, flags, headers: headers.decode(rest)? }
        }
        SYN_REPLY => {
            let stream = id(&mut c)?;
            Frame::SynReply { stream, flags, headers: headers.decode(c.0)? }
        }
        HEADERS => {
            let stream = id(&mut c)?;
            Frame::Headers { stream, flags, headers: headers.decode(c.0)? }
        }
        RST_STREAM => Frame::RstStream { stream: id(&mut c)?, status: c.u32().ok_or(SpdyError::Short)? },
        SETTINGS => {
            let n = c.u32().ok_or(SpdyError::Short)?;
            let mut entries = Vec::new();
            for _ in 0..n {
                let word = c.u32().ok_or(SpdyError::Short)?;
                entries.push(((word >> 24) as u8, word & 0x00ff_ffff, c.u32().ok_or(SpdyError::Short)?));
            }
            Frame::Settings { flags, entries }
        }
        PING => Frame::Ping { id: c.u32().ok_or(SpdyError::Short)? },
        GOAWAY => Frame::GoAway { last_stream: id(&mut c)?, status: c.u32().unwrap_or(0) },
        WINDOW_UPDATE => Frame::WindowUpdate { stream: id(&mut c)?, delta: id(&mut c)? },
        other => Frame::Unknown { kind: other },
    })
}

fn control(kind: u16, flags: u8, payload: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&payload);
    out
}

/// Encodes one frame (data frames longer than the length field must be split by the caller).
pub fn encode(frame: &Frame, headers: &mut HeaderEncoder) -> Vec<u8> {
    let be = |v: u32| v.to_be_bytes();
    match frame {
        Frame::Data { stream, flags, data } => {
            let mut out = Vec::with_capacity(8 + data.len());
            out.extend_from_slice(&be(stream & 0x7fff_ffff));
            out.push(*flags);
            out.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
            out.extend_from_slice(data);
            out
        }
        Frame::SynStream { stream, associated, priority, flags, headers: h } => {
            let mut p = [be(*stream), be(*associated)].concat();
            p.extend_from_slice(&[priority << 5, 0]);
            p.extend(headers.encode(h));
            control(SYN_STREAM, *flags, p)
        }
        Frame::SynReply { stream, flags, headers: h } => {
            let mut p = be(*stream).to_vec();
            p.extend(headers.encode(h));
            control(SYN_REPLY, *flags, p)
        }
        Frame::Headers { stream, flags, headers: h } => {
            let mut p = be(*stream).to_vec();
            p.extend(headers.encode(h));
            control(HEADERS, *flags, p)
        }
        Frame::RstStream { stream, status } => control(RST_STREAM, 0, [be(*stream), be(*status)].concat()),
        Frame::Settings { flags, entries } => {
            let mut p = be(entries.len() as u32).to_vec();
            for (f, id, value) in entries {
                p.extend_from_slice(&be(((*f as u32) << 24) | (id & 0x00ff_ffff)));
                p.extend_from_slice(&be(*value));
            }
            control(SETTINGS, *flags, p)
        }
        Frame::Ping { id } => control(PING, 0, be(*id).to_vec()),
        Frame::GoAway { last_stream, status } => control(GOAWAY, 0, [be(*last_stream), be(*status)].concat()),
        Frame::WindowUpdate { stream, delta } => control(WINDOW_UPDATE, 0, [be(*stream), be(*delta)].concat()),
        Frame::Unknown { kind } => control(*kind, 0, Vec::new()),
    }
}

#[cfg(test)]
mod tests;
