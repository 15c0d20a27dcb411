//! QUIC beside TLS over TCP (quinn-proto): the workloads of this folder run
//! their flows as QUIC connections over the engine's UDP flows (one
//! connection per flow, connected UDP sockets made by control's hello
//! exchange), so they get the engine's workers, CPU accounting, window and
//! reports as every other workload does. `--transport quic` picks them for
//! the TCP workload of the same name (`quic-stream` for `stream`).
//!
//! Each QUIC result has a twin: the same test as TLS over TCP with the
//! same TLS settings, run right after it (`Plugin::twin`), so the report
//! says what QUIC costs per byte on each end against TLS over TCP measured
//! side by side.

use std::sync::Arc;

use super::kind::KindFacts;
use super::{Conns, Pattern, Plugin, RateColumn, WorkloadError};
use crate::engine::flow::Flow;
use crate::engine::tls::Role;
use crate::model::error::Invalid;
use crate::model::flow::{FlowReport, QuicFlowStats, TlsInfo};
use crate::model::result::Iteration;
use crate::model::spec::{self, Direction, Figures, IoMode, MainMetric, TestSpec, TlsBackend};
use crate::units::{fmt_bytes, fmt_us};

pub mod config;
pub mod crr;
pub mod flow;
pub mod linger;
pub mod link;
pub mod perf_server;
pub mod request;
pub mod respond;
pub mod rr;
pub mod stream;

use flow::{QuicFlow, Streams};
use link::Link;
use stream::Bulk;

/// `stream` over QUIC.
pub struct QuicStream;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("quic-stream");

/// UDP socket buffers of a QUIC flow where the test sets none: 4 MiB (the
/// kernel caps them at net.core.[rw]mem_max). The default 208 KiB drops
/// datagrams at tens of Gbit/s on loopback before QUIC's flow control
/// would hold the sender back.
const SOCKET_BUFFER: usize = 4 << 20;

/// What QUIC cannot carry of a test's settings, in one line.
pub fn rules(spec: &TestSpec) -> Result<(), Invalid> {
    if let Some(t) = &spec.tls {
        if t.backend != TlsBackend::Rustls {
            return Err("QUIC runs on rustls: drop --backend openssl".into());
        }
        if t.version.as_deref().is_some_and(|v| v.trim() == "1.2") {
            return Err("QUIC carries TLS 1.3 only: drop --tls-version 1.2".into());
        }
        if t.etm.is_some() {
            return Err("--etm is a TLS 1.2 CBC setting: QUIC has none".into());
        }
    }
    if config::controller(spec.cc.as_deref()).is_none() {
        return Err(format!(
            "--cc {}: QUIC (quinn) offers {}",
            spec.cc.as_deref().unwrap_or(""),
            config::CONTROLLERS.join(", ")
        )
        .into());
    }
    if spec.io == IoMode::Threads {
        return Err(
            "--io threads blocks on a TCP socket: QUIC runs on the event loop (--io epoll)".into(),
        );
    }
    Ok(())
}

impl Plugin for QuicStream {
    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Bulk transfer over QUIC (quinn-proto; the perf protocol of quinn's `perf`), with its TLS over TCP twin"
    }

    fn facts(&self) -> KindFacts {
        KindFacts {
            bulk: true,
            // --bytes, --per, --reply: finite transfers, each a request
            // of the perf protocol (the upload, or the size of the download
            // asked) on a stream of its own, as stream's are rr
            // transactions over TCP.
            transfer: true,
            tls_always: true,
            worker_per_flow: true,
            // QUIC's datagrams: no read size (quinn hands over what it
            // has decrypted).
            datagrams: true,
            ..KindFacts::NONE
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), Invalid> {
        rules(spec)
    }

    fn pattern(&self) -> Pattern {
        Pattern::Datagram
    }

    /// A finite transfer has a latency (its duration); a continuous
    /// stream none.
    fn figures(&self, spec: &TestSpec) -> Figures {
        Figures {
            latency: spec.bytes.is_some(),
            ..Figures::default()
        }
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let cc = config::controller(spec.cc.as_deref()).unwrap_or("?");
        let dir = super::direction_words(spec.direction);
        match spec.bytes {
            Some(b) => format!(
                "stream over QUIC {dir}, {} per {}, reply {}, a stream per transfer, QUIC congestion control {cc}",
                fmt_bytes(b),
                format!("{:?}", spec.per).to_lowercase(),
                fmt_bytes(spec.reply),
            ),
            None => format!(
                "stream over QUIC {dir}, {} writes, QUIC congestion control {cc}",
                fmt_bytes(spec.message as u64),
            ),
        }
    }

    fn rate_column(&self, spec: &TestSpec) -> RateColumn {
        match spec.bytes {
            Some(_) => RateColumn::Transactions,
            None => RateColumn::None,
        }
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        quic_lines(it)
    }

    fn main_metric(&self, spec: &TestSpec) -> MainMetric {
        match (spec.bytes, spec.per) {
            (Some(_), spec::Per::Transaction) => MainMetric::TransactionRate,
            _ => MainMetric::Throughput,
        }
    }

    /// Its twin is TLS over TCP, not clear text: `stream` with the same
    /// TLS settings.
    fn clear_twin(&self) -> spec::Workload {
        super::stream::NAME
    }

    fn twin_keeps_tls(&self) -> bool {
        true
    }

    fn over(&self) -> Option<(spec::Transport, spec::Workload)> {
        Some((spec::Transport::Quic, super::stream::NAME))
    }

    fn speaks_perf(&self) -> bool {
        true
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        if let Some((request, response)) = super::stream::transaction(spec) {
            let count = (spec.per == spec::Per::Flow).then_some(1);
            return client_flows(spec, conns, |_| {
                rr::Requests::transfers(request, response, count)
            });
        }
        let (upload, download) = ends(spec.direction);
        let ends = stream::Ends {
            client: true,
            upload,
            download,
        };
        client_flows(spec, conns, |_| Bulk::new(ends, spec))
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        if let Some((_, response)) = super::stream::transaction(spec) {
            return agent_flows(spec, conns, || rr::Requests::answers(response));
        }
        let (upload, download) = ends(spec.direction);
        let ends = stream::Ends {
            client: false,
            upload,
            download,
        };
        agent_flows(spec, conns, || Bulk::new(ends, spec))
    }
}

/// A client's flows of a QUIC kind: a connection on each of control's
/// UDP flows (the test's TLS, ALPN perf), its streams' work from `streams`.
fn client_flows<S: Streams + 'static>(
    spec: &TestSpec,
    conns: Conns,
    streams: impl Fn(Option<&Arc<config::Tickets>>) -> S,
) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    let role = conns.tls.as_deref().ok_or(WorkloadError::NoServerCert)?;
    let c = config::client(spec, role).map_err(quic_error)?;
    let tickets = c.tickets.clone();
    let streams = || streams(tickets.as_ref());
    quic_flows(spec, conns, c.info, streams, |s, cookie| {
        Link::client(s, cookie, c.config.clone(), &c.server_name)
    })
}

/// An agent's flows of a QUIC kind: each accepts the connection of its
/// flow's client.
fn agent_flows<S: Streams + 'static>(
    spec: &TestSpec,
    conns: Conns,
    streams: impl Fn() -> S,
) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    let role: &Role = conns.tls.as_deref().ok_or(WorkloadError::NoServerCert)?;
    let (cfg, info) = config::server(spec, role).map_err(quic_error)?;
    quic_flows(spec, conns, info, streams, |s, cookie| {
        Link::server(s, cookie, Arc::clone(&cfg))
    })
}

fn quic_flows<S: Streams + 'static>(
    spec: &TestSpec,
    conns: Conns,
    info: TlsInfo,
    streams: impl Fn() -> S,
    link: impl Fn(std::net::UdpSocket, u64) -> std::io::Result<Link>,
) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    let cc = config::controller(spec.cc.as_deref()).unwrap_or("cubic");
    conns
        .udp
        .into_iter()
        .map(|(id, s)| {
            buffers(&s, spec)?;
            let l = link(s, conns.cookie)?;
            let f = QuicFlow::new(id, l, info.clone(), cc, streams());
            Ok(Box::new(f) as Box<dyn Flow>)
        })
        .collect::<std::io::Result<_>>()
        .map_err(WorkloadError::Quic)
}

/// Each end's QUIC connections, a line each.
fn quic_lines(it: &Iteration) -> Vec<(&'static str, String)> {
    [
        ("quic client", &it.flows.client),
        ("quic agent", &it.flows.agent),
    ]
    .into_iter()
    .filter_map(|(label, flows)| Some((label, quic_line(flows)?)))
    .collect()
}

/// One end's QUIC connections in a line: the path as QUIC saw it (its
/// loss is what it retransmitted, the receivers' socket drops included),
/// and how many datagrams each system call moved.
fn quic_line(flows: &[FlowReport]) -> Option<String> {
    let q: Vec<&QuicFlowStats> = flows.iter().filter_map(|f| f.quic.as_ref()).collect();
    let first = q.first()?;
    let sum = |f: fn(&QuicFlowStats) -> u64| q.iter().map(|s| f(s)).sum::<u64>();
    let (sent, lost) = (sum(|s| s.packets_sent), sum(|s| s.packets_lost));
    let per = |n: u64, calls: u64| n as f64 / calls.max(1) as f64;
    let rtt = q.iter().map(|s| s.rtt_us).sum::<f64>() / q.len() as f64;
    // A flow that made one connection after another says how many.
    let conns: u64 = q.iter().map(|s| s.connections.max(1)).sum();
    Some(format!(
        "{}, {} ({} connection{}): rtt {} (min {}), {} packets sent, {} lost ({:.2}%) in {} congestion events, MTU {}; {:.1} datagrams per send, {:.1} per receive; flow control held a sender {} times",
        first.implementation,
        first.congestion_control,
        conns,
        if conns == 1 { "" } else { "s" },
        fmt_us(rtt),
        // An end that only acknowledges has no round trip of its own
        // sampled: its minimum reads 0.
        q.iter()
            .map(|s| s.min_rtt_us)
            .filter(|m| *m > 0.0)
            .reduce(f64::min)
            .map_or("-".into(), fmt_us),
        sent,
        lost,
        100.0 * lost as f64 / sent.max(1) as f64,
        sum(|s| s.congestion_events),
        first.mtu,
        per(sum(|s| s.datagrams_tx), sum(|s| s.send_calls)),
        per(sum(|s| s.datagrams_rx), sum(|s| s.recv_calls)),
        sum(|s| s.data_blocked),
    ))
}

/// (the client uploads, the client downloads) for a direction.
fn ends(d: Direction) -> (bool, bool) {
    (d != Direction::Rx, d != Direction::Tx)
}

/// The flow socket's buffers: the test's, else `SOCKET_BUFFER`.
fn buffers(s: &std::net::UdpSocket, spec: &TestSpec) -> std::io::Result<()> {
    let r = socket2::SockRef::from(s);
    if spec.sndbuf.is_none() {
        r.set_send_buffer_size(SOCKET_BUFFER)?;
    }
    if spec.rcvbuf.is_none() {
        r.set_recv_buffer_size(SOCKET_BUFFER)?;
    }
    Ok(())
}

fn quic_error(e: config::ConfigError) -> WorkloadError {
    WorkloadError::Quic(std::io::Error::other(e.to_string()))
}
