//! A kind that runs in its client's process (rpm), run by every client
//! agent of a fleet at once: each agent's clock is probed, one start
//! instant is scheduled in every agent's own clock (as a flow test's
//! window is), each is sent the spec (`RunHere`) and its whole result
//! comes back (`RanHere`). The kind merges them (`Kind::clients`).
//!
//! An agent's run ends at the spec's own bound; a client that fails or
//! never answers is named and the others' results are kept. Ctrl-C stops
//! the waiting here, keeping what came back: the agents' runs end at
//! their own bound.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Driver, Role};
use crate::control::clock::{self, ClockSync};
use crate::control::protocol::Msg;
use crate::controller::conn::clock_of;
use crate::controller::error::ControllerError;
use crate::model::result::TestResult;
use crate::model::spec::TestSpec;

/// One client agent's run.
pub struct HereRun {
    pub name: String,
    pub control: SocketAddr,
    pub clock: ClockSync,
    /// Its result, or why there is none.
    pub result: Result<TestResult, String>,
    /// How late its agent woke for the scheduled start, microseconds.
    pub start_late_us: f64,
}

/// How long a client's run may take past its start: the spec's duration
/// twice (a kind that measures each way in turn) and a minute for its
/// setup and its server's answers.
fn limit(spec: &TestSpec) -> Duration {
    Duration::from_secs_f64(spec.duration_s * 2.0 + spec.warmup_s + 60.0)
}

impl Driver {
    /// How many of its members are client agents.
    pub fn client_agents(&self) -> usize {
        self.indices(Role::Client)
            .into_iter()
            .filter(|&i| self.members[i].control().is_some())
            .count()
    }

    /// Runs `spec` on every client agent at once; Err before any started
    /// (an agent unreachable or refusing, named).
    pub fn run_clients_here(&mut self, spec: &TestSpec) -> Result<Vec<HereRun>, ControllerError> {
        let clients: Vec<usize> = self
            .indices(Role::Client)
            .into_iter()
            .filter(|&i| self.members[i].control().is_some())
            .collect();
        if clients.is_empty() {
            return Err(ControllerError::NoHosts);
        }
        let mut clocks = Vec::new();
        for &i in &clients {
            let c = self.members[i].agent_mut(spec).expect("a client agent");
            match c.probe() {
                Ok(p) => clocks.push(clock_of(&p)),
                Err(e) => return Err(self.failed(i, e)),
            }
        }
        let slowest = clocks.iter().map(|c| c.rtt_ns).max().unwrap_or(0);
        let margin = Duration::from_millis(100).max(Duration::from_nanos(slowest * 4));
        let start = clock::mono_ns() + margin.as_nanos() as u64;
        for (k, &i) in clients.iter().enumerate() {
            let m = Msg::RunHere {
                spec: Box::new(spec.clone()),
                at_ns: Some(clocks[k].to_agent(start)),
            };
            let c = self.members[i].agent_mut(spec).expect("a client agent");
            if let Err(e) = c.send(&m) {
                return Err(self.failed(i, e));
            }
        }
        let deadline = Instant::now() + margin + limit(spec);
        let mut runs = Vec::new();
        for (k, &i) in clients.iter().enumerate() {
            let (result, late_ns) = match self.await_result(i, spec, deadline) {
                Ok((r, late)) => (Ok(r), late),
                Err(e) => (Err(e), 0),
            };
            let m = &self.members[i];
            runs.push(HereRun {
                name: m.name.clone(),
                control: m.control().expect("a client agent"),
                clock: clocks[k],
                result,
                start_late_us: late_ns as f64 / 1e3,
            });
        }
        Ok(runs)
    }

    /// Member `i`'s `RanHere` (its result and how late it started), or why
    /// it did not come by `deadline`.
    fn await_result(
        &mut self,
        i: usize,
        spec: &TestSpec,
        deadline: Instant,
    ) -> Result<(TestResult, u64), String> {
        loop {
            if crate::engine::signals::test_interrupted() {
                return Err(format!(
                    "{}: its run ends at its own bound, not waited for",
                    crate::engine::signals::stopped_by()
                ));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "no result within {:.0} s",
                    limit(spec).as_secs_f64()
                ));
            }
            let c = self.members[i].agent_mut(spec).expect("a client agent");
            match c.expect("running the test", left.min(Duration::from_millis(200))) {
                Ok(Msg::RanHere { result, late_ns }) => return Ok((*result, late_ns)),
                Ok(other) => return Err(self.unexpected(i, "its result", &other).to_string()),
                Err(ControllerError::Timeout { .. }) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}
