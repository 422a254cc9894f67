//! What `bench locate` and `bench household` write at their end: the JSON and the table, side by side.

use crate::Failure;

/// A benchmark's JSON as `DIR/NAME` and its table as `DIR/table.txt`, and one of them on stdout.
pub(crate) fn write_report(
    dir: &std::path::Path,
    name: &str,
    json: String,
    table: String,
    print_json: bool,
) -> Result<(), Failure> {
    unbloat_safefs::write(&dir.join(name), json.clone() + "\n", 0o644)?;
    unbloat_safefs::write(&dir.join("table.txt"), table.clone(), 0o644)?;
    if print_json {
        println!("{json}");
    } else {
        print!("{table}");
    }
    Ok(())
}
