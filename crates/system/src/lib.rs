//! unbloat-system: everything that touches the machine.
//!
//! - [`runner`]: the only place that starts programs (`tc`, `ip`, `nft`, ...), behind the
//!   [`runner::Runner`] trait, with a real ([`runner::SystemRunner`]) and a recording
//!   ([`runner::RecordingRunner`]) implementation. The test bench's kernel runner
//!   (unbloat-testbed) starts User-Mode Linux through it too; nothing of that is here.
//! - [`probe`]: what the kernel and iproute2 here can do, tried for real in a throw-away network
//!   namespace, and what to do about what is missing.
//! - [`hostnet`]: whether this machine forwards and NATs out of a WAN device (sysctls, nftables,
//!   iptables), for cake's fairness defaults.
//! - [`knobs`]: the environment variables of the tests (`UNBLOAT_TC`, ...), read only by test
//!   builds (feature `test-knobs`).
//! - [`trust`]: whether root may run what is at a path, or everything under a directory (no
//!   symlinks, nobody else can write it).
//! - [`sqm`]: the real sqm-scripts installed and run dry for `unbloat config import-sqm --check`
//!   (the lab installs its copy the same way; finding the copy vendored in the source tree is
//!   the test bench's, unbloat-testbed).
//! - [`rtnl`]: links, qdisc snapshots and cake's rate over rtnetlink, without a process; link
//!   events ([`rtnl::events`]) for the daemon.
//! - [`planned`]: a config or the user's options planned for this machine (its fairness
//!   defaults, the link-speed check), the same for `start` and the daemon.
//! - [`apply`]: start, stop and set-rate as transactions over every interface of a command:
//!   the [`transition`](unbloat_shaper::transition) between plans, [`live`] read-back and
//!   verification, undo to a [`snapshot`]; the [`journal`] written before any change and
//!   [`recover`]y from it after a crash; one transaction [`lock`]; the [`state`] records (typed
//!   plans) of what unbloat created; a change on trial's [`deadline`] on the boot clock.
//! - [`clients`]: who a peer is (an IPv4 address, an IPv6 /64 in its /56) and how much of a
//!   server each may hold: the per-client caps of `unbloat serve`, the page and metrics.
//! - [`exit`]: what a failed command exits with (1, or 2 for invalid input), for both binaries.
pub mod apply;
pub mod clients;
pub mod deadline;
pub mod exit;
pub mod hostnet;
pub mod journal;
pub mod knobs;
pub mod live;
pub mod lock;
pub mod offload;
pub mod planned;
pub mod probe;
pub mod recover;
pub mod rtnl;
pub mod runner;
pub mod snapshot;
pub mod sqm;
pub mod state;
pub mod stop;
pub mod tcnl;
pub mod trust;
#[cfg(feature = "networks")]
pub mod wifi;
