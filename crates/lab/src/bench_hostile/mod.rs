//! `unbloat-lab bench hostile` (issue 53 §3): hostile clients against `unbloat serve`, the
//! daemon's page and its metrics, on this machine, in namespaces of its own ([`net`]), while a
//! legitimate client from another address is served or not ([`legit`]).
//!
//! Each case is one server (a fresh process, so its peak memory is the attack's), one attack
//! ([`attack`]: slow or flood) and one source (one IPv4 address, or one IPv6 /56): the server
//! is sampled throughout ([`crate::procstat`]); [`report`] holds the figures and the table.
//! The host's kernel is enough: the attacks are on sockets and threads, and nothing is shaped.

pub mod attack;
pub mod legit;
pub mod net;
pub mod report;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use attack::{Attack, Kind};
use legit::Ask;
use net::{Net, Source};
pub use report::{render, Case, HostileBench, Target};
use unbloat_testbed::netns::NetnsError;

const SERVE_PORT: u16 = 4420;
const WEB_PORT: u16 = 8723;
const METRICS_PORT: u16 = 9723;
/// The legitimate client starts asking this long after the attack began (the slow attack's
/// connections are open by then).
const LEGIT_DELAY: Duration = Duration::from_secs(1);

/// What to run.
#[derive(Debug, Clone)]
pub struct HostileArgs {
    pub connections: usize,
    pub seconds: f64,
    pub gap: Duration,
    pub flood_rate: u32,
    pub targets: Vec<Target>,
    pub attacks: Vec<Kind>,
    pub sources: Vec<Source>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostileError {
    #[error("the benchmark's namespaces: {0}")]
    Net(#[from] NetnsError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} did not answer within 20 s: {why}")]
    NotReady { what: String, why: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostileError {
    let what = what.into();
    move |source| HostileError::Io { what, source }
}

/// Every case of `args`, each reported to `progress` when done.
pub fn run(
    exe: &Path,
    args: &HostileArgs,
    mut progress: impl FnMut(&Case),
) -> Result<HostileBench, HostileError> {
    raise_fd_limit();
    let net = Net::new()?;
    let scratch = unbloat_safefs::private_dir(Path::new("/run"), "unbloat-bench-hostile")
        .map_err(io("a private directory under /run"))?;
    let mut cases = vec![];
    let result = (|| {
        for &target in &args.targets {
            for &kind in &args.attacks {
                for &source in &args.sources {
                    let case = one_case(exe, &net, &scratch, args, target, kind, source)?;
                    progress(&case);
                    cases.push(case);
                }
            }
        }
        Ok::<(), HostileError>(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    Ok(HostileBench {
        version: 1,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        connections: args.connections,
        seconds: args.seconds,
        gap_s: args.gap.as_secs_f64(),
        flood_rate: args.flood_rate,
        cases,
    })
}

fn one_case(
    exe: &Path,
    net: &Net,
    scratch: &Path,
    args: &HostileArgs,
    target: Target,
    kind: Kind,
    source: Source,
) -> Result<Case, HostileError> {
    let (port, ask) = match target {
        Target::Serve => (SERVE_PORT, Ask::Hello),
        Target::Page => (WEB_PORT, Ask::Get("/")),
        Target::Metrics => (METRICS_PORT, Ask::Get("/metrics")),
    };
    let server = Server::start(exe, net, scratch, target)?;
    let legit_to = SocketAddr::new(IpAddr::V4(net::SERVER_FOR_CLIENT), port);
    server.wait_ready(net, legit_to, ask, target)?;
    let sampler = crate::procstat::Sampler::start(server.pid(), Duration::from_millis(50));
    let attack = Attack {
        kind,
        source,
        port,
        connections: args.connections,
        seconds: args.seconds,
        gap: args.gap,
        flood_rate: args.flood_rate,
        script: script(target),
    };
    let attacker = net.atk.run_in(move || attack::run(&attack))?;
    let seconds = args.seconds;
    let prober = net
        .cli
        .run_in(move || legit::probe(legit_to, ask, LEGIT_DELAY, seconds))?;
    let test = match target {
        Target::Serve => {
            let (exe, scratch) = (exe.to_path_buf(), scratch.to_path_buf());
            let t = net.cli.run_in(move || {
                std::thread::sleep(LEGIT_DELAY);
                legit::unbloat_test(&exe, legit_to, &scratch)
            })?;
            Some(t.join().map_err(|_| panicked("unbloat test"))?)
        }
        _ => None,
    };
    let outcomes = attacker.join().map_err(|_| panicked("the attacker"))?;
    let legit = prober
        .join()
        .map_err(|_| panicked("the legitimate client"))?;
    let watched = sampler.finish();
    drop(server);
    Ok(Case {
        target,
        attack: kind,
        source,
        outcomes,
        legit,
        test,
        server: watched,
    })
}

fn panicked(who: &str) -> HostileError {
    HostileError::Io {
        what: who.into(),
        source: std::io::Error::other("its thread panicked"),
    }
}

/// What a slow connection sends, a byte at a time: what a client would, never finished.
fn script(target: Target) -> Vec<u8> {
    use unbloat_measure::protocol::{encode_hello, MAX_FRAME, PROTOCOL_VERSION};
    match target {
        // A hello, then a frame that announces MAX_FRAME bytes and never ends.
        Target::Serve => {
            let mut s = encode_hello(PROTOCOL_VERSION).to_vec();
            s.extend_from_slice(&(MAX_FRAME as u32).to_be_bytes());
            s.resize(s.len() + MAX_FRAME, 0);
            s
        }
        // A request head that never ends.
        Target::Page | Target::Metrics => {
            let path = if target == Target::Page {
                "/"
            } else {
                "/metrics"
            };
            let mut s = format!("GET {path} HTTP/1.1\r\nHost: 10.53.1.1\r\n").into_bytes();
            for i in 0..1000 {
                s.extend_from_slice(format!("X-Slow-{i}: a\r\n").as_bytes());
            }
            s
        }
    }
}

/// The server under attack, in the server's namespace; SIGTERM and reaped on drop.
struct Server {
    child: Child,
    _run_dir: Option<PathBuf>,
}

impl Server {
    fn start(
        exe: &Path,
        net: &Net,
        scratch: &Path,
        target: Target,
    ) -> Result<Server, HostileError> {
        let mut cmd = Command::new(exe);
        let mut run_dir = None;
        match target {
            Target::Serve => {
                cmd.args(["serve", "--listen"])
                    .arg(format!("[::]:{SERVE_PORT}"));
            }
            Target::Page | Target::Metrics => {
                // A WAN that never appears: the daemon waits for it and serves meanwhile.
                let dir = scratch.join("daemon");
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir(&dir).map_err(io("the daemon's run directory"))?;
                set_mode(&dir, 0o700)?;
                let config = dir.join("unbloat.toml");
                std::fs::write(
                    &config,
                    "[interface.wan0]\ndown = \"20mbit\"\nup = \"5mbit\"\n",
                )
                .map_err(io("the daemon's config"))?;
                cmd.args(["daemon", "--config"])
                    .arg(&config)
                    .arg("--web")
                    .arg(format!("[::]:{WEB_PORT}"))
                    .arg("--metrics")
                    .arg(format!("[::]:{METRICS_PORT}"))
                    .env("UNBLOAT_RUN_DIR", &dir);
                run_dir = Some(dir);
            }
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let what = format!("starting {}", exe.display());
        let child = net
            .srv
            .run_in(move || cmd.spawn())?
            .join()
            .map_err(|_| panicked("the server's start"))?
            .map_err(io(what))?;
        Ok(Server {
            child,
            _run_dir: run_dir,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Until the legitimate client is served once (the server is up).
    fn wait_ready(
        &self,
        net: &Net,
        to: SocketAddr,
        ask: Ask,
        target: Target,
    ) -> Result<(), HostileError> {
        let waited = net.cli.run_in(move || {
            let t0 = Instant::now();
            loop {
                match legit::ask(to, ask) {
                    Ok(_) => return Ok(()),
                    Err(why) if t0.elapsed() > Duration::from_secs(20) => return Err(why),
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        })?;
        waited
            .join()
            .map_err(|_| panicked("the readiness check"))?
            .map_err(|why| HostileError::NotReady {
                what: format!("{} on {to}", target.name()),
                why,
            })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), HostileError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io(format!("chmod {}", path.display())))
}

/// The attacker holds `connections` sockets and more: the soft limit on open files goes up to
/// the hard one (the servers, started from here, get it too; their own caps are what hold).
fn raise_fd_limit() {
    // SAFETY: getrlimit and setrlimit on a struct we own.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
