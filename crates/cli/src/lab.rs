//! `unbloat lab` and the lab and measurement benchmarks (wired to unbloat-lab).
use crate::Failure;
use clap::Args;

#[derive(Debug, Args)]
pub struct LabCmd {}
#[derive(Debug, Args)]
pub struct LabBenchCmd {}
pub fn lab(_: &LabCmd) -> Result<(), Failure> {
    Err(anyhow::anyhow!("lab: wiring in progress").into())
}
pub fn lab_bench(_: &LabBenchCmd) -> Result<(), Failure> {
    Err(anyhow::anyhow!("wiring in progress").into())
}
pub fn measure_bench() -> Result<(), Failure> {
    Err(anyhow::anyhow!("wiring in progress").into())
}
