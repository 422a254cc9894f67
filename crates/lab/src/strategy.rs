//! A strategy's name: what `--strategies` takes, what tables and `lab.json` show, and the report
//! directory its run writes into. Pure, and it imports nothing of this crate: the table, the
//! spreads, the benchmark and the code that sets strategies up all share it.
//!
//! - `none`, `wondershaper`, `sqm-simple`, `sqm-piece-of-cake`, `unbloat`: the lab writes their
//!   commands itself ([`crate::strategies`]); the sqm ones re-create what sqm-scripts builds.
//! - `sqm-scripts:simple`, `sqm-scripts:piece_of_cake`: the real sqm-scripts' `start-sqm` with that
//!   recipe (`simple.qos`, `piece_of_cake.qos`), run in the router ([`crate::script`]), to be
//!   compared with its re-creation on the same link.
//! - `script:PATH`: the user's own executable, run in the router with the link's values in its
//!   environment ([`crate::script`] lists them), to compare an existing setup.
//! - `unbloat-tuned`: `unbloat tune wan0 --apply` run in the router against `unbloat serve`
//!   first ([`crate::tune_lab::tune_and_apply`]): the lab measures what tune found, not the
//!   profile's truth.
//! - For variable links (a profile with traces; [`crate::autorate_lab`]): `unbloat-autorate`
//!   (`unbloat autorate` in the router during the test), `cake-autorate` (the real
//!   cake-autorate there instead, on the same cake setup), and `unbloat-p10` / `unbloat-mean`
//!   (`unbloat start` at a fixed rate: the trace's 10th percentile or its mean).
//!
//! A list is comma-separated, so a path cannot contain a comma.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// One way of managing the router's queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    None,
    Wondershaper,
    SqmSimple,
    SqmPieceOfCake,
    Unbloat,
    /// `unbloat tune --apply` in the router, then measured as it left the link.
    UnbloatTuned,
    /// The real sqm-scripts with one of its recipes.
    SqmScripts(SqmRecipe),
    /// The user's own executable; a relative path is made absolute when the lab checks it.
    Script(PathBuf),
    /// `unbloat autorate` moving the rates during the test.
    UnbloatAutorate,
    /// The real cake-autorate moving the rates during the test.
    CakeAutorate,
    /// `unbloat start` at a fixed rate taken from the link's traces.
    UnbloatFixed(FixedRate),
}

/// The fixed rate a variable link is shaped at, for comparison with the controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FixedRate {
    /// The 10th percentile of the trace's one-second rates: low latency, most capacity lost.
    P10,
    /// The trace's mean rate: what the link carries on average.
    Mean,
}

/// The sqm-scripts recipes the lab runs for real: the two it also re-creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SqmRecipe {
    /// `simple.qos`: HTB with three fq_codel tiers.
    Simple,
    /// `piece_of_cake.qos`: one cake each way, OpenWrt's default.
    PieceOfCake,
}

impl SqmRecipe {
    pub const ALL: [SqmRecipe; 2] = [SqmRecipe::Simple, SqmRecipe::PieceOfCake];

    /// The name sqm-scripts gives it: its file is `NAME.qos`.
    pub fn name(self) -> &'static str {
        match self {
            SqmRecipe::Simple => "simple",
            SqmRecipe::PieceOfCake => "piece_of_cake",
        }
    }

    /// The `QDISC` sqm-scripts pairs with the recipe: its default (fq_codel) for simple.qos;
    /// piece_of_cake.qos sets cake itself, and OpenWrt's GUI writes cake beside it.
    pub fn qdisc(self) -> &'static str {
        match self {
            SqmRecipe::Simple => "fq_codel",
            SqmRecipe::PieceOfCake => "cake",
        }
    }
}

/// The qdisc and action kinds a user's script may need. The lab cannot know which it uses, so
/// it asks for every kind its own strategies use (and boots User-Mode Linux when one is missing).
const SCRIPT_NEEDS: [&str; 7] = ["htb", "fq_codel", "cake", "sfq", "ingress", "ifb", "mirred"];

impl Strategy {
    /// The strategies whose commands the lab writes itself, in the order tables show them.
    pub const ALL: [Strategy; 5] = [
        Strategy::None,
        Strategy::Wondershaper,
        Strategy::SqmSimple,
        Strategy::SqmPieceOfCake,
        Strategy::Unbloat,
    ];

    /// [`Strategy::ALL`] with the real sqm-scripts each beside its re-creation: what `bench lab`
    /// compares when sqm-scripts' source is found.
    pub fn with_real_sqm() -> Vec<Strategy> {
        vec![
            Strategy::None,
            Strategy::Wondershaper,
            Strategy::SqmSimple,
            Strategy::SqmScripts(SqmRecipe::Simple),
            Strategy::SqmPieceOfCake,
            Strategy::SqmScripts(SqmRecipe::PieceOfCake),
            Strategy::Unbloat,
        ]
    }

    /// The name `--strategies` takes and tables and `lab.json` show.
    pub fn name(&self) -> String {
        match self {
            Strategy::None => "none".into(),
            Strategy::Wondershaper => "wondershaper".into(),
            Strategy::SqmSimple => "sqm-simple".into(),
            Strategy::SqmPieceOfCake => "sqm-piece-of-cake".into(),
            Strategy::Unbloat => "unbloat".into(),
            Strategy::UnbloatTuned => "unbloat-tuned".into(),
            Strategy::SqmScripts(r) => format!("sqm-scripts:{}", r.name()),
            Strategy::Script(path) => format!("script:{}", path.display()),
            Strategy::UnbloatAutorate => "unbloat-autorate".into(),
            Strategy::CakeAutorate => "cake-autorate".into(),
            Strategy::UnbloatFixed(FixedRate::P10) => "unbloat-p10".into(),
            Strategy::UnbloatFixed(FixedRate::Mean) => "unbloat-mean".into(),
        }
    }

    /// The strategies of a variable link, in the order tables show them.
    pub const VARIABLE: [Strategy; 5] = [
        Strategy::None,
        Strategy::UnbloatFixed(FixedRate::P10),
        Strategy::UnbloatFixed(FixedRate::Mean),
        Strategy::CakeAutorate,
        Strategy::UnbloatAutorate,
    ];

    /// A strategy of [`Strategy::VARIABLE`] but `none`: it needs a profile with traces.
    pub fn is_variable(&self) -> bool {
        matches!(
            self,
            Strategy::UnbloatAutorate | Strategy::CakeAutorate | Strategy::UnbloatFixed(_)
        )
    }

    /// A strategy that runs a rate controller in the router during the test.
    pub fn is_controller(&self) -> bool {
        matches!(self, Strategy::UnbloatAutorate | Strategy::CakeAutorate)
    }

    /// The report's subdirectory for this strategy's run: its name where that is a plain file
    /// name, `sqm-scripts-RECIPE`, or `script-FILE` with anything but letters, digits, `.`, `_`
    /// and `-` as `_` (a `:` would make the page's links read as URL schemes).
    pub fn dir_name(&self) -> String {
        match self {
            Strategy::SqmScripts(r) => format!("sqm-scripts-{}", r.name()),
            Strategy::Script(path) => {
                let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
                let safe: String = file
                    .unwrap_or_default()
                    .chars()
                    .map(|c| match c {
                        'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
                        _ => '_',
                    })
                    .collect();
                format!("script-{safe}")
            }
            other => other.name(),
        }
    }

    /// The user's script, for `script:PATH`.
    pub fn script(&self) -> Option<&Path> {
        match self {
            Strategy::Script(p) => Some(p),
            _ => None,
        }
    }

    /// The qdisc and action kinds the strategy needs from the kernel.
    pub fn kernel_needs(&self) -> &'static [&'static str] {
        match self {
            Strategy::None => &[],
            // act_police is not probed (no qdisc kind); every kernel with sfq and ingress has had it.
            Strategy::Wondershaper => &["htb", "sfq", "ingress"],
            Strategy::SqmSimple | Strategy::SqmScripts(SqmRecipe::Simple) => {
                &["htb", "fq_codel", "ifb", "mirred"]
            }
            Strategy::SqmPieceOfCake | Strategy::SqmScripts(SqmRecipe::PieceOfCake) => {
                &["cake", "ifb", "mirred"]
            }
            Strategy::Unbloat
            | Strategy::UnbloatTuned
            | Strategy::UnbloatAutorate
            | Strategy::CakeAutorate
            | Strategy::UnbloatFixed(_) => &["cake", "ifb", "mirred"],
            Strategy::Script(_) => &SCRIPT_NEEDS,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Strategy, String> {
        if let Some(path) = s.strip_prefix("script:") {
            if path.trim().is_empty() {
                return Err(
                    "script: needs the path of an executable, as in script:/etc/my-shaper.sh"
                        .into(),
                );
            }
            return Ok(Strategy::Script(PathBuf::from(path)));
        }
        if let Some(recipe) = s.strip_prefix("sqm-scripts:") {
            let recipe = recipe.strip_suffix(".qos").unwrap_or(recipe);
            let names: Vec<_> = SqmRecipe::ALL.iter().map(|r| r.name()).collect();
            return SqmRecipe::ALL
                .into_iter()
                .find(|r| r.name() == recipe)
                .map(Strategy::SqmScripts)
                .ok_or_else(|| {
                    format!(
                        "unknown sqm-scripts recipe {recipe:?}; choose from {}",
                        names.join(", ")
                    )
                });
        }
        Strategy::ALL
            .into_iter()
            .chain([Strategy::UnbloatTuned])
            .chain(Strategy::VARIABLE)
            .find(|st| st.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Strategy::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown strategy {s:?}; choose from {}, unbloat-tuned, sqm-scripts:simple, \
                     sqm-scripts:piece_of_cake, script:PATH, and for variable links \
                     unbloat-autorate, cake-autorate, unbloat-p10, unbloat-mean",
                    names.join(", ")
                )
            })
    }
}

/// As its name: `"sqm-piece-of-cake"`, `"script:/etc/my-shaper.sh"` (what lab.json has always held
/// for the strategies without data).
impl serde::Serialize for Strategy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Strategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strategy, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses `--strategies a,b,c`: at least one, no repeats, and no two that would write into the
/// same report directory (two scripts of the same file name).
pub fn parse_list(text: &str) -> Result<Vec<Strategy>, String> {
    let mut out: Vec<Strategy> = Vec::new();
    for word in text.split(',').map(str::trim) {
        let st: Strategy = word.parse()?;
        if out.contains(&st) {
            return Err(format!("strategy {st} is listed twice"));
        }
        if let Some(other) = out.iter().find(|o| o.dir_name() == st.dir_name()) {
            return Err(format!(
                "{other} and {st} would share the report directory {}: give one script another file name",
                st.dir_name()
            ));
        }
        out.push(st);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbloat_tuned_is_asked_for_by_name_and_not_run_by_default() {
        assert_eq!("unbloat-tuned".parse(), Ok(Strategy::UnbloatTuned));
        assert!(!Strategy::ALL.contains(&Strategy::UnbloatTuned));
        let err = "unbloat-tune".parse::<Strategy>().unwrap_err();
        assert!(err.contains("unbloat-tuned"), "{err}");
    }

    #[test]
    fn the_names_of_the_built_in_strategies_and_their_json_are_unchanged() {
        let names: Vec<String> = Strategy::ALL.iter().map(Strategy::name).collect();
        let expect = [
            "none",
            "wondershaper",
            "sqm-simple",
            "sqm-piece-of-cake",
            "unbloat",
        ];
        assert_eq!(names, expect);
        for s in Strategy::ALL.into_iter().chain([Strategy::UnbloatTuned]) {
            assert_eq!(s.dir_name(), s.name());
            let json = serde_json::to_string(&s).expect("serialize");
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(
                serde_json::from_str::<Strategy>(&json).expect("read back"),
                s
            );
        }
    }

    #[test]
    fn script_path_parses_keeps_its_path_and_reads_back_from_json() {
        let s: Strategy = "script:/etc/unbloat/my shaper.sh".parse().expect("parse");
        assert_eq!(s, Strategy::Script("/etc/unbloat/my shaper.sh".into()));
        assert_eq!(s.script(), Some(Path::new("/etc/unbloat/my shaper.sh")));
        assert_eq!(s.name(), "script:/etc/unbloat/my shaper.sh");
        assert_eq!(s.dir_name(), "script-my_shaper.sh");
        let json = serde_json::to_string(&s).expect("serialize");
        assert_eq!(json, "\"script:/etc/unbloat/my shaper.sh\"");
        assert_eq!(serde_json::from_str::<Strategy>(&json).expect("read"), s);
        // Relative paths are taken as typed; the lab's check makes them absolute.
        assert_eq!(
            "script:shape.sh".parse(),
            Ok(Strategy::Script("shape.sh".into()))
        );
        for empty in ["script:", "script:  "] {
            let err = empty.parse::<Strategy>().unwrap_err();
            assert!(err.contains("needs the path of an executable"), "{err}");
        }
        assert_eq!(s.kernel_needs(), SCRIPT_NEEDS);
    }

    #[test]
    fn sqm_scripts_recipes_parse_with_or_without_qos_and_name_their_directories() {
        let cake = Strategy::SqmScripts(SqmRecipe::PieceOfCake);
        assert_eq!("sqm-scripts:piece_of_cake".parse(), Ok(cake.clone()));
        assert_eq!("sqm-scripts:piece_of_cake.qos".parse(), Ok(cake.clone()));
        assert_eq!(cake.name(), "sqm-scripts:piece_of_cake");
        assert_eq!(cake.dir_name(), "sqm-scripts-piece_of_cake");
        assert_eq!(cake.kernel_needs(), Strategy::SqmPieceOfCake.kernel_needs());
        let simple = Strategy::SqmScripts(SqmRecipe::Simple);
        assert_eq!(simple.kernel_needs(), Strategy::SqmSimple.kernel_needs());
        let err = "sqm-scripts:layer_cake".parse::<Strategy>().unwrap_err();
        assert_eq!(
            err,
            "unknown sqm-scripts recipe \"layer_cake\"; choose from simple, piece_of_cake"
        );
        let err = "cake".parse::<Strategy>().unwrap_err();
        assert!(
            err.contains("script:PATH") && err.contains("sqm-scripts:simple"),
            "{err}"
        );
    }

    #[test]
    fn the_benchmarks_list_puts_each_real_sqm_beside_its_re_creation() {
        let names: Vec<String> = Strategy::with_real_sqm()
            .iter()
            .map(Strategy::name)
            .collect();
        assert_eq!(
            names,
            [
                "none",
                "wondershaper",
                "sqm-simple",
                "sqm-scripts:simple",
                "sqm-piece-of-cake",
                "sqm-scripts:piece_of_cake",
                "unbloat"
            ]
        );
    }

    #[test]
    fn lists_refuse_repeats_and_two_scripts_that_share_a_report_directory() {
        assert_eq!(
            parse_list("none, script:/a/x.sh"),
            Ok(vec![Strategy::None, Strategy::Script("/a/x.sh".into())])
        );
        assert!(parse_list("script:/a/x.sh,script:/a/x.sh")
            .unwrap_err()
            .contains("twice"));
        let err = parse_list("script:/a/x.sh,script:/b/x.sh").unwrap_err();
        assert!(
            err.contains("share the report directory script-x.sh"),
            "{err}"
        );
        assert!(parse_list("sqm-scripts:simple,sqm-scripts:simple.qos")
            .unwrap_err()
            .contains("twice"));
    }
}
