//! The documentation that comes from the clap definition itself, so it cannot drift from
//! `--help`: `unbloat completions bash|zsh|fish` prints a shell's completion script
//! (clap_complete), and the hidden `unbloat man --out DIR` writes the man pages (clap_mangen):
//! `unbloat.8` and one page per visible subcommand, nested names joined with `-`
//! (`unbloat-set-rate.8`, `unbloat-config-import-sqm.8`, `unbloat-bench-lab.8`). Section 8:
//! system administration, where `man unbloat` and the systemd unit's
//! `Documentation=man:unbloat(8) man:unbloat-daemon(8)` look. `make deb` packages both.
//!
//! Both take the command tree as an argument (main builds it with `Cli::command()`), so this
//! module knows nothing of the CLI's types. Hidden subcommands (`kernel`, `man`) get neither a
//! page nor a completion.

use crate::Failure;
use anyhow::Context;
use clap::{Args, ValueEnum};
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// The section of every page: system administration commands and daemons (man-pages(7)).
pub const SECTION: &str = "8";

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell whose completion script to print.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing; pages there are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The pages' date, YYYY-MM-DD (`make deb` gives the commit's, so a commit gives the same
    /// pages every time).
    #[arg(long, value_name = "DATE")]
    pub date: String,
}

/// `unbloat completions SHELL`: the script on stdout.
pub fn completions(args: &CompletionsArgs, mut cmd: clap::Command) -> Result<(), Failure> {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, &mut std::io::stdout().lock());
    Ok(())
}

/// `unbloat man --out DIR`: every page written, their file names printed one a line.
pub fn man(args: &ManArgs, cmd: clap::Command) -> Result<(), Failure> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create the directory", args.out.display()))?;
    for name in write_pages(cmd, &args.date, &args.out)? {
        println!("{name}");
    }
    Ok(())
}

/// Writes the page of `cmd` and of each visible subcommand, depth first, into `dir`; returns
/// the file names in the order written.
pub fn write_pages(cmd: clap::Command, date: &str, dir: &Path) -> anyhow::Result<Vec<String>> {
    let version = cmd.get_version().unwrap_or_default().to_string();
    let title = Title {
        date,
        source: &format!("{} {version}", cmd.get_name()),
    };
    // As clap_mangen's own generate_to: no `help` pseudo-subcommand, and the tree built once
    // so every subcommand carries its display name (`unbloat-config-import-sqm`).
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_tree(&cmd, &title, dir, &mut written)?;
    Ok(written)
}

/// What every page's `.TH` line carries besides its name and section. An empty date would
/// shift the fields after it (roff drops an empty argument), so one is always given.
struct Title<'a> {
    date: &'a str,
    source: &'a str,
}

fn write_tree(
    cmd: &clap::Command,
    title: &Title,
    dir: &Path,
    written: &mut Vec<String>,
) -> anyhow::Result<()> {
    let page = clap_mangen::Man::new(cmd.clone())
        .section(SECTION)
        .date(title.date)
        .source(title.source)
        .manual("System Administration");
    let name = page.get_filename();
    let mut text = Vec::new();
    page.render(&mut text)?;
    let path = dir.join(&name);
    std::fs::write(&path, text).with_context(|| format!("{}: cannot write", path.display()))?;
    written.push(name);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, title, dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Command, Parser, Subcommand};

    #[derive(Parser)]
    #[command(name = "tool", version = "1.2.3")]
    struct Tool {
        #[command(subcommand)]
        command: Top,
    }

    #[derive(Subcommand)]
    enum Top {
        /// Shape.
        SetRate,
        #[command(subcommand)]
        Config(Nested),
        #[command(hide = true)]
        Secret,
    }

    #[derive(Subcommand)]
    enum Nested {
        /// Import.
        ImportSqm,
    }

    fn pages(cmd: Command) -> (Vec<String>, PathBuf) {
        let dir = std::env::temp_dir().join(format!("unbloat-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        (write_pages(cmd, "2026-01-02", &dir).unwrap(), dir)
    }

    #[test]
    fn nested_subcommands_get_joined_names_and_hidden_ones_none() {
        use clap::CommandFactory;
        let (names, dir) = pages(Tool::command());
        assert_eq!(
            names,
            [
                "tool.8",
                "tool-set-rate.8",
                "tool-config.8",
                "tool-config-import-sqm.8"
            ]
        );
        let page = std::fs::read_to_string(dir.join("tool-config-import-sqm.8")).unwrap();
        assert!(
            page.contains(
                ".TH tool-config-import-sqm 8 2026-01-02 \"tool 1.2.3\" \"System Administration\""
            ),
            "{page}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
