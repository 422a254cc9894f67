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
pub mod kernel;
