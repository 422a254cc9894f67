//! Writes the SVG plots of a synthetic bloated RRUL run into a directory:
//! `cargo run -p unbloat-report --example plots -- DIR`.
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let results = unbloat_report::synthetic::rrul(3);
    match unbloat_report::plot::write_plots(&results, std::path::Path::new(&dir)) {
        Ok(paths) => paths.iter().for_each(|p| println!("{}", p.display())),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
