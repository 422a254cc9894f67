//! Prints the terminal summary of a synthetic bloated RRUL run:
//! `cargo run -p unbloat-report --example summary`.
fn main() {
    let results = unbloat_report::synthetic::rrul(3);
    print!(
        "{}",
        unbloat_report::render_text(&unbloat_report::Summary::from_results(&results))
    );
}
