//! Every fuzz target's body over its whole seed corpus (`fuzz/corpus/TARGET/`), on stable: the
//! part of fuzzing that every `cargo test` runs. A panic in a body fails the test with the
//! file's name. `make test` runs libFuzzer itself over the same seeds too (scripts/fuzz).

use std::fs;
use std::path::{Path, PathBuf};

use unbloat_fuzz::TARGETS;

/// The seeds are small real examples (docs/reliability.md#fuzzing): a few KB each.
const MAX_SEED: u64 = 64 * 1024;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_target_runs_over_its_seed_corpus_without_a_panic_and_takes_most_seeds() {
    for (name, body) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(name);
        let seeds = names_in(&dir);
        assert!(
            seeds.len() >= 3,
            "{name}: {} seeds in {}",
            seeds.len(),
            dir.display()
        );
        let mut took = vec![];
        for seed in &seeds {
            let path = dir.join(seed);
            let size = fs::metadata(&path).expect("a seed").len();
            assert!(size <= MAX_SEED, "{}: {size} bytes", path.display());
            let data = fs::read(&path).expect("a seed");
            match std::panic::catch_unwind(|| body(&data)) {
                Ok(true) => took.push(seed.as_str()),
                Ok(false) => {}
                Err(_) => panic!("{name} panicked on {}", path.display()),
            }
        }
        // Seeds the parser refuses at once would leave libFuzzer to find its way in alone.
        assert!(
            took.len() * 2 >= seeds.len(),
            "{name}: only {took:?} of {seeds:?} were taken"
        );
    }
}

/// fuzz/ has a binary for each body and a corpus for each binary, and nothing else.
#[test]
fn every_target_has_a_binary_and_a_corpus_and_nothing_else_does() {
    let mut names: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    assert_eq!(names_in(&fuzz_dir().join("corpus")), names);
    let binaries: Vec<String> = names_in(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .map(|f| f.trim_end_matches(".rs").to_string())
        .collect();
    assert_eq!(binaries, names);
    let manifest = fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for name in &names {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml: {name}"
        );
    }
}
