//! Writes the flent file of a synthetic run: `cargo run -p unbloat-report --example
//! write_flent -- rrul OUT.flent.gz` (profiles: rrul, rrul_be, tcp_nup, tcp_ndown, ping).
use unbloat_report::{flent, synthetic};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(profile), Some(out)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: write_flent PROFILE OUT.flent.gz");
        std::process::exit(2);
    };
    let results = match profile.as_str() {
        "tcp_nup" => synthetic::tcp_nup(4, 1),
        "tcp_ndown" => synthetic::tcp_ndown(4, 1),
        "ping" => synthetic::ping(1),
        _ => synthetic::rrul(1),
    };
    let Some(test) = flent::FlentTest::for_profile(profile) else {
        eprintln!("no flent test for profile {profile}");
        std::process::exit(2);
    };
    if let Err(e) = flent::write_flent_file(&results, test, std::path::Path::new(out)) {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
