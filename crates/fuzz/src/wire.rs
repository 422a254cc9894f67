//! What arrives on a socket: the daemon's HTTP heads, `unbloat serve`'s frames and probes.

use std::io::Cursor;

use unbloat_daemon::http::parse_head;
use unbloat_measure::protocol::{
    read_frame, read_hello, ClientMsg, ProbeReply, ProbeRequest, ServerMsg,
};

/// The daemon's HTTP server (page and metrics) on the bytes a client has sent: a head takes
/// some of them, or is refused with one of the statuses the server sends for a bad head.
pub fn http_head(data: &[u8]) -> bool {
    match parse_head(data) {
        None => false,
        Some((n, Ok((_head, _length, _close)))) => {
            assert!(
                n > 0 && n <= data.len(),
                "a head of {n} bytes in {}",
                data.len()
            );
            true
        }
        Some((_, Err(refusal))) => {
            assert!(
                [400, 411, 413, 431, 501].contains(&refusal.status),
                "refused with {}",
                refusal.status
            );
            false
        }
    }
}

/// `unbloat serve`'s control connection, read as either end reads it: the hello, then frames
/// until the bytes end, each decoded as a client's and a server's message; and the bytes as a
/// UDP probe and its reply. What decodes is encoded back and decodes the same.
pub fn serve_frames(data: &[u8]) -> bool {
    let mut took = ProbeRequest::decode(data).is_ok() | ProbeReply::decode(data).is_ok();
    let mut stream = Cursor::new(data);
    let _ = read_hello(&mut stream);
    while let Ok(body) = read_frame(&mut stream) {
        if let Ok(msg) = ClientMsg::decode(&body) {
            assert_eq!(ClientMsg::decode(&msg.encode()).ok(), Some(msg));
            took = true;
        }
        if let Ok(msg) = ServerMsg::decode(&body) {
            assert_eq!(ServerMsg::decode(&msg.encode()).ok(), Some(msg));
            took = true;
        }
    }
    took
}
