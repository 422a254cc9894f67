//! Running the commands of a change: `ip` steps over rtnetlink, nftables rules in one
//! transaction, and how a failing `tc -batch` is named (its line, tc's own words).

use super::Failed;
use crate::rtnl::{Rtnl, RtnlError};
use crate::runner::{Cmd, CmdOutput};
use unbloat_shaper::plan::Step;
use unbloat_shaper::script::argv;

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

/// `nft -f -` reading `text`: one transaction, all of it or nothing. Public for the test bench,
/// whose strategies load a plan's rules the same way.
pub fn nft(text: &str) -> Cmd {
    Cmd::new("nft").args(["-f", "-"]).stdin(text.to_string())
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
