//! The Debian package `make deb` builds (scripts/deb, from the binary under test), as Debian's
//! tools and the shells see it, and installed, used and purged in a throwaway root
//! (`deb-root.sh`: an overlay over this machine's root, in a kernel with veth and cake).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

struct Package {
    deb: PathBuf,
    /// The package's files, unpacked (`dpkg-deb -x`).
    tree: PathBuf,
}

/// The package, built once for every test of this file.
fn package() -> &'static Package {
    static PACKAGE: OnceLock<Package> = OnceLock::new();
    PACKAGE.get_or_init(|| {
        // cargo-deb packages `<target>/release/unbloat`: that must be the binary under test.
        let exe = Path::new(UNBLOAT);
        let profile = exe.parent().unwrap();
        assert_eq!(
            profile.file_name().unwrap(),
            "release",
            "the package is made from the release binary: run the tests with --release (make test does)"
        );
        let target = profile.parent().unwrap();
        let out = run(Command::new(format!("{WORKSPACE}/scripts/deb"))
            .env("CARGO_TARGET_DIR", target)
            .current_dir(WORKSPACE));
        let deb = PathBuf::from(stdout(&out).trim());
        assert!(deb.is_file(), "scripts/deb printed {deb:?}");
        let tree = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deb-tree");
        let _ = std::fs::remove_dir_all(&tree);
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
        Package { deb, tree }
    })
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/install-deps installs it)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `argv` in a kernel with every qdisc (the host's, or User-Mode Linux), as
/// `unbloat-lab kernel` does: through the library, since the product binary has no such command.
fn in_a_kernel_with_cake(argv: &[String]) {
    use unbloat_testbed::kernel::{GuestOptions, Kernel};
    let needs = ["cake", "fq_codel", "htb", "netem", "sfq", "ingress"];
    let kernel = Kernel::detect(&needs).unwrap_or_else(|e| panic!("no kernel with cake: {e}"));
    let opts = GuestOptions {
        timeout: std::time::Duration::from_secs(300),
        ..GuestOptions::default()
    };
    let out = kernel
        .run(argv, &opts)
        .unwrap_or_else(|e| panic!("{argv:?} in {}: {e}", kernel.describe()));
    assert_eq!(
        out.status,
        0,
        "{argv:?} in {}:\n{}{}",
        kernel.describe(),
        out.stdout,
        out.stderr
    );
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every visible subcommand, as the words that reach it (`["config", "import-sqm"]`), read off
/// `--help` (not off the code that writes the pages).
fn subcommands(path: &[String]) -> Vec<Vec<String>> {
    let help = stdout(&run(Command::new(UNBLOAT).args(path).arg("--help")));
    let mut found = Vec::new();
    let listed = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty());
    for line in listed {
        // A command's line starts two spaces in; its wrapped description further.
        if line.starts_with("   ") {
            continue;
        }
        let name = line.split_whitespace().next().unwrap().to_string();
        if name == "help" {
            continue;
        }
        let mut sub = path.to_vec();
        sub.push(name);
        found.push(sub.clone());
        found.extend(subcommands(&sub));
    }
    found
}

/// The package's files (not directories), as `dpkg-deb -c` lists them.
fn listed_files(deb: &Path) -> BTreeSet<String> {
    stdout(&run(Command::new("dpkg-deb").arg("-c").arg(deb)))
        .lines()
        .filter(|l| !l.starts_with('d'))
        .map(|l| {
            l.split_whitespace()
                .last()
                .unwrap()
                .trim_start_matches('.')
                .to_string()
        })
        .collect()
}

#[test]
fn the_package_holds_the_binary_unit_pages_completions_and_docs() {
    let p = package();
    let files = listed_files(&p.deb);
    let mut want: BTreeSet<String> = [
        "/usr/bin/unbloat",
        "/usr/lib/systemd/system/unbloat.service",
        "/usr/share/bash-completion/completions/unbloat",
        "/usr/share/zsh/vendor-completions/_unbloat",
        "/usr/share/fish/vendor_completions.d/unbloat.fish",
        "/usr/share/doc/unbloat/copyright",
        "/usr/share/doc/unbloat/changelog.Debian.gz",
        "/usr/share/doc/unbloat/examples/unbloat.toml",
        "/usr/share/doc/unbloat/README.md",
        "/usr/share/doc/unbloat/install.md",
        "/usr/share/lintian/overrides/unbloat",
        "/usr/share/man/man8/unbloat.8.gz",
        // A laptop's network managers wake the daemon on a change of network (docs/daemon.md).
        "/usr/lib/NetworkManager/dispatcher.d/90-unbloat",
        "/usr/lib/networkd-dispatcher/routable.d/unbloat",
    ]
    .map(String::from)
    .into();
    for sub in subcommands(&[]) {
        want.insert(format!(
            "/usr/share/man/man8/unbloat-{}.8.gz",
            sub.join("-")
        ));
    }
    // Nothing under /etc: the config's existence is what starts shaping, so it is never shipped.
    assert_eq!(files, want);

    let shipped = |path: &str| read(p.tree.join(path.trim_start_matches('/')));
    assert_eq!(
        shipped("/usr/lib/systemd/system/unbloat.service"),
        read(format!("{WORKSPACE}/packaging/systemd/unbloat.service"))
    );
    for (hook, source) in [
        (
            "/usr/lib/NetworkManager/dispatcher.d/90-unbloat",
            "networkmanager/90-unbloat",
        ),
        (
            "/usr/lib/networkd-dispatcher/routable.d/unbloat",
            "networkd-dispatcher/unbloat",
        ),
    ] {
        assert_eq!(
            shipped(hook),
            read(format!("{WORKSPACE}/packaging/{source}"))
        );
        // Both run only executables (NetworkManager: owned by root, not writable by others).
        let mode = std::fs::metadata(p.tree.join(hook.trim_start_matches('/')))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "{hook}: mode {mode:o}");
    }
    assert_eq!(
        shipped("/usr/share/doc/unbloat/examples/unbloat.toml"),
        read(format!("{WORKSPACE}/crates/shaper/examples/unbloat.toml"))
    );
    let control = stdout(&run(Command::new("dpkg-deb").arg("-f").arg(&p.deb)));
    let depends = control
        .lines()
        .find(|l| l.starts_with("Depends: "))
        .unwrap();
    for dep in ["iproute2", "kmod", "libc6"] {
        assert!(depends.contains(dep), "{depends}");
    }

    // DEP-5: unbloat's own license, each linked crate with its license, a text for each.
    let copyright = shipped("/usr/share/doc/unbloat/copyright");
    assert!(copyright.starts_with(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    ));
    assert!(copyright.contains("Files: *\nCopyright: the unbloat developers\nLicense: GPL-2+\n"));
    for krate in ["clap_mangen-", "tokio-", "ring-", "anyhow-"] {
        assert!(
            copyright.contains(&format!("Files: vendor/{krate}")),
            "{krate}"
        );
    }
    let used: BTreeSet<&str> = copyright
        .lines()
        .filter_map(|l| l.strip_prefix("License: "))
        .flat_map(|l| l.split([',', ' ']))
        .filter(|w| !["", "or", "and"].contains(w))
        .collect();
    for name in ["GPL-2+", "Apache-2.0", "Expat", "ISC"] {
        assert!(used.contains(name), "{name} in {used:?}");
        assert!(
            copyright.contains(&format!("\n\nLicense: {name}\n ")),
            "{name}: no text"
        );
    }
}

#[test]
fn every_subcommand_has_a_page_and_man_renders_each_without_a_warning() {
    let p = package();
    let dir = p.tree.join("usr/share/man/man8");
    let mut pages = vec![dir.join("unbloat.8.gz")];
    pages.extend(
        subcommands(&[])
            .iter()
            .map(|s| dir.join(format!("unbloat-{}.8.gz", s.join("-")))),
    );
    for page in &pages {
        // What lintian runs for its manpage checks: groff's warnings on, UTF-8 output.
        let out = run(Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"])
            .arg(page)
            .env("MANWIDTH", "80"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.is_empty(), "{}: {said}", page.display());
    }
    let text = |name: &str| {
        let out = run(Command::new("man")
            .arg("-l")
            .arg(dir.join(name))
            .env("MANWIDTH", "80"));
        assert!(
            out.stderr.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
    };
    let main = text("unbloat.8.gz");
    for word in [
        "unbloat-set-rate(8)",
        "unbloat-daemon(8)",
        "Exit status:",
        "SYNOPSIS",
    ] {
        assert!(main.contains(word), "{word} in unbloat(8):\n{main}");
    }
    let set_rate = text("unbloat-set-rate.8.gz");
    assert!(set_rate.contains("--down"), "{set_rate}");
    assert!(set_rate.contains("unbloat-set-rate(8)"), "{set_rate}");
    let import = text("unbloat-config-import-sqm.8.gz");
    assert!(import.contains("--check"), "{import}");
    // The hidden developer commands have none.
    assert!(!dir.join("unbloat-kernel.8.gz").exists());
    assert!(!dir.join("unbloat-man.8.gz").exists());
}

/// What bash completes after `words` (the last one being completed), with the package's script
/// loaded the way bash-completion loads it.
fn bash_completes(tree: &Path, words: &[&str]) -> Vec<String> {
    let script = tree.join("usr/share/bash-completion/completions/unbloat");
    let words_q: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        ". /usr/share/bash-completion/bash_completion\n\
         . '{}'\n\
         complete -p unbloat >&2\n\
         COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}\n\
         _unbloat unbloat '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words_q.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = run(Command::new("bash").arg("-c").arg(program));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(" -F _unbloat unbloat"), "{said}");
    stdout(&out).lines().map(|l| l.trim().to_string()).collect()
}

#[test]
fn bash_completes_subcommands_and_values() {
    let tree = &package().tree;
    assert_eq!(bash_completes(tree, &["unbloat", "set-"]), ["set-rate"]);
    assert_eq!(
        bash_completes(tree, &["unbloat", "config", "imp"]),
        ["import-sqm"]
    );
    let shells = bash_completes(tree, &["unbloat", "completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.contains(&shell.to_string()), "{shells:?}");
    }
    let flags = bash_completes(tree, &["unbloat", "set-rate", "--d"]);
    assert!(flags.contains(&"--down".to_string()), "{flags:?}");
}

#[test]
fn zsh_and_fish_load_their_completions() {
    let tree = &package().tree;
    let zsh = tree.join("usr/share/zsh/vendor-completions/_unbloat");
    let dump = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zcompdump");
    let out = run(Command::new("zsh").arg("-fc").arg(format!(
        "autoload -U compinit && compinit -u -d '{}' && source '{}' && print -r -- $_comps[unbloat]",
        dump.display(),
        zsh.display()
    )));
    assert_eq!(stdout(&out).trim(), "_unbloat", "{out:?}");

    let fish = tree.join("usr/share/fish/vendor_completions.d/unbloat.fish");
    let out = run(Command::new("fish")
        .arg("--no-config")
        .arg("-c")
        .arg(format!(
            "source '{}'; complete -C 'unbloat set-'",
            fish.display()
        )));
    let said = stdout(&out);
    assert!(said.starts_with("set-rate\t"), "{said}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

/// Lintian at every level (errors, warnings, information, pedantic) reports nothing: each tag
/// it has for the package is overridden in packaging/debian/lintian-overrides with its reason.
#[test]
fn lintian_reports_nothing_the_overrides_do_not_explain() {
    let p = package();
    let out = run(Command::new("lintian")
        .args(["--fail-on", "error,warning", "--display-info", "--pedantic"])
        .arg(&p.deb));
    // The spelling override covers bytes of code that spell a word by accident (below); a build
    // whose bytes spell none leaves it unused, which is no finding. Anything else is.
    let text = stdout(&out);
    let findings: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("unused-override spelling-error-in-binary"))
        .filter(|l| !(l.starts_with("N: ") && l.ends_with("; 1 unused override")))
        .collect();
    assert!(findings.is_empty(), "lintian: {text}");
    // The one wildcard override, for spelling in the binary, hides only bytes of code: a hint's
    // word there has a capital after its first letter ("tHIk"), where a message's typo would not.
    let out = run(Command::new("lintian")
        .args(["--no-override", "--tags", "spelling-error-in-binary"])
        .arg(&p.deb));
    let binary = std::fs::read(p.tree.join("usr/bin/unbloat")).expect("the packaged binary");
    for hint in stdout(&out).lines() {
        let word = hint.split_whitespace().nth(3).unwrap_or("");
        // Two messages the linker put end to end can spell a word across their junction; each
        // such word is named here with the text that shows the junction in the binary.
        let junction = JUNCTIONS
            .iter()
            .find(|(w, _)| *w == word)
            .is_some_and(|(_, text)| contains(&binary, text.as_bytes()));
        assert!(
            junction || word.chars().skip(1).any(|c| c.is_ascii_uppercase()),
            "a misspelling in a message: {hint}"
        );
    }
}

/// Words lintian finds across the end of one message and the start of the next, with the bytes
/// that show it: rustls's "received plaintext buffer full" followed by the standard library's
/// "filled must not become larger than initialized" (core's BorrowedBuf).
const JUNCTIONS: [(&str, &str); 1] = [(
    "fullfilled",
    "buffer fullfilled must not become larger than initialized",
)];

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One line per file or directory of a `find -printf '%y %p'` listing.
fn listing(out: &Path, name: &str) -> BTreeSet<String> {
    read(out.join(name)).lines().map(String::from).collect()
}

#[test]
fn install_shape_remove_and_purge_in_a_throwaway_root() {
    let p = package();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deb-root");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let script = format!("{WORKSPACE}/crates/cli/tests/deb-root.sh");
    in_a_kernel_with_cake(&[
        "sh".into(),
        script,
        p.deb.display().to_string(),
        out.display().to_string(),
    ]);
    let file = |name: &str| read(out.join(name));
    assert_eq!(file("finished"), "done\n");

    // Installed: the binary runs, `man unbloat` and bash's completion work from where the
    // package put them, the unit is enabled and was not started, /etc/unbloat is there, empty.
    let install = file("install.log");
    assert!(install.contains("unbloat: nothing is shaped"), "{install}");
    assert!(file("version").starts_with("unbloat "));
    assert_eq!(
        file("man-paths"),
        "/usr/share/man/man8/unbloat.8.gz\n/usr/share/man/man8/unbloat-daemon.8.gz\n"
    );
    assert!(file("man-unbloat").contains("unbloat-set-rate(8)"));
    assert_eq!(file("man-unbloat.err"), "");
    let completion = file("bash-completion");
    assert!(completion.contains(" -F _unbloat unbloat"), "{completion}");
    assert!(
        completion.lines().any(|l| l.trim() == "set-rate"),
        "{completion}"
    );
    // Enabled: systemd's link (to /lib or /usr/lib: one directory on a merged-/usr system)
    // and deb-systemd-helper's record of it, which purge uses to remove it.
    let links = file("links-installed");
    let wants = "l /etc/systemd/system/multi-user.target.wants/unbloat.service -> ";
    assert!(
        links.contains(&format!("{wants}/lib/systemd/system/unbloat.service\n"))
            || links.contains(&format!("{wants}/usr/lib/systemd/system/unbloat.service\n")),
        "{links}"
    );
    assert!(links.contains("deb-systemd-helper-enabled/multi-user.target.wants/unbloat.service"));
    let asked = file("systemctl-installed");
    assert!(
        !asked
            .lines()
            .any(|l| l.contains(" start") || l.contains("restart")),
        "installing asked systemd to start something: {asked}"
    );
    assert_eq!(file("etc-unbloat"), "");

    // Shaping started with the installed binary stays through remove and purge, and both say so.
    let started = file("qdisc-started");
    assert!(
        started.contains("qdisc cake"),
        "{}\n{started}",
        file("start.log")
    );
    assert_eq!(file("qdisc-removed"), started);
    assert_eq!(file("qdisc-purged"), started);
    assert_eq!(file("records-purged"), "wan0.json\n");
    let remove = file("remove.log");
    assert!(
        remove.contains("the shaping on wan0 stays as it is"),
        "{remove}"
    );
    let purge = file("purge.log");
    assert!(
        purge.contains("running shaping (on wan0) is left as it is"),
        "{purge}"
    );
    let asked = file("systemctl-all");
    assert!(asked.contains(" stop unbloat.service\n"), "{asked}");

    // Purged: none of the package's files, no unit links or state, no /etc/unbloat; what is
    // left in the overlay beyond what was there before is dpkg's and man-db's bookkeeping.
    assert_eq!(file("links-purged"), "");
    assert!(file("etc-unbloat-purged").contains("No such file"));
    let before = listing(&out, "upper-before");
    let after = listing(&out, "upper-purged");
    for path in read(out.join("files")).lines() {
        let path = path.trim();
        if path.is_empty() || path == "/." {
            continue;
        }
        let entry = |kind: char| format!("{kind} .{path}");
        assert!(
            !after.contains(&entry('f')) && !after.contains(&entry('l')),
            "{path} is left after purge"
        );
        if after.contains(&entry('d')) && !before.contains(&entry('d')) {
            // A directory copied up is one the host has too; one the package made must go.
            assert!(Path::new(path).is_dir(), "{path}/ is left after purge");
        }
    }
    let bookkeeping = [
        "./var/lib/dpkg",
        "./var/log/dpkg.log",
        "./var/cache/man",
        "./var/cache/debconf",
    ];
    let left: Vec<&String> = after
        .difference(&before)
        .filter(|l| {
            let path = &l[2..];
            let kept = bookkeeping.iter().any(|b| path.starts_with(b));
            // A directory copied up because something in it changed, which the host has too.
            let copied_up = l.starts_with("d ") && Path::new(&path[1..]).is_dir();
            !kept && !copied_up
        })
        .collect();
    assert!(left.is_empty(), "left after purge: {left:?}");
}
