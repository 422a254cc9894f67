//! `unbloat serve`, the far end of `unbloat test`: its flags and their help; `unbloat_measure`
//! gets them as its plain [`ServeArgs`]. Not in the router's small build (feature `serve`).

use crate::Failure;
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;
use unbloat_measure::serve_policy::DEFAULT_TESTS_PER_CLIENT;
use unbloat_measure::server::{parse_max_duration, parse_max_streams, parse_max_tests};
use unbloat_measure::{run_serve, DscpPolicy, ServeArgs};

/// `unbloat serve`: the far end for `unbloat test`.
#[derive(Debug, Clone, Args)]
pub struct ServeCmd {
    /// Address and port to listen on, TCP for control and load streams and UDP for latency
    /// probes. The default listens on every address, IPv6 and IPv4, port 4420.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// How many tests may run at once (1 to 256); the next client is told the server is busy.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = parse_max_tests)]
    pub max_tests: usize,
    /// How many of them one client may run at once (1 to 256): a client is an IPv4 address,
    /// or an IPv6 /64. Its next test is refused, saying why, until one ends.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TESTS_PER_CLIENT, value_parser = parse_max_tests)]
    pub max_tests_per_client: usize,
    /// Which DSCP marks a client may ask the server to put on what it sends (downloads, probe
    /// replies): `standard` (BE, LE, CS1, AF41, CS5, EF: what test profiles use, never network
    /// control), `any` (0 to 63), or `off` (none). A test asking for another mark is refused.
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = ServeDscp::Standard)]
    pub dscp: ServeDscp,
    /// The most load streams one test may open (0 to 255; 0 allows latency-only tests).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = parse_max_streams)]
    pub max_streams: usize,
    /// The longest test a client may ask for, idle phases included (e.g. 2m, 300s; at most
    /// 1440m, a day). The default fits a 60 s load with 30 s idle phases, and keeps one
    /// client's slot short.
    #[arg(long, value_name = "TIME", default_value = "2m", value_parser = parse_max_duration)]
    pub max_duration: Duration,
}

impl ServeCmd {
    pub fn args(&self) -> ServeArgs {
        ServeArgs {
            listen: self.listen,
            max_tests: self.max_tests,
            max_tests_per_client: self.max_tests_per_client,
            dscp: self.dscp.into(),
            max_streams: self.max_streams,
            max_duration: self.max_duration,
        }
    }
}

/// `--dscp`: [`DscpPolicy`]'s words, with their help (the man page lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ServeDscp {
    /// The standard classes a test needs (BE, LE, CS1, AF41, CS5, EF); a test that asks for
    /// another is refused.
    Standard,
    /// Whatever the client asks for (0 to 63), CS6 and CS7 included.
    Any,
    /// No marks: everything leaves as best effort; a test that asks for a mark is refused.
    Off,
}

impl From<ServeDscp> for DscpPolicy {
    fn from(d: ServeDscp) -> DscpPolicy {
        match d {
            ServeDscp::Standard => DscpPolicy::Standard,
            ServeDscp::Any => DscpPolicy::Any,
            ServeDscp::Off => DscpPolicy::Off,
        }
    }
}

/// Runs `unbloat serve` until the process is stopped.
pub fn serve(cmd: &ServeCmd) -> Result<(), Failure> {
    Ok(run_serve(&cmd.args())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        serve: ServeCmd,
    }

    /// Bug: `--max-tests 0` made a server that refused every test, and a huge `--max-streams`
    /// wrapped the connection cap (max_tests * (max_streams + 1) + 16) to a handful. Both are
    /// refused while parsing (exit status 2), naming the flag; `unbloat_measure`'s server
    /// tests the largest values' connection cap.
    #[test]
    fn max_tests_zero_and_wrapping_max_streams_are_refused_naming_the_flag() {
        let refused = [
            ("--max-tests", "0"),
            ("--max-tests", "257"),
            ("--max-tests", "-1"),
            ("--max-streams", "18446744073709551615"),
            ("--max-streams", "256"),
            ("--max-duration", "0s"),
            ("--max-duration", "inf"),
            ("--max-duration", "1e99"),
        ];
        for (flag, value) in refused {
            let arg = format!("{flag}={value}");
            let err = match Serve::try_parse_from(["serve", arg.as_str()]) {
                Ok(cli) => panic!("{flag} {value} accepted: {:?}", cli.serve),
                Err(e) => e,
            };
            assert_eq!(err.exit_code(), 2, "{flag} {value}");
            assert!(err.to_string().contains(flag), "{err}");
        }
        let most = Serve::try_parse_from(["serve", "--max-tests", "256", "--max-streams", "255"])
            .expect("the largest values")
            .serve
            .args()
            .options();
        assert_eq!(most.problem(), None);
        assert_eq!((most.max_tests, most.max_streams), (256, 255));
    }

    /// The defaults the help shows are the server's own.
    #[test]
    fn serve_defaults_are_the_servers() {
        let args = Serve::try_parse_from(["serve"])
            .expect("no flags")
            .serve
            .args();
        let opts = args.options();
        let default = unbloat_measure::ServeOptions::default();
        assert_eq!(opts.max_tests, default.max_tests);
        assert_eq!(opts.max_tests_per_client, default.max_tests_per_client);
        assert_eq!(opts.dscp, default.dscp);
        assert_eq!(opts.max_streams, default.max_streams);
        assert_eq!(opts.max_session, default.max_session);
    }
}
