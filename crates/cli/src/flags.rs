//! The shaping flags of `unbloat plan`, `unbloat start` (and the lab's copies of them), made
//! from the option declarations ([`OPTIONS`]): one flag per option the declaration gives a flag,
//! with its help, section, value name and form, and the value read by the same parser as the
//! config file's key. Two ways to say it, one meaning: the flags fill the same [`ShapeOptions`]
//! a config file's `[interface.NAME]` table does, and an option added to the declarations is
//! a flag here without a line of this file.
//!
//! Every value is checked while clap parses, so a bad value is reported with the flag's name
//! (`invalid value '78mbitz' for '--down <RATE>': invalid rate ...`, exit status 2). Units are
//! never guessed (the units crate's rule, issue 19): a rate needs its unit (`--down 20000` is
//! refused with "write 20000kbit (SQM's unit) or 20mbit"), `mbps` and its kin are refused as
//! bits-or-bytes, and a qdisc time needs its unit (`--rtt 100`: "write 100ms"). `0` still turns
//! a direction off.

use clap::builder::ValueParser;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use unbloat_shaper::options::{Cli, Opt, ShapeOptions, OPTIONS};

/// The config file `start --config` and the daemon read when none is named.
pub const DEFAULT_CONFIG: &str = "/etc/unbloat/unbloat.toml";

/// What the shaping flags said: unset flags are `None`, so they do not override a file.
#[derive(Debug, Clone, Default)]
pub struct ShapeFlags {
    options: ShapeOptions,
}

impl ShapeFlags {
    /// The options these flags say.
    pub fn to_options(&self) -> ShapeOptions {
        self.options.clone()
    }

    /// Whether any shaping flag was given (they make no sense with a whole config file).
    pub fn any(&self) -> bool {
        self.options != ShapeOptions::default()
    }
}

/// A value parser that reads the text as `opt`'s field does, and keeps the text: the field is
/// set from it once the whole command line has been read.
fn checked(opt: &'static Opt) -> ValueParser {
    ValueParser::new(move |text: &str| -> Result<String, String> {
        opt.field
            .set(&mut ShapeOptions::default(), text)
            .map(|()| text.to_string())
    })
}

/// The flags of one option.
fn args(opt: &'static Opt) -> Vec<Arg> {
    let flag = |name: &'static str| {
        Arg::new(name)
            .long(name)
            .help(opt.help)
            .help_heading(opt.heading.title())
    };
    let valued = |name: &'static str, value_name: &'static str| {
        flag(name)
            .value_name(value_name)
            .value_parser(checked(opt))
            .allow_negative_numbers(true)
    };
    match opt.cli {
        Cli::None => vec![],
        Cli::Value(value_name) => vec![valued(opt.key, value_name)],
        Cli::Named(name, value_name) => vec![valued(name, value_name)],
        Cli::Repeated(value_name) => vec![valued(opt.key, value_name).action(ArgAction::Append)],
        Cli::Optional(value_name, missing) => vec![valued(opt.key, value_name)
            .num_args(0..=1)
            .default_missing_value(missing)],
        Cli::Switch => vec![flag(opt.key).action(ArgAction::SetTrue)],
        Cli::Off(off) => vec![flag(off).action(ArgAction::SetTrue)],
        Cli::Pair(off, off_help) => vec![
            flag(opt.key).action(ArgAction::SetTrue).conflicts_with(off),
            flag(off).action(ArgAction::SetTrue).help(off_help),
        ],
    }
}

impl Args for ShapeFlags {
    fn augment_args(cmd: Command) -> Command {
        OPTIONS.iter().flat_map(args).fold(cmd, Command::arg)
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ShapeFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = ShapeFlags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        let o = &mut self.options;
        let invalid = |e: String| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e);
        for opt in OPTIONS {
            let many = |id: &str| -> Vec<&str> {
                m.get_many::<String>(id)
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect()
            };
            let said: Vec<&str> = match opt.cli {
                Cli::None => vec![],
                Cli::Switch if m.get_flag(opt.key) => vec!["true"],
                Cli::Off(off) if m.get_flag(off) => vec!["false"],
                Cli::Pair(off, _) if m.get_flag(off) => vec!["false"],
                Cli::Pair(..) if m.get_flag(opt.key) => vec!["true"],
                Cli::Switch | Cli::Off(_) | Cli::Pair(..) => vec![],
                Cli::Named(name, _) => many(name),
                Cli::Value(_) | Cli::Optional(..) | Cli::Repeated(_) => many(opt.key),
            };
            for text in said {
                opt.field.set(o, text).map_err(invalid)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use unbloat_shaper::model::AckFilter;
    use unbloat_units::Rate;

    #[derive(Parser, Debug)]
    struct Test {
        #[command(flatten)]
        flags: ShapeFlags,
    }

    fn parse(args: &[&str]) -> Result<ShapeOptions, String> {
        Test::try_parse_from(std::iter::once("unbloat").chain(args.iter().copied()))
            .map(|t| t.flags.to_options())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_declared_flag_is_on_the_command_line() {
        let cmd = <Test as clap::CommandFactory>::command();
        let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        for opt in OPTIONS {
            for f in opt.flags() {
                assert!(longs.contains(&f), "--{f} ({}) is missing", opt.key);
            }
        }
    }

    #[test]
    fn flags_fill_the_options_a_file_would() {
        let o = parse(&[
            "--down",
            "78mbit",
            "--up",
            "19950kbit",
            "--no-nat",
            "--wash",
            "--ack-filter",
            "--overhead",
            "-4",
            "--classify",
            "gaming",
            "--classify",
            "bulk lan-host 10.0.0.5",
            "--no-ingress-keyword",
            "--egress-options",
            "mpu 64",
        ])
        .expect("valid");
        let file: ShapeOptions = unbloat_shaper::tomlread::from_str(
            "down = \"78mbit\"\nup = \"19950kbit\"\nnat = false\nwash = true\nack-filter = true\n\
             overhead = -4\nclassify = [\"gaming\", \"bulk lan-host 10.0.0.5\"]\n\
             ingress-keyword = false\nextra-egress = \"mpu 64\"",
        )
        .expect("valid");
        assert_eq!(o, file);
        assert_eq!(o.down, Some(Rate::from_mbit(78)));
        let o = parse(&["--ack-filter=aggressive"]).expect("valid");
        assert_eq!(o.ack_filter, Some(AckFilter::Aggressive));
        assert_eq!(parse(&[]).expect("valid"), ShapeOptions::default());
    }

    #[test]
    fn a_bad_value_names_its_flag() {
        let e = parse(&["--down", "78mbitz"]).unwrap_err();
        assert!(
            e.contains("'--down <RATE>'") && e.contains("78mbitz"),
            "{e}"
        );
        let e = parse(&["--ack-filter=sometimes"]).unwrap_err();
        assert!(
            e.contains("--ack-filter") && e.contains("aggressive"),
            "{e}"
        );
        let e = parse(&["--nat", "--no-nat"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }
}
