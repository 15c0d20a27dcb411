//! A test's connections, made before its window opens. Each workload names
//! its connection pattern; how a pattern's connections are made is here,
//! once, for the controller, the agent and the fleet.
//!
//! The server half listens (`listen`: what `Ready` tells the controller),
//! then takes its flows in (`Server::accept`: what `FlowsReady` counts);
//! the client half connects to one server (`connect`), to the addresses
//! `Routes` picks. The control messages around them are the caller's.
//! memcached is the one service (`Pattern::Service`): its start, prefill
//! and counters are `workload::memcache`'s.

use mio::net::TcpListener;
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::{memcache, Conns, WorkloadError};
use crate::engine::setup::{accept_flows, connect_flows};
use crate::engine::side::ServiceProbe;
use crate::engine::{sockopt, tls, udp, EngineError};
use crate::kv::service::Service;
use crate::model::sample::{KvPrefill, PeerClock};
use crate::model::spec::TestSpec;

/// How a workload's connections are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// TCP connections that last the whole test (stream, rr): opened, and
    /// their TLS done, before the window.
    Persistent,
    /// A TCP connection per transaction (crr, tls-handshake): the agent
    /// listens on one SO_REUSEPORT socket per worker, clients connect
    /// during the window.
    PerTransaction,
    /// Connected UDP sockets, one per flow (udp-stream, udp-rr).
    Datagram,
    /// A server the agent starts (or one that runs already), which the
    /// clients load directly (memcache).
    Service,
}

impl Pattern {
    /// Whether the controller waits for the agent's `FlowsReady` (every
    /// flow arrived) before it starts the window.
    pub fn waits_for_flows(self) -> bool {
        matches!(self, Pattern::Persistent | Pattern::Datagram)
    }

    /// Whether a side reads the kernel's UDP counters over its window.
    pub fn kernel_udp(self) -> bool {
        self == Pattern::Datagram
    }
}

impl Pattern {
    /// What the agent does while the controller waits for `FlowsReady`
    /// (for messages).
    pub fn arrival(self) -> &'static str {
        match self {
            Pattern::Datagram => "receiving the UDP flows",
            _ => "accepting the flows",
        }
    }
}

/// How long a side waits for `n` flows to connect (or arrive), and their
/// TLS handshakes.
pub fn setup_timeout(n: usize) -> Duration {
    Duration::from_secs(30 + n as u64 / 100)
}

/// Why the server half could not set up: the agent answers a refusal and
/// a failure with different codes.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The test asks for what this side cannot give (its TLS settings).
    #[error(transparent)]
    Refused(EngineError),
    /// Setting up failed (a listener, a service that did not start).
    #[error(transparent)]
    Failed(WorkloadError),
}

/// What the controller is told once the server half listens (`Ready`).
#[derive(Clone, Debug, Default)]
pub struct Listening {
    /// The data listeners, one per address asked for (a service: the one
    /// it listens on, none with `--target`).
    pub data: Vec<SocketAddr>,
    pub cookie: u64,
    /// With TLS: the certificate clients trust for this test, and what
    /// results call it.
    pub tls_cert: Option<Vec<u8>>,
    pub tls_cert_label: Option<String>,
}

/// The server half between `Ready` and the arrival of its flows.
pub struct Server {
    pattern: Pattern,
    pub listening: Listening,
    conns: Conns,
    /// Persistent: the listeners its flows arrive on (closed once they did).
    tcp: Vec<TcpListener>,
    /// Datagram: the sockets its flows say hello to.
    udp: Vec<UdpSocket>,
    service: Option<Service>,
}

/// What the server half ends with.
pub struct Accepted {
    pub conns: Conns,
    /// When the controller waits for `FlowsReady`: the connections turned
    /// away (a wrong cookie, an unexpected or repeated flow id).
    pub rejected: Option<u32>,
    /// A service this side started (stopped when dropped).
    pub service: Option<Service>,
}

/// The server half, first step: what `pattern` listens with on `addrs`
/// (one listener per address; per transaction, one per agent worker and
/// address), or the service started on the first address. `port`: the
/// data port (`serve --data-port`, which a Service or a NAT forwards), 0
/// for a free one.
pub fn listen(
    spec: &TestSpec,
    pattern: Pattern,
    addrs: &[IpAddr],
    port: u16,
    cookie: u64,
) -> Result<Server, SetupError> {
    use SetupError::Failed;
    // TLS: the server config and the certificate the controller will trust.
    let (role, tls_cert, tls_cert_label) = match &spec.tls {
        None => (None, None, None),
        Some(t) => {
            let (role, cert, label) = tls::Role::server(t).map_err(SetupError::Refused)?;
            (Some(Arc::new(role)), Some(cert), Some(label))
        }
    };
    let mut s = Server {
        pattern,
        listening: Listening {
            data: Vec::new(),
            cookie,
            tls_cert,
            tls_cert_label,
        },
        conns: Conns::new(cookie, role),
        tcp: Vec::new(),
        udp: Vec::new(),
        service: None,
    };
    match pattern {
        Pattern::Persistent | Pattern::PerTransaction => {
            let reuse_port = pattern == Pattern::PerTransaction;
            for &ip in addrs {
                let bind = SocketAddr::new(ip, port);
                let first = sockopt::listener(&bind, spec, reuse_port, super::receives(spec, true))
                    .map_err(|source| Failed(WorkloadError::DataListener { bind, source }))?;
                let addr = first
                    .local_addr()
                    .map_err(|e| Failed(WorkloadError::LocalAddr(e)))?
                    .as_socket()
                    .ok_or(Failed(WorkloadError::NotIp))?;
                s.listening.data.push(addr);
                let first = TcpListener::from_std(first.into());
                if !reuse_port {
                    s.tcp.push(first);
                    continue;
                }
                s.conns.listeners.push(first);
                // One listener per worker (SO_REUSEPORT) and address.
                for _ in 1..spec.agent_workers {
                    let more = sockopt::listener(&addr, spec, true, super::receives(spec, true))
                        .map_err(|e| Failed(WorkloadError::MoreListeners(e)))?;
                    s.conns.listeners.push(TcpListener::from_std(more.into()));
                }
            }
        }
        Pattern::Datagram => {
            s.udp = udp::listeners(addrs, port, spec).map_err(|e| Failed(e.into()))?;
            s.listening.data = s
                .udp
                .iter()
                .map(|l| l.local_addr())
                .collect::<Result<_, _>>()
                .map_err(|e| Failed(WorkloadError::LocalAddr(e)))?;
        }
        Pattern::Service => {
            let ip = *addrs
                .first()
                .ok_or(Failed(WorkloadError::NoServiceAddress))?;
            s.service = memcache::serve(spec, ip).map_err(Failed)?;
            s.listening.data = s.service.iter().map(|svc| svc.addr).collect();
        }
    }
    Ok(s)
}

impl Server {
    /// The server half, second step, once the controller knows where to
    /// connect: the flows `expect` names (empty: all of them) accepted,
    /// and their TLS done, for the patterns whose flows arrive before the
    /// window. `cancel`: the controller went away.
    pub fn accept(
        self,
        spec: &TestSpec,
        expect: Vec<u32>,
        cancel: &AtomicBool,
    ) -> Result<Accepted, WorkloadError> {
        let Server {
            pattern,
            mut conns,
            mut tcp,
            udp,
            service,
            ..
        } = self;
        let expect: BTreeSet<u32> = if expect.is_empty() {
            (0..spec.flows).collect()
        } else {
            expect.into_iter().collect()
        };
        let timeout = setup_timeout(expect.len());
        let rejected = match pattern {
            Pattern::Persistent => {
                let (flows, rejected) = accept_flows(
                    &mut tcp,
                    spec,
                    conns.cookie,
                    &expect,
                    timeout,
                    cancel,
                    super::receives(spec, true),
                )?;
                conns.established = tls::handshake_all(flows, conns.tls.as_deref(), timeout)?;
                Some(rejected)
            }
            Pattern::Datagram => {
                let (flows, rejected) =
                    udp::accept_flows(&udp, spec, conns.cookie, &expect, timeout, cancel)?;
                conns.udp = flows;
                Some(rejected)
            }
            Pattern::PerTransaction | Pattern::Service => None,
        };
        Ok(Accepted {
            conns,
            rejected,
            service,
        })
    }
}

/// One client's flows to one server: the controller's to its agent, or a
/// client agent's to each server agent of a fleet.
#[derive(Clone, Debug, Default)]
pub struct Group {
    /// The server's test cookie (its flows announce themselves with it).
    pub cookie: u64,
    /// Flow id and the data address it connects to.
    pub targets: Vec<(u32, SocketAddr)>,
    /// With TLS: the server's certificate and its label.
    pub tls_cert: Option<Vec<u8>>,
    pub tls_cert_label: Option<String>,
    /// A service: this client loads it before the window (one client per
    /// server does).
    pub prefill: bool,
    /// The server's clock against this client's, where the controller
    /// knows it (udp-rr's one-way delays); None: unknown.
    pub clock: Option<PeerClock>,
    /// The server is another tool's (`--perf-server`): its flows say no
    /// hello, and its certificate is not known in advance.
    pub foreign: bool,
}

/// A client's connections to one server.
pub struct Connected {
    pub conns: Conns,
    /// A service: the prefill this client did.
    pub prefill: Option<KvPrefill>,
}

/// The client half: the persistent flows opened (and their TLS done), the
/// UDP flows answered, the targets of per-transaction flows, or the
/// connections to a service (loaded first when asked).
pub fn connect(
    spec: &TestSpec,
    pattern: Pattern,
    group: Group,
) -> Result<Connected, WorkloadError> {
    let role = match &spec.tls {
        None => None,
        Some(t) if group.foreign => Some(Arc::new(tls::Role::foreign_client(t)?)),
        Some(t) => {
            let cert = group.tls_cert.ok_or(WorkloadError::NoServerCert)?;
            let label = group
                .tls_cert_label
                .unwrap_or_else(|| t.cert.name().to_string());
            Some(Arc::new(tls::Role::client(t, &cert, &label)?))
        }
    };
    let mut conns = Conns::new(group.cookie, role);
    conns.peer_clock = group.clock;
    let timeout = setup_timeout(group.targets.len());
    match pattern {
        Pattern::Persistent => {
            let flows = connect_flows(
                &group.targets,
                spec,
                group.cookie,
                timeout,
                super::receives(spec, false),
            )?;
            conns.established = tls::handshake_all(flows, conns.tls.as_deref(), timeout)?;
        }
        Pattern::PerTransaction => conns.connect_to = group.targets,
        // Another tool's server: the sockets connected, nothing said.
        Pattern::Datagram if group.foreign => conns.udp = udp::connect_plain(&group.targets, spec)?,
        Pattern::Datagram => {
            conns.udp = udp::connect_flows(&group.targets, spec, group.cookie, timeout)?
        }
        Pattern::Service => {
            // The key space may be set first: half a minute more.
            let timeout = timeout + Duration::from_secs(30);
            let (conns, prefill) = memcache::open(&group.targets, spec, timeout, group.prefill)?;
            return Ok(Connected { conns, prefill });
        }
    }
    Ok(Connected {
        conns,
        prefill: None,
    })
}

/// Where the clients' flows connect (the controller's to its agent, every
/// client's in a fleet): a server's data address, or a service's.
pub struct Routes {
    pattern: Pattern,
    /// A service that runs already (`--target`), resolved.
    target: Option<SocketAddr>,
}

impl Routes {
    pub fn new(spec: &TestSpec, pattern: Pattern) -> Result<Routes, WorkloadError> {
        let target = match pattern {
            Pattern::Service => memcache::target(spec)?,
            _ => None,
        };
        Ok(Routes { pattern, target })
    }

    /// Where a flow to the server address `ip` connects, given that
    /// server's data listeners: the listener on `ip`; a service: the one
    /// service of that server (or `--target`).
    pub fn to(&self, data: &[SocketAddr], ip: IpAddr) -> SocketAddr {
        if let Some(t) = self.target {
            return t;
        }
        let at = match self.pattern {
            Pattern::Service => data.first(),
            _ => data.iter().find(|a| a.ip() == ip),
        };
        at.copied().unwrap_or(SocketAddr::new(ip, 0))
    }

    /// Whether a client loads a service before the window: the client
    /// that holds a server's lowest flow does, and with `--target` (one
    /// service for all) only the one of the first server.
    pub fn prefill(&self, holds_first_flow: bool, first_server: bool) -> bool {
        self.pattern == Pattern::Service
            && holds_first_flow
            && (self.target.is_none() || first_server)
    }

    /// A service nobody here started (`--target`): what the controller's
    /// side watches of it.
    pub fn watch(&self) -> Option<ServiceProbe> {
        self.target.map(memcache::watch_target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::Workload;
    use crate::workload::memcache::params::KvSpec;

    fn spec(workload: Workload) -> TestSpec {
        TestSpec {
            workload,
            flows: 3,
            agent_workers: 2,
            ..Default::default()
        }
    }

    /// Listens on loopback, connects every flow, accepts them.
    fn both_halves(spec: &TestSpec, pattern: Pattern) -> (Listening, Accepted, Connected) {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let server = listen(spec, pattern, &[lo], 0, 7).unwrap();
        let listening = server.listening.clone();
        let routes = Routes::new(spec, pattern).unwrap();
        let to = routes.to(&listening.data, lo);
        let group = Group {
            cookie: listening.cookie,
            targets: (0..spec.flows).map(|i| (i, to)).collect(),
            ..Default::default()
        };
        let s = spec.clone();
        let client = std::thread::spawn(move || connect(&s, pattern, group).unwrap());
        let accepted = server
            .accept(spec, vec![], &AtomicBool::new(false))
            .unwrap();
        (listening, accepted, client.join().unwrap())
    }

    #[test]
    fn persistent_flows_arrive_before_the_window() {
        let s = spec(crate::model::spec::Workload::named("rr"));
        let (l, a, c) = both_halves(&s, Pattern::Persistent);
        assert_eq!(l.data.len(), 1);
        assert_eq!(a.rejected, Some(0));
        assert_eq!(a.conns.established.len(), 3);
        assert_eq!(c.conns.established.len(), 3);
        assert!(c.prefill.is_none() && a.service.is_none());
    }

    /// `serve --data-port`: every pattern's listeners take the port given
    /// (what a Service forwards to), TCP and UDP alike, and again once the
    /// last test's are closed.
    #[test]
    fn a_fixed_data_port_is_the_one_listened_on() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let free = std::net::TcpListener::bind((lo, 0)).unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        for (kind, pattern) in [
            ("stream", Pattern::Persistent),
            ("crr", Pattern::PerTransaction),
            ("crr", Pattern::PerTransaction),
            ("udp-stream", Pattern::Datagram),
        ] {
            let s = spec(crate::model::spec::Workload::named(kind));
            let server = listen(&s, pattern, &[lo], port, 7).unwrap();
            assert_eq!(server.listening.data, vec![SocketAddr::new(lo, port)]);
        }
    }

    #[test]
    fn a_connection_per_transaction_gets_a_listener_per_worker() {
        let s = spec(crate::model::spec::Workload::named("crr"));
        let (l, a, c) = both_halves(&s, Pattern::PerTransaction);
        assert_eq!(a.rejected, None, "no FlowsReady");
        assert_eq!(a.conns.listeners.len(), 2);
        assert_eq!(
            c.conns.connect_to,
            vec![(0, l.data[0]), (1, l.data[0]), (2, l.data[0])]
        );
        assert!(c.conns.established.is_empty());
    }

    #[test]
    fn udp_flows_say_hello() {
        let s = TestSpec {
            request: 64,
            response: 64,
            ..spec(crate::model::spec::Workload::named("udp-rr"))
        };
        let (_, a, c) = both_halves(&s, Pattern::Datagram);
        assert_eq!(a.rejected, Some(0));
        assert_eq!(a.conns.udp.len(), 3);
        assert_eq!(c.conns.udp.len(), 3);
    }

    #[test]
    fn routes_point_at_the_address_or_the_service() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let data: Vec<SocketAddr> = vec![
            "127.0.0.1:1000".parse().unwrap(),
            "127.0.0.2:2000".parse().unwrap(),
        ];
        let tcp = Routes::new(
            &spec(crate::model::spec::Workload::named("stream")),
            Pattern::Persistent,
        )
        .unwrap();
        assert_eq!(tcp.to(&data, other), data[1]);
        assert_eq!(tcp.to(&[], other), SocketAddr::new(other, 0));
        assert!(!tcp.prefill(true, true));
        assert!(tcp.watch().is_none());
        let kv = |target: Option<&str>| TestSpec {
            own: crate::model::own::Own::with(
                "kv",
                &KvSpec {
                    service: target.is_none().then(|| "memcached".into()),
                    target: target.map(String::from),
                    ..Default::default()
                },
            ),
            ..spec(crate::model::spec::Workload::named("memcache"))
        };
        let own = Routes::new(&kv(None), Pattern::Service).unwrap();
        assert_eq!(own.to(&data, other), data[0], "a server's one memcached");
        assert!(own.prefill(true, false) && !own.prefill(false, true));
        let given = Routes::new(&kv(Some("127.0.0.3:11211")), Pattern::Service).unwrap();
        assert_eq!(given.to(&data, lo), "127.0.0.3:11211".parse().unwrap());
        assert!(given.prefill(true, true) && !given.prefill(true, false));
    }

    #[test]
    fn the_controller_waits_for_flows_that_arrive_before_the_window() {
        assert!(Pattern::Persistent.waits_for_flows() && Pattern::Datagram.waits_for_flows());
        assert!(!Pattern::PerTransaction.waits_for_flows() && !Pattern::Service.waits_for_flows());
    }
}
