//! `unbloat plan | start | stop | status | config check`: from flags or a config file to a
//! validated plan (pure, in unbloat-shaper), then applied, verified, read back and removed
//! through unbloat-system.

use crate::flags::ShapeFlags;
use crate::{invalid, Failure};
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::time::Duration;
use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::{Plan, RootQdisc};
use unbloat_shaper::spec::{parse_iface, Spec};
use unbloat_shaper::status::{render_text, Status};
use unbloat_shaper::tcjson::{LiveState, LiveTexts};
use unbloat_shaper::verify::verify;
use unbloat_system::apply::{
    script_commands, script_commands_one_by_one, ApplyRequest, Shaper, StartOutcome,
};
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::StateDir;

pub const DEFAULT_CONFIG: &str = "/etc/unbloat/unbloat.toml";

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The WAN interface (eth0, eth0.2, pppoe-wan, ...). Without it: every interface of the
    /// config file.
    pub iface: Option<String>,
    /// Config file: one [interface.NAME] table per interface (flags override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the plan as JSON (the typed operations) instead of shell commands.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub flags: ShapeFlags,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Print the exact commands that would run, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The interface to stop shaping.
    #[arg(required_unless_present = "all")]
    pub iface: Option<String>,
    /// Stop every interface unbloat shapes.
    #[arg(long, conflicts_with = "iface")]
    pub all: bool,
    /// Report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The interface; without it, every interface unbloat shapes.
    pub iface: Option<String>,
    /// The status as JSON.
    #[arg(long)]
    pub json: bool,
    /// Refresh every SECONDS (default 1) until interrupted.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "1")]
    pub watch: Option<f64>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file (default /etc/unbloat/unbloat.toml) without touching anything.
    Check {
        file: Option<PathBuf>,
        /// Print the validated plans too.
        #[arg(long)]
        plans: bool,
    },
}

/// The plans asked for: one per interface, from flags over the config file.
fn plans(args: &PlanArgs) -> Result<Vec<(Plan, ShapeOptions)>, Failure> {
    let flag_opts = args.flags.to_options().map_err(|e| invalid(anyhow!(e)))?;
    let explicit = args.config.is_some();
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let config = if explicit
        || (args.iface.is_none() && path.exists())
        || (args.iface.is_some() && path.exists() && !args.flags.any())
    {
        Some(ConfigFile::load(&path).map_err(invalid)?)
    } else {
        None
    };
    let mut out = vec![];
    match &args.iface {
        Some(name) => {
            let iface = parse_iface(name).map_err(invalid)?;
            let base = config
                .as_ref()
                .and_then(|c| c.interface(&iface))
                .map(|i| i.options.clone())
                .unwrap_or_default();
            if config.is_some() && base == ShapeOptions::default() && !args.flags.any() {
                return Err(invalid(anyhow!(
                    "{} has no [interface.{iface}] table, and no rates were given",
                    path.display()
                )));
            }
            let opts = ShapeOptions::merge(&base, &flag_opts);
            out.push((
                Plan::build(&Spec::new(iface, &opts).map_err(invalid)?),
                opts,
            ));
        }
        None => {
            let Some(config) = config else {
                return Err(invalid(anyhow!(
                    "name an interface (unbloat start eth0 --down 78mbit --up 19950kbit), or write {}",
                    path.display()
                )));
            };
            if args.flags.any() {
                return Err(invalid(anyhow!("shaping flags need an interface name; for the whole config file, put them in the file")));
            }
            let specs = config.specs(&ShapeOptions::default()).map_err(invalid)?;
            for (spec, i) in specs.iter().zip(&config.interfaces) {
                out.push((Plan::build(spec), i.options.clone()));
            }
        }
    }
    Ok(out)
}

pub fn plan(args: &PlanArgs) -> Result<(), Failure> {
    for (plan, _) in plans(args)? {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&plan)?);
        } else {
            print!("{}", plan.render_shell());
        }
    }
    Ok(())
}

/// The system side of a plan: its commands, what it needs, and how to verify it.
pub fn request<'a>(
    plan: &'a Plan,
    opts: &ShapeOptions,
    verifier: unbloat_system::apply::Verifier<'a>,
) -> ApplyRequest<'a> {
    let script = plan.script();
    ApplyRequest {
        iface: plan.wan.to_string(),
        ifb: plan.ingress.as_ref().map(|i| i.ifb.to_string()),
        needs: needs(plan),
        apply: script_commands(&script),
        teardown: script_commands_one_by_one(&plan.teardown()),
        script: script.render_shell(),
        options: serde_json::to_value(opts).unwrap_or_default(),
        verify: verifier,
    }
}

/// The qdiscs and features the kernel must have for a plan, probed before anything is touched.
fn needs(plan: &Plan) -> Vec<&'static str> {
    let mut needs = vec![];
    let roots = plan
        .egress
        .iter()
        .map(|e| &e.root)
        .chain(plan.ingress.iter().map(|i| &i.shaping.root));
    for root in roots {
        match root {
            RootQdisc::Cake(_) => needs.push("cake"),
            RootQdisc::Htb(tree) => {
                needs.extend(["htb", "fq_codel"]);
                if !tree.filters.is_empty() {
                    needs.push("u32");
                }
            }
        }
    }
    if plan.ingress.is_some() {
        needs.extend(["ingress", "ifb", "mirred", "u32"]);
    }
    needs.sort();
    needs.dedup();
    needs
}

pub fn live_state(wan: &str, t: &LiveTexts) -> anyhow::Result<LiveState> {
    Ok(LiveState::parse(&parse_iface(wan)?, t)?)
}

pub fn verifier(plan: &Plan) -> impl Fn(&LiveTexts) -> Vec<String> + '_ {
    move |texts| match live_state(plan.wan.as_str(), texts) {
        Ok(live) => verify(plan, &live).iter().map(|m| m.to_string()).collect(),
        Err(e) => vec![format!("cannot read what the kernel holds: {e}")],
    }
}

pub fn start(args: &StartArgs) -> Result<(), Failure> {
    let plans = plans(&args.plan)?;
    if args.dry_run {
        for (plan, _) in &plans {
            print!("{}", plan.render_shell());
        }
        return Ok(());
    }
    let runner = SystemRunner::from_env();
    let shaper = Shaper::new(&runner, StateDir::from_env());
    for (plan, opts) in &plans {
        let v = verifier(plan);
        let req = request(plan, opts, &v);
        match shaper
            .start(&req)
            .with_context(|| format!("cannot shape {}", plan.wan))?
        {
            StartOutcome::Applied { replaced } => {
                let how = if replaced { "reshaped" } else { "shaped" };
                eprintln!(
                    "unbloat: {} {how} and verified: {}",
                    plan.wan,
                    plan.summary().join("; ")
                );
            }
            StartOutcome::Unchanged => eprintln!(
                "unbloat: {} is already shaped exactly so; nothing changed",
                plan.wan
            ),
        }
        if args.plan.json {
            println!(
                "{}",
                serde_json::json!({"iface": plan.wan.to_string(), "plan": plan})
            );
        }
    }
    Ok(())
}

pub fn stop(args: &StopArgs) -> Result<(), Failure> {
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    let ifaces = match &args.iface {
        Some(i) => vec![parse_iface(i).map_err(invalid)?.to_string()],
        None => state.list()?,
    };
    let mut stopped = vec![];
    for iface in &ifaces {
        shaper
            .stop(iface)
            .with_context(|| format!("cannot stop shaping {iface}"))?;
        eprintln!("unbloat: {iface} is no longer shaped");
        stopped.push(iface.clone());
    }
    if args.json {
        println!("{}", serde_json::json!({ "stopped": stopped }));
    } else if ifaces.is_empty() {
        eprintln!("unbloat: no interface is shaped by unbloat");
    }
    Ok(())
}

pub fn status(args: &StatusArgs) -> Result<(), Failure> {
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    let ifaces = match &args.iface {
        Some(i) => {
            let name = parse_iface(i).map_err(invalid)?.to_string();
            shaper.check_interface(&name)?;
            vec![name]
        }
        None => state.list()?,
    };
    if ifaces.is_empty() {
        eprintln!("unbloat: no interface is shaped by unbloat; name one to see what is there (unbloat status eth0)");
        return Ok(());
    }
    loop {
        let mut all = vec![];
        for iface in &ifaces {
            all.push(status_of(&shaper, &state, iface)?);
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            if args.watch.is_some() {
                print!("\x1b[H\x1b[2J");
            }
            for s in &all {
                print!("{}", render_text(s));
            }
        }
        match args.watch {
            Some(secs) if secs > 0.0 => std::thread::sleep(Duration::from_secs_f64(secs)),
            _ => return Ok(()),
        }
    }
}

fn status_of(shaper: &Shaper, state: &StateDir, iface: &str) -> Result<Status, Failure> {
    let record = state.load(iface)?;
    let plan = match &record {
        Some(r) => {
            let opts: ShapeOptions =
                serde_json::from_value(r.options.clone()).context("reading unbloat's record")?;
            Some(Plan::build(
                &Spec::new(parse_iface(iface).map_err(invalid)?, &opts).map_err(invalid)?,
            ))
        }
        None => None,
    };
    let ifb = record.as_ref().and_then(|r| r.created.ifb_device.clone());
    let texts = shaper.read_live(iface, ifb.as_deref())?;
    let live = live_state(iface, &texts)?;
    Ok(Status::from_live(&live, plan.as_ref()))
}

pub fn config(cmd: &ConfigCommand) -> Result<(), Failure> {
    match cmd {
        ConfigCommand::Check { file, plans: show } => {
            let path: &Path = file.as_deref().unwrap_or(Path::new(DEFAULT_CONFIG));
            let config = ConfigFile::load(path).map_err(invalid)?;
            let specs = config.specs(&ShapeOptions::default()).map_err(invalid)?;
            for spec in &specs {
                if *show {
                    print!("{}", Plan::build(spec).render_shell());
                }
            }
            let n = specs.len();
            eprintln!(
                "{}: valid ({n} interface{})",
                path.display(),
                if n == 1 { "" } else { "s" }
            );
            Ok(())
        }
    }
}
