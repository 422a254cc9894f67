//! Where the lab, lab-hosts and the benchmarks find the real peers they compare unbloat with:
//! the copies vendored in the source tree's `third_party/` (third_party/README.md), at a path
//! fixed when this program was built, and used only when root may run what they hold. Nothing
//! is looked for above the current directory or the binary: a tree anyone can write (/tmp) could
//! plant a peer there, and these run as root. `--sqm-scripts DIR` and `--cake-autorate DIR`
//! name others.

use std::path::{Component, Path, PathBuf};

use unbloat_system::trust::trusted_tree;

/// sqm-scripts (tohojo/sqm-scripts), the directory with `src/start-sqm`.
pub const SQM_SCRIPTS: &str = "sqm-scripts";
/// cake-autorate (lynxthecat/cake-autorate), the directory with `cake-autorate.sh`.
pub const CAKE_AUTORATE: &str = "cake-autorate";

/// `third_party/NAME` in the source tree this program was built from, without its `..`.
pub fn vendored(name: &str) -> PathBuf {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../third_party")).join(name);
    let mut out = PathBuf::new();
    for c in dir.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The vendored copy of peer `name` ([`vendored`]) when it is there and root may run what it
/// holds ([`trusted_tree`]); else why not, naming the path.
pub fn peer_dir(name: &str) -> Result<PathBuf, String> {
    let dir = vendored(name);
    if !dir.is_dir() {
        return Err(format!(
            "{}: not there (the source tree this unbloat was built from has no copy of {name})",
            dir.display()
        ));
    }
    trusted_tree(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_peers_are_found_in_the_source_tree_and_trusted() {
        let sqm = vendored(SQM_SCRIPTS);
        assert!(sqm.is_absolute(), "{}", sqm.display());
        assert!(
            !sqm.components().any(|c| c == Component::ParentDir),
            "{}",
            sqm.display()
        );
        assert!(
            sqm.ends_with("third_party/sqm-scripts"),
            "{}",
            sqm.display()
        );
        assert_eq!(
            sqm.parent().and_then(Path::parent),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .and_then(Path::parent)
        );
        assert_eq!(peer_dir(SQM_SCRIPTS), Ok(sqm.clone()));
        assert!(sqm.join("src/start-sqm").is_file());
        let cake = peer_dir(CAKE_AUTORATE).expect("third_party/cake-autorate");
        assert!(cake.join("cake-autorate.sh").is_file());
        let err = peer_dir("no-such-peer").unwrap_err();
        assert!(err.contains("third_party/no-such-peer: not there"), "{err}");
    }
}
