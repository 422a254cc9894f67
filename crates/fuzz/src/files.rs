//! Files a user or another tool wrote: the config (TOML or UCI) and sqm-scripts' files.

use std::path::Path;

use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::sqm_import::{self, render, Import, Options};

/// `/etc/unbloat/config.toml` or OpenWrt's `/etc/config/unbloat`, as the daemon and
/// `unbloat config check` read it: parsed, then every interface checked as a spec.
pub fn config(data: &[u8]) -> bool {
    let Some(text) = crate::text(data) else {
        return false;
    };
    let _ = unbloat_shaper::uci::parse(text);
    let Ok(config) = ConfigFile::parse(text, Path::new("config")) else {
        return false;
    };
    config.specs(&ShapeOptions::default()).is_ok()
}

/// `unbloat config import-sqm` on OpenWrt's `/etc/config/sqm` or an `IFACE.iface.conf`: what
/// it imports, written as TOML or as UCI, reads back as a config with the options of every
/// enabled queue (what crates/shaper/tests/sqm_import.rs checks on the golden cases).
pub fn sqm_import(data: &[u8]) -> bool {
    let Some(text) = crate::text(data) else {
        return false;
    };
    // The name gives a shell file its interface, as `/etc/sqm/wan0.iface.conf` would.
    let Ok(import) = sqm_import::import(text, "wan0.iface.conf", &Options::default()) else {
        return false;
    };
    read_back(&import, &render::toml(&import, "sqm"), "imported.toml");
    read_back(&import, &render::uci(&import, "sqm"), "/etc/config/unbloat");
    true
}

fn read_back(import: &Import, written: &str, path: &str) {
    let config = ConfigFile::parse(written, Path::new(path))
        .unwrap_or_else(|e| panic!("the import does not read back: {e}\n{written}"));
    let enabled: Vec<_> = import.interfaces.iter().filter(|i| i.enabled).collect();
    assert_eq!(config.interfaces.len(), enabled.len(), "{written}");
    for (read, meant) in config.interfaces.iter().zip(&enabled) {
        assert_eq!(read.name, meant.iface, "{written}");
        assert_eq!(read.options, meant.options, "{written}");
    }
}
