//! `unbloat config import-sqm FILE`: the file read (at most 1 MiB of UTF-8), imported by
//! [`unbloat_shaper::sqm_import`] (pure), and the result printed or written; `--check` puts
//! `unbloat plan`'s commands for each table beside the ones the real sqm-scripts runs for the
//! same queue ([`unbloat_lab::sqm_dry`]: its start-sqm with tc, ip and iptables printing instead
//! of running).
//!
//! Exit status 2 for anything wrong with the input (unreadable, not sqm's, a missing interface,
//! an unknown script, a bad rate, a result unbloat's checks refuse) or an `--out` that exists
//! without `--force`: nothing is written then. 1 if the output cannot be written.

use crate::{invalid, Failure};
use anyhow::anyhow;
use clap::Args;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use unbloat_shaper::config::{ConfigFile, MAX_CONFIG_BYTES};
use unbloat_shaper::sqm_import::{self, render, Import, NoteKind};

#[derive(Debug, Args)]
pub struct ImportSqmArgs {
    /// sqm's configuration: OpenWrt's /etc/config/sqm (UCI), or sqm-scripts'
    /// /etc/sqm/IFACE.iface.conf (shell variables).
    pub file: PathBuf,
    /// Write the TOML to FILE instead of printing it (refused if FILE exists, unless --force).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Print, per interface, what the result shapes (`unbloat plan`'s commands on this machine)
    /// beside the commands sqm-scripts runs for the same queue (its start-sqm, with tc, ip and
    /// iptables printing instead of running), instead of the TOML.
    #[arg(long)]
    pub check: bool,
    /// Print the result as JSON: the TOML, each interface's typed options and every note.
    #[arg(long)]
    pub json: bool,
    /// The interface of a shell file that names none (sqm-scripts' default.conf).
    #[arg(long, value_name = "IFACE")]
    pub iface: Option<String>,
    /// Take rates unbloat would refuse as a likely typo (below 64 kbit/s, directions over 1000:1
    /// apart): their tables get `i-mean-it = true`.
    #[arg(long)]
    pub i_mean_it: bool,
    /// sqm-scripts' source for --check (the directory with src/start-sqm); default:
    /// shared/peers/sqm-scripts above the current directory or the binary.
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<PathBuf>,
}

pub fn import_sqm(args: &ImportSqmArgs) -> Result<(), Failure> {
    let path = args.file.display().to_string();
    let text = read(&args.file).map_err(invalid)?;
    let opts = sqm_import::Options {
        iface: args.iface.as_deref(),
        i_mean_it: args.i_mean_it,
    };
    let imp = sqm_import::import(&text, &path, &opts).map_err(invalid)?;
    let toml = render::toml(&imp, &path);
    // The TOML is unbloat's own config format, read back as `start --config` will read it.
    ConfigFile::parse(&toml, Path::new(&path))
        .map_err(|e| anyhow!("the imported TOML does not read back (a bug): {e}"))?;
    if let Some(out) = &args.out {
        if out.exists() && !args.force {
            return Err(invalid(anyhow!(
                "{}: exists; --force replaces it (nothing was written)",
                out.display()
            )));
        }
    }
    let checks = match args.check {
        true => Some(checks(&imp, args)?),
        false => None,
    };
    if let Some(out) = &args.out {
        write(out, &toml)?;
    }
    if args.json {
        let json = serde_json::json!({
            "source": path,
            "format": imp.format,
            "interfaces": imp.interfaces,
            "notes": imp.notes,
            "toml": toml,
            "check": checks.as_ref().map(|c| c.iter().map(Check::json).collect::<Vec<_>>()),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for n in imp.notes.iter().filter(|n| n.kind != NoteKind::Mapped) {
            eprintln!("unbloat: {n}");
        }
        match &checks {
            Some(c) => c.iter().for_each(|c| print!("{}", c.text())),
            None if args.out.is_none() => print!("{toml}"),
            None => {}
        }
    }
    if let Some(out) = &args.out {
        let on = imp.interfaces.iter().filter(|i| i.enabled).count();
        let off = imp.interfaces.len() - on;
        eprintln!(
            "unbloat: wrote {} ({on} interface{}{}); check it with: unbloat config check {}",
            out.display(),
            if on == 1 { "" } else { "s" },
            if off > 0 {
                format!(", {off} commented out")
            } else {
                String::new()
            },
            out.display()
        );
    }
    Ok(())
}

/// The file's text: at most [`MAX_CONFIG_BYTES`], UTF-8.
fn read(path: &Path) -> anyhow::Result<String> {
    let cannot = |e: std::io::Error| anyhow!("cannot read {}: {e}", path.display());
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(cannot)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(anyhow!(
            "{}: larger than 1 MiB; sqm's configuration is a few hundred bytes per queue, is it the right file?",
            path.display()
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{}: not text (invalid UTF-8 at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Write `text` to `out` through a temporary file in the same directory, renamed into place:
/// a reader never sees half a file.
fn write(out: &Path, text: &str) -> Result<(), Failure> {
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.unwrap_or_else(|| "unbloat".into()),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Failure::from(anyhow!("cannot write {}: {e}", out.display()))
    })
}

/// One interface of `--check`: unbloat's plan and sqm-scripts' commands.
struct Check {
    iface: String,
    queue: String,
    script: &'static str,
    enabled: bool,
    unbloat: String,
    /// sqm-scripts' commands, or why they could not be had.
    sqm: Result<unbloat_lab::sqm_dry::DryRun, String>,
}

fn checks(imp: &Import, args: &ImportSqmArgs) -> Result<Vec<Check>, Failure> {
    let source = sqm_source(args);
    let mut out = Vec::new();
    for i in &imp.interfaces {
        let unbloat = crate::shape::plan_text(i.iface.clone(), &i.options)?;
        let sqm = match (&source, i.enabled) {
            (_, false) => Err("disabled in sqm: sqm-scripts starts nothing".to_string()),
            (None, _) => Err(
                "sqm-scripts' source not found (--sqm-scripts DIR, the directory with src/start-sqm)"
                    .to_string(),
            ),
            (Some(src), true) => unbloat_lab::workdir::WorkDir::new("import-sqm")
                .and_then(|w| {
                    unbloat_lab::sqm_dry::dry_run(src, &w.0, i.iface.as_str(), &i.sqm_env)
                })
                .map_err(|e| format!("could not run sqm-scripts: {e}")),
        };
        out.push(Check {
            iface: i.iface.to_string(),
            queue: i.queue.clone(),
            script: i.script.name(),
            enabled: i.enabled,
            unbloat,
            sqm,
        });
    }
    Ok(out)
}

/// sqm-scripts' source: the flag, or shared/peers/sqm-scripts above here or the binary.
fn sqm_source(args: &ImportSqmArgs) -> Option<PathBuf> {
    if let Some(d) = &args.sqm_scripts {
        return Some(d.clone());
    }
    [std::env::current_dir().ok(), std::env::current_exe().ok()]
        .into_iter()
        .flatten()
        .find_map(|start| unbloat_lab::sqm::find(&start))
}

impl Check {
    fn text(&self) -> String {
        let mut s = format!("==== {} ({}, {})\n", self.iface, self.queue, self.script);
        match self.enabled {
            true => {
                s.push_str("---- unbloat: what `unbloat plan --config` prints for the result\n")
            }
            false => {
                s.push_str("---- unbloat: commented out in the result; uncommented, it plans\n")
            }
        }
        s.push_str(&self.unbloat);
        s.push_str(
            "---- sqm-scripts: what its start-sqm runs for the same queue (printed, not run)\n",
        );
        match &self.sqm {
            Ok(d) => {
                for c in &d.commands {
                    s.push_str(c);
                    s.push('\n');
                }
                if d.exit_status != Some(0) {
                    s.push_str(&format!(
                        "# start-sqm exited with {:?}: {}\n",
                        d.exit_status,
                        d.stderr.trim().replace('\n', " / ")
                    ));
                }
            }
            Err(why) => s.push_str(&format!("# {why}\n")),
        }
        s.push('\n');
        s
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "iface": self.iface,
            "queue": self.queue,
            "script": self.script,
            "enabled": self.enabled,
            "unbloat": self.unbloat,
            "sqm_scripts": match &self.sqm {
                Ok(d) => serde_json::json!({
                    "commands": d.commands,
                    "exit_status": d.exit_status,
                    "stderr": d.stderr,
                }),
                Err(why) => serde_json::json!({ "error": why }),
            },
        })
    }
}
