//! The groups of a composite test (mix, rrul): each a flow workload with
//! its options, on one window. What a group is, how one is read from the
//! words a user writes, and the rules a set of them must keep, whoever
//! builds them (a mix from its groups, rrul from its own four); the
//! controller runs them (`controller::mix`).

use std::time::Duration;

use super::error::SpecError;
use crate::model::options::TestOptions;
use crate::model::phase::Phase;
use crate::model::spec::{TestSpec, Workload};
use crate::model::Invalid;

/// One group of a mixed test.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Group {
    /// `g1`, `g2`, ...
    pub name: String,
    /// As written (`rr --rate 100 --request 64`).
    pub command: String,
    pub spec: TestSpec,
    /// Seconds after the common start that this group's timeline begins
    /// (0 for every group a user writes; rrul's streams start later).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset_s: f64,
    /// Stretches of the common timeline over which this group's latency
    /// is kept apart (rrul's probes: idle, ramp, loaded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Group {
    /// A group as a user writes it: on the common start, no phases. Its
    /// receivers never poll unless asked (`--rx-poll auto` is off in a
    /// group): the other groups share its hosts, and a poll would take
    /// their CPU.
    pub fn new(name: String, command: String, mut spec: TestSpec) -> Group {
        super::receivers_sleep(&mut spec);
        Group {
            name,
            command,
            spec,
            offset_s: 0.0,
            phases: Vec::new(),
        }
    }

    /// When its window opens, seconds since the common start.
    pub fn window_start_s(&self) -> f64 {
        self.offset_s + self.spec.warmup_s
    }

    /// Its intervals in its window (the last may be partial).
    pub fn intervals(&self) -> usize {
        crate::measure::interval::Timeline {
            warmup: Duration::ZERO,
            interval: Duration::from_secs_f64(self.spec.interval_s),
            duration: Some(Duration::from_secs_f64(self.spec.duration_s)),
        }
        .intervals()
        .unwrap_or(1)
    }

    /// The index of its interval that begins at `t_s` on the common
    /// timeline (0 before its window): phases begin on interval edges.
    pub fn index_at(&self, t_s: f64) -> usize {
        let k = (t_s - self.window_start_s()) / self.spec.interval_s;
        k.round().max(0.0) as usize
    }
}

/// A composite's result as the controller ran its groups, and what the
/// result does not hold: each group's latency per phase (per group, per
/// iteration, per phase; empty for a group without phases), for a
/// composite that summarizes phases (rrul).
pub struct Mixed {
    pub result: crate::model::result::TestResult,
    pub phase_hists: Vec<Vec<Vec<crate::measure::histogram::Hist>>>,
}

/// Why a composite's groups cannot run: all input, what the user wrote.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error(
        "a mix needs at least one group, e.g. linerate run mix 'stream --flows 4' 'rr --rate 100'"
    )]
    NoGroups,
    #[error("group {0} is itself a mix: list its groups instead")]
    GroupIsMix(String),
    #[error("group {group} ({command}): {workload} is a program, not flows; a mix runs flows on one window")]
    GroupIsProgram {
        group: String,
        command: String,
        workload: &'static str,
    },
    #[error("group {group} ({command}): --bytes makes a group end on its own; the groups of a mix share one window (use --duration)")]
    GroupEnds { group: String, command: String },
    /// A group that fails the checks every test passes.
    #[error("group {group} ({command}): {source}")]
    GroupCheck {
        group: String,
        command: String,
        source: Box<SpecError>,
    },
    #[error("group {group} ({command}) has its own --duration, --warmup or --interval: a mix has one window; give them after the groups, for all")]
    GroupWindow { group: String, command: String },
    /// A group with a lane whose window is not the others' (seconds of the
    /// common timeline, and the first group's).
    #[error("group {group} ({command}) does not end with the others on whole intervals: its window is {start_s} s to {end_s} s of the common timeline, the first group's {first_start_s} s to {first_end_s} s, intervals {interval_s} s")]
    GroupLane {
        group: String,
        command: String,
        start_s: f64,
        end_s: f64,
        first_start_s: f64,
        first_end_s: f64,
        interval_s: f64,
    },
    #[error("group '{0}': unbalanced quotes")]
    GroupQuotes(String),
    #[error("an empty group: write a workload and its options, e.g. 'rr --rate 100'")]
    EmptyGroup,
    /// A group's words that its options do not take: the first line of
    /// clap's message.
    #[error("group '{text}': {clap} (a group takes a workload and test options; where the test runs, --duration and --json go after the groups)")]
    GroupArgs { text: String, clap: String },
    #[error("group '{0}': a mix cannot hold a mix")]
    MixInMix(String),
    /// `--search` in more than one group of a mix.
    #[error("--search in more than one group: a search varies one group's rate while the others run as written")]
    SearchInGroups,
    /// A composite whose options or groups do not build (the text names
    /// the group).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// What a composite adds to its groups' result needs the groups it
    /// built (rrul's four).
    #[error("{0} runs its own groups")]
    NotItsGroups(&'static str),
}

impl GroupError {
    /// Every one is what the user wrote (exit 2).
    pub fn is_usage(&self) -> bool {
        true
    }
}

crate::error::classed_by_is_usage!(GroupError);

/// The checks a mix adds to each group's own: groups run on one window, so
/// none may end on its own (a finite transfer) or be a program.
pub fn check(groups: &[Group]) -> Result<(), GroupError> {
    if groups.is_empty() {
        return Err(GroupError::NoGroups);
    }
    if groups.iter().filter(|g| g.spec.search.is_some()).count() > 1 {
        return Err(GroupError::SearchInGroups);
    }
    for g in groups {
        let w = g.spec.workload;
        let k = super::kind_of(w);
        if k.composite().is_some() {
            return Err(GroupError::GroupIsMix(g.name.clone()));
        }
        if k.needs().lab {
            return Err(GroupError::GroupIsProgram {
                group: g.name.clone(),
                command: g.command.clone(),
                workload: w.name(),
            });
        }
        if g.spec.is_finite() {
            return Err(GroupError::GroupEnds {
                group: g.name.clone(),
                command: g.command.clone(),
            });
        }
        super::check(&g.spec).map_err(|source| GroupError::GroupCheck {
            group: g.name.clone(),
            command: g.command.clone(),
            source: Box::new(source),
        })?;
    }
    let first = &groups[0].spec;
    if groups.iter().all(|g| g.offset_s == 0.0) {
        if let Some(g) = groups.iter().find(|g| {
            g.spec.duration_s != first.duration_s
                || g.spec.warmup_s != first.warmup_s
                || g.spec.interval_s != first.interval_s
        }) {
            return Err(GroupError::GroupWindow {
                group: g.name.clone(),
                command: g.command.clone(),
            });
        }
        return Ok(());
    }
    // Groups with lanes: one interval, one end, and starts on its edges.
    let end = |g: &Group| g.window_start_s() + g.spec.duration_s;
    for g in groups {
        let off = g.window_start_s() / first.interval_s;
        if g.spec.interval_s != first.interval_s
            || (end(g) - end(&groups[0])).abs() > 1e-6
            || (off - off.round()).abs() > 1e-6
            || g.offset_s < 0.0
        {
            return Err(GroupError::GroupLane {
                group: g.name.clone(),
                command: g.command.clone(),
                start_s: g.window_start_s(),
                end_s: end(g),
                first_start_s: groups[0].window_start_s(),
                first_end_s: end(&groups[0]),
                interval_s: first.interval_s,
            });
        }
    }
    Ok(())
}

/// The spec a mixed result stores as its own: the first group's, named
/// `name` (mix's: `workload::mixed_spec`), with the flows of every group.
pub fn spec_of(groups: &[Group], name: Workload) -> TestSpec {
    let mut spec = groups[0].spec.clone();
    spec.workload = name;
    spec.flows = groups.iter().map(|g| g.spec.flows).sum();
    // A group's capacity search is the group's, not the mix's.
    spec.search = None;
    spec
}

/// A group as `linerate run` takes it, without `linerate run`.
#[derive(clap::Parser, Debug)]
#[command(name = "group", no_binary_name = true, disable_help_flag = true)]
struct GroupArgs {
    #[arg(value_parser = super::parser())]
    workload: Workload,
    #[command(flatten)]
    test: TestOptions,
}

/// Parses one group (`"rr --rate 100 --request 64"`, shell quoting
/// allowed) into its workload and options; the error names the group.
pub fn parse_group(text: &str) -> Result<(Workload, TestOptions), GroupError> {
    use clap::Parser;
    let words = shlex::split(text).ok_or_else(|| GroupError::GroupQuotes(text.to_string()))?;
    if words.is_empty() {
        return Err(GroupError::EmptyGroup);
    }
    let a = GroupArgs::try_parse_from(&words).map_err(|e| {
        let msg = e.to_string();
        let first = msg
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string();
        GroupError::GroupArgs {
            text: text.to_string(),
            clap: first,
        }
    })?;
    if super::kind_of(a.workload).composite().is_some() {
        return Err(GroupError::MixInMix(text.to_string()));
    }
    Ok((a.workload, a.test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_parses_as_run_takes_it() {
        let (w, o) = parse_group("rr --rate 100 --request 64 --response '64'").unwrap();
        assert_eq!(w, crate::model::spec::Workload::named("rr"));
        let spec = crate::workload::build(
            &o.overlay(&crate::model::options::TestOptions {
                run: crate::model::options::RunOptions {
                    workload: Some(w),
                    ..Default::default()
                },
                ..Default::default()
            }),
            false,
        )
        .unwrap();
        assert_eq!((spec.request, spec.response), (64, 64));
        assert_eq!(spec.rate, Some(100.0));
    }

    #[test]
    fn bad_groups_are_named() {
        let e = parse_group("stream --flows").unwrap_err().to_string();
        assert!(e.contains("group 'stream --flows'"), "{e}");
        let e = parse_group("strem").unwrap_err().to_string();
        assert!(e.contains("strem"), "{e}");
        assert!(parse_group("").is_err());
        assert!(parse_group("stream 'x")
            .unwrap_err()
            .to_string()
            .contains("quotes"));
        assert!(parse_group("mix").unwrap_err().to_string().contains("mix"));
        let e = parse_group("rr --agent 127.0.0.1:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("after the groups"), "{e}");
    }

    #[test]
    fn a_mix_has_one_window() {
        let g = |name: &str, text: &str| {
            let (w, o) = parse_group(text).unwrap();
            let mut o = o;
            o.run.workload = Some(w);
            Group::new(
                name.into(),
                text.into(),
                crate::workload::build(&o, false).unwrap(),
            )
        };
        assert!(check(&[g("g1", "stream"), g("g2", "rr --rate 10")]).is_ok());
        let e = check(&[g("g1", "stream --bytes 1M")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--bytes"), "{e}");
        let e = check(&[g("g1", "stream"), g("g2", "rr --duration 3")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("g2") && e.contains("one window"), "{e}");
        let s = spec_of(
            &[g("g1", "stream --flows 4"), g("g2", "rr")],
            crate::model::spec::Workload::named("mix"),
        );
        assert_eq!(
            (s.workload, s.flows),
            (crate::model::spec::Workload::named("mix"), 5)
        );
    }
}
