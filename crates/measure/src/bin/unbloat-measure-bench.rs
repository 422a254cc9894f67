//! `unbloat-measure-bench [--json] [--no-netem]`: the measuring engine's accuracy benchmarks
//! (see `unbloat_measure::bench`). Needs root (network namespaces), iperf3 and ping; the 20 ms
//! netem path runs in User-Mode Linux when the host kernel lacks netem.
//!
//! Exit status: 0 when every measured part met its target, 1 when one missed, 2 on bad usage.

use std::time::Duration;

use unbloat_measure::bench::{self, IdleRtt, Part, NETEM_PART_ARG};
use unbloat_system::kernel::{GuestOptions, Kernel};

fn netem_in_a_kernel() -> Result<IdleRtt, String> {
    let kernel = Kernel::detect(&["netem"]).map_err(|e| e.to_string())?;
    if kernel == Kernel::Host {
        return bench::netem_idle_rtt();
    }
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let argv = vec![
        exe.to_string_lossy().into_owned(),
        NETEM_PART_ARG.to_string(),
    ];
    let opts = GuestOptions {
        timeout: Duration::from_secs(180),
        ..GuestOptions::default()
    };
    let out = kernel
        .run(&argv, &opts)
        .map_err(|e| format!("{}: {e}", kernel.describe()))?;
    let part: Part<IdleRtt> = serde_json::from_str(out.stdout.trim()).map_err(|e| {
        format!(
            "the guest printed no result ({e}); stderr: {}",
            out.stderr.trim()
        )
    })?;
    match part {
        Part {
            value: Some(mut v), ..
        } => {
            v.path = format!("{} (in {})", v.path, kernel.describe());
            Ok(v)
        }
        Part { not_measured, .. } => Err(not_measured.unwrap_or_else(|| "no result".into())),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == NETEM_PART_ARG) {
        let part: Part<IdleRtt> = bench::netem_idle_rtt().into();
        match serde_json::to_string(&part) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("{e}"),
        }
        return;
    }
    let json = args.iter().any(|a| a == "--json");
    let no_netem = args.iter().any(|a| a == "--no-netem");
    if let Some(bad) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--json" | "--no-netem"))
    {
        eprintln!("unbloat-measure-bench: unknown argument {bad:?} (use --json, --no-netem)");
        std::process::exit(2);
    }
    let report = bench::run(|| {
        if no_netem {
            Err("skipped (--no-netem)".into())
        } else {
            netem_in_a_kernel()
        }
    });
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("{e}"),
        }
    } else {
        print!("{}", bench::table(&report));
    }
    let missed = [
        report.shaped_goodput.value.as_ref().map(|g| g.pass),
        report.loopback_goodput.value.as_ref().map(|g| g.pass),
    ]
    .into_iter()
    .chain([
        report.idle_rtt_veth.value.as_ref().map(|r| r.pass),
        report.idle_rtt_netem_20ms.value.as_ref().map(|r| r.pass),
    ])
    .any(|p| p == Some(false));
    std::process::exit(i32::from(missed));
}
