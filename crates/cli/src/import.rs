//! `unbloat config import-sqm FILE`: the file read (at most 1 MiB of UTF-8), imported by
//! [`unbloat_shaper::sqm_import`] (pure), and the result printed or written; `--check` puts
//! `unbloat plan`'s commands for each table beside the ones the real sqm-scripts runs for the
//! same queue ([`unbloat_system::sqm::dry`]: its start-sqm with tc, ip and iptables printing instead
//! of running).
//!
//! `--check` runs sqm-scripts' start-sqm, as root when unbloat is, so it takes sqm-scripts only
//! from `--sqm-scripts DIR` or from where a distribution installs it ([`SYSTEM_DIR`]), never
//! from anywhere looked for (a tree above the current directory could be anyone's), and only when
//! no one but root (or the user running it) could have changed what runs
//! ([`unbloat_system::trust::trusted_tree`]).
//!
//! Exit status 2 for anything wrong with the input (unreadable, not sqm's, a missing interface,
//! an unknown script, a bad rate, a result unbloat's checks refuse), an `--out` that exists
//! without `--force`, or a `--check` without sqm-scripts it may run: nothing is written then. 1
//! if the output cannot be written.

use crate::{invalid, Failure};
use anyhow::anyhow;
use clap::Args;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use unbloat_shaper::config::{ConfigFile, MAX_CONFIG_BYTES};
use unbloat_shaper::sqm_import::{self, render, Import, NoteKind};
use unbloat_system::sqm::SYSTEM_DIR;

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
    /// Write OpenWrt's UCI for /etc/config/unbloat instead of TOML (a disabled sqm queue is a
    /// section with `option enabled '0'`).
    #[arg(long)]
    pub uci: bool,
    /// The interface of a shell file that names none (sqm-scripts' default.conf).
    #[arg(long, value_name = "IFACE")]
    pub iface: Option<String>,
    /// Take rates unbloat would refuse as a likely typo (below 64 kbit/s, directions over 1000:1
    /// apart): their tables get `i-mean-it = true`.
    #[arg(long)]
    pub i_mean_it: bool,
    /// sqm-scripts for --check: its source (the directory with src/start-sqm, such as
    /// third_party/sqm-scripts in unbloat's source) or an installed copy (the directory with
    /// start-sqm); default: /usr/lib/sqm, where distributions install it. Refused if anyone but
    /// root (or you) could change what it holds: its scripts are run.
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
    let toml = match args.uci {
        true => render::uci(&imp, &path),
        false => render::toml(&imp, &path),
    };
    // unbloat's own config format, read back as `start --config` will read it.
    ConfigFile::parse(&toml, Path::new(&path))
        .map_err(|e| anyhow!("the imported configuration does not read back (a bug): {e}"))?;
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
/// a reader never sees half a file. The temporary file is a new one (`create_new`: O_EXCL,
/// which follows no link) in a private directory beside `out`, so nothing anyone planted at
/// a name we might use is written through, as root; the rename replaces a link at `out`
/// itself, never its target.
fn write(out: &Path, text: &str) -> Result<(), Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fail = |e: std::io::Error| Failure::from(anyhow!("cannot write {}: {e}", out.display()));
    let private = unbloat_safefs::private_dir(dir, ".unbloat-import").map_err(fail)?;
    let tmp = private.join("new");
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)
    })();
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir(&private);
    result.map_err(fail)
}

/// One interface of `--check`: unbloat's plan and sqm-scripts' commands.
struct Check {
    iface: String,
    queue: String,
    script: &'static str,
    enabled: bool,
    unbloat: String,
    /// sqm-scripts' commands, or why they could not be had.
    sqm: Result<unbloat_system::sqm::dry::DryRun, String>,
}

fn checks(imp: &Import, args: &ImportSqmArgs) -> Result<Vec<Check>, Failure> {
    // Only an enabled queue runs sqm-scripts.
    let source = match imp.interfaces.iter().any(|i| i.enabled) {
        true => Some(sqm_source(args)?),
        false => None,
    };
    let mut out = Vec::new();
    for i in &imp.interfaces {
        let unbloat = crate::shape::plan_text(i.iface.clone(), &i.options)?;
        let sqm = match (&source, i.enabled) {
            (Some(src), true) => unbloat_system::sqm::workdir::WorkDir::new("import-sqm")
                .and_then(|w| {
                    unbloat_system::sqm::dry::dry_run(src, &w.0, i.iface.as_str(), &i.sqm_env)
                })
                .map_err(|e| format!("could not run sqm-scripts: {e}")),
            _ => Err("disabled in sqm: sqm-scripts starts nothing".to_string()),
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

/// sqm-scripts for `--check`: `--sqm-scripts DIR`, else [`SYSTEM_DIR`] when sqm-scripts is
/// installed there; nowhere else. Refused (exit status 2) when root could not safely run what it
/// holds: a symbolic link, or anything another user may change, on the way to its scripts or
/// among them.
fn sqm_source(args: &ImportSqmArgs) -> Result<PathBuf, Failure> {
    let dir = match &args.sqm_scripts {
        Some(d) => d.clone(),
        None if Path::new(SYSTEM_DIR).join("start-sqm").exists() => PathBuf::from(SYSTEM_DIR),
        None => {
            return Err(invalid(anyhow!(
                "--check runs sqm-scripts, which is not installed ({SYSTEM_DIR}/start-sqm): pass \
                 --sqm-scripts DIR, the directory with its src/start-sqm (third_party/sqm-scripts \
                 in unbloat's source)"
            )))
        }
    };
    let Some(scripts) = unbloat_system::sqm::scripts(&dir) else {
        return Err(invalid(anyhow!(
            "--sqm-scripts {}: no src/start-sqm (nor start-sqm) there",
            dir.display()
        )));
    };
    unbloat_system::trust::trusted_tree(&scripts).map_err(|why| {
        invalid(anyhow!(
            "sqm-scripts in {}: refused, since --check runs its scripts: {why}",
            dir.display()
        ))
    })?;
    Ok(dir)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Issue 36 item 10: the temporary file beside `--out` had a predictable name
    /// (`.NAME.PID.tmp`) and was opened through a link: root wrote the config into whatever
    /// file a link planted there pointed at. Now the link is left alone and the config still
    /// lands at `--out`.
    #[test]
    fn a_link_planted_at_the_temporary_name_is_not_written_through() {
        let base = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"));
        std::fs::create_dir_all(&base).expect("base");
        let dir = base.join(format!("import-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").expect("victim");
        let out = dir.join("unbloat.toml");
        symlink(
            &victim,
            dir.join(format!(".unbloat.toml.{}.tmp", std::process::id())),
        )
        .expect("link");
        let wrote = write(&out, "[interface.eth0]\n");
        assert!(
            wrote.is_ok(),
            "{:?}",
            wrote.err().map(|f| f.error.to_string())
        );
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious"
        );
        let meta = std::fs::symlink_metadata(&out).expect("out");
        assert!(meta.is_file(), "--out is a file of its own, not the link");
        assert_eq!(
            std::fs::read_to_string(&out).expect("out"),
            "[interface.eth0]\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
