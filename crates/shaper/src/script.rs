//! From typed steps to what runs: `ip` argv lists and the text `tc -batch -` reads.
//!
//! Heads up! iproute2's batch reader (lib/utils.c `getcmdline`, `makeargs`; tc/tc.c `batch`):
//! one command per line without the leading `tc`; `#` starts a comment anywhere on a line (6.1
//! strips from the first `#`); a word starting with a quote is a quoted string; empty lines are
//! skipped; by default the batch stops at the first failing command and names its line. The batch
//! text here has no comments and no empty lines, so line N of a `tc -batch` error is
//! `tc_batch[N - 1]`. Interface names with `#`, quotes or `\` are refused by the spec for this
//! reason.
//!
//! Every `add` is deliberate, never `replace`: `add` fails loudly if something is already there
//! ("Exclusivity flag on"), and the apply code removes unbloat's previous setup first and rolls
//! back on failure, so an unexpected qdisc (someone else's) is an error rather than silently
//! overwritten, and the kernel's state after a successful start is exactly the plan.

use crate::plan::{Plan, QdiscKind, RootQdisc, Step};
use std::fmt;

/// What to run: `ip` commands before the batch, the `tc -batch` commands, `ip` commands after.
/// Each command is its argv without the program name.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Script {
    pub ip_before: Vec<Vec<String>>,
    pub tc_batch: Vec<Vec<String>>,
    pub ip_after: Vec<Vec<String>>,
    /// What `nft -f -` reads last: the classification's table ([`crate::classify`]).
    pub nft: Option<String>,
}

impl Script {
    /// From steps in order: the leading `ip` steps run before the batch, the `ip` steps that
    /// follow a `tc` step run after it.
    pub fn from_steps(steps: &[Step]) -> Script {
        let mut s = Script::default();
        for step in steps {
            let argv = argv(step);
            if step.is_ip() {
                if s.tc_batch.is_empty() {
                    s.ip_before.push(argv);
                } else {
                    s.ip_after.push(argv);
                }
            } else {
                s.tc_batch.push(argv);
            }
        }
        s
    }

    /// Exactly what `tc -batch -` should read: one command per line, newline-terminated.
    pub fn batch_text(&self) -> String {
        self.tc_batch.iter().map(|c| c.join(" ") + "\n").collect()
    }

    /// The whole script as the shell commands that do the same, for `unbloat plan` and
    /// `start --dry-run`: `ip` lines and one `tc -batch - <<'EOF'` here-document.
    pub fn render_shell(&self) -> String {
        let mut out = String::new();
        for c in &self.ip_before {
            out.push_str(&shell_line("ip", c));
        }
        if !self.tc_batch.is_empty() {
            // A quoted delimiter: the shell expands nothing inside.
            out.push_str("tc -batch - <<'EOF'\n");
            out.push_str(&self.batch_text());
            out.push_str("EOF\n");
        }
        for c in &self.ip_after {
            out.push_str(&shell_line("ip", c));
        }
        if let Some(text) = &self.nft {
            out.push_str("nft -f - <<'EOF'\n");
            out.push_str(text);
            out.push_str("EOF\n");
        }
        out
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render_shell())
    }
}

fn shell_line(program: &str, argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
    format!("{program} {}\n", words.join(" "))
}

/// Quote a word for a POSIX shell when it has anything but plain characters.
fn shell_quote(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-:/+=@%,".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

fn words(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The argv of one step (without `ip` / `tc`).
pub fn argv(step: &Step) -> Vec<String> {
    match step {
        Step::AddIfb { name } => words(&["link", "add", "name", name.as_str(), "type", "ifb"]),
        Step::SetUp { name } => words(&["link", "set", "dev", name.as_str(), "up"]),
        Step::DeleteLink { name } => words(&["link", "del", "dev", name.as_str()]),
        Step::AddRootQdisc {
            dev,
            handle,
            stab,
            qdisc,
        } => {
            let mut w = words(&["qdisc", "add", "dev", dev.as_str(), "root"]);
            if let Some(h) = handle {
                w.push("handle".into());
                w.push(h.to_string());
            }
            if let Some(s) = stab {
                w.extend(s.words());
            }
            match qdisc {
                QdiscKind::Cake(p) => {
                    w.push("cake".into());
                    w.extend(p.words());
                }
                QdiscKind::Htb { default_class } => {
                    w.push("htb".into());
                    w.push("default".into());
                    // `default` takes the class's minor number, in hex like every tc handle.
                    w.push(format!("{:x}", default_class.minor));
                }
            }
            w
        }
        Step::AddLeafQdisc { dev, leaf } => {
            let mut w = words(&["qdisc", "add", "dev", dev.as_str(), "parent"]);
            w.push(leaf.parent.to_string());
            w.push("handle".into());
            w.push(leaf.handle.to_string());
            w.push("fq_codel".into());
            w.extend(leaf.params.words());
            w
        }
        Step::AddIngressQdisc { dev } => words(&[
            "qdisc",
            "add",
            "dev",
            dev.as_str(),
            "handle",
            "ffff:",
            "ingress",
        ]),
        Step::AddClass { dev, class } => {
            let mut w = words(&["class", "add", "dev", dev.as_str()]);
            w.extend(class.words());
            w
        }
        Step::AddDscpFilter { dev, filter } => {
            let mut w = words(&["filter", "add", "dev", dev.as_str()]);
            w.extend(filter.words());
            w
        }
        Step::AddRedirect { redirect } => {
            let mut w = words(&["filter", "add", "dev", redirect.dev.as_str()]);
            w.extend(redirect.words());
            w
        }
        Step::DeleteRootQdisc { dev } => words(&["qdisc", "del", "dev", dev.as_str(), "root"]),
        Step::DeleteIngressQdisc { dev } => {
            words(&["qdisc", "del", "dev", dev.as_str(), "ingress"])
        }
    }
}

impl Plan {
    /// The script that creates this plan.
    pub fn script(&self) -> Script {
        Script {
            nft: self.classify.as_ref().map(|c| c.nft_text()),
            ..Script::from_steps(&self.steps())
        }
    }

    /// The script that removes exactly what [`Plan::script`] created.
    pub fn teardown(&self) -> Script {
        Script {
            nft: self
                .classify
                .as_ref()
                .map(|c| crate::classify::delete_text(&c.wan)),
            ..Script::from_steps(&self.teardown_steps())
        }
    }

    /// One line per direction for people: `egress eth0: cake 19950kbit overhead 26 mpu 64 ptm`.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        let describe = |root: &RootQdisc| match root {
            RootQdisc::Cake(p) => format!(
                "cake {} {} link {}",
                p.bandwidth,
                crate::cake::params::PARAMS
                    .iter()
                    .filter_map(|param| (param.summary)(p))
                    .collect::<Vec<_>>()
                    .join(" "),
                link_text(&p.link),
            ),
            RootQdisc::Htb(t) => format!(
                "htb {} + fq_codel, {} tier{}, stab overhead {} mpu {} linklayer {}",
                t.classes
                    .first()
                    .map(|c| c.rate.to_string())
                    .unwrap_or_default(),
                t.leaves.len(),
                if t.leaves.len() == 1 { "" } else { "s" },
                t.stab.map(|s| s.overhead).unwrap_or(0),
                t.stab.map(|s| s.mpu).unwrap_or(0),
                t.stab
                    .map(|s| s.words().last().cloned().unwrap_or_default())
                    .unwrap_or_default(),
            ),
        };
        if let Some(e) = &self.egress {
            out.push(format!("egress  {}: {}", e.dev, describe(&e.root)));
        }
        if let Some(i) = &self.ingress {
            out.push(format!(
                "ingress {} via {}: {}",
                self.wan,
                i.ifb,
                describe(&i.shaping.root)
            ));
        }
        if let Some(c) = &self.classify {
            // No literal ends in "classes": lintian reads the binary's strings run together,
            // and "classes" before the plural's "s" is a misspelling to it.
            let n = c.rules.len();
            let rules = match (n, c.auto.is_some()) {
                (0, _) => "automatic classes only".to_string(),
                (n, auto) => format!(
                    "{n} rule{}, the first match wins{}",
                    if n == 1 { "" } else { "s" },
                    if auto {
                        ", then automatic classes for the rest"
                    } else {
                        ""
                    }
                ),
            };
            out.push(format!(
                "classify: {rules}{}:",
                if self.ingress.is_some() {
                    ", the download's DSCP restored by ctinfo"
                } else {
                    ""
                }
            ));
            for (i, r) in c.rules.iter().enumerate() {
                out.push(format!("  {}. {}", i + 1, r.text));
            }
            if let Some(a) = &c.auto {
                for line in a.comments() {
                    out.push(format!("  {line}"));
                }
            }
        }
        out
    }

    /// The exact shell commands `unbloat plan` and `start --dry-run` print: a comment header,
    /// then the script. Comments are outside the batch text (see the module note).
    pub fn render_shell(&self) -> String {
        let mut out = format!("# unbloat plan for {}\n", self.wan);
        for line in self.summary() {
            out.push_str(&format!("#   {line}\n"));
        }
        out.push_str(&self.script().render_shell());
        out
    }
}

fn link_text(l: &crate::linklayer::LinkLayer) -> String {
    let name = l.preset.map(|p| format!("{p}: ")).unwrap_or_default();
    format!(
        "({name}{}overhead {} mpu {} {})",
        if l.raw { "raw " } else { "" },
        l.overhead,
        l.mpu,
        l.framing
    )
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render_shell())
    }
}
