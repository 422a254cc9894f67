//! A plan's script as the commands that run it, for the test bench: the lab's strategies
//! (`unbloat_lab::strategies`) and the start benchmark's "one by one" baseline (`unbloat-lab
//! bench start`), which run what unbloat would, without its transactions. The product runs a
//! script through `unbloat_system::apply` (IFBs over rtnetlink, one `tc -batch` per interface,
//! read back and verified), never through these.

use unbloat_shaper::script::Script;
use unbloat_system::apply::nft;
use unbloat_system::runner::Cmd;

/// A plan's script as the commands that run it: the `ip` steps, then one `tc -batch -` with the
/// batch text on its standard input, then the `ip` steps after it, then its nftables rules in
/// one `nft -f -` each (the lab's strategies run scripts this way).
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
