//! Issue 36 item 13, through the built binary: a connection the far end closes is the far end's
//! doing (exit 3, said in words, partial results kept), and a closed stdout is the reader's
//! (a quiet end, as for any Unix tool). Both used to be one signal: SIGPIPE killed the test
//! without a word.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

/// A web server with the responsiveness layout whose upload URL has a body limit, as nginx's
/// `client_max_body_size`: a POST is answered 413 at once and the connection closed with its
/// body unread (so the kernel resets it under the client's writes).
fn body_limited_web() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve(conn, port));
        }
    });
    port
}

/// Answers GETs on one keep-alive connection until a POST comes, which it refuses and closes.
fn serve(conn: TcpStream, port: u16) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut conn = conn;
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request).unwrap_or(0) == 0 {
            return;
        }
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 2 {
            line.clear();
        }
        let body = if request.starts_with("POST") {
            let _ = conn.write_all(
                b"HTTP/1.0 413 Content Too Large\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large",
            );
            // As Python's http.server does: FIN, then close with the body unread, which the
            // kernel answers the client's next bytes with RST.
            let _ = conn.shutdown(std::net::Shutdown::Write);
            return;
        } else if request.contains("/.well-known/nq") {
            format!(
                r#"{{"version":1,"urls":{{"small_https_download_url":"http://127.0.0.1:{port}/small","large_https_download_url":"http://127.0.0.1:{port}/large","https_upload_url":"http://127.0.0.1:{port}/upload"}}}}"#
            )
        } else {
            "x".to_string()
        };
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        if conn.write_all(head.as_bytes()).is_err() || conn.write_all(body.as_bytes()).is_err() {
            return;
        }
    }
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("broken-pipes-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

#[test]
fn a_far_end_that_closes_an_upload_ends_the_test_with_exit_3_and_says_so() {
    let port = body_limited_web();
    let out_dir = scratch("upload");
    let started = Instant::now();
    let out = Command::new(UNBLOAT)
        .args(["test", &format!("http://127.0.0.1:{port}/.well-known/nq")])
        .args(["--profile", "upload", "--duration", "3s", "--idle", "3s"])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("unbloat runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "{:?}: {text}", out.status);
    assert!(text.contains("127.0.0.1"), "the far end is named: {text}");
    assert!(
        ["reset", "closed", "413"].iter().any(|s| text.contains(s)),
        "says what the far end did: {text}"
    );
    assert!(text.contains("partial"), "{text}");
    let kept: Vec<_> = std::fs::read_dir(&out_dir)
        .expect("out dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        kept.iter().any(|n| n.ends_with(".json")),
        "partial results kept in --out: {kept:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    // The reader is gone before the first write, as `unbloat status | head -c1` is after its
    // first byte: every write fails.
    let mut child = Command::new(UNBLOAT)
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unbloat runs");
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    let status = child.wait().expect("wait");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "nothing to say: {stderr}");
    // Killed by SIGPIPE (as `head` expects) or a quiet exit 0: never an error status.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.success() || status.signal() == Some(SIGPIPE),
        "{status:?}"
    );
}

/// Linux's number for SIGPIPE (the test crate links no libc).
const SIGPIPE: i32 = 13;
