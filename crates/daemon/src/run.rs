//! `unbloat daemon`: the threads around the [`Keeper`] and the loop that feeds it.
//!
//! One thread owns the keeper and makes every change, one message at a time, so two changes
//! never race. Around it: a thread reading link events (rtnetlink), one waiting for signals
//! (`sigwait`: SIGHUP reloads, SIGTERM and SIGINT end the daemon, SIGUSR1 looks at the networks
//! again), one serving the control
//! socket, the HTTP servers (metrics, web page) on their own runtime, and a controller per
//! `[autorate.NAME]` table ([`crate::autorate`]). The keeper's loop pings
//! systemd's watchdog, so a stuck apply gets the daemon restarted; a restart recovers from the
//! journal and shapes again.
//!
//! Ending the daemon leaves the shaping in place (the kernel keeps it; a restart finds it
//! verified and changes nothing): `unbloat stop --all` removes it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use unbloat_system::apply::Shaper;
use unbloat_system::planned::PlanError;
use unbloat_system::rtnl::events::{LinkEvent, LinkEvents};
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::{now_unix, StateDir};

use crate::autorate::Autorates;
use crate::control::{self, Answer, DaemonStatus, Request};
use crate::keeper::{decide, Health, Keeper};
use crate::metrics::DaemonCounters;
use crate::say;

/// What `unbloat daemon` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: PathBuf,
    pub metrics: Option<SocketAddr>,
    pub web: Option<SocketAddr>,
    /// Lab reports the web page lists and serves read-only (`--reports DIR`).
    pub reports: Option<PathBuf>,
    /// How often every interface is checked without an event.
    pub check_every: Duration,
    /// Names besides IP addresses and `localhost` the web page answers to (`--web-host`).
    pub web_hosts: Vec<String>,
    /// Whether this binary has `unbloat tune` (the router's small build has not): the page
    /// offers tune runs only then.
    pub tune: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The config cannot be used: the daemon does not start (exit 2; the unit does not restart).
    #[error("{0}")]
    Config(#[from] PlanError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

/// What reaches the keeper's thread.
enum Msg {
    Links(Vec<LinkEvent>),
    Reload,
    Stop(&'static str),
    Control(Request, Sender<Answer>),
    EventsFailed(std::io::Error),
    /// SIGUSR1: look at the networks again (the NetworkManager and networkd-dispatcher hooks).
    #[cfg(feature = "networks")]
    Networks,
}

/// A way for other threads (the web page's handlers) to ask the keeper's thread, as the control
/// socket does: every change still goes through the one thread that makes changes.
#[derive(Clone)]
pub struct KeeperHandle {
    tx: Sender<Msg>,
}

impl KeeperHandle {
    /// The keeper's answer; `None` when the daemon is ending. Blocks until the keeper gets to it
    /// (a reload is a transaction: seconds in User-Mode Linux); call it from a blocking thread.
    pub fn ask(&self, request: Request) -> Option<Answer> {
        let (reply, wait) = mpsc::channel();
        self.tx.send(Msg::Control(request, reply)).ok()?;
        wait.recv().ok()
    }
}

pub fn run(opts: &Options) -> Result<(), DaemonError> {
    // Blocked here, before any thread starts, so every thread inherits the mask and the signals
    // wait for sigwait in one thread instead of interrupting whichever runs.
    let signals = block_signals();
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    state.ensure().map_err(|e| DaemonError::Io {
        what: format!("the run directory {}", state.path().display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    let counters = Arc::new(Mutex::new(DaemonCounters {
        start_unix: now_unix(),
        ..DaemonCounters::default()
    }));
    let live = crate::autorate::Live::default();
    let mut keeper = Keeper::new(
        Shaper::new(&runner, state.clone()),
        &opts.config,
        counters.clone(),
        live.clone(),
    )?;
    let listener = control::bind(state.path()).map_err(io("the control socket"))?;
    // Joined before the first apply, so a device that appears during it is not missed.
    let events = LinkEvents::open().map_err(io("listening for link events"))?;

    let (tx, rx) = mpsc::channel();
    spawn_events(events, tx.clone());
    #[cfg(feature = "networks")]
    spawn_wifi_events(tx.clone());
    spawn_signals(signals, tx.clone());
    spawn_control(listener, tx.clone());
    let mut servers = crate::serve::Servers::default();
    if let Some(addr) = opts.metrics {
        let scrape = crate::serve::Scrape {
            state: state.clone(),
            counters: counters.clone(),
            unread: Default::default(),
        };
        servers.metrics = Some(
            crate::serve::metrics(addr, scrape, opts.web_hosts.clone()).map_err(io(format!(
                "serving metrics on {addr} (is the port taken? --metrics HOST:PORT)"
            )))?,
        );
        say::info(&format!("metrics on http://{addr}/metrics"));
    }
    if let Some(addr) = opts.web {
        let keeper = KeeperHandle { tx: tx.clone() };
        let setup = crate::web::Setup {
            state: state.clone(),
            config: opts.config.clone(),
            reports: opts.reports.clone(),
            ask: Arc::new(move |request| keeper.ask(request)),
            exe: std::env::current_exe()
                .map_err(io("finding this program (for test and tune runs)"))?,
            hosts: opts.web_hosts.clone(),
            tune: opts.tune,
        };
        servers.web = Some(crate::web::start(addr, setup).map_err(io(format!(
            "serving the web page on {addr} (is the port taken? --web HOST:PORT)"
        )))?);
    }

    keeper.start_up();
    let names = keeper.names().join(", ");
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&format!("keeping {names} shaped")),
    ]);
    // What start-up achieved, per interface: "keeping wan0 shaped" must not follow a failure.
    let health: Vec<String> = keeper
        .names()
        .iter()
        .map(|n| {
            let h = keeper.health().get(n).cloned().unwrap_or(Health::Waiting);
            format!("{n} {}", h.describe())
        })
        .collect();
    say::info(&format!(
        "keeping {names} as {} says (pid {}): {}",
        opts.config.display(),
        std::process::id(),
        health.join(", ")
    ));

    let mut autorates = Autorates::new(live);
    autorates.start(&keeper.autorate());
    let result = serve_loop(&mut keeper, &mut autorates, &rx, opts, &counters, &servers);
    notify(&[sd_notify::NotifyState::Stopping]);
    // Each controller puts its base rates back: the config's setup is what stays.
    autorates.stop_all();
    let _ = std::fs::remove_file(control::socket_path(state.path()));
    if opts.web.is_some() {
        // The token dies with the server it opened; a new start makes a new one.
        let _ = std::fs::remove_file(state.path().join(crate::web::TOKEN_FILE));
    }
    result
}

fn serve_loop(
    keeper: &mut Keeper,
    autorates: &mut Autorates,
    rx: &Receiver<Msg>,
    opts: &Options,
    counters: &Arc<Mutex<DaemonCounters>>,
    servers: &crate::serve::Servers,
) -> Result<(), DaemonError> {
    let watchdog = watchdog_interval();
    let mut next_check = Instant::now() + opts.check_every;
    let mut pending: Vec<Msg> = vec![];
    loop {
        let wait = next_check
            .saturating_duration_since(Instant::now())
            .min(watchdog.unwrap_or(Duration::from_secs(3600)));
        let msg = if pending.is_empty() {
            match rx.recv_timeout(wait) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        } else {
            Some(pending.remove(0))
        };
        ping(watchdog);
        match msg {
            None => {}
            Some(Msg::Links(mut events)) => {
                // Everything already queued joins this batch: a re-created device's burst of
                // messages is one cleanup and one apply, not one apply per message.
                while let Ok(m) = rx.try_recv() {
                    match m {
                        Msg::Links(more) => events.extend(more),
                        other => pending.push(other),
                    }
                }
                counters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .link_events += events.len() as u64;
                // A ping after each transaction, not once per batch: a re-created device is a
                // cleanup and an apply, and under load the two together outlast a short watchdog.
                for action in decide(&events, &keeper.configured()) {
                    keeper.act(std::slice::from_ref(&action));
                    ping(watchdog);
                }
                // A route, a neighbour or a device changed: the network behind one may have.
                #[cfg(feature = "networks")]
                follow_networks(keeper, autorates, watchdog);
            }
            Some(Msg::Reload) => {
                let _ = reload(keeper, autorates);
            }
            #[cfg(feature = "networks")]
            Some(Msg::Networks) => follow_networks(keeper, autorates, watchdog),
            Some(Msg::Control(Request::Reload, reply)) => {
                let answer = match reload(keeper, autorates) {
                    Ok(r) => Answer::Reloaded(r),
                    Err(refusal) => Answer::Refused(refusal),
                };
                let _ = reply.send(answer);
            }
            Some(Msg::Control(Request::Status, reply)) => {
                let status = status(keeper, autorates, counters, servers);
                let _ = reply.send(Answer::Status(status));
            }
            Some(Msg::Stop(signal)) => {
                say::info(&format!(
                    "{signal}: ending; the shaping stays (`unbloat stop --all` removes it)"
                ));
                return Ok(());
            }
            Some(Msg::EventsFailed(e)) => {
                return Err(DaemonError::Io {
                    what: "reading link events".into(),
                    source: e,
                })
            }
        }
        if Instant::now() >= next_check {
            #[cfg(feature = "networks")]
            follow_networks(keeper, autorates, watchdog);
            for name in keeper.names() {
                keeper.ensure(&name, "the periodic check");
                ping(watchdog);
            }
            next_check = Instant::now() + opts.check_every;
        }
    }
}

/// Recognises each interface's network again and applies what changed, each interface in its
/// transaction (in place when only values change). The controllers stop around it when any
/// interface has one: a network with rates of its own takes an interface from autorate, an
/// unknown one gives it back.
#[cfg(feature = "networks")]
fn follow_networks(keeper: &mut Keeper, autorates: &mut Autorates, watchdog: Option<Duration>) {
    let changed = keeper.recognise();
    if changed.is_empty() {
        return;
    }
    let controllers = keeper.has_autorate();
    if controllers {
        autorates.stop_all();
    }
    for name in &changed {
        keeper.ensure(name, "a network change");
        ping(watchdog);
    }
    if controllers {
        autorates.start(&keeper.autorate());
    }
}

/// A reload with the controllers stopped (at their base rates) around it, so the file's rates
/// are what the reload compares and applies; they start again with its tables (the old ones
/// when it was refused). A file that cannot be used is refused before they stop: they keep
/// running, their logs untouched.
fn reload(
    keeper: &mut Keeper,
    autorates: &mut Autorates,
) -> Result<crate::keeper::Reloaded, crate::keeper::Refusal> {
    keeper.check()?;
    autorates.stop_all();
    let result = keeper.reload();
    autorates.start(&keeper.autorate());
    result
}

fn status(
    keeper: &Keeper,
    autorates: &Autorates,
    counters: &Arc<Mutex<DaemonCounters>>,
    servers: &crate::serve::Servers,
) -> DaemonStatus {
    let c = counters.lock().unwrap_or_else(|e| e.into_inner());
    DaemonStatus {
        pid: std::process::id(),
        config: keeper.config().display().to_string(),
        started_unix: c.start_unix,
        interfaces: keeper
            .names()
            .into_iter()
            .map(|n| {
                let h = keeper.health().get(&n).cloned().unwrap_or(Health::Waiting);
                (n, h)
            })
            .collect(),
        reapplies: c.reapplies.values().sum(),
        failures: c.failures.values().sum(),
        link_events: c.link_events,
        metrics: servers.metrics.map(|a| a.to_string()),
        web: servers.web.map(|a| a.to_string()),
        autorate: keeper
            .live_rates()
            .into_iter()
            .map(|(n, (d, u))| (n, (d.bits_per_sec(), u.bits_per_sec())))
            .collect(),
        autorate_waits: autorates.waiting(),
        #[cfg(feature = "networks")]
        networks: keeper.networks().clone(),
    }
}

fn spawn_events(mut events: LinkEvents, tx: Sender<Msg>) {
    std::thread::spawn(move || loop {
        match events.next(Duration::from_secs(3600)) {
            Ok(v) if v.is_empty() => {}
            Ok(v) => {
                if tx.send(Msg::Links(v)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Msg::EventsFailed(e));
                return;
            }
        }
    });
}

/// Wi-Fi associations (nl80211's "mlme" group) wake the networks' check: a station can move to
/// another SSID or access point without a route or neighbour event. A kernel without Wi-Fi has
/// nothing to listen to.
#[cfg(feature = "networks")]
fn spawn_wifi_events(tx: Sender<Msg>) {
    use unbloat_system::wifi::Nl80211;
    let events = match Nl80211::open().and_then(|n| n.map(Nl80211::events).transpose()) {
        Ok(e) => e.flatten(),
        Err(e) => {
            say::warn(&format!(
                "not listening for Wi-Fi associations (nl80211): {e}; route changes and the periodic check still follow networks"
            ));
            None
        }
    };
    let Some(mut events) = events else {
        return;
    };
    // cfg80211 announces a connection before it marks the access point's BSS associated
    // (net/wireless/sme.c, `__cfg80211_connect_result`): a second look once the group has been
    // quiet for a moment sees what the first may have missed.
    std::thread::spawn(move || {
        let mut second_look = false;
        loop {
            let wait = Duration::from_secs(if second_look { 1 } else { 3600 });
            let wake = match events.next(wait) {
                Ok(true) => {
                    second_look = true;
                    true
                }
                Ok(false) => std::mem::take(&mut second_look),
                Err(e) => {
                    say::warn(&format!(
                        "Wi-Fi association events (nl80211): {e}; no longer listening"
                    ));
                    return;
                }
            };
            if wake && tx.send(Msg::Networks).is_err() {
                return;
            }
        }
    });
}

fn spawn_control(listener: std::os::unix::net::UnixListener, tx: Sender<Msg>) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = match control::read_request(&stream) {
                Ok(req) => {
                    let (reply, wait) = mpsc::channel();
                    if tx.send(Msg::Control(req, reply)).is_err() {
                        return;
                    }
                    match wait.recv() {
                        Ok(a) => a,
                        Err(_) => return,
                    }
                }
                Err(e) => Answer::Refused(crate::keeper::Refusal {
                    reason: format!("not a request: {e}"),
                    bad_config: false,
                }),
            };
            let _ = control::write_answer(&stream, &answer);
        }
    });
}

/// SIGHUP, SIGTERM and SIGINT (and SIGUSR1 with networks), blocked in the calling thread (and so in every thread it starts).
fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it, and pthread_sigmask
    // only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
            libc::sigaddset(&mut set, s);
        }
        #[cfg(feature = "networks")]
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn spawn_signals(set: libc::sigset_t, tx: Sender<Msg>) {
    std::thread::spawn(move || loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: a valid, initialised set and a valid out pointer.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            continue;
        }
        let msg = match sig {
            libc::SIGHUP => Msg::Reload,
            #[cfg(feature = "networks")]
            libc::SIGUSR1 => Msg::Networks,
            libc::SIGTERM => Msg::Stop("SIGTERM"),
            _ => Msg::Stop("SIGINT"),
        };
        if tx.send(msg).is_err() {
            return;
        }
    });
}

/// Half of systemd's `WatchdogSec=`, when the unit sets one: `$WATCHDOG_USEC`, for this process
/// if `$WATCHDOG_PID` says so or is unset (libsystemd's `sd_watchdog_enabled`; the sd-notify
/// crate insists on the pid, which a supervisor other than systemd may not set).
fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    match std::env::var("WATCHDOG_PID") {
        Ok(pid) if pid.parse() != Ok(std::process::id()) => None,
        _ => (usec > 0).then(|| Duration::from_micros(usec / 2)),
    }
}

/// WATCHDOG=1, when systemd watches: once per turn of the loop and after each transaction.
fn ping(watchdog: Option<Duration>) {
    if watchdog.is_some() {
        notify(&[sd_notify::NotifyState::Watchdog]);
    }
}

fn notify(states: &[sd_notify::NotifyState]) {
    // Outside systemd ($NOTIFY_SOCKET unset) this does nothing.
    let _ = sd_notify::notify(false, states);
}
