use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn dictionary_is_the_protocols() {
    let dict = dictionary();
    assert_eq!(dict.len(), 1423);
    assert!(dict.starts_with(b"\x00\x00\x00\x07options\x00\x00\x00\x04head"));
    assert!(dict.ends_with(b"utf-,*,enq=0."));
}

/// Two header blocks in one zlib stream, captured from C zlib primed with the dictionary
/// (zlib header 78 bb, dictionary id e3c6a7c2, as SPDY/3 peers send them).
#[test]
fn decodes_captured_header_blocks() {
    let mut decoder = HeaderDecoder::default();
    let first = hex("78bbe3c6a7c202e50e703a2b294a4dcc851625aca9a0808614cb45e01c6061606100000000ffff");
    assert_eq!(decoder.decode(&first).unwrap(), headers(&[("streamtype", "error"), ("port", "8080")]));
    let second = hex("02d28c184a81893b25bfb404000000ffff");
    assert_eq!(decoder.decode(&second).unwrap(), headers(&[("streamtype", "stdout")]));
}

#[test]
fn header_blocks_round_trip_across_many_frames() {
    let (mut enc, mut dec) = (HeaderEncoder::default(), HeaderDecoder::default());
    for i in 0..200 {
        let h = headers(&[("streamType", "data"), ("port", &format!("{}", 1000 + i)), ("requestID", &i.to_string())]);
        let block = enc.encode(&h);
        let got = dec.decode(&block).unwrap();
        let lower: Headers = h.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())).collect();
        assert_eq!(got, lower, "block {i}");
    }
    let big = headers(&[("x", &"v".repeat(100_000))]);
    assert_eq!(dec.decode(&enc.encode(&big)).unwrap(), big);
}

#[test]
fn frames_have_the_wire_layout() {
    let mut enc = HeaderEncoder::default();
    let cases: Vec<(Frame, &str)> = vec![
        (Frame::Data { stream: 5, flags: FLAG_FIN, data: b"hi".to_vec() }, "00000005010000026869"),
        (Frame::Ping { id: 7 }, "800300060000000400000007"),
        (Frame::RstStream { stream: 3, status: 5 }, "80030003000000080000000300000005"),
        (Frame::WindowUpdate { stream: 1, delta: 65536 }, "80030009000000080000000100010000"),
        (Frame::GoAway { last_stream: 9, status: 0 }, "80030007000000080000000900000000"),
        (Frame::Settings { flags: 0, entries: vec![(0, 7, 65536)] }, "800300040000000c000000010000000700010000"),
    ];
    for (frame, want) in cases {
        assert_eq!(encode(&frame, &mut enc), hex(want), "{frame:?}");
    }
}

#[test]
fn frames_round_trip() {
    let (mut enc, mut dec) = (HeaderEncoder::default(), HeaderDecoder::default());
    let frames = vec![
        Frame::SynStream {
            stream: 1,
            associated: 0,
            priority: 0,
            flags: 0,
            headers: headers(&[("streamtype", "error")]),
        },
        Frame::SynReply { stream: 1, flags: 0, headers: vec![] },
        Frame::Headers { stream: 1, flags: 0, headers: headers(&[("a", "b")]) },
        Frame::Data { stream: 1, flags: 0, data: vec![0; 70_000] },
        Frame::Ping { id: 2 },
        Frame::Settings { flags: 1, entries: vec![(1, 4, 100), (0, 7, 1 << 20)] },
    ];
    for frame in frames {
        let bytes = encode(&frame, &mut enc);
        let header: [u8; 8] = bytes[..8].try_into().unwrap();
        assert_eq!(payload_len(&header), bytes.len() - 8);
        assert_eq!(decode(&header, &bytes[8..], &mut dec).unwrap(), frame);
    }
}

#[test]
fn bad_frames_are_errors_not_panics() {
    let mut dec = HeaderDecoder::default();
    let v2: [u8; 8] = hex("8002000100000000").try_into().unwrap();
    assert_eq!(decode(&v2, &[], &mut dec), Err(SpdyError::Version(2)));
    let syn: [u8; 8] = hex("8003000100000002").try_into().unwrap();
    assert_eq!(decode(&syn, &[0, 0], &mut dec), Err(SpdyError::Short));
    let garbage = [0u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6];
    assert!(matches!(decode(&syn, &garbage, &mut dec), Err(SpdyError::HeaderBlock(_))));
    let unknown: [u8; 8] = hex("8003000f00000000").try_into().unwrap();
    assert_eq!(decode(&unknown, &[], &mut dec), Ok(Frame::Unknown { kind: 15 }));
}
