//! The daemon's control socket, `daemon.sock` in the run directory (root's own, mode 0700):
//! `unbloat reload` and `unbloat status` ask the running daemon here. One JSON line asks, one
//! JSON line answers, then the connection closes.
//!
//! Only root reaches the socket (the directory's mode), so no other check is made; a request
//! longer than [`MAX_REQUEST`] bytes is refused unread.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use unbloat_units::Rate;

use crate::keeper::{Health, Refusal, Reloaded};

/// Far more than any request needs.
pub const MAX_REQUEST: u64 = 4096;
/// A reload applies a transaction: in User-Mode Linux that may take seconds.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "cmd")]
pub enum Request {
    Status,
    Reload,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum Answer {
    Status(DaemonStatus),
    Reloaded(Reloaded),
    Refused(Refusal),
}

/// What `unbloat status` shows of the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    pub config: String,
    pub started_unix: u64,
    pub interfaces: Vec<(String, Health)>,
    pub reapplies: u64,
    pub failures: u64,
    pub link_events: u64,
    pub metrics: Option<String>,
    pub web: Option<String>,
    /// The rates autorate has set, download and upload in bits per second, by interface.
    #[serde(default)]
    pub autorate: BTreeMap<String, (u64, u64)>,
    /// Why a table's controller does not run (yet), by interface: its interface does not exist,
    /// is not shaped, or another controller holds it.
    #[serde(default)]
    pub autorate_waits: BTreeMap<String, String>,
    /// The network each interface that follows one is on, and why.
    #[cfg(feature = "networks")]
    #[serde(default)]
    pub networks: BTreeMap<String, crate::seen::Seen>,
}

impl DaemonStatus {
    /// One line per interface under a header, for `unbloat status`.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "daemon: running (pid {}, config {}, {} re-applies, {} failures, {} link events)\n",
            self.pid, self.config, self.reapplies, self.failures, self.link_events
        );
        for (name, h) in &self.interfaces {
            out.push_str(&format!("  {name}: {}\n", h.describe()));
            #[cfg(feature = "networks")]
            if let Some(seen) = self.networks.get(name) {
                out.push_str(&format!("  {name}: on {}\n", seen.describe()));
            }
            if let Some(&(down, up)) = self.autorate.get(name) {
                out.push_str(&format!(
                    "  {name}: autorate at {} down, {} up\n",
                    Rate::from_bits_per_sec(down),
                    Rate::from_bits_per_sec(up)
                ));
            }
            if let Some(why) = self.autorate_waits.get(name) {
                out.push_str(&format!("  {name}: autorate waits: {why}\n"));
            }
        }
        for (what, addr) in [("metrics", &self.metrics), ("web page", &self.web)] {
            if let Some(a) = addr {
                out.push_str(&format!("  {what}: http://{a}/\n"));
            }
        }
        out
    }
}

pub fn socket_path(run_dir: &Path) -> PathBuf {
    run_dir.join("daemon.sock")
}

/// Binds the socket, replacing one a dead daemon left (a live one is refused: it answers).
pub fn bind(run_dir: &Path) -> io::Result<UnixListener> {
    let path = socket_path(run_dir);
    if UnixStream::connect(&path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "another unbloat daemon answers on {}; stop it first",
                path.display()
            ),
        ));
    }
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Reads one request from a connection.
pub fn read_request(stream: &UnixStream) -> io::Result<Request> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(stream.take(MAX_REQUEST)).read_line(&mut line)?;
    if !line.ends_with('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no request line (too long, or cut short)",
        ));
    }
    serde_json::from_str(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub fn write_answer(mut stream: &UnixStream, answer: &Answer) -> io::Result<()> {
    let mut text = serde_json::to_string(answer).map_err(io::Error::other)?;
    text.push('\n');
    stream.write_all(text.as_bytes())
}

/// Asks the daemon of `run_dir`; `Ok(None)` when no daemon runs there.
pub fn ask(run_dir: &Path, request: &Request) -> io::Result<Option<Answer>> {
    let mut stream = match UnixStream::connect(socket_path(run_dir)) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let mut text = serde_json::to_string(request).map_err(io::Error::other)?;
    text.push('\n');
    stream.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream.take(1 << 20)).read_line(&mut line)?;
    serde_json::from_str(&line)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
