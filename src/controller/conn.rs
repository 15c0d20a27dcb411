//! The controller's end of the control protocol: connect and
//! authenticate, probe the agent's clock, send and receive (the driver
//! runs tests over it), reach the agent's crypto companion, say goodbye.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::error::{ControllerError, Peer};
use crate::control::clock;
use crate::control::protocol::{
    self, mac, mac_eq, random_hex, read_msg, write_msg, ErrorCode, Msg, Opener, Wire,
};
use crate::model::host::HostInfo;
use crate::model::spec::TestSpec;

pub struct AgentConn {
    pub addr: SocketAddr,
    writer: Wire,
    rx: Receiver<Option<Msg>>,
    pub host: Option<HostInfo>,
    /// The agent's crypto libraries use the CPU's crypto extensions.
    pub crypto_hw: bool,
    /// Its companion with the other crypto setting: the port it announced,
    /// and the connection once a test needed it.
    twin_port: Option<u16>,
    twin: Option<Box<AgentConn>>,
    /// Kept to authenticate to the companion (same token).
    token: String,
    /// The agent's data addresses beyond its control address, for
    /// `--ports N`: flows go round robin over the first N (empty: the
    /// control address only; the local agent on loopback has
    /// `LOOPBACK_PORTS`).
    pub data: Vec<IpAddr>,
}

/// How many loopback addresses (127.0.0.1 up) the local agent listens on
/// for `--ports`: every one is this host's without setup.
pub const LOOPBACK_PORTS: u8 = 16;

/// The local agent's data addresses on loopback: 127.0.0.1 up.
pub fn loopback_data() -> Vec<IpAddr> {
    (1..=LOOPBACK_PORTS)
        .map(|i| IpAddr::from([127, 0, 0, i]))
        .collect()
}

/// Resolves `host:port`, naming the input in the error.
pub fn resolve(agent: &str) -> Result<SocketAddr, ControllerError> {
    agent
        .to_socket_addrs()
        .map_err(|source| ControllerError::Resolve {
            agent: agent.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| ControllerError::ResolvesToNothing(agent.to_string()))
}

pub fn connect(addr: SocketAddr, token: &str) -> Result<AgentConn, ControllerError> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|source| ControllerError::Unreachable { addr, source })?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(ControllerError::Socket)?;
    let hello = read_msg(&mut s).map_err(|source| ControllerError::NoGreeting { addr, source })?;
    let (version, nonce, crypto_hw, twin_port, no_token) = match hello {
        Msg::Hello {
            protocol: p,
            version,
            nonce,
            crypto_hw,
            crypto_twin,
            no_token,
            ..
        } if p == protocol::PROTOCOL => (version, nonce, crypto_hw, crypto_twin, no_token),
        // A refusal before the greeting (an agent past its caps).
        Msg::Error { code, message } => return Err(ControllerError::refusal(addr, code, message)),
        other => {
            return Err(ControllerError::NotAnAgent {
                addr,
                first: other.name(),
            })
        }
    };
    if version != protocol::VERSION {
        let e = ControllerError::VersionMismatch {
            addr,
            theirs: version,
            ours: protocol::VERSION,
        };
        let _ = write_msg(
            &mut s,
            &Msg::Error {
                code: ErrorCode::VersionMismatch,
                message: e.to_string(),
            },
        );
        return Err(e);
    }
    // An empty token is "none given". A controller that holds a token
    // insists the agent proves it: an agent that claims to need none could
    // be anyone's, and would be trusted with results and certificates.
    match (token.is_empty(), no_token) {
        (true, false) => return Err(ControllerError::NeedsToken(addr)),
        (false, true) => return Err(ControllerError::HoldsNoToken(addr)),
        _ => {}
    }
    let cnonce = random_hex(16);
    write_msg(
        &mut s,
        &Msg::Auth {
            version: protocol::VERSION,
            nonce: cnonce.clone(),
            mac: mac(token, "controller", &nonce, &cnonce),
        },
    )
    .map_err(|source| ControllerError::Auth { addr, source })?;
    match read_msg(&mut s) {
        Ok(Msg::AuthOk { mac: m }) if mac_eq(&m, &mac(token, "agent", &cnonce, &nonce)) => {}
        Ok(Msg::AuthOk { .. }) => return Err(ControllerError::WrongToken(addr)),
        Ok(Msg::Error { code, message }) => {
            return Err(ControllerError::refusal(addr, code, message))
        }
        Ok(other) => {
            return Err(ControllerError::AuthUnexpected {
                addr,
                got: other.name(),
            })
        }
        Err(source) => return Err(ControllerError::AuthClosed { addr, source }),
    }
    s.set_read_timeout(None).map_err(ControllerError::Socket)?;
    let keys = protocol::session_keys(token, &nonce, &cnonce);
    let (rx, _, _) = protocol::spawn_reader(
        s.try_clone().map_err(ControllerError::Socket)?,
        Opener::new(keys.to_controller, "the agent"),
    );
    Ok(AgentConn {
        addr,
        writer: Wire::new(s, keys.to_agent),
        rx,
        host: None,
        crypto_hw,
        twin_port,
        twin: None,
        token: token.to_string(),
        data: Vec::new(),
    })
}

/// Tells the agent why this side ends the connection (what this side
/// sends is still sealed), then shuts it.
fn tell_broken(writer: &mut Wire, reason: &str) {
    let _ = writer.send(&Msg::Error {
        code: ErrorCode::Tampered,
        message: format!("the controller closes the connection: {reason}"),
    });
    let _ = writer.stream.shutdown(std::net::Shutdown::Both);
}

pub use crate::control::protocol::Probe;

/// Connects, authenticates and probes (clock, load, version) the agent at
/// `control`, then says goodbye: what `cluster up` and `status` check.
pub fn probe_agent(control: SocketAddr, token: &str) -> Result<Probe, ControllerError> {
    let mut conn = connect(control, token)?;
    let probe = conn.probe();
    conn.bye();
    probe
}

/// What a probe says of the agent's clock, as the start instant needs it.
pub fn clock_of(p: &Probe) -> clock::ClockSync {
    clock::ClockSync {
        offset_ns: p.offset_ns,
        uncertainty_ns: p.uncertainty_ns,
        rtt_ns: p.rtt_ns,
        probes: if p.same_kernel { 1 } else { CLOCK_PROBES },
    }
}

/// The server's clock against its client's, from each one's against the
/// controller's (None: the controller itself, offset 0 exactly): the
/// difference of the offsets, within the sum of their uncertainties.
pub fn peer_clock(
    server: &clock::ClockSync,
    client: Option<&clock::ClockSync>,
) -> crate::model::sample::PeerClock {
    let (c_off, c_unc) = client.map_or((0, 0), |c| (c.offset_ns, c.uncertainty_ns));
    crate::model::sample::PeerClock {
        offset_ns: server.offset_ns - c_off,
        uncertainty_ns: server.uncertainty_ns + c_unc,
    }
}

/// Probes per clock estimate: the fastest of 16 round trips on an idle
/// control connection is within a few microseconds of the true minimum.
pub const CLOCK_PROBES: usize = 16;

impl AgentConn {
    /// Estimates the agent's clock offset (the fastest of
    /// [`CLOCK_PROBES`] round trips) and reads its load and version.
    /// An agent on this kernel says so in its first answer: its offset is
    /// then exact (the time namespaces' difference) and one round trip is
    /// enough. Between tests only.
    pub fn probe(&mut self) -> Result<Probe, ControllerError> {
        let mut samples = Vec::with_capacity(CLOCK_PROBES);
        let mut last = None;
        let mut exact = None;
        for _ in 0..CLOCK_PROBES {
            if exact.is_some() {
                break;
            }
            let sent_ns = clock::mono_ns();
            self.send(&Msg::Probe { sent_ns })?;
            match self.expect("answering a clock probe", Duration::from_secs(5))? {
                Msg::ProbeReply {
                    sent_ns: echoed,
                    agent_ns,
                    software,
                    load,
                    tests_running,
                    uptime_s,
                    clock: base,
                } if echoed == sent_ns => {
                    exact = clock::local_base()
                        .zip(base)
                        .and_then(|(here, there)| here.offset_to(&there));
                    samples.push(clock::Probe {
                        sent_ns,
                        agent_ns,
                        back_ns: clock::mono_ns(),
                    });
                    last = Some((software, load, tests_running, uptime_s));
                }
                other => return Err(self.unexpected("a probe reply", &other)),
            }
        }
        let sync = clock::estimate(&samples).ok_or(ControllerError::NoProbeBack)?;
        let (software, load, tests_running, uptime_s) = last.expect("probes were answered");
        Ok(Probe {
            software,
            offset_ns: exact.unwrap_or(sync.offset_ns),
            uncertainty_ns: if exact.is_some() {
                0
            } else {
                sync.uncertainty_ns
            },
            rtt_ns: sync.rtt_ns,
            load,
            tests_running,
            uptime_s,
            same_kernel: exact.is_some(),
        })
    }

    pub(super) fn send(&mut self, m: &Msg) -> Result<(), ControllerError> {
        self.writer.send(m).map_err(|source| ControllerError::Gone {
            addr: self.addr,
            source,
        })
    }

    /// `m` came where `expected` was due.
    pub(super) fn unexpected(&self, expected: &'static str, m: &Msg) -> ControllerError {
        ControllerError::Unexpected {
            from: Peer::Agent(self.addr),
            expected,
            got: m.name(),
        }
    }

    /// The next message without waiting: Ok(None) when there is none yet,
    /// Err when the connection is gone.
    pub(super) fn poll(&self) -> Result<Option<Msg>, ()> {
        match self.rx.try_recv() {
            Ok(Some(m)) => Ok(Some(m)),
            Err(TryRecvError::Empty) => Ok(None),
            Ok(None) | Err(TryRecvError::Disconnected) => Err(()),
        }
    }

    pub(super) fn expect(
        &mut self,
        what: &'static str,
        timeout: Duration,
    ) -> Result<Msg, ControllerError> {
        let addr = self.addr;
        match self.rx.recv_timeout(timeout) {
            Ok(Some(Msg::Error { code, message })) => {
                if code == ErrorCode::ChannelBroken {
                    self.tell_broken(&message);
                }
                if code == ErrorCode::Busy {
                    return Err(ControllerError::refusal(addr, code, message));
                }
                Err(ControllerError::Agent { addr, message })
            }
            Ok(Some(m)) => Ok(m),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                Err(ControllerError::Closed { addr, what })
            }
            Err(RecvTimeoutError::Timeout) => Err(ControllerError::Timeout {
                addr,
                what,
                secs: timeout.as_secs_f64(),
            }),
        }
    }

    /// Another control connection to the same agent (a mixed test runs
    /// one group per connection: the agent runs one test per session).
    pub fn again(&self) -> Result<AgentConn, ControllerError> {
        let mut c = connect(self.addr, &self.token)?;
        c.data = self.data.clone();
        Ok(c)
    }

    /// A setup step failed (say, connecting the flows): if the channel
    /// broke or the agent ended the test, that is the cause, and it
    /// arrives a moment later on the control connection. Where the flows
    /// were refused, an agent whose own setup failed (`SetupFailed`,
    /// `Internal`) is the cause too: its listener went with it, and the
    /// refusal is only the consequence. Where this side failed first (a
    /// TLS name that does not match), its own error stays: the agent's
    /// would only say the handshake was cut.
    pub(super) fn reason_for(&mut self, e: ControllerError) -> ControllerError {
        let refused = refused_flow(&e);
        // The agent's setup failure, kept while a broken channel (which
        // the agent says after it, and which caused it) may still come.
        let mut failed = None;
        let until = Instant::now() + Duration::from_millis(300);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(Some(Msg::Error { code, message }))
                    if matches!(code, ErrorCode::ChannelBroken | ErrorCode::Tampered) =>
                {
                    if code == ErrorCode::ChannelBroken {
                        self.tell_broken(&message);
                    }
                    return ControllerError::Agent {
                        addr: self.addr,
                        message,
                    };
                }
                Ok(Some(Msg::Error { code, message }))
                    if refused && matches!(code, ErrorCode::SetupFailed | ErrorCode::Internal) =>
                {
                    failed.get_or_insert(message);
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        match failed {
            Some(message) => ControllerError::Agent {
                addr: self.addr,
                message,
            },
            None => e,
        }
    }

    /// This side's reader found the channel broken: the agent hears why
    /// (what this side sends is still sealed), then the connection is
    /// useless.
    pub(super) fn tell_broken(&mut self, reason: &str) {
        tell_broken(&mut self.writer, reason);
    }

    pub fn bye(mut self) {
        if let Some(t) = self.twin.take() {
            t.bye();
        }
        let _ = self.writer.send(&Msg::Bye);
    }

    /// The connection `for_spec` picked for `spec` (this one where its
    /// companion is not wanted or not connected).
    pub(super) fn conn_for(&self, spec: &TestSpec) -> &AgentConn {
        match &self.twin {
            Some(t) if spec.tls.is_some() && spec.crypto_hw != self.crypto_hw => t,
            _ => self,
        }
    }

    pub(super) fn conn_for_mut(&mut self, spec: &TestSpec) -> &mut AgentConn {
        let twin = spec.tls.is_some() && spec.crypto_hw != self.crypto_hw;
        if !twin || self.twin.is_none() {
            return self;
        }
        match self.twin.as_deref_mut() {
            Some(t) => t,
            None => unreachable!("the companion was checked above"),
        }
    }

    /// The connection that runs `spec`: this agent, or (a TLS test that
    /// wants the other crypto-hardware setting) its companion, connected
    /// on first use.
    pub fn for_spec(&mut self, spec: &TestSpec) -> Result<&mut AgentConn, ControllerError> {
        if spec.tls.is_none() || spec.crypto_hw == self.crypto_hw {
            return Ok(self);
        }
        if self.twin.is_none() {
            let Some(port) = self.twin_port else {
                return Err(ControllerError::NoCompanion {
                    addr: self.addr,
                    hw: self.crypto_hw,
                    want: spec.crypto_hw,
                });
            };
            let addr = SocketAddr::new(self.addr.ip(), port);
            let mut twin =
                connect(addr, &self.token).map_err(|e| ControllerError::Companion(Box::new(e)))?;
            twin.data = self.data.clone();
            if twin.crypto_hw != spec.crypto_hw {
                return Err(ControllerError::CompanionSame {
                    addr: self.addr,
                    companion: addr,
                });
            }
            self.twin = Some(Box::new(twin));
        }
        Ok(self.twin.as_mut().expect("connected above"))
    }
}

/// Whether `e` is a flow's connect refused (the agent's listener gone).
fn refused_flow(e: &ControllerError) -> bool {
    use crate::engine::EngineError;
    use crate::workload::WorkloadError;
    matches!(e, ControllerError::Flows { source, .. }
        if matches!(&**source, WorkloadError::Engine(EngineError::Connect { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineError;
    use crate::workload::WorkloadError;

    /// A connection whose agent messages are `said` (already received).
    fn conn_that_heard(said: Vec<Msg>) -> AgentConn {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let s = TcpStream::connect(addr).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for m in said {
            tx.send(Some(m)).unwrap();
        }
        drop(tx);
        AgentConn {
            addr,
            writer: Wire::new(s, [7; 32]),
            rx,
            host: None,
            crypto_hw: true,
            twin_port: None,
            twin: None,
            token: String::new(),
            data: Vec::new(),
        }
    }

    /// Flow 0's connect to `addr` failed with `errno`.
    fn flows_failed(addr: SocketAddr, errno: i32) -> ControllerError {
        ControllerError::Flows {
            addr,
            source: Box::new(WorkloadError::from(EngineError::Connect {
                id: 0,
                addr,
                source: std::io::Error::from_raw_os_error(errno),
            })),
        }
    }

    /// What `reason_for` makes of a flow's connect failing with `errno`
    /// after the agent said `code` with `message`: (the agent's address,
    /// the error's text).
    fn reason_after(errno: i32, code: ErrorCode, message: &str) -> (SocketAddr, String) {
        let mut c = conn_that_heard(vec![Msg::Error {
            code,
            message: message.into(),
        }]);
        let addr = c.addr;
        (addr, c.reason_for(flows_failed(addr, errno)).to_string())
    }

    /// The agent's setup ended (its listener went with it) before the
    /// flows connected: its reason, not the refusal, is the error.
    #[test]
    fn an_agents_setup_failure_is_the_cause_of_refused_flows() {
        let why = "epoll: Interrupted system call (os error 4)";
        let (addr, e) = reason_after(libc::ECONNREFUSED, ErrorCode::SetupFailed, why);
        assert_eq!(e, format!("agent at {addr}: {why}"));
    }

    /// A replayed message broke the channel, which ended the agent's
    /// setup: the agent says the setup failed, then why. The why wins.
    #[test]
    fn a_broken_channel_said_after_the_setup_failure_is_the_cause() {
        let mut c = conn_that_heard(vec![
            Msg::Error {
                code: ErrorCode::SetupFailed,
                message: "controller went away while flows were being opened".into(),
            },
            Msg::Error {
                code: ErrorCode::Tampered,
                message: "control message 0 arrived again".into(),
            },
        ]);
        let addr = c.addr;
        let e = c
            .reason_for(flows_failed(addr, libc::ECONNREFUSED))
            .to_string();
        assert!(e.ends_with("arrived again"), "{e}");
    }

    /// A refusal of another kind, or flows that failed otherwise (this
    /// side's TLS check cut the handshake, and the agent says so): the
    /// flows' own error stands.
    #[test]
    fn without_a_reason_the_flows_error_stands() {
        let (_, e) = reason_after(libc::ECONNREFUSED, ErrorCode::Busy, "busy");
        assert!(e.contains("Connection refused"), "{e}");
        let cut = "flow 0: TLS handshake failed: received fatal alert: BadCertificate";
        let (_, e) = reason_after(libc::ECONNRESET, ErrorCode::SetupFailed, cut);
        assert!(e.contains("Connection reset"), "{e}");
    }
}
