//! Running a study: plan the runs (every point, `repeat` times, repetitions
//! interleaved round by round and optionally shuffled within a round, so
//! drift on a shared machine spreads over all points instead of biasing the
//! last ones), run each against one agent, and store each result as it ends.
//! `--resume` picks up a folder and runs only what has no result yet.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::controller::point::Point;
use crate::controller::target::{self, ConnectArgs};
use crate::engine::signals;
use crate::error::{Error, Result};
use crate::lab::calibrate;
use crate::lab::topology::{self, Backend, OwnedLab};
use crate::model::options::TestOptions;
use crate::model::result::Status;
use crate::study::file::Study;
use crate::study::folder::{self, Manifest, RunRecord, StudyStatus};
use crate::study::sweep;
use crate::study::StudyError;

pub struct RunOptions {
    /// Runs of every point; overrides the study's `repeat`.
    pub repeat: Option<u32>,
    pub shuffle: bool,
    /// Continue this folder instead of starting a new one.
    pub resume: Option<PathBuf>,
    /// Where new folders go (`results/`).
    pub out: PathBuf,
    /// Settings applied over every point (e.g. `--duration`).
    pub overrides: TestOptions,
    pub connect: ConnectArgs,
    pub quiet: bool,
    /// Only the points of one crypto pass: Some(true) the clear points and
    /// the TLS points with crypto hardware, Some(false) the TLS points
    /// without (run by a masked process). None: every point.
    pub crypto_pass: Option<bool>,
}

pub struct Outcome {
    pub dir: PathBuf,
    /// Runs done now, and runs skipped because a result was already stored.
    pub ran: usize,
    pub skipped: usize,
    /// Why the study stopped early, if it did.
    pub stopped: Option<String>,
}

/// A permutation from a 64-bit seed (xorshift; only spreading order matters).
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut x = seed | 1;
    for i in (1..items.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        items.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

/// The run order: round r holds repetition r of every point.
pub fn plan(points: &[sweep::Point], repeat: u32, seed: Option<u64>) -> Vec<RunRecord> {
    let mut runs = Vec::new();
    for rep in 1..=repeat {
        let mut round: Vec<RunRecord> = points
            .iter()
            .map(|p| RunRecord {
                point: p.id.clone(),
                repetition: rep,
                file: format!("points/{}.r{rep}.json", p.id),
                status: Status::Pending,
                error: None,
            })
            .collect();
        if let Some(s) = seed {
            shuffle(&mut round, s.wrapping_add(rep as u64));
        }
        runs.extend(round);
    }
    runs
}

fn network_name(c: &ConnectArgs, study: &Study) -> String {
    if let Some(h) = &c.hosts {
        return format!(
            "hosts {} (clients {}, servers {})",
            h.display(),
            c.clients.as_deref().unwrap_or("by role"),
            c.servers.as_deref().unwrap_or("by role")
        );
    }
    if let Some(p) = &c.perf_server {
        return format!("another tool's QUIC perf server at {p} (--perf-server)");
    }
    match (&c.agent, &study.lab) {
        (Some(a), _) => format!("agent {a}"),
        // A lab the user brought up (`--lab NAME`): its points record it.
        (None, None) if c.lab.is_some() => {
            let name = c.lab.as_deref().unwrap_or_default();
            match crate::lab::state::load(name) {
                Ok(Some(st)) => format!("lab {name} ({})", st.spec.describe()),
                _ => format!("lab {name}"),
            }
        }
        (None, Some(l)) => match l.build() {
            Ok(s) => format!("lab ({})", s.describe()),
            Err(_) => "lab".into(),
        },
        (None, None) => "loopback (local agent)".into(),
    }
}

/// A study with a `[lab]` runs in a lab of its own, which follows each
/// point's `rtt`: reshaped (and calibrated again) when the round trip changes.
struct StudyLab {
    lab: OwnedLab,
    /// The study's `[lab]`, which a point's own settings go over.
    cfg: crate::study::file::LabConfig,
    /// Sysctls a point changed: their values before the first change, put
    /// back for a point that does not set them.
    saved: std::collections::BTreeMap<String, Vec<(String, String)>>,
    quiet: bool,
}

impl StudyLab {
    fn up(study: &Study, quiet: bool) -> Result<Option<StudyLab>> {
        let Some(cfg) = &study.lab else {
            return Ok(None);
        };
        let base = cfg.build()?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::Failed(format!(
                "study {} brings up a lab (network namespaces): run it as root",
                study.name
            )));
        }
        let name = format!("st-{}", std::process::id());
        let lab = OwnedLab::up(&name, &base, Backend::Auto)?;
        if !quiet {
            eprintln!(
                "lab {name}: {} (emulator {})",
                lab.state.spec.describe(),
                lab.state.backend
            );
        }
        let mut l = StudyLab {
            lab,
            cfg: cfg.clone(),
            saved: Default::default(),
            quiet,
        };
        let c = l.calibrate()?;
        if !quiet {
            eprintln!("lab calibration: {}", c.describe());
        }
        Ok(Some(l))
    }

    /// RTT and one flow's goodput; kept in the lab's state for every result.
    fn calibrate(&mut self) -> Result<crate::model::lab::Calibration, StudyError> {
        let st = &mut self.lab.state;
        let c = calibrate::calibrate(st, st.spec.links[0].rate_bps.is_some())?;
        st.calibration = Some(c.clone());
        crate::lab::state::save(st)?;
        Ok(c)
    }

    /// Makes the lab the point's: its round trip (split evenly) and its own
    /// lab settings over the study's `[lab]`, calibrated again when the
    /// link changed; then its sysctls in the hosts' namespaces.
    fn follow(&mut self, spec: &crate::model::spec::TestSpec) -> Result<(), StudyError> {
        let mut want = match &spec.lab {
            Some(p) => self.cfg.with_point(p).build()?,
            None => self.cfg.build()?,
        };
        if let Some(rtt) = spec.rtt_s {
            for l in want.links.iter_mut() {
                l.delay_s = rtt / 2.0;
            }
        } else {
            // A point without rtt keeps the lab's current round trip.
            for (l, now) in want.links.iter_mut().zip(&self.lab.state.spec.links) {
                if self.cfg.rtt.is_none() && self.cfg.delay.is_none() {
                    l.delay_s = now.delay_s;
                }
            }
        }
        if want != self.lab.state.spec {
            topology::reshape(&mut self.lab.state, &want)?;
            let c = self.calibrate()?;
            if !self.quiet {
                eprintln!("lab now {}: {}", want.describe(), c.describe());
                for w in &c.warnings {
                    eprintln!("lab warning: {w}");
                }
            }
        }
        self.sysctls(&spec.sysctl)
    }

    /// Sets the point's sysctls in every client and server namespace, and
    /// puts back those an earlier point changed and this one does not set.
    /// A sysctl that is not per namespace (the host's would change) is
    /// refused and put back.
    fn sysctls(
        &mut self,
        want: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), StudyError> {
        use crate::lab::netns;
        let hosts = self.lab.state.host_namespaces();
        let router = self.lab.state.router_ns.clone();
        let restore: Vec<String> = self
            .saved
            .keys()
            .filter(|k| !want.contains_key(*k))
            .cloned()
            .collect();
        for k in restore {
            for (ns, v) in self.saved.remove(&k).unwrap_or_default() {
                netns::sysctls(&ns, &[(k.as_str(), v)])?;
            }
        }
        self.restore_host(Some(want));
        for (k, v) in want {
            if host_wide(&router, k) {
                let before = crate::lab::netns::host_sysctl(k, None).map_err(|source| {
                    StudyError::Sysctl {
                        key: k.clone(),
                        source,
                    }
                })?;
                if !self.lab.state.host_sysctls.contains_key(k) {
                    if !self.quiet {
                        eprintln!(
                            "sysctl {k} is the host's, not a namespace's: set on this host for the points that set it (was {before}), put back after"
                        );
                    }
                    // Kept in the lab's state file too, so a study killed
                    // with SIGKILL has it put back when its lab is swept.
                    self.lab.state.host_sysctls.insert(k.clone(), before);
                    crate::lab::state::save(&self.lab.state)?;
                }
                crate::lab::netns::host_sysctl(k, Some(v.clone())).map_err(|source| {
                    StudyError::Sysctl {
                        key: k.clone(),
                        source,
                    }
                })?;
                continue;
            }
            // The router's namespace is not set: if its value moves too,
            // the sysctl is the host's, not the namespace's.
            let host_before = netns::sysctl(&router, k).map_err(|source| StudyError::Sysctl {
                key: k.clone(),
                source,
            })?;
            if !self.saved.contains_key(k) {
                let mut old = Vec::new();
                for ns in &hosts {
                    old.push((ns.clone(), netns::sysctl(ns, k)?));
                }
                self.saved.insert(k.clone(), old);
            }
            for ns in &hosts {
                netns::sysctls(ns, &[(k.as_str(), v.clone())])?;
            }
            let host_after = netns::sysctl(&router, k)?;
            if host_after != host_before {
                netns::sysctls(&router, &[(k.as_str(), host_before.clone())])?;
                return Err(StudyError::HostSysctl {
                    key: k.clone(),
                    before: host_before,
                });
            }
        }
        Ok(())
    }
}

/// A `net.core` sysctl that network namespaces do not have, only the host
/// (netdev_max_backlog, the receive backlog seed 003 tunes): the lab's
/// namespaces share the host's, so a study's own lab sets it there.
fn host_wide(router_ns: &str, key: &str) -> bool {
    key.starts_with("net.core.")
        && crate::lab::netns::sysctl(router_ns, key).is_err()
        && crate::lab::netns::host_sysctl(key, None).is_ok()
}

impl StudyLab {
    /// Puts back the host-wide sysctls `keep` does not set (all of them
    /// with None); an error is said, not raised: the next point or the
    /// study's end tries again.
    fn restore_host(&mut self, keep: Option<&std::collections::BTreeMap<String, String>>) {
        let keys: Vec<String> = self
            .lab
            .state
            .host_sysctls
            .keys()
            .filter(|k| keep.is_none_or(|w| !w.contains_key(*k)))
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        for k in keys {
            let v = self.lab.state.host_sysctls.remove(&k).expect("listed");
            if let Err(e) = crate::lab::netns::host_sysctl(&k, Some(v.clone())) {
                eprintln!("cannot put back the host's {k} = {v}: {e}");
                self.lab.state.host_sysctls.insert(k, v);
            }
        }
        if let Err(e) = crate::lab::state::save(&self.lab.state) {
            eprintln!("cannot record the host's sysctls in the lab's state: {e}");
        }
    }
}

impl Drop for StudyLab {
    fn drop(&mut self) {
        self.restore_host(None);
    }
}

/// A point's firewall (`firewall.*`) in the lab's first server namespace.
impl StudyLab {
    /// Loads the point's rules (nothing for a point without `firewall.*`).
    fn load_firewall(&mut self, spec: &crate::model::spec::TestSpec) -> Result<(), StudyError> {
        if let Some(f) = &spec.firewall {
            crate::lab::firewall::load(&self.lab.state.server_ns, f)?;
        }
        Ok(())
    }

    /// Reads back what the point had loaded, removes it (also when the
    /// point failed), and records both in the result.
    fn end_firewall(
        &mut self,
        spec: &crate::model::spec::TestSpec,
        r: Result<crate::model::result::TestResult>,
    ) -> Result<crate::model::result::TestResult> {
        use crate::lab::firewall;
        let Some(f) = &spec.firewall else {
            return r;
        };
        let ns = self.lab.state.server_ns.clone();
        let rec = firewall::read_back(&ns, f);
        let removed = firewall::remove(&ns).and_then(|_| firewall::rule_lines(&ns, "filter"));
        let mut result = r?;
        let mut rec = rec.map_err(StudyError::from)?;
        rec.iptables_s_lines_after = removed.map_err(StudyError::from)?.len() as u32;
        result.firewall = Some(rec);
        Ok(result)
    }
}

/// Starts a new folder, or reopens `opts.resume`.
fn prepare(study: &Study, opts: &RunOptions, connect: &ConnectArgs) -> Result<(PathBuf, Manifest)> {
    if let Some(dir) = &opts.resume {
        let m = folder::read_manifest(dir)?;
        if m.study != study.name {
            return Err(Error::Failed(format!(
                "{} holds study '{}', not '{}'",
                dir.display(),
                m.study,
                study.name
            )));
        }
        if opts.overrides != TestOptions::default() && opts.overrides != m.overrides {
            return Err(Error::Failed(format!(
                "--resume keeps the folder's settings; drop --duration/--warmup/--iterations (the folder used {})",
                serde_json::to_string(&m.overrides).unwrap_or_default()
            )));
        }
        return Ok((dir.clone(), m));
    }
    let points = sweep::expand(study, &opts.overrides)?;
    let repeat = opts.repeat.unwrap_or(study.repeat).max(1);
    let shuffled = opts.shuffle || study.shuffle;
    let seed = shuffled.then(|| {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        u64::from_le_bytes(b)
    });
    let dir = folder::new_dir(&opts.out, &study.name)?;
    folder::write_atomic(&dir.join("study.toml"), study.source.as_bytes())?;
    let now = crate::units::rfc3339_now();
    let m = Manifest {
        schema: folder::MANIFEST_SCHEMA.into(),
        schema_version: folder::MANIFEST_VERSION,
        study: study.name.clone(),
        title: study.title.clone(),
        created_at: now.clone(),
        updated_at: now,
        status: StudyStatus::Running,
        network: network_name(connect, study),
        repeat,
        shuffle: shuffled,
        seed,
        overrides: opts.overrides.clone(),
        runs: plan(&points, repeat, seed),
        points,
        command: std::env::args().collect(),
    };
    folder::write_json(&folder::manifest_path(&dir), &m)?;
    Ok((dir, m))
}

/// Where the study runs: the command line's agent or hosts, else the
/// study's `[network]`.
fn network(study: &Study, opts: &RunOptions) -> ConnectArgs {
    let mut connect = opts.connect.clone();
    if connect.agent.is_none() && connect.hosts.is_none() {
        let n = &study.network;
        connect.agent = n.agent.clone();
        connect.hosts = n.hosts.clone();
        if connect.hosts.is_some() {
            connect.clients = connect.clients.or_else(|| n.clients.clone());
            connect.servers = connect.servers.or_else(|| n.servers.clone());
        }
        if connect.token_file.is_none() {
            connect.token_file = n.token_file.clone();
        }
    }
    connect
}

/// A study that brings up its own lab, pointed at other hosts: its
/// traffic would not cross the lab it shapes, and its results would carry
/// settings the traffic never met. `--no-lab` is what the user meant.
fn elsewhere(study: &Study, c: &ConnectArgs) -> Result<()> {
    let flag = if c.hosts.is_some() {
        "--hosts"
    } else if c.agent.is_some() {
        "--agent"
    } else if c.lab.is_some() {
        "--lab"
    } else {
        return Ok(());
    };
    if study.lab.is_some() {
        return Err(Error::Usage(format!(
            "study {} brings up a lab of its own ([lab]), which {flag}'s traffic would not cross: add --no-lab to run its points there without the lab (its rtt/lab.*/firewall.* axes dropped), or leave out {flag}",
            study.name
        )));
    }
    if let Some(h) = &c.hosts {
        // Read before the results folder is made: a wrong path is a usage
        // error, not a stopped study.
        target::load_hosts(h)?;
    }
    Ok(())
}

/// What no point may ask of where the study runs: many hosts' options
/// without hosts, a lab's without a lab, a program without a lab.
fn check_points(study: &Study, m: &Manifest, connect: &ConnectArgs) -> Result<()> {
    if connect.hosts.is_none() {
        let many = |s: &crate::model::spec::TestSpec| {
            [
                ("clients", s.clients.is_some()),
                ("client_hosts", s.client_hosts.is_some()),
                ("server_hosts", s.server_hosts.is_some()),
            ]
            .into_iter()
            .find(|(_, set)| *set)
        };
        if let Some((p, (key, _))) = m.points.iter().find_map(|p| many(&p.spec).map(|k| (p, k))) {
            return Err(Error::Usage(format!(
                "point {} sets {key}, which needs many hosts: --hosts FILE or [network] hosts",
                p.label()
            )));
        }
    }
    if study.lab.is_none() {
        if let Some(p) = m.points.iter().find(|p| p.spec.rtt_s.is_some()) {
            return Err(Error::Failed(format!(
                "point {} sets rtt, which needs a [lab] in the study",
                p.label()
            )));
        }
        if let Some(p) = m.points.iter().find(|p| p.spec.lab.is_some()) {
            return Err(Error::Usage(format!(
                "point {} sets lab.*, which needs a [lab] in the study",
                p.label()
            )));
        }
        if let Some(p) = m.points.iter().find(|p| p.spec.firewall.is_some()) {
            return Err(Error::Usage(format!(
                "point {} sets firewall.*, which linerate loads only in a lab's server namespace: add a [lab] to the study (a real host's firewall is left alone)",
                p.label()
            )));
        }
    }
    if study.lab.is_none() || connect.agent.is_some() {
        if let Some(p) = m
            .points
            .iter()
            .find(|p| crate::workload::kind_of(p.spec.workload).needs().lab)
        {
            return Err(Error::Failed(format!(
                "point {} runs a program ({}), which needs a [lab] in the study",
                p.label(),
                p.spec.workload.name()
            )));
        }
    }
    Ok(())
}

/// Stores run `rec`'s result (or why it has none) in the folder and the
/// manifest's record; the study stops at a run that ended early.
fn record(
    rec: &mut RunRecord,
    r: Result<crate::model::result::TestResult>,
    dir: &std::path::Path,
    label: &str,
    opts: &RunOptions,
    outcome: &mut Outcome,
) -> Result<()> {
    match r {
        Ok(result) => {
            // A full disk (or a folder gone read-only): what is stored
            // stays, and the study can go on later from it.
            if let Err(e) = folder::write_json(&dir.join(&rec.file), &result) {
                return Err(stopped_failure(dir, &format!("{label}: {e}")));
            }
            rec.status = result.summary.status;
            rec.error = result.iterations.iter().find_map(|it| it.error.clone());
            if let Some(why) = result.nothing_measured() {
                // Kept for its errors, but not a point of the landscape.
                rec.status = Status::Failed;
                rec.error = Some(why);
            }
            outcome.ran += 1;
            if !opts.quiet && !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                // The live line is hidden when stderr is not a terminal
                // (CI, a log): a long study was minutes of silence.
                eprintln!("{label}: {}", finished_line(&result));
            }
            if !rec.status.is_ok() {
                outcome.stopped = Some(format!(
                    "{label}: {}",
                    rec.error.clone().unwrap_or_else(|| "ended early".into())
                ));
            }
        }
        Err(e) => {
            rec.status = Status::Failed;
            rec.error = Some(e.to_string());
            outcome.stopped = Some(format!("{label}: {e}"));
        }
    }
    Ok(())
}

/// The first Ctrl-C ends the study after the running test (the manifest
/// and the report are still written); a second one ends it at once.
/// SIGTERM (timeout, a service manager) ends the running test at once, and
/// the study with it; either way the lab is taken down. Set before the lab
/// comes up, so a signal during its setup takes it down too.
fn stop_on_signals() {
    signals::on_signals(&[libc::SIGINT], true);
    signals::on_terminate();
}

/// A point this host cannot run (on this kernel's sockets: a lab, or
/// loopback) is recorded as such, and the study goes on; true if so.
fn unavailable(
    rec: &mut RunRecord,
    spec: &crate::model::spec::TestSpec,
    connect: &ConnectArgs,
    label: &str,
    quiet: bool,
) -> bool {
    let local = connect.agent.is_none() && connect.hosts.is_none();
    let Some(why) = crate::study::available::missing_here(spec, local) else {
        return false;
    };
    if !quiet {
        eprintln!("{label}: not available here: {why}");
    }
    rec.status = Status::Unavailable;
    rec.error = Some(why);
    true
}

/// Where a point runs: `connect` with the point's own client and server
/// hosts (`client_hosts`, `server_hosts`) where it names them.
fn hosts_of(spec: &crate::model::spec::TestSpec, connect: &ConnectArgs) -> ConnectArgs {
    let mut c = connect.clone();
    if c.hosts.is_some() {
        c.clients = spec.client_hosts.clone().or(c.clients);
        c.servers = spec.server_hosts.clone().or(c.servers);
    }
    c
}

/// Says who applies a study's NIC settings where no lab does.
fn nic_note(m: &Manifest) {
    if m.points.iter().any(|p| !p.spec.nic.is_empty()) {
        eprintln!(
            "nic.* settings: applied by the agents (serve --allow-nic) on their data interfaces; this process's end is not changed"
        );
    }
}

/// Opens the fleet again when a point runs on other hosts (`hosts_of`)
/// than the open one, `picked`.
fn on_hosts(
    target: &mut target::Target,
    picked: &mut ConnectArgs,
    want: ConnectArgs,
    flows: bool,
) -> Result<()> {
    if want.clients == picked.clients && want.servers == picked.servers {
        return Ok(());
    }
    let old = std::mem::replace(target, target::open(&want, flows)?);
    old.close();
    *picked = want;
    Ok(())
}

/// Runs one point where it belongs: in the study's own lab (which first
/// follows the point's lab settings, then loads its firewall and sets its
/// NIC settings), in a lab given with --lab (its NIC settings), or on the
/// target alone.
fn run_point(
    lab: &mut Option<StudyLab>,
    target: &mut target::Target,
    connect: &ConnectArgs,
    flows: bool,
    p: Point,
    on_step: &mut dyn FnMut(&crate::model::search::SearchPoint),
) -> Result<crate::model::result::TestResult> {
    match lab {
        // A lab given with --lab NAME: its namespaces take the point's
        // NIC settings as a study's own lab does.
        // Its points run inside it and their results record it (the
        // emulator's counters, the lab's settings), as `run --lab` does.
        None if !p.spec.nic.is_empty() && target.lab.is_some() => {
            let st = target.lab.clone().expect("checked above");
            crate::study::labnic::run_with_nic(&st, p.spec, p.groups, |spec, groups| {
                crate::controller::search::run_or_search(
                    target,
                    Some(&st),
                    &p.with(spec, groups),
                    on_step,
                )
            })
        }
        None => {
            let st = target.lab.clone();
            crate::controller::search::run_or_search(target, st.as_ref(), &p, on_step)
        }
        Some(l) => {
            let addr = l.lab.state.server_addr.clone();
            let r = match l.follow(p.spec).map_err(Error::from) {
                // A tunnel came or went (lab.tunnel): the data addresses
                // changed, so the agent listens on the new one.
                Ok(()) if l.lab.state.server_addr != addr => {
                    target::open(connect, flows).map(|t| *target = t)
                }
                other => other,
            }
            .and_then(|_| l.load_firewall(p.spec).map_err(Error::from))
            .and_then(|_| {
                // The lab sets the point's NIC settings itself (labnic).
                let st = &l.lab.state;
                crate::study::labnic::run_with_nic(st, p.spec, p.groups, |spec, groups| {
                    let p = p.with(spec, groups);
                    crate::controller::search::run_or_search(target, Some(st), &p, on_step)
                })
            });
            // The point's firewall goes, whatever happened; the result
            // keeps what was loaded and what was left.
            l.end_firewall(p.spec, r)
        }
    }
}

/// Runs what is left of the study; the folder is complete or partial after.
pub fn run(study: &Study, opts: &RunOptions) -> Result<Outcome> {
    let mut connect = network(study, opts);
    elsewhere(study, &connect)?;
    let (dir, mut m) = prepare(study, opts, &connect)?;
    check_points(study, &m, &connect)?;
    let in_pass = |i: usize| {
        let Some(pass) = opts.crypto_pass else {
            return true;
        };
        m.point(&m.runs[i].point).is_none_or(|p| {
            let crypto =
                p.spec.tls.is_some() || crate::workload::facts(p.spec.workload).crypto_alone;
            (!crypto || p.spec.crypto_hw) == pass
        })
    };
    let todo: Vec<usize> = (0..m.runs.len())
        .filter(|&i| !(m.runs[i].status.is_ok() && dir.join(&m.runs[i].file).exists()))
        .filter(|&i| in_pass(i))
        .collect();
    let stored = |i: usize| m.runs[i].status.is_ok() && dir.join(&m.runs[i].file).exists();
    let skipped = (0..m.runs.len()).filter(|&i| stored(i)).count();
    if !opts.quiet {
        eprintln!(
            "study {}: {} points x {} = {} runs{} -> {}",
            study.name,
            m.points.len(),
            m.repeat,
            m.runs.len(),
            if skipped > 0 {
                format!(" ({skipped} already stored)")
            } else {
                String::new()
            },
            dir.display()
        );
    }
    let mut outcome = Outcome {
        dir: dir.clone(),
        ran: 0,
        skipped,
        stopped: None,
    };
    if todo.is_empty() {
        m.status = StudyStatus::Complete;
        folder::write_json(&folder::manifest_path(&dir), &m)?;
        return Ok(outcome);
    }
    stop_on_signals();
    let mut lab = match StudyLab::up(study, opts.quiet) {
        Ok(l) => l,
        Err(e) => {
            m.status = StudyStatus::Partial;
            let _ = folder::write_json(&folder::manifest_path(&dir), &m);
            return Err(e);
        }
    };
    if let Some(l) = &lab {
        connect.lab = Some(l.lab.state.name.clone());
    }
    let flows = m
        .points
        .iter()
        .any(|p| target::wants_agents(&connect, crate::workload::kind_of(p.spec.workload)));
    // Opened where the first point to run runs.
    let mut picked = match todo.first().and_then(|&i| m.point(&m.runs[i].point)) {
        Some(first) => hosts_of(&first.spec, &connect),
        None => connect.clone(),
    };
    let mut target = match target::open(&picked, flows) {
        Ok(t) => t,
        Err(e) => {
            m.status = StudyStatus::Partial;
            let _ = folder::write_json(&folder::manifest_path(&dir), &m);
            return Err(e);
        }
    };
    if lab.is_none() && target.lab.is_none() && !opts.quiet {
        nic_note(&m);
    }
    let total = m.runs.len();
    let interrupted = signals::raised();
    for (n, &i) in todo.iter().enumerate() {
        if interrupted.load(Ordering::SeqCst) {
            outcome.stopped = Some(signals::stopped_by().into());
            break;
        }
        let run = m.runs[i].clone();
        let point = m.point(&run.point).cloned().ok_or_else(|| {
            Error::Failed(format!("manifest names an unknown point {}", run.point))
        })?;
        let label = format!(
            "[{}/{}] {}{}",
            skipped + n + 1,
            total,
            point.label(),
            if m.repeat > 1 {
                format!(" #{}", run.repetition)
            } else {
                String::new()
            }
        );
        let p = Point {
            spec: &point.spec,
            confidence: point.confidence,
            command: m.command.clone(),
            label: label.clone(),
            quiet: opts.quiet,
            json_stream: false,
            // Studies put clear and TLS side by side as points of their
            // landscape; a clear twin per TLS point would double the time.
            tls_baseline: false,
            groups: &point.groups,
        };
        // A searched point's steps, each as it finishes: a search runs ten
        // or more windows, and the point's line comes only after the last.
        let quiet = opts.quiet;
        let mut on_step = |st: &crate::model::search::SearchPoint| {
            if !quiet {
                eprintln!("{label}: {}", st.line());
            }
        };
        if unavailable(&mut m.runs[i], &point.spec, &connect, &label, opts.quiet) {
            folder::write_json(&folder::manifest_path(&dir), &m)
                .map_err(|e| stopped_failure(&dir, &e.to_string()))?;
            continue;
        }
        let want = hosts_of(&point.spec, &connect);
        let r = on_hosts(&mut target, &mut picked, want, flows)
            .and_then(|_| run_point(&mut lab, &mut target, &picked, flows, p, &mut on_step));
        record(&mut m.runs[i], r, &dir, &label, opts, &mut outcome)?;
        m.updated_at = crate::units::rfc3339_now();
        folder::write_json(&folder::manifest_path(&dir), &m)
            .map_err(|e| stopped_failure(&dir, &e.to_string()))?;
        if outcome.stopped.is_some() {
            break;
        }
    }
    if interrupted.load(Ordering::SeqCst) && outcome.stopped.is_none() {
        outcome.stopped = Some(format!("{} after the last run", signals::stopped_by()));
    }
    target.close();
    m.status = if outcome.stopped.is_some() {
        StudyStatus::Partial
    } else {
        StudyStatus::Complete
    };
    folder::write_json(&folder::manifest_path(&dir), &m)?;
    Ok(outcome)
}

/// A finished point in a line: its main figure (mean over iterations) and
/// whether it is partial.
fn finished_line(r: &crate::model::result::TestResult) -> String {
    use crate::model::spec::MainMetric;
    use crate::units::{fmt_bps, fmt_rate};
    let metric = crate::workload::main_metric(&r.spec);
    let n = r.iterations.len().max(1) as f64;
    let v = r
        .iterations
        .iter()
        .map(|i| i.main_value(metric))
        .sum::<f64>()
        / n;
    if let Some(s) = &r.search {
        // A capacity search: its answer, not the figures of its last step.
        return s.sentence();
    }
    // A kind that says its own (rrul: its probes' wait; cipher: one
    // core's figures), or its main metric.
    let main = match crate::workload::kind_of(r.spec.workload).sentence(r) {
        Some(s) => s,
        None => match metric {
            MainMetric::Throughput => fmt_bps(v),
            MainMetric::TransactionRate => format!("{} transactions", fmt_rate(v)),
            MainMetric::PacketRate => format!("{} packets received", fmt_rate(v)),
        },
    };
    match r.iterations.iter().find_map(|i| i.error.as_deref()) {
        Some(e) if !r.summary.status.is_ok() => format!("{main} (partial: {e})"),
        _ => main,
    }
}

/// The error for a study that stopped early (partial), with a resume hint.
pub fn stopped_failure(dir: &Path, why: &str) -> Error {
    Error::Partial(format!(
        "study stopped early ({why}); finished points are kept in {} (continue with --resume {})",
        dir.display(),
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rrul_point_finishes_with_its_probes_wait_not_a_throughput() {
        let l = crate::workload::rrul::params::LatencyUnderLoad {
            idle_p99_us: Some(21_230.0),
            loaded_p99_us: Some(978_850.0),
            up_bps: 18.15e6,
            down_bps: 18.13e6,
            ..Default::default()
        };
        let mut r = crate::model::result::TestResult::default();
        r.spec.workload = crate::workload::rrul::NAME;
        r.summary
            .own
            .set(crate::workload::rrul::params::FIGURES, &l);
        assert_eq!(
            finished_line(&r),
            "probe p99 21.23 ms idle, 978.85 ms loaded; up 18.15 Mbit/s, down 18.13 Mbit/s"
        );
    }

    fn points(n: usize) -> Vec<sweep::Point> {
        (0..n)
            .map(|i| sweep::Point {
                groups: Vec::new(),
                index: i,
                id: format!("p{i}"),
                params: vec![],
                spec: Default::default(),
                confidence: Default::default(),
            })
            .collect()
    }

    #[test]
    fn repetitions_interleave_round_by_round() {
        let runs = plan(&points(3), 2, None);
        let order: Vec<(String, u32)> = runs
            .iter()
            .map(|r| (r.point.clone(), r.repetition))
            .collect();
        assert_eq!(order[0], ("p0".into(), 1));
        assert_eq!(order[3], ("p0".into(), 2));
        assert_eq!(runs[4].file, "points/p1.r2.json");
    }

    #[test]
    fn shuffle_permutes_within_each_round() {
        let runs = plan(&points(20), 2, Some(42));
        let first: Vec<&str> = runs[..20].iter().map(|r| r.point.as_str()).collect();
        assert!(runs[..20].iter().all(|r| r.repetition == 1));
        let mut sorted = first.clone();
        sorted.sort_by_key(|p| p[1..].parse::<usize>().unwrap());
        assert_ne!(first, sorted, "a seed must change the order");
        assert_eq!(sorted, (0..20).map(|i| format!("p{i}")).collect::<Vec<_>>());
        assert_eq!(
            plan(&points(20), 2, Some(42)),
            runs,
            "the seed reproduces the order"
        );
    }
}
