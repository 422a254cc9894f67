//! The daemon's log lines on stderr. Under systemd (`$JOURNAL_STREAM` set) each line starts with
//! its syslog priority (`<6>`, `<4>`, `<3>`), which journald reads as the line's level
//! (sd-daemon(3)); on a terminal or under procd the line says `unbloat daemon:` instead.

use std::sync::OnceLock;

fn journald() -> bool {
    static JOURNALD: OnceLock<bool> = OnceLock::new();
    *JOURNALD.get_or_init(|| std::env::var_os("JOURNAL_STREAM").is_some())
}

fn line(priority: u8, word: &str, text: &str) {
    // One write per line, so lines from several threads never interleave.
    let out = if journald() {
        format!("<{priority}>{text}\n")
    } else {
        format!("unbloat daemon: {word}{text}\n")
    };
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

pub fn info(text: &str) {
    line(6, "", text);
}

pub fn warn(text: &str) {
    line(4, "warning: ", text);
}

pub fn error(text: &str) {
    line(3, "error: ", text);
}
