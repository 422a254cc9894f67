//! unbloat-lab: an emulated bloated access network, and the strategies compared on it.
//!
//! The layers:
//! - [`profile`]: link profiles (TOML data, seven shipped, users may write their own).
//! - [`strategy`]: a strategy's name, as `--strategies` takes it and tables show it.
//! - [`strategies`]: the one place that defines what each compared strategy configures
//!   (`none`, `wondershaper`, `sqm-simple`, `sqm-piece-of-cake`, `unbloat`) as exact commands;
//!   [`script`]: the strategies that run a program in the router instead, with the link's values
//!   in its environment (`script:PATH`, and the real sqm-scripts as `sqm-scripts:RECIPE`).
//! - [`topology`]: the network namespaces of one lab run (LAN host, router, modem, internet,
//!   server), built from a profile, and removed again whatever happens ([`cleanup`]: drop guards
//!   and the SIGINT/SIGTERM handler).
//! - [`farend`]: the far end the server namespace runs (`unbloat serve`, nginx over TLS, or
//!   stock irtt and iperf3 servers) and how `unbloat test` reaches it.
//! - [`hosts`]: two LAN hosts behind a masquerading router, one stream against eight each way
//!   ([`hosts_parse`] reads iperf3 and ping back, [`hosts_plot`] draws the goodput):
//!   per-host or per-flow fairness, per setup (`unbloat-lab hosts`, `unbloat-lab bench fair`).
//! - [`household`]: the same network as a household (a game, a video call and the web on one
//!   host, bulk on the other), per setup with and without classification;
//!   [`bench_household`]: its runs and table (`unbloat-lab bench household`).
//! - The real peers compared against (the source tree's `third_party/`, used only when root may
//!   run what it holds) are found by the test bench ([`unbloat_testbed::peer`],
//!   [`unbloat_testbed::sqm`]); sqm-scripts is installed as the product's `unbloat config
//!   import-sqm --check` installs it ([`unbloat_system::sqm`]).
//! - [`table`]: one comparison row per strategy from its results file; text and JSON.
//! - [`page`]: the report's `index.html`: the before and after first, then each strategy's detail;
//!   [`report_dir`] writes it, `compare.svg`, `table.txt` and `lab.json`.
//! - [`theory`]: the best goodput each direction of a test could reach (the table's yardstick).
//! - [`lab`]: `unbloat-lab run` ([`LabArgs`], [`run_lab`]): where it runs (host kernel or UML),
//!   calibration, one fresh network per strategy, the report directory.
//! - [`bench_measure`]: the measuring engine against iperf3, ping and irtt (`unbloat-lab bench
//!   measure`, and parts of `bench far-ends`): benchmark code, kept out of unbloat-measure.
//! - [`bench`]: `unbloat-lab bench lab` ([`run_benchmark`]): every profile x every strategy, with the
//!   checks of issue 4 §7; [`spread`]: medians and ranges over repeated runs.
//! - [`autorate_lab`]: the strategies of a variable link: `unbloat autorate` and the real
//!   cake-autorate in the router during the test, and fixed rates from the traces;
//!   [`bench_autorate`]: all of them on a step, a ramp and real LTE traces (`bench autorate`).
//! - [`bench_hostile`]: hostile clients against `unbloat serve`, the daemon's page and metrics,
//!   with a legitimate client beside them (`bench hostile`); [`procstat`]: a process's memory,
//!   threads and files, sampled from /proc (it and [`bench_soak`] watch their server with it);
//!   [`bench_soak`]: the daemon through thousands of link re-creations, reloads and scrapes
//!   (`bench soak`).
//! - [`tune_lab`]: `unbloat tune` run in the lab's router (`bench tune`, the `unbloat-tuned`
//!   strategy); [`bench_tune`]: `bench tune --runs N`, each profile's runs counted against the
//!   truth.

pub mod autorate_lab;
pub mod bench;
pub mod bench_autorate;
pub mod bench_far;
pub mod bench_hostile;
pub mod bench_household;
pub mod bench_locate;
pub mod bench_measure;
pub mod bench_soak;
pub mod bench_tune;
pub mod bench_tuned;
pub mod cleanup;
pub mod cpu;
pub mod error;
pub mod farend;
pub mod hosts;
pub mod hosts_parse;
pub mod hosts_plot;
pub mod household;
pub mod lab;
pub mod lab_report;
pub mod page;
pub mod procstat;
pub mod profile;
pub mod report_dir;
pub mod script;
pub mod spread;
pub mod strategies;
pub mod strategy;
pub mod table;
pub mod theory;
pub mod topology;
pub mod trace;
pub mod trace_player;
pub mod truth;
pub mod tune_lab;

pub use bench::{render_benchmark, run_benchmark, BenchLabArgs};
pub use lab::{print_report, run_lab, run_lab_with, LabArgs, LabError, LabReport, Rerun};
