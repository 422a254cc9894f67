//! The lab's far end: which stock server the server namespace runs, and how `unbloat test`
//! reaches it (`unbloat-lab run --far-end`).
//!
//! - `unbloat`: `unbloat serve` (the default; UDP probes with both clocks' stamps).
//! - `http`: Debian's nginx over TLS with HTTP/2, serving the responsiveness test's endpoints
//!   (`/.well-known/nq`, a small object, a large one, an upload sink) with a certificate
//!   authority and certificate the lab makes with openssl for the run; the test trusts that
//!   authority with `--ca-file`.
//! - `irtt-iperf3`: a stock `irtt server` for the probes and a stock `iperf3 -s` for the load.
//!
//! So every before/after can be shown with the servers users already trust. What callers can
//! rely on: [`FarEndKind::start`] returns only once every server listens (or fails with its log),
//! and every process it started is the topology's to stop on teardown.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use unbloat_shaper::invocation::{FarEnd, Test};

use crate::error::{io, LabError};
use crate::topology::{LiveTopology, Node};

/// A far end kind, as `--far-end` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FarEndKind {
    #[default]
    Unbloat,
    Http,
    IrttIperf3,
}

/// Port `unbloat serve` listens on in the lab (its default).
pub const SERVE_PORT: u16 = 4420;
/// The HTTPS port nginx listens on in the lab.
pub const HTTPS_PORT: u16 = 443;
/// The large object: sparse, so it costs no memory, and larger than any lab load moves.
const LARGE_BYTES: u64 = 8 << 30;

impl FarEndKind {
    pub const NAMES: [&'static str; 3] = ["unbloat", "http", "irtt-iperf3"];

    pub fn parse(text: &str) -> Result<FarEndKind, String> {
        match text {
            "unbloat" => Ok(FarEndKind::Unbloat),
            "http" | "https" => Ok(FarEndKind::Http),
            "irtt-iperf3" => Ok(FarEndKind::IrttIperf3),
            other => Err(format!(
                "{other:?}: the far end is one of {}",
                FarEndKind::NAMES.join(", ")
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FarEndKind::Unbloat => "unbloat",
            FarEndKind::Http => "http",
            FarEndKind::IrttIperf3 => "irtt-iperf3",
        }
    }

    /// The programs this far end needs, beyond unbloat itself.
    pub fn programs(self) -> &'static [&'static str] {
        match self {
            FarEndKind::Unbloat => &[],
            FarEndKind::Http => &["nginx", "openssl"],
            FarEndKind::IrttIperf3 => &["irtt", "iperf3"],
        }
    }

    /// Starts the servers in the server namespace; `dir` takes their logs. Returns how
    /// `unbloat test` reaches them, and the site nginx serves (removed on drop).
    pub fn start(
        self,
        live: &mut LiveTopology,
        dir: &Path,
        exe: &Path,
    ) -> Result<Started, LabError> {
        let mut site = None;
        let (far_end, max_connections) = self.start_servers(live, dir, exe, &mut site)?;
        Ok(Started {
            far_end,
            max_connections,
            site,
        })
    }

    fn start_servers(
        self,
        live: &mut LiveTopology,
        dir: &Path,
        exe: &Path,
        site_slot: &mut Option<Site>,
    ) -> Result<(FarEnd, Option<u32>), LabError> {
        let addr = live.topo.server_addr();
        match self {
            FarEndKind::Unbloat => {
                let listen = format!("{addr}:{SERVE_PORT}");
                let argv = [
                    exe.display().to_string(),
                    "serve".into(),
                    "--listen".into(),
                    listen.clone(),
                    // The lab's own server, in its own emulated network: a lab run may load
                    // for an hour (a public server's default allows 2 minutes).
                    "--max-duration".into(),
                    "1440m".into(),
                ];
                spawn_listening(live, dir, "serve", &argv, addr, SERVE_PORT, Proto::Tcp)?;
                let far_end = FarEnd {
                    server: Some(listen),
                    ..FarEnd::default()
                };
                Ok((far_end, None))
            }
            FarEndKind::IrttIperf3 => {
                let irtt = [
                    "irtt".into(),
                    "server".into(),
                    "-b".into(),
                    format!("{addr}:2112"),
                ];
                spawn_listening(live, dir, "irtt", &irtt, addr, 2112, Proto::Udp)?;
                let iperf3 = ["iperf3".into(), "-s".into(), "-B".into(), addr.to_string()];
                spawn_listening(live, dir, "iperf3", &iperf3, addr, 5201, Proto::Tcp)?;
                let far_end = FarEnd {
                    load: Some(format!("iperf3://{addr}")),
                    probe: Some(format!("irtt://{addr}")),
                    ..FarEnd::default()
                };
                Ok((far_end, None))
            }
            FarEndKind::Http => {
                let site = site_slot.insert(Site::make(addr, dir)?);
                spawn_listening(
                    live,
                    dir,
                    "nginx",
                    &site.argv(),
                    addr,
                    HTTPS_PORT,
                    Proto::Tcp,
                )?;
                let far_end = FarEnd {
                    server: Some(site.config_url()),
                    ca_file: Some(site.ca_file()),
                    ..FarEnd::default()
                };
                // As many connections as unbloat serve's rrul streams: the emulation has one
                // CPU, and TLS for 16 more would measure it rather than the link.
                Ok((far_end, Some(4)))
            }
        }
    }
}

/// Running far end servers.
pub struct Started {
    /// How `unbloat test` reaches them.
    pub far_end: FarEnd,
    /// The load connections a web server gets (`--max-connections`).
    pub max_connections: Option<u32>,
    site: Option<Site>,
}

impl Started {
    /// `test` aimed at these servers.
    pub fn aim(&self, test: Test) -> Test {
        Test {
            far_end: self.far_end.clone(),
            max_connections: self.max_connections,
            ..test
        }
    }

    /// Whether a web server's site directory is in use (for tests).
    pub fn site(&self) -> Option<&Path> {
        self.site.as_ref().map(|s| s.root.as_path())
    }
}

/// How long a far end may take to listen. 5 s was once too short: on a busy 2-core host the
/// guest read the 80 MB `unbloat` binary for `serve` from the host's disk for longer, and a
/// five-run benchmark ended in its first run. A healthy start takes well under a second.
const LISTEN_WITHIN: Duration = Duration::from_secs(30);

#[derive(Clone, Copy)]
enum Proto {
    Tcp,
    Udp,
}

/// Starts `argv` in the server namespace with its output in `dir/NAME.log`, and waits (at most
/// [`LISTEN_WITHIN`]) until something listens on `port` there.
fn spawn_listening(
    live: &mut LiveTopology,
    dir: &Path,
    name: &str,
    argv: &[String],
    addr: Ipv4Addr,
    port: u16,
    proto: Proto,
) -> Result<u32, LabError> {
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).map_err(io("cannot create", &log))?;
    let err = out.try_clone().map_err(io("cannot create", &log))?;
    let pid = live.spawn(Node::Server, argv, Stdio::from(out), Stdio::from(err))?;
    let flag = match proto {
        Proto::Tcp => "-ltnH",
        Proto::Udp => "-lunH",
    };
    let ss = unbloat_system::runner::Cmd::new("ss").args([flag.to_string()]);
    let wanted = format!("{addr}:{port}");
    let started = Instant::now();
    loop {
        if !live.is_running(pid) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(LabError::Test {
                strategy: format!("the {name} far end"),
                status: -1,
                detail: format!("`{}` exited at once: {}", argv.join(" "), text.trim()),
            });
        }
        let listening = live
            .run_in(Node::Server, &ss)
            .is_ok_and(|o| o.stdout.contains(&wanted) || o.stdout.contains(&format!("*:{port}")));
        if listening {
            return Ok(pid);
        }
        if started.elapsed() > LISTEN_WITHIN {
            return Err(LabError::Test {
                strategy: format!("the {name} far end"),
                status: -1,
                detail: format!(
                    "`{}` did not listen on {wanted} within {} s",
                    argv.join(" "),
                    LISTEN_WITHIN.as_secs()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nginx's site: configuration, certificate authority and certificate, the endpoints' files.
/// Removed when dropped (after the topology stopped nginx, or with it).
pub struct Site {
    root: PathBuf,
    addr: Ipv4Addr,
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Site {
    /// nginx's command line for this site, in the foreground.
    pub fn argv(&self) -> Vec<String> {
        vec![
            "nginx".into(),
            "-p".into(),
            self.root.display().to_string(),
            "-c".into(),
            self.root.join("nginx.conf").display().to_string(),
            "-g".into(),
            "daemon off;".into(),
        ]
    }

    /// The responsiveness test's config URL.
    pub fn config_url(&self) -> String {
        format!("https://{}/.well-known/nq", self.addr)
    }

    /// The certificate authority a client must trust.
    pub fn ca_file(&self) -> PathBuf {
        self.root.join("ca.pem")
    }

    /// Writes the site into a directory of its own. On tmpfs (`/run`) when it can: under
    /// User-Mode Linux `/tmp` is the host's disk through hostfs, and the large object is read
    /// over and over.
    pub fn make(addr: Ipv4Addr, logs: &Path) -> Result<Site, LabError> {
        let base = ["/run", "/dev/shm"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        // The address too: a benchmark and a lab in one process each have a site of their own.
        let root = base.join(format!("unbloat-lab-nginx-{}-{addr}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let www = root.join("www");
        std::fs::create_dir_all(www.join(".well-known")).map_err(io("cannot create", &www))?;
        let write = |path: PathBuf, text: &str| {
            std::fs::write(&path, text).map_err(io("cannot write", &path))
        };
        write(www.join("small"), "x")?;
        let large = www.join("large");
        std::fs::File::create(&large)
            .and_then(|f| f.set_len(LARGE_BYTES))
            .map_err(io("cannot create", &large))?;
        let base_url = format!("https://{addr}");
        write(
            www.join(".well-known").join("nq"),
            &format!(
                "{{\"version\": 1, \"test_endpoint\": \"{addr}\", \"urls\": {{\
                 \"small_https_download_url\": \"{base_url}/small\", \
                 \"large_https_download_url\": \"{base_url}/large\", \
                 \"https_upload_url\": \"{base_url}/upload\"}}}}\n"
            ),
        )?;
        certificates(&root, addr, logs)?;
        write(root.join("nginx.conf"), &nginx_conf(&root, addr))?;
        Ok(Site { root, addr })
    }
}

/// A certificate authority and a server certificate for `addr` signed by it (a self-signed
/// server certificate is refused by rustls as a CA used as an end entity).
fn certificates(root: &Path, addr: Ipv4Addr, logs: &Path) -> Result<(), LabError> {
    let p = |name: &str| root.join(name).display().to_string();
    let ext = root.join("server.ext");
    std::fs::write(
        &ext,
        format!("subjectAltName=IP:{addr}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"),
    )
    .map_err(io("cannot write", &ext))?;
    let steps: [Vec<String>; 3] = [
        [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=unbloat lab CA",
            "-keyout",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([p("ca.key"), "-out".into(), p("ca.pem")])
        .collect(),
        [
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("/CN={addr}"),
            "-keyout".into(),
            p("server.key"),
            "-out".into(),
            p("server.csr"),
        ])
        .collect(),
        ["x509", "-req", "-days", "2", "-in"]
            .iter()
            .map(|s| s.to_string())
            .chain([
                p("server.csr"),
                "-CA".into(),
                p("ca.pem"),
                "-CAkey".into(),
                p("ca.key"),
                "-CAcreateserial".into(),
                "-extfile".into(),
                p("server.ext"),
                "-out".into(),
                p("server.pem"),
            ])
            .collect(),
    ];
    for step in steps {
        let out = std::process::Command::new("openssl")
            .args(&step)
            .output()
            .map_err(io("cannot run openssl for", logs))?;
        if !out.status.success() {
            return Err(LabError::Test {
                strategy: "the http far end".into(),
                status: out.status.code().unwrap_or(-1),
                detail: format!(
                    "openssl {}: {}",
                    step.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
    }
    Ok(())
}

/// nginx as the responsiveness test's server: HTTP/2 over TLS, the large object by sendfile,
/// an upload location that reads and discards any body.
fn nginx_conf(root: &Path, addr: Ipv4Addr) -> String {
    let r = root.display();
    format!(
        "# Written by unbloat lab for one run.
user root;
worker_processes 1;
pid {r}/nginx.pid;
error_log {r}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {r}/body;
    proxy_temp_path {r}/proxy;
    fastcgi_temp_path {r}/fastcgi;
    uwsgi_temp_path {r}/uwsgi;
    scgi_temp_path {r}/scgi;
    sendfile on;
    keepalive_requests 100000;
    types {{ application/json nq; application/octet-stream large; }}
    server {{
        listen {addr}:{HTTPS_PORT} ssl http2;
        ssl_certificate {r}/server.pem;
        ssl_certificate_key {r}/server.key;
        root {r}/www;
        location = /.well-known/nq {{ default_type application/json; }}
        # A POST of any length, read and thrown away: `return` discards the request body.
        # Over HTTP/2 nginx resets a discarded body after its first window unless it may read
        # ahead more (seen with nginx 1.22: 7 MB in 3 s without, 900 MB with).
        http2_body_preread_size 16m;
        location = /upload {{ client_max_body_size 0; return 200 \"\"; }}
    }}
}}
"
    )
}
