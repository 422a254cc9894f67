//! Setting a strategy up on the lab's router ([`set_up`]), and the strategies that run a program
//! there instead of commands the lab writes: the user's own shaping script (`script:PATH`), so an
//! existing setup meets unbloat on the same emulated link, and the real sqm-scripts
//! (`sqm-scripts:RECIPE`), beside the lab's re-creation of it.
//!
//! # What the program gets
//! It runs once, after the network is built and before the test, in the router's network
//! namespace (where the WAN device is `wan0`), as root, with no input, under `timeout`
//! ([`TIMEOUT_S`] s), and in an environment of its own: `PATH` and these, nothing else of the
//! lab's, so that a run does not depend on the shell it was started from ([`environment`]).
//! Rates are whole kbit/s, as sqm-scripts takes them; the examples are the `vdsl2` profile's.
//!
//! | variable | value |
//! |---|---|
//! | `IFACE`, `UNBLOAT_IFACE` | the WAN device: `wan0` |
//! | `UPLINK`, `UNBLOAT_UP_KBIT` | the upload shaper rate, [`SHAPE_PERCENT`](strategies::SHAPE_PERCENT) % of the link's, as for every strategy: `19000` |
//! | `DOWNLINK`, `UNBLOAT_DOWN_KBIT` | the download shaper rate: `76000` |
//! | `UNBLOAT_LINK_UP_KBIT`, `UNBLOAT_LINK_DOWN_KBIT` | the link's own rates, for a script that picks its own share: `20000`, `80000` |
//! | `LINKLAYER` | sqm-scripts' link layer: `atm` on ATM links, otherwise `ethernet` (sqm-scripts has no PTM), `none` for a `raw` profile |
//! | `OVERHEAD`, `UNBLOAT_OVERHEAD` | bytes each packet costs on the link beyond its IP length: `26` |
//! | `STAB_MPU`, `UNBLOAT_MPU` | the link's minimum packet unit, bytes: `0` |
//! | `UNBLOAT_FRAMING` | `atm` (48-byte cells), `ptm` (64b/65b encoding) or `none` |
//! | `UNBLOAT_CAKE_LINK` | all of that in tc-cake's words, to append to a cake command: `overhead 26 mpu 0 ptm` |
//! | `UNBLOAT_PROFILE` | the link profile's name: `vdsl2` |
//!
//! The names without `UNBLOAT_` are sqm-scripts' own (its `defaults.sh`), so a script written
//! for sqm-scripts' environment runs unchanged.
//!
//! # Failure
//! A program that is missing or not executable is refused before anything is built ([`resolve`],
//! exit status 2). One that exits non-zero or outlives [`TIMEOUT_S`] stops the lab with an error
//! that names the strategy, how it ended and the end of its stderr; the network is removed as
//! after any run. sqm-scripts' `start-sqm` exits 0 even when its recipe failed, so for it success
//! is the state file it writes only after the recipe succeeded.
//!
//! # Teardown: no stop counterpart
//! The lab runs no stop script: after the test it deletes the router's namespace, and every
//! qdisc, IFB, filter and iptables rule the program made there goes with it; processes it left
//! in the namespace are killed. (So `stop-sqm` is not run either.) A program that leaves a daemon
//! running must close its stdout and stderr, as daemons do, or the lab waits for the timeout.
//!
//! # In the report
//! The invocation as a shell line, then, as `# ` lines, the router's qdiscs as `tc -d qdisc show`
//! printed them after the program ran: what the script, or the real sqm-scripts, built.
//!
//! # The real sqm-scripts
//! `sqm-scripts:RECIPE` installs sqm-scripts' source ([`unbloat_testbed::sqm`]) into a fresh directory for
//! the run and runs `sh start-sqm` with the same environment plus `SCRIPT=RECIPE.qos` and `QDISC`
//! ([`SqmRecipe::qdisc`]), and with `STAB_MPU=0`: sqm-scripts' default, which the re-created
//! `sqm-simple` and `sqm-piece-of-cake` use too, so that a recipe and its re-creation get the
//! same input ([`sqm_environment`]).

use std::path::{Path, PathBuf};

use unbloat_shaper::linklayer::Framing;
use unbloat_system::runner::Cmd;
use unbloat_units::Rate;

use crate::error::{io, LabError};
use crate::profile::LinkProfile;
use crate::strategies::{self, shaper_rates, RouterDevs, ShaperPlanner};
use crate::strategy::{SqmRecipe, Strategy};
use crate::topology::{LiveTopology, Node};
use unbloat_testbed::sqm;

/// `--strategies`' long help (`unbloat-lab run --help`, `unbloat-lab bench lab --help`): every name, and
/// the environment of a `script:` as the module's table has it.
pub const STRATEGIES_HELP: &str = "\
Strategies to compare, in order, comma-separated: none, wondershaper, sqm-simple, \
sqm-piece-of-cake, unbloat, unbloat-tuned, sqm-scripts:simple, sqm-scripts:piece_of_cake, \
script:PATH; and on a variable link (a profile with down_trace/up_trace): unbloat-autorate, \
cake-autorate, unbloat-p10, unbloat-mean.

unbloat-autorate runs `unbloat autorate wan0` in the router for the whole test; cake-autorate \
runs the real cake-autorate there instead (see --cake-autorate; it needs bash and fping), both \
on the cake `unbloat start` sets up, with the same min/base/max (the 5th percentile of the \
traces' one-second rates halved, the 25th, the 95th) and the server's addresses as reflectors. \
unbloat-p10 and unbloat-mean shape at a fixed rate: the traces' 10th percentile, or their mean.

unbloat shapes at 95 % of the profile's true rates with its true framing. unbloat-tuned knows \
neither: it runs `unbloat tune wan0 --apply` in the router against unbloat serve first (at most \
--tune-max-time; it saturates the link meanwhile), and the test then measures what tune left; \
the notes and lab.json set what tune found beside the truth.

sqm-simple and sqm-piece-of-cake are the lab's re-creations of sqm-scripts' recipes; \
sqm-scripts:simple and sqm-scripts:piece_of_cake run the real start-sqm (see --sqm-scripts) in \
the router with that recipe, the environment below plus SCRIPT=RECIPE.qos and QDISC, and \
STAB_MPU=0 as the re-creations have it.

script:PATH runs your executable PATH once in the router's network namespace, as root, with no \
input, after the network is built and before the test; it must exit 0 within 120 seconds. Its \
environment holds PATH and only these (rates in whole kbit/s; the names without UNBLOAT_ are \
sqm-scripts' own):
  IFACE, UNBLOAT_IFACE          the WAN device, wan0
  UPLINK, UNBLOAT_UP_KBIT       the upload shaper rate: 95 % of the link's
  DOWNLINK, UNBLOAT_DOWN_KBIT   the download shaper rate: 95 % of the link's
  UNBLOAT_LINK_UP_KBIT, UNBLOAT_LINK_DOWN_KBIT   the link's own rates
  LINKLAYER                     atm on ATM links, else ethernet (none for a raw link)
  OVERHEAD, UNBLOAT_OVERHEAD    bytes per packet beyond its IP length
  STAB_MPU, UNBLOAT_MPU         the minimum packet unit, bytes
  UNBLOAT_FRAMING               atm, ptm or none
  UNBLOAT_CAKE_LINK             the same in tc-cake's words (\"overhead 26 mpu 0 ptm\")
  UNBLOAT_PROFILE               the link profile's name
For example: tc qdisc replace dev \"$IFACE\" root cake bandwidth \"${UPLINK}kbit\" $UNBLOAT_CAKE_LINK

Nothing stops a script: after the test the router's namespace is deleted with everything the \
script made there. A path cannot contain a comma.";

/// How long a program may take, seconds: sqm-scripts starts in well under a second, and a
/// script that probes its qdiscs a few times still has ample room.
pub const TIMEOUT_S: u64 = 120;

/// `timeout`'s exit status when the time ran out (coreutils).
const TIMED_OUT: i32 = 124;

/// How many of a failed program's last stderr lines its error quotes.
const STDERR_LINES: usize = 8;

/// The environment a program gets for `profile`, without `PATH`, in the order of the module's
/// table. Pure.
pub fn environment(profile: &LinkProfile, devs: &RouterDevs) -> Vec<(&'static str, String)> {
    let (down, up) = shaper_rates(profile);
    let kbit = |r: Rate| (r.bits_per_sec() / 1000).to_string();
    let link = profile.link_layer();
    let sqm_link_layer = match (link.raw, link.framing) {
        (true, _) => "none",
        (false, Framing::Atm) => "atm",
        (false, _) => "ethernet",
    };
    let framing = match link.framing {
        Framing::Atm => "atm",
        Framing::Ptm => "ptm",
        Framing::None => "none",
    };
    vec![
        ("IFACE", devs.wan.clone()),
        ("UPLINK", kbit(up)),
        ("DOWNLINK", kbit(down)),
        ("LINKLAYER", sqm_link_layer.into()),
        ("OVERHEAD", link.overhead.to_string()),
        ("STAB_MPU", link.mpu.to_string()),
        ("UNBLOAT_IFACE", devs.wan.clone()),
        ("UNBLOAT_UP_KBIT", kbit(up)),
        ("UNBLOAT_DOWN_KBIT", kbit(down)),
        ("UNBLOAT_LINK_UP_KBIT", kbit(profile.up)),
        ("UNBLOAT_LINK_DOWN_KBIT", kbit(profile.down)),
        ("UNBLOAT_FRAMING", framing.into()),
        ("UNBLOAT_OVERHEAD", link.overhead.to_string()),
        ("UNBLOAT_MPU", link.mpu.to_string()),
        ("UNBLOAT_CAKE_LINK", link.cake_words().join(" ")),
        ("UNBLOAT_PROFILE", profile.name.clone()),
    ]
}

/// What the real sqm-scripts gets for `recipe`: [`environment`] with `STAB_MPU=0` (its default,
/// as the re-created sqm strategies have it), `SCRIPT` and `QDISC`. Pure.
pub fn sqm_environment(
    recipe: SqmRecipe,
    profile: &LinkProfile,
    devs: &RouterDevs,
) -> Vec<(&'static str, String)> {
    let mut env = environment(profile, devs);
    for (name, value) in &mut env {
        if *name == "STAB_MPU" {
            *value = "0".into();
        }
    }
    env.push(("SCRIPT", format!("{}.qos", recipe.name())));
    env.push(("QDISC", recipe.qdisc().into()));
    env
}

/// The command that runs `argv` with exactly `env` and `PATH=path`, under `timeout`. Pure.
/// The runner's own deadline comes after timeout(1)'s, so the script's is the one that speaks.
pub fn invocation(argv: &[String], env: &[(&str, String)], path: &str) -> Cmd {
    Cmd::new("timeout")
        .args(["--kill-after=5".to_string(), TIMEOUT_S.to_string()])
        .args(["env", "-i"])
        .arg(format!("PATH={path}"))
        .args(env.iter().map(|(k, v)| format!("{k}={v}")))
        .args(argv.iter().cloned())
        .timeout(std::time::Duration::from_secs(TIMEOUT_S + 15))
}

/// The system's half of checking a `script:PATH` strategy, before anything is built: the path
/// made absolute (a re-run inside User-Mode Linux starts elsewhere), an existing file, executable.
/// Other strategies pass unchanged.
pub fn resolve(strategy: Strategy) -> Result<Strategy, LabError> {
    use std::os::unix::fs::PermissionsExt;
    let Strategy::Script(path) = &strategy else {
        return Ok(strategy);
    };
    let abs =
        std::path::absolute(path).map_err(|e| LabError::Strategies(format!("{strategy}: {e}")))?;
    // Named as the lab will run it: a relative path says where it was looked for.
    let refuse = |why: String| LabError::Strategies(format!("script:{}: {why}", abs.display()));
    let meta = std::fs::metadata(&abs).map_err(|e| refuse(format!("cannot use it: {e}")))?;
    if !meta.is_file() {
        return Err(refuse("not a file".into()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(refuse(format!(
            "not executable (chmod +x {})",
            abs.display()
        )));
    }
    Ok(Strategy::Script(abs))
}

/// sqm-scripts' source when `strategies` run it: `given` (`--sqm-scripts`), else the vendored
/// copy ([`sqm::locate`]); an error that says which, and why, when it cannot be used.
pub fn sqm_source(
    strategies: &[Strategy],
    given: Option<&Path>,
) -> Result<Option<PathBuf>, LabError> {
    let Some(first) = strategies
        .iter()
        .find(|s| matches!(s, Strategy::SqmScripts(_)))
    else {
        return Ok(None);
    };
    match (sqm::locate(given), given) {
        (Ok(dir), _) => Ok(Some(std::path::absolute(&dir).unwrap_or(dir))),
        (Err(_), Some(dir)) => Err(LabError::SqmScripts(format!(
            "--sqm-scripts {}: no src/start-sqm there",
            dir.display()
        ))),
        (Err(why), None) => Err(LabError::SqmScripts(format!(
            "--strategies {first} runs the real sqm-scripts, whose vendored copy cannot be used \
             ({why}): give --sqm-scripts DIR"
        ))),
    }
}

/// Sets `strategy` up on `live`'s router: its commands ([`strategies::commands`]), or its
/// program. Returns the lines the report shows for it. `sqm_scripts` is sqm-scripts' source, for
/// the `sqm-scripts:` strategies ([`sqm_source`]).
pub fn set_up(
    live: &LiveTopology,
    strategy: &Strategy,
    profile: &LinkProfile,
    sqm_scripts: Option<&Path>,
) -> Result<Vec<String>, LabError> {
    let devs = live.topo.router_devs();
    match strategy {
        Strategy::Script(path) => {
            let argv = [path.display().to_string()];
            let ran = run_program(live, strategy, &argv, &environment(profile, &devs))?;
            Ok(ran.shown)
        }
        Strategy::SqmScripts(recipe) => {
            let src = sqm_scripts.ok_or_else(|| {
                LabError::SqmScripts(format!("{strategy}: no sqm-scripts source was given"))
            })?;
            let lib = std::env::temp_dir().join(format!("unbloat-sqm-{}", live.topo.prefix));
            let installed = sqm::Installed::new(src, lib.clone())
                .map_err(io("cannot install sqm-scripts into", &lib))?;
            let argv = [
                "sh".to_string(),
                installed.lib.join("start-sqm").display().to_string(),
            ];
            let env = sqm_environment(*recipe, profile, &devs);
            let ran = run_program(live, strategy, &argv, &env)?;
            if !installed.state_file(&devs.wan).is_file() {
                return Err(failed(
                    strategy,
                    "start-sqm exited 0 but its recipe did not start (no state file)",
                    &ran.stderr,
                ));
            }
            Ok(ran.shown)
        }
        _ => {
            let cmds = strategies::commands(strategy, profile, &devs, &ShaperPlanner)?;
            live.apply(Node::Router, &cmds)?;
            Ok(cmds.iter().map(Cmd::display).collect())
        }
    }
}

/// What a program's run leaves for the report, and its stderr.
struct Ran {
    shown: Vec<String>,
    stderr: String,
}

fn run_program(
    live: &LiveTopology,
    strategy: &Strategy,
    argv: &[String],
    env: &[(&str, String)],
) -> Result<Ran, LabError> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    let cmd = invocation(argv, env, &path);
    let out = live.run_in(Node::Router, &cmd)?;
    match out.status {
        0 => {}
        TIMED_OUT => {
            let how = format!("still running after {TIMEOUT_S} s, stopped");
            return Err(failed(strategy, &how, &out.stderr));
        }
        status => {
            return Err(failed(
                strategy,
                &format!("exit status {status}"),
                &out.stderr,
            ));
        }
    }
    for line in out.stderr.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("unbloat lab: {strategy}: {line}");
    }
    let mut shown = vec![cmd.display(), "# the router's qdiscs after it:".into()];
    let qdiscs = live.run_in(Node::Router, &Cmd::tc(["-d", "qdisc", "show"]))?;
    shown.extend(qdiscs.stdout.lines().map(|l| format!("# {l}")));
    Ok(Ran {
        shown,
        stderr: out.stderr,
    })
}

/// The error for a program that failed: `how` it ended and the last lines of its stderr, on one
/// line (a run inside User-Mode Linux passes on only the last lines of what it printed).
fn failed(strategy: &Strategy, how: &str, stderr: &str) -> LabError {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(STDERR_LINES)..];
    let stderr = if tail.is_empty() {
        "nothing on stderr".to_string()
    } else {
        format!("stderr: {}", tail.join(" | "))
    };
    LabError::Script {
        strategy: strategy.to_string(),
        how: how.to_string(),
        stderr,
    }
}

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;
