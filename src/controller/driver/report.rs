//! What one member of a fleet reports over an iteration, as its
//! messages arrive (`window` feeds it; `fold` reads it).

use std::collections::BTreeMap;

use crate::control::clock::ClockSync;
use crate::control::protocol::{ErrorCode, HistText, Msg};
use crate::measure::histogram::{self, Hist, WaitHists};
use crate::model::flow::FlowReport;
use crate::model::sample::{CpuWindow, IntervalSample, WorkerPlacement};

/// What one member reported during an iteration.
#[derive(Default)]
pub(super) struct Report {
    pub(super) clock: ClockSync,
    pub(super) t0_ns: Option<u64>,
    pub(super) late_ns: u64,
    pub(super) samples: BTreeMap<usize, (IntervalSample, Option<Hist>, Option<Hist>)>,
    pub(super) window_done: bool,
    pub(super) window_cpu: Option<CpuWindow>,
    pub(super) kernel_udp: Option<crate::model::sample::KernelUdp>,
    pub(super) service: Option<crate::model::sample::ServiceWindow>,
    pub(super) finished: bool,
    pub(super) flows: Vec<FlowReport>,
    pub(super) placement: Vec<WorkerPlacement>,
    pub(super) errors: Vec<String>,
    pub(super) hist: Option<(Hist, Hist)>,
    /// What this member's own scheduling added (open loops).
    pub(super) waits: Option<WaitHists>,
    pub(super) complete: bool,
    /// Why this member ended the iteration early.
    pub(super) failure: Option<String>,
    /// What the agent said went wrong (its last error message).
    pub(super) said: Option<String>,
    /// Its control connection is gone.
    pub(super) dead: bool,
    /// Its reader found the channel broken (the reason, told back).
    pub(super) broken: Option<String>,
    /// It was told to stop.
    pub(super) told: bool,
    /// It stopped counting and holds its sockets open (after `told`).
    pub(super) halted: bool,
    /// It was told to close.
    pub(super) closed: bool,
}

fn decode(h: &Option<HistText>) -> (Option<Hist>, Option<Hist>) {
    match h {
        Some(t) => (
            histogram::decode(&t.latency).ok(),
            histogram::decode(&t.corrected).ok(),
        ),
        None => (None, None),
    }
}

impl Report {
    /// A member that reports nothing (another tool's server): its window
    /// is the clients', and it is never waited for.
    pub(super) fn unheard() -> Report {
        Report {
            window_done: true,
            finished: true,
            complete: true,
            ..Report::default()
        }
    }

    pub(super) fn take(&mut self, m: Msg) {
        match m {
            Msg::Started { t0_ns, late_ns } => {
                self.t0_ns = Some(t0_ns);
                self.late_ns = late_ns;
            }
            Msg::Interval { sample, hist } => {
                let (l, c) = decode(&hist);
                self.samples.insert(sample.index, (*sample, l, c));
            }
            Msg::Halted => self.halted = true,
            Msg::WindowDone {
                cpu,
                kernel_udp,
                service,
                ..
            } => {
                self.window_done = true;
                self.window_cpu = cpu;
                self.kernel_udp = kernel_udp;
                self.service = service;
            }
            Msg::Final {
                flows,
                placement,
                errors,
                hist,
                complete,
                waits,
                ..
            } => {
                self.flows = flows;
                self.placement = placement;
                self.errors = errors;
                if let (Some(l), Some(c)) = decode(&hist) {
                    self.hist = Some((l, c));
                }
                self.waits = waits.as_ref().and_then(|w| WaitHists::decode(w).ok());
                self.complete = complete;
                self.finished = true;
            }
            Msg::Error { code, message } => {
                if code == ErrorCode::ChannelBroken {
                    self.broken = Some(message.clone());
                }
                self.said = Some(message.clone());
                self.failure.get_or_insert(message);
            }
            _ => {}
        }
    }
}
