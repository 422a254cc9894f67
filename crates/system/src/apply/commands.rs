//! Running the commands of a change: `ip` steps over rtnetlink, and how a failing `tc -batch`
//! is named (its line, tc's own words).

use super::Failed;
use crate::rtnl::{Rtnl, RtnlError};
use crate::runner::{Cmd, CmdOutput};
use unbloat_shaper::plan::Step;
use unbloat_shaper::script::{argv, Script};

/// An `ip` step of a transition, over rtnetlink.
pub(super) fn link_step(rtnl: &Rtnl, step: &Step) -> Result<(), Failed> {
    let shown = format!("ip {}", argv(step).join(" "));
    let fail = |message: String| Failed::Command {
        command: shown.clone(),
        message,
    };
    match step {
        Step::AddIfb { name } => rtnl.add_ifb(name.as_str()).map_err(|e| fail(e.to_string())),
        Step::SetUp { name } | Step::DeleteLink { name } => {
            let link = rtnl
                .link(name.as_str())
                .map_err(|e| fail(e.to_string()))?
                .ok_or_else(|| fail(format!("Cannot find device \"{name}\"")))?;
            let done = if matches!(step, Step::SetUp { .. }) {
                rtnl.set_up(link.index)
            } else if link.is_ifb() {
                rtnl.delete_link(link.index)
            } else {
                return Err(fail(format!(
                    "{name} is not an IFB; unbloat deletes only its own IFBs"
                )));
            };
            done.map_err(|e| fail(e.to_string()))
        }
        other => Err(fail(format!("not a link step: {other:?}"))),
    }
}

pub(super) fn netlink(e: RtnlError) -> Failed {
    Failed::Command {
        command: "netlink".into(),
        message: e.to_string(),
    }
}

/// A plan's script as the commands that run it: the `ip` steps, then one `tc -batch -` with the
/// batch text on its standard input, then the `ip` steps after it (the lab's strategies and the
/// benchmark's "one by one" baseline run scripts this way).
pub fn script_commands(script: &Script) -> Vec<Cmd> {
    let ip = |argv: &Vec<String>| Cmd::ip(argv.iter().map(String::as_str));
    let mut cmds: Vec<Cmd> = script.ip_before.iter().map(ip).collect();
    if !script.tc_batch.is_empty() {
        cmds.push(Cmd::tc(["-batch", "-"]).stdin(script.batch_text()));
    }
    cmds.extend(script.ip_after.iter().map(ip));
    cmds.extend(script.nft.iter().map(|t| nft(t)));
    cmds
}

/// `nft -f -` reading `text`: one transaction, all of it or nothing.
pub fn nft(text: &str) -> Cmd {
    Cmd::new("nft").args(["-f", "-"]).stdin(text.to_string())
}

/// The same, each `tc` command its own process, as a shell script like sqm-scripts runs them.
pub fn script_commands_one_by_one(script: &Script) -> Vec<Cmd> {
    let ip = |argv: &Vec<String>| Cmd::ip(argv.iter().map(String::as_str));
    let mut cmds: Vec<Cmd> = script.ip_before.iter().map(ip).collect();
    cmds.extend(
        script
            .tc_batch
            .iter()
            .map(|argv| Cmd::tc(argv.iter().map(String::as_str))),
    );
    cmds.extend(script.ip_after.iter().map(ip));
    cmds.extend(script.nft.iter().map(|t| nft(t)));
    cmds
}

/// tc's own words, without its "Command failed -:N" line (the command is named instead).
pub(super) fn tc_message(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().starts_with("Command failed -:"))
        .collect();
    lines.join("\n")
}

/// Names the failing command; for a `tc -batch`, the line tc reports ("Command failed -:N").
pub(super) fn failing_command(cmd: &Cmd, out: &CmdOutput) -> String {
    if let (Some(stdin), true) = (&cmd.stdin, cmd.args.iter().any(|a| a == "-batch")) {
        let line_no = out
            .stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Command failed -:"))
            .and_then(|n| n.trim().parse::<usize>().ok());
        if let Some(line) = line_no.and_then(|n| stdin.lines().nth(n.saturating_sub(1))) {
            return format!("tc {line}");
        }
    }
    cmd.display()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_line_of_a_batch_is_named() {
        let cmd =
            Cmd::tc(["-batch", "-"]).stdin("qdisc add dev x root cake\nqdisc add dev x ingress\n");
        let out = CmdOutput::failed(1, "Error: Exclusivity flag on.\nCommand failed -:2\n");
        assert_eq!(failing_command(&cmd, &out), "tc qdisc add dev x ingress");
        assert_eq!(tc_message(&out.stderr), "Error: Exclusivity flag on.");
    }
}
