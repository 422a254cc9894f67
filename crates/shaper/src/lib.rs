//! unbloat-shaper: pure planning of a shaped link, and the model of what the kernel reports.
//!
//! Nothing here runs a command or touches the system; the `unbloat-system` crate does that. The
//! layers, in the order data flows through them:
//!
//! - [`model`]: the shared vocabulary (tc handles, directions, the final parameters of cake, HTB,
//!   fq_codel, the size table, filters and the redirect). It imports none of the modules below;
//!   they all import it, so data flows one way.
//! - [`options`]: what a user says about one interface ([`options::ShapeOptions`]), from flags or
//!   a config file, every field optional, each option declared once ([`options::OPTIONS`]: key,
//!   flag, help, type, words, strategy, direction, form); extra option strings and sqm-scripts'
//!   parsed with cake's/fq_codel's own grammar ([`options::words`]) into the same typed options.
//! - [`config`]: the TOML file, one table per interface, errors with file:line:column and key;
//!   [`autorate_config`]: its `[autorate.NAME]` tables, for the daemon's autorate; [`tomlread`]:
//!   the product's one way to read TOML (toml's parser, serde_json's deserializer), with places;
//!   [`tomlsplice`]: one table of a file changed in its own text, comments and order kept (the
//!   web page's form, `tune --save-as`).
//! - `network` (feature `networks`): `[network.NAME]` tables, a laptop's shaping per network,
//!   recognised by the default gateway's MAC (a pure function of it).
//! - [`spec`]: every check that needs no system, and the defaults of the field
//!   ([`spec::Spec::new`]); errors name the flag and the value.
//! - [`linklayer`]: link-layer presets with cake's exact numbers; [`qdisc`]: one module per
//!   qdisc kind ([`cake`], [`fq_codel`], [`htb`], [`ingress`]), each the one home of its option
//!   words, constants and netlink attributes, and [`qdisc::netlink`], the kernel's shared
//!   numbers; [`stab`], [`ifb`]: the size table and the IFB device. Each cites its man page,
//!   kernel source and RFC.
//! - [`plan`]: the typed operations ([`plan::Plan`], [`plan::Step`]), built from a spec by calling
//!   the per-qdisc builders (it re-exports [`model`]'s types for callers); [`script`]: the `ip` argv
//!   and `tc -batch` text, and the shell rendering for `unbloat plan` / `start --dry-run`.
//! - [`fairness`]: what the machine looks like (forwarding, NAT on the WAN) -> cake's isolation
//!   and `nat` defaults, and the one line `plan` and `status` show about them.
//! - [`sqm_import`]: sqm-scripts' configuration (OpenWrt's `/etc/config/sqm`,
//!   `/etc/sqm/*.iface.conf`) read as sqm-scripts reads it, into the same [`options`] and a TOML
//!   table per queue, with a note for every option (`unbloat config import-sqm`).
//! - [`invocation`]: the argument vectors of unbloat's own commands (`start`, `test`, `tune`,
//!   ...) for a program that runs them (the daemon's web page, the test bench), `start`'s
//!   shaping flags written from [`options::OPTIONS`].
//! - [`clip`]: user text in error messages cut to [`clip::MAX_ECHO`] characters, everywhere.
//! - [`tcjson`], [`verify`], [`status`], [`goodput`]: the model of `tc -j -s` output, the
//!   comparison of a plan with the live state (each qdisc's parameter table says what to compare),
//!   the status view and the goodput formula; [`human`]: rates, times and sizes for people.

pub mod autorate_config;
pub mod classify;
pub mod clip;
pub mod config;
pub mod fairness;
pub mod ifb;
pub mod invocation;
pub mod linklayer;
pub mod model;
#[cfg(feature = "networks")]
pub mod network;
pub mod options;
pub mod plan;
pub mod qdisc;
pub mod script;
pub mod spec;
pub mod sqm_import;
pub mod stab;
pub mod tomlread;
pub mod tomlsplice;
pub mod transition;
pub mod uci;

// The qdisc modules under their old paths too (`unbloat_shaper::cake`, ...).
pub use qdisc::{cake, fq_codel, htb, ingress};

pub mod goodput;
pub mod human;
pub mod status;
pub mod tcjson;
pub mod verify;
