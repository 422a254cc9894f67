//! `unbloat tune --save-as NAME`: the run's rates and framing written into the config file as
//! `[network.NAME]`, recognised by the MAC of the interface's default gateway. The gateway is
//! read as the daemon reads it (rtnetlink: the interface's own default route, its gateway's
//! neighbour entry); the edit is [`unbloat_shaper::network::save`]'s; the file is read without
//! following a link and replaced atomically ([`unbloat_safefs::replace`]).
//!
//! Everything that can be refused is refused before the run (the name, the file, its interface
//! table, a gateway whose MAC the kernel knows), and again after it, with nothing written: the
//! run's own files in DIR stay either way.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use unbloat_shaper::config::MAX_CONFIG_BYTES;
use unbloat_shaper::model::Direction;
use unbloat_shaper::network::save::{self, Saved};
use unbloat_shaper::network::Mac;
use unbloat_shaper::options::ShapeOptions;
use unbloat_system::rtnl::gateway::Gateway;
use unbloat_system::rtnl::Rtnl;
use unbloat_units::IfName;

use crate::{invalid, Failure};

/// Where a run is saved, checked before it starts.
pub struct SaveAs {
    pub name: String,
    pub config: PathBuf,
    pub iface: IfName,
    /// The gateway when the run started: the one the rates were measured behind.
    pub gateway: Mac,
}

/// Checks `--save-as NAME` before any load: the name, the file and its interface table, and
/// the interface's gateway with its MAC.
pub fn before(name: &str, config: &Path, iface: &IfName) -> Result<SaveAs, Failure> {
    let flag = |e: &dyn std::fmt::Display| {
        invalid(anyhow!(
            "--save-as {name}: {e}; nothing was measured or changed"
        ))
    };
    let text = read(config).map_err(|e| flag(&e))?;
    save::precheck(&text, config, name, iface).map_err(|e| flag(&e))?;
    let gateway = mac_of(iface).map_err(|e| flag(&e))?;
    save::unclaimed(&text, config, name, iface, gateway).map_err(|e| flag(&e))?;
    Ok(SaveAs {
        name: name.to_string(),
        config: config.to_path_buf(),
        iface: iface.clone(),
        gateway,
    })
}

/// Writes the run's `options` into the file, if the interface is still behind the gateway it
/// was measured behind; says what it did on stderr.
pub fn after(to: &SaveAs, options: &ShapeOptions, note: &str) -> Result<(), Failure> {
    let name = &to.name;
    let fail = |e: &dyn std::fmt::Display| {
        anyhow!(
            "--save-as {name}: {e}; {} was not changed (the run's result is in its DIR)",
            to.config.display()
        )
    };
    let now = mac_of(&to.iface).map_err(|e| fail(&e))?;
    if now != to.gateway {
        return Err(fail(&format!(
            "{}'s gateway changed during the run ({} then, {now} now): the rates are not this network's",
            to.iface, to.gateway
        ))
        .into());
    }
    let text = read(&to.config).map_err(|e| fail(&e))?;
    let Saved { text: new, retuned } = save::save(
        &text, &to.config, name, &to.iface, to.gateway, options, note,
    )
    .map_err(|e| fail(&e))?;
    if new != text {
        unbloat_safefs::replace(&to.config, &new).map_err(|e| fail(&e))?;
    }
    eprintln!(
        "unbloat: {} [network.{name}] in {}: {} behind {}; `unbloat reload` makes a running daemon use it",
        if retuned { "re-tuned" } else { "saved" },
        to.config.display(),
        to.iface,
        to.gateway
    );
    if let Some(words) = upload_words_left_out(options) {
        eprintln!(
            "unbloat: [network.{name}] does not carry the upload's memlimit (extra-egress = {words:?}): a network's extra-egress replaces [interface.{}]'s own words, which the run did not read; add the memlimit to that table's extra-egress by hand, beside the words that upload is shaped with",
            to.iface
        );
    }
    Ok(())
}

/// The upload's option words when they carry a `memlimit` (tune's bound on a slow upload, or
/// the user's own): not saved, since [`save::TUNED_KEYS`] holds no option string.
fn upload_words_left_out(options: &ShapeOptions) -> Option<&str> {
    let says = |o: &ShapeOptions| o.memlimit.is_some();
    let words = options.extra_egress.as_deref()?;
    let bare = ShapeOptions {
        memlimit: None,
        ..options.clone()
    };
    bare.says(Direction::Egress, says).then_some(words)
}

/// The interface's gateway MAC, or why there is none to record.
fn mac_of(iface: &IfName) -> Result<Mac, String> {
    let rtnl = Rtnl::open().map_err(|e| format!("opening rtnetlink: {e}"))?;
    let link = rtnl
        .link(iface.as_str())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("there is no interface {iface}"))?;
    match rtnl.gateway(link.index).map_err(|e| e.to_string())? {
        Some(Gateway { mac: Some(mac), .. }) => Ok(mac),
        Some(Gateway { addr, mac: None }) => Err(format!(
            "{iface}'s gateway {addr} has no MAC in the neighbour table yet (`ping -c1 {addr}` resolves it)"
        )),
        None => Err(format!(
            "{iface} has no default route through a gateway, so no network to recognise (`ip route show dev {iface}`)"
        )),
    }
}

/// The config file's text: a regular file, not through a link, at most 1 MiB of UTF-8.
fn read(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = vec![];
    unbloat_safefs::open(path)
        .map_err(|e| e.to_string())?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: larger than 1 MiB, not a config file",
            path.display()
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memlimit_in_the_upload_words_is_named_as_not_saved() {
        let words = |w: Option<&str>| ShapeOptions {
            extra_egress: w.map(str::to_string),
            ..Default::default()
        };
        let slow = words(Some("memlimit 16384 ack-filter"));
        assert_eq!(
            upload_words_left_out(&slow),
            Some("memlimit 16384 ack-filter")
        );
        assert_eq!(upload_words_left_out(&words(Some("ack-filter"))), None);
        assert_eq!(upload_words_left_out(&words(None)), None);
        // The key bounds both ways and is not the upload's words: nothing to name.
        let key = ShapeOptions {
            memlimit: Some(unbloat_units::Size::from_bytes(16384)),
            ..words(Some("ack-filter"))
        };
        assert_eq!(upload_words_left_out(&key), None);
    }
}
