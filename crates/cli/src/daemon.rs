//! `unbloat daemon` and `unbloat reload`: the always-on service (unbloat-daemon) and the
//! command that asks it to read its config again.

use crate::flags::DEFAULT_CONFIG;
use crate::{invalid, Failure};
use anyhow::anyhow;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use unbloat_daemon::control::{self, Answer, Request};
use unbloat_daemon::run::{DaemonError, Options};
use unbloat_system::state::StateDir;

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The config file to keep applied.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
    pub config: PathBuf,
    /// Serve Prometheus metrics on this address (off unless given; e.g. 127.0.0.1:9723).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Serve the web page on this address (off unless given; e.g. 127.0.0.1:8723). Changes need
    /// the token the daemon writes to web-token in its run directory (/run/unbloat), readable by
    /// root only and never logged; the start line gives a command that prints the page's address
    /// with it. Bind to 127.0.0.1 unless other machines must reach it.
    #[arg(long, value_name = "HOST:PORT")]
    pub web: Option<SocketAddr>,
    /// A name the web page and the metrics may be reached by, besides their IP addresses and
    /// localhost (e.g. router.lan, or the name Prometheus scrapes); repeat for more. Other names
    /// are refused, which stops DNS rebinding.
    #[arg(long = "web-host", value_name = "NAME")]
    pub web_hosts: Vec<String>,
    /// Lab reports (`unbloat-lab run --out` directories) the web page lists and serves read-only.
    #[arg(long, value_name = "DIR", requires = "web")]
    pub reports: Option<PathBuf>,
    /// Check every interface this often without a link event (puts back shaping deleted by
    /// hand; 10 to 3600 seconds).
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_check)]
    pub check_every: u64,
}

fn parse_check(text: &str) -> Result<u64, String> {
    match text.trim().trim_end_matches('s').parse::<u64>() {
        Ok(n) if (10..=3600).contains(&n) => Ok(n),
        _ => Err(format!("{text:?}: give 10 to 3600 seconds")),
    }
}

#[derive(Debug, Args)]
pub struct ReloadArgs {
    /// The answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn daemon(args: &DaemonArgs) -> Result<(), Failure> {
    let opts = Options {
        config: args.config.clone(),
        metrics: args.metrics,
        web: args.web,
        reports: args.reports.clone(),
        check_every: Duration::from_secs(args.check_every),
        web_hosts: args.web_hosts.clone(),
        tune: cfg!(feature = "tune"),
    };
    unbloat_daemon::run::run(&opts).map_err(|e| match e {
        DaemonError::Config(_) => invalid(e),
        other => Failure::from(other),
    })
}

/// Asks the running daemon to reload; its refusal (a bad file, a change the kernel refused) is
/// exit 2 or 1 with the reason, and the running setup stays.
pub fn reload(args: &ReloadArgs) -> Result<(), Failure> {
    let state = StateDir::from_env();
    let answer = control::ask(state.path(), &Request::Reload)
        .map_err(|e| anyhow!("asking the daemon: {e}"))?
        .ok_or_else(|| {
            anyhow!(
                "no unbloat daemon runs (no answer on {}); start it with `systemctl start unbloat` or `unbloat daemon`",
                control::socket_path(state.path()).display()
            )
        })?;
    match answer {
        Answer::Reloaded(r) => {
            if args.json {
                println!("{}", serde_json::to_string(&r)?);
            }
            eprintln!(
                "unbloat: reloaded: changed [{}], unchanged [{}], removed [{}], waiting for their device [{}]",
                r.changed.join(", "),
                r.unchanged.join(", "),
                r.removed.join(", "),
                r.waiting.join(", ")
            );
            Ok(())
        }
        Answer::Refused(r) => {
            let e = anyhow!(
                "the daemon refused the reload; the running setup stays: {}",
                r.reason
            );
            Err(if r.bad_config { invalid(e) } else { e.into() })
        }
        Answer::Status(_) => Err(anyhow!("the daemon answered something else").into()),
    }
}

/// The network the running daemon recognised on each interface that follows one (empty when
/// no daemon runs), for `unbloat status --json`.
#[cfg(feature = "networks")]
pub fn networks(
    state: &StateDir,
) -> std::collections::BTreeMap<String, unbloat_daemon::seen::Seen> {
    match control::ask(state.path(), &Request::Status) {
        Ok(Some(Answer::Status(s))) => s.networks,
        _ => Default::default(),
    }
}

/// The daemon's lines for `unbloat status`, when one runs.
pub fn status_text(state: &StateDir) -> Option<String> {
    match control::ask(state.path(), &Request::Status) {
        Ok(Some(Answer::Status(s))) => Some(s.render_text()),
        _ => None,
    }
}
