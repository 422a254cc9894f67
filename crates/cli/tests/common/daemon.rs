//! `unbloat daemon` run in a test's namespace, stopped (SIGTERM) when the test is done.

use super::{Netns, UNBLOAT};
use std::process::{Child, Command, Stdio};

/// A daemon the test started.
pub struct Daemon {
    pub child: Child,
}

impl Daemon {
    /// `unbloat daemon --config ARGS...` in the namespace.
    pub fn start(ns: &Netns, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut argv = vec![UNBLOAT, "daemon", "--config"];
        argv.extend(args);
        Daemon::start_argv(ns, &argv, env)
    }

    /// The command line `argv` in the namespace.
    pub fn start_argv(ns: &Netns, argv: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.name])
            .args(argv)
            .env("UNBLOAT_RUN_DIR", &ns.run_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            c.env(k, v);
        }
        Daemon {
            child: c.spawn().expect("the daemon starts"),
        }
    }

    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}
