//! unbloat-testbed: the test bench's machinery, which the product never links. The lab
//! (`unbloat-lab`), the benchmarks and every crate's tests use it, as a dev-dependency of the
//! product's crates; it uses the product's `unbloat-system` (its runner, probe, trust and lock
//! files) and adds nothing to it.
//!
//! - [`kernel`]: a kernel that has every qdisc a piece of work needs (the host's, or User-Mode
//!   Linux), to run commands and tests in: [`real_kernel_test!`] and
//!   [`kernel::run_test_in_real_kernel`] for tests, [`kernel::own_argv`] for a command that
//!   re-runs itself there, and the [`kernel::slot`]s by which tests of several processes share
//!   the machine's guests.
//! - [`netns`]: throw-away network namespaces, and a client, a router and a server joined by
//!   veths ([`netns::Testbed`]), for measure's tests and the accuracy benchmarks.
//! - [`peer`]: the real peers unbloat is compared with (sqm-scripts, cake-autorate), vendored in
//!   the source tree's `third_party/` and found there, at a path fixed when the crate was built:
//!   a source tree is the test bench's to know, never the product's.
//! - [`sqm`]: sqm-scripts as the lab and the benchmarks use it: located, and installed for a run.
//! - `browser` (feature `browser`, for tests only): headless Chromium through chromedriver, for
//!   the tests that look at a page.
//! - [`commands`]: a plan's script as the commands that run it, for the lab's strategies and the
//!   start benchmark's baseline (the product applies a plan through `unbloat_system::apply`).
#[cfg(feature = "browser")]
pub mod browser;
pub mod commands;
pub mod kernel;
pub mod netns;
pub mod peer;
pub mod sqm;
