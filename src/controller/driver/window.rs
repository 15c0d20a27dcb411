//! The window: every member's messages gathered until each is done, or one
//! fails, Ctrl-C, another group of a mix ends, `-d auto` settles or the
//! deadline passes; then the members are stopped once. Where this process
//! is a client, its side's own loop runs the window and asks this one
//! whether to stop (on the same thread as ever: the hot path is the
//! workers'); otherwise the window polls every 5 ms.

use std::time::{Duration, Instant};

use super::report::Report;
use super::{Driver, Live, PhaseHists, Role, Seat};
use crate::controller::auto::AutoWatch;
use crate::controller::together::Together;
use crate::engine::side::{Observer, Side, SideReport};
use crate::engine::signals;
use crate::measure::fold::{self, combine};
use crate::measure::histogram::{self, new_hist, Hist};
use crate::model::sample::IntervalSample;
use crate::model::spec::{Figures, TestSpec};

pub(super) struct Window<'a> {
    pub(super) d: &'a mut Driver,
    pub(super) spec: &'a TestSpec,
    pub(super) reports: Vec<Report>,
    /// The member that is this process, if it is a client.
    here: Option<usize>,
    next_live: usize,
    live: &'a mut dyn Live,
    together: Option<&'a Together>,
    /// A group with phases: this process's latency per phase.
    pub(super) phases: PhaseHists,
    figures: Figures,
    /// `--duration auto`: ends the window once the figure has settled.
    pub(super) auto: Option<AutoWatch>,
    /// A finite test's time limit (this process's side keeps it).
    deadline: Option<Instant>,
    stop_sent: bool,
}

impl<'a> Window<'a> {
    pub(super) fn new(
        d: &'a mut Driver,
        spec: &'a TestSpec,
        reports: Vec<Report>,
        live: &'a mut dyn Live,
        together: Option<&'a Together>,
        phases: &[std::ops::Range<usize>],
    ) -> Window<'a> {
        let here = d
            .members
            .iter()
            .position(|m| matches!(m.seat, Seat::Here) && m.role == Role::Client);
        Window {
            here,
            reports,
            next_live: 0,
            live,
            together,
            phases: PhaseHists::new(phases),
            figures: Figures {
                client_only: d.drives_foreign(),
                ..crate::workload::figures(spec)
            },
            auto: AutoWatch::new(spec),
            deadline: spec
                .is_finite()
                .then(|| Instant::now() + Duration::from_secs_f64(spec.duration_s)),
            stop_sent: false,
            d,
            spec,
        }
    }

    /// Runs the window: `side`'s own loop (this process is a client), else
    /// the polling one. Returns this process's side's report.
    pub(super) fn run(&mut self, side: Option<Side>, margin: Duration) -> Option<SideReport> {
        match side {
            Some(side) => Some(self.run_here(side)),
            None => {
                self.gather(margin);
                None
            }
        }
    }

    /// Takes every message that has arrived; a member whose connection is
    /// gone failed.
    fn poll(&mut self) {
        let spec = self.spec;
        let hosts = self.d.hosts;
        for (m, r) in self.d.members.iter().zip(self.reports.iter_mut()) {
            if r.dead || (hosts && r.failure.is_some()) {
                continue;
            }
            let Some(c) = m.agent(spec) else {
                continue;
            };
            loop {
                match c.poll() {
                    Ok(Some(msg)) => r.take(msg),
                    Ok(None) => break,
                    Err(()) => {
                        r.dead = true;
                        r.failure.get_or_insert(format!(
                            "{}: agent died mid-test (control connection lost after {} intervals)",
                            m.label(),
                            r.samples.len()
                        ));
                        break;
                    }
                }
            }
        }
        self.flush_live(false);
    }

    fn failed(&self) -> bool {
        self.reports.iter().any(|r| r.failure.is_some())
    }

    fn interrupted(&self) -> bool {
        signals::test_interrupted() || self.together.is_some_and(|t| t.stopped())
    }

    fn settled(&self) -> bool {
        self.auto.as_ref().is_some_and(|w| w.settled())
    }

    /// Every agent of `role` (that has not failed) ended its window.
    fn done(&self, role: Role) -> bool {
        self.d
            .members
            .iter()
            .zip(&self.reports)
            .filter(|(m, r)| m.role == role && matches!(m.seat, Seat::Agent(_)) && !r.dead)
            .all(|(_, r)| r.window_done)
    }

    /// Tells every agent not yet told to stop. The stop has two steps
    /// (`close_when_halted`): no end closes a socket before every end has
    /// stopped counting, so no close is an error of anyone's window.
    fn stop_all(&mut self) {
        if self.stop_sent {
            return;
        }
        let spec = self.spec;
        for (m, r) in self.d.members.iter_mut().zip(&mut self.reports) {
            if r.failure.is_none() && !r.told {
                if let Some(c) = m.agent_mut(spec) {
                    let _ = c.send(&crate::control::protocol::Msg::Stop);
                }
                r.told = true;
            }
        }
        self.stop_sent = true;
    }

    /// Whether `pick` holds of every agent's report, or the agent failed
    /// or is gone.
    fn every_agent(&self, pick: fn(&Report) -> bool) -> bool {
        self.d
            .members
            .iter()
            .zip(&self.reports)
            .filter(|(m, _)| matches!(m.seat, Seat::Agent(_)))
            .all(|(_, r)| pick(r) || r.failure.is_some() || r.dead)
    }

    /// Every agent told to stop has halted, or will not (it finished,
    /// failed or is gone).
    fn all_halted(&self) -> bool {
        self.every_agent(|r| r.halted || r.finished)
    }

    /// Tells every agent told to stop to close its sockets and send its
    /// final report (once each).
    fn close_all(&mut self) {
        let spec = self.spec;
        for (m, r) in self.d.members.iter_mut().zip(&mut self.reports) {
            if r.told && !r.closed && !r.finished && !r.dead {
                if let Some(c) = m.agent_mut(spec) {
                    let _ = c.send(&crate::control::protocol::Msg::Close);
                }
                r.closed = true;
            }
        }
    }

    /// Once every agent has halted, tells them to close.
    fn close_when_halted(&mut self) {
        if self.stop_sent && self.all_halted() {
            self.close_all();
        }
    }

    /// Waits up to `limit` for every agent told to stop to halt, then
    /// tells them to close (past the limit, one that has not halted too:
    /// it would close on its own after its own wait).
    fn await_halted(&mut self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.all_halted() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
            self.poll();
        }
        self.close_all();
    }

    /// The polling window (every client is an agent).
    fn gather(&mut self, margin: Duration) {
        let spec = self.spec;
        let deadline = Instant::now()
            + margin
            + Duration::from_secs_f64(spec.warmup_s + spec.duration_s + 30.0);
        loop {
            let before = self.reports.iter().map(|r| r.samples.len()).sum::<usize>();
            self.poll();
            let idle = before == self.reports.iter().map(|r| r.samples.len()).sum::<usize>();
            let clients_done = self.done(Role::Client);
            let servers_done = self.done(Role::Server);
            if self.failed()
                || self.interrupted()
                || self.settled()
                || (clients_done && (spec.is_finite() || servers_done))
            {
                self.stop_all();
            }
            self.close_when_halted();
            if self.stop_sent && self.all_final() {
                break;
            }
            if Instant::now() >= deadline {
                self.stop_all();
                // A last grace period for the final reports.
                self.await_halted(Duration::from_secs(5));
                self.await_final(Duration::from_secs(15));
                for (m, r) in self.d.members.iter().zip(self.reports.iter_mut()) {
                    if !r.finished && r.failure.is_none() {
                        r.failure =
                            Some(format!("{}: did not finish its window in time", m.label()));
                    }
                }
                break;
            }
            if idle {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Every agent sent its final report (or failed).
    fn all_final(&self) -> bool {
        self.every_agent(|r| r.finished)
    }

    /// Waits up to `limit` for the agents' final reports (their flows,
    /// placement), once told to stop.
    fn await_final(&mut self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.all_final() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
            self.poll();
        }
    }

    /// This process's side runs the window; the agents are told to stop
    /// in the order that keeps every exchange whole.
    fn run_here(&mut self, mut side: Side) -> SideReport {
        side.collect(self);
        let alive = !self.reports.iter().any(|r| r.dead);
        // Finite tests end when the client is done: tell the agents now.
        // Likewise a test a Ctrl-C ended (the client's workers have
        // stopped; the agents' stop before they would close their end
        // mid-window on them) and a settled auto window.
        if (self.spec.is_finite() || signals::test_interrupted() || self.settled()) && alive {
            self.stop_all();
        }
        let until = Instant::now() + Duration::from_secs_f64(10.0 + self.spec.interval_s * 2.0);
        while !self.done(Role::Server)
            && !self.failed()
            && !signals::test_interrupted()
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(5));
            self.poll();
        }
        // This side stops counting and holds its sockets; so does every
        // agent; then every end closes. A close now reaches no peer still
        // in its window, whichever end closes first.
        side.halt(self);
        if !self.reports.iter().any(|r| r.dead) {
            self.stop_all();
        }
        self.await_halted(Duration::from_secs(15));
        let client = side.finish(self);
        self.await_final(Duration::from_secs(15));
        client
    }

    /// Interval `k` of `role`'s members: one member's as it is where the
    /// fleet is of one, else their sum (None: none has it).
    fn merged(&self, role: Role, k: usize) -> Option<IntervalSample> {
        let parts: Vec<_> = self
            .d
            .members
            .iter()
            .zip(&self.reports)
            .filter(|(m, _)| m.role == role)
            .filter_map(|(_, r)| r.samples.get(&k))
            .map(|(s, l, c)| (s, l.as_ref(), c.as_ref()))
            .collect();
        match parts.len() {
            0 => None,
            1 if !self.d.hosts => Some(parts[0].0.clone()),
            _ => Some(fold::merge_samples(k, &parts)),
        }
    }

    /// Shows every interval all members have reported, once; at the end
    /// (`all`) a fleet of one shows its client's last ones alone. With
    /// `--duration auto`, the watch reads each as it is shown.
    pub(super) fn flush_live(&mut self, all: bool) {
        loop {
            let k = self.next_live;
            let everyone = self.reports.iter().all(|r| r.samples.contains_key(&k));
            let alone = !self.d.hosts
                && (all || self.reports.iter().any(|r| r.dead))
                && self
                    .d
                    .members
                    .iter()
                    .zip(&self.reports)
                    .all(|(m, r)| m.role == Role::Server || r.samples.contains_key(&k));
            if !(everyone || alone) {
                break;
            }
            let Some(c) = self.merged(Role::Client, k) else {
                break;
            };
            let a = self.merged(Role::Server, k);
            let joined = combine(&c, a.as_ref(), self.figures);
            if self.here.is_none() {
                // The clients' latency over this interval, merged: the
                // kept intervals' latency once the warm-up is cut.
                let (l, lc) = self.client_hists(k);
                if let Some(w) = &mut self.auto {
                    w.hists(k, &l, &lc);
                }
            }
            if let Some(w) = &mut self.auto {
                w.interval(&joined);
            }
            self.live.interval(&joined);
            self.next_live += 1;
        }
    }

    /// The agents' clients' latency histograms of interval `k`, merged.
    fn client_hists(&self, k: usize) -> (Hist, Hist) {
        let (mut l, mut lc) = (new_hist(), new_hist());
        for (_, r) in self
            .d
            .members
            .iter()
            .zip(&self.reports)
            .filter(|(m, _)| m.role == Role::Client)
        {
            if let Some((_, Some(h), Some(hc))) = r.samples.get(&k) {
                histogram::merge(&mut l, h);
                histogram::merge(&mut lc, hc);
            }
        }
        (l, lc)
    }
}

impl Observer for Window<'_> {
    fn interval(&mut self, sample: &IntervalSample) {
        if let Some(i) = self.here {
            self.reports[i]
                .samples
                .insert(sample.index, (sample.clone(), None, None));
        }
        self.flush_live(false);
    }

    fn interval_hists(&mut self, index: usize, latency: &Hist, corrected: &Hist) {
        self.phases.add(index, latency);
        if let Some(w) = &mut self.auto {
            w.hists(index, latency, corrected);
        }
    }

    fn should_stop(&mut self) -> bool {
        self.poll();
        self.failed()
            || self.deadline.is_some_and(|d| Instant::now() >= d)
            || self.interrupted()
            || self.settled()
    }
}
