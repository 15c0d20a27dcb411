//! The control protocol: length-prefixed JSON messages on one TCP connection
//! per controller. A frame is a 4-byte big-endian length and a JSON object
//! tagged by `type`. The agent speaks first (`hello`, with its protocol
//! version and a nonce); the controller answers with an HMAC-SHA256 of both
//! nonces under the shared token, so the token never crosses the wire, and
//! the agent proves it knows the token too. A version mismatch is named on
//! both sides instead of showing up as a refused or dropped connection.
//!
//! After that challenge every message is sealed (v5): both sides derive a
//! key per direction with HKDF-SHA256 over the token and both nonces, and
//! each frame carries a sequence number and an HMAC-SHA256 tag over it and
//! the message. A changed, replayed, reordered, dropped or cut message is
//! caught by the reader, which ends the connection with the reason. The
//! channel is authenticated, not encrypted: tests and results can be read
//! on the wire, never forged; the token itself never crosses it.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;

use super::clock::ClockBase;
use crate::model::flow::FlowReport;
use crate::model::host::HostInfo;

use crate::model::sample::{
    CpuWindow, IntervalSample, KernelUdp, KvPrefill, PeerClock, ServiceWindow, WorkerPlacement,
};
use crate::model::spec::TestSpec;

pub const PROTOCOL: &str = "linerate-control";
/// Bumped on any incompatible change of the messages below. v3: clock
/// probes, scheduled starts, agents as clients, several data addresses.
/// v4: the memcache workload (agents start memcached, report its stats;
/// clients prefill it). v5: every message after the challenge sealed with
/// a sequence number and an HMAC tag. v6: a stop in two steps (`Stop`,
/// `Halted`, `Close`): no end closes its sockets before every end has
/// stopped counting. v7: `RunHere`/`RanHere`: a kind that runs in its
/// client's process (rpm) run by several client agents on one window.
pub const VERSION: u32 = 7;
/// Frames larger than this are refused (a result with 10k flows is ~5 MB).
pub const MAX_FRAME: usize = 64 << 20;
/// Frames before authentication (hello, auth) are small: a peer that has
/// not proven the token cannot make the agent allocate more.
pub const MAX_HANDSHAKE_FRAME: usize = 16 << 10;
/// Sequence number and tag in front of a sealed message.
const SEAL_HEADER: usize = 8 + 32;

fn yes() -> bool {
    true
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    VersionMismatch,
    AuthFailed,
    /// A sealed message failed its check (sent to the peer with the reason).
    Tampered,
    /// Made by this side's own reader, never sent: the channel broke
    /// (failed check, cut frame); the message says how.
    ChannelBroken,
    Busy,
    BadRequest,
    SetupFailed,
    Internal,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    Hello {
        protocol: String,
        version: u32,
        software: String,
        nonce: String,
        /// Whether this agent's crypto libraries use the CPU's crypto
        /// extensions (false: `serve --crypto-hw off`).
        #[serde(default = "yes")]
        crypto_hw: bool,
        /// The port of this agent's companion that runs with the other
        /// crypto setting, on the same host (None: no companion).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        crypto_twin: Option<u16>,
        /// This agent holds no token (`serve` on loopback without one, or
        /// `--insecure-no-token`): the challenge runs with the empty token,
        /// so messages are checked for corruption but anyone can drive it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        no_token: bool,
    },
    Auth {
        version: u32,
        nonce: String,
        mac: String,
    },
    AuthOk {
        mac: String,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// Between tests: the agent's clock and load (clock offset estimation,
    /// `cluster status`).
    Probe {
        sent_ns: u64,
    },
    ProbeReply {
        sent_ns: u64,
        /// The agent's CLOCK_MONOTONIC when it answered.
        agent_ns: u64,
        software: String,
        /// /proc/loadavg: 1, 5 and 15 minutes.
        load: [f64; 3],
        tests_running: u32,
        uptime_s: f64,
        /// The agent's kernel and time namespace: on the controller's own
        /// kernel, its clock offset is known exactly.
        #[serde(default)]
        clock: Option<ClockBase>,
    },
    /// Prepare the server side of a test: open listeners, check caps.
    Setup {
        spec: Box<TestSpec>,
        /// Data addresses to listen on (empty: the control connection's).
        #[serde(default)]
        listen: Vec<IpAddr>,
        /// Ids of the flows that will come here (empty: 0..flows); the
        /// agent accepts these persistent flows, and its caps count them.
        #[serde(default)]
        expect: Vec<u32>,
    },
    /// Prepare the client side of a test on this agent: open flows to
    /// other agents' data listeners, one group per server agent.
    SetupClient {
        spec: Box<TestSpec>,
        groups: Vec<TargetGroup>,
    },
    /// The client agent's persistent flows are open (and TLS done; for
    /// memcache, the key space prefilled if this agent has flow 0).
    Connected {
        host: Box<HostInfo>,
        #[serde(default)]
        prefill: Option<KvPrefill>,
    },
    Ready {
        /// The first data address's port (one address: the only one).
        data_port: u16,
        /// Every data listener (one per address of `listen`).
        #[serde(default)]
        data: Vec<SocketAddr>,
        cookie: u64,
        host: Box<HostInfo>,
        /// With TLS: the agent's certificate (DER), which the client trusts
        /// for this test (never the key).
        #[serde(default)]
        tls_cert: Option<Vec<u8>>,
        /// What results call that certificate ("ecdsa-p256", "file <path>").
        #[serde(default)]
        tls_cert_label: Option<String>,
    },
    /// Every flow of the test is accepted (stream, rr).
    FlowsReady {
        rejected: u32,
    },
    /// Open the window; with `at_ns`, when the agent's monotonic clock
    /// reads that (the controller scheduled every host's start together).
    Start {
        #[serde(default)]
        at_ns: Option<u64>,
    },
    /// The agent's timeline began at this reading of its monotonic clock
    /// (the scheduled instant); its thread woke `late_ns` after it.
    Started {
        t0_ns: u64,
        #[serde(default)]
        late_ns: u64,
    },
    Interval {
        sample: Box<IntervalSample>,
        /// A client side's latency histograms of the interval (hex HDR V2).
        #[serde(default)]
        hist: Option<HistText>,
    },
    /// The agent's window is over; its CPU over the window.
    WindowDone {
        cpu: Option<CpuWindow>,
        complete: bool,
        /// UDP: the kernel's UDP counters over the agent's window.
        #[serde(default)]
        kernel_udp: Option<KernelUdp>,
        /// memcache: memcached's own counts over the agent's window.
        #[serde(default)]
        service: Option<ServiceWindow>,
    },
    /// The window ends: stop the flows, count nothing more, keep the
    /// sockets open and say `Halted`.
    Stop,
    /// The agent's flows have stopped after a `Stop`; its sockets stay
    /// open until `Close`.
    Halted,
    /// Every member has halted (or failed): close the sockets and send
    /// `Final`. A close now reaches a peer that counts nothing more.
    Close,
    Final {
        flows: Vec<FlowReport>,
        placement: Vec<WorkerPlacement>,
        errors: Vec<String>,
        /// A client side's latency over the whole window.
        #[serde(default)]
        hist: Option<HistText>,
        /// A client side's window length, its own clock (seconds).
        #[serde(default)]
        window_s: f64,
        /// A client side finished every finite transfer.
        #[serde(default)]
        complete: bool,
        /// What this end's own scheduling added over the window (open
        /// loops; older agents send none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waits: Option<crate::model::sample::EncodedWaits>,
    },
    /// Run a kind that runs in its client's process (rpm) here, as one
    /// client of several toward one server (the spec names it), from when
    /// the agent's monotonic clock reads `at_ns`; the agent answers
    /// `RanHere`, or `Error` when it cannot.
    RunHere {
        spec: Box<TestSpec>,
        #[serde(default)]
        at_ns: Option<u64>,
    },
    /// What a `RunHere` measured: the kind's own result on this agent.
    RanHere {
        result: Box<crate::model::result::TestResult>,
        /// How late the agent's thread woke for the scheduled start.
        #[serde(default)]
        late_ns: u64,
    },
    Bye,
}

/// The flows a client agent opens to one server agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TargetGroup {
    /// The server agent's test cookie (its flows announce themselves with it).
    pub cookie: u64,
    /// Flow id and the data address it connects to.
    pub targets: Vec<(u32, SocketAddr)>,
    /// With TLS: the server agent's certificate (DER) and its label.
    #[serde(default)]
    pub tls_cert: Option<Vec<u8>>,
    #[serde(default)]
    pub tls_cert_label: Option<String>,
    /// memcache: this client sets every key on that server before the
    /// window (one client per server does).
    #[serde(default)]
    pub prefill: bool,
    /// The server agent's clock against this client agent's, where the
    /// controller knows both (udp-rr's one-way delays).
    #[serde(default)]
    pub clock: Option<PeerClock>,
    /// The server is another tool's (a QUIC perf server): no hello, no
    /// certificate known in advance.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub foreign: bool,
}

/// What a client opens (the controller itself or a client agent): the
/// group as `workload::conns` connects it.
impl From<TargetGroup> for crate::workload::conns::Group {
    fn from(g: TargetGroup) -> Self {
        crate::workload::conns::Group {
            cookie: g.cookie,
            targets: g.targets,
            tls_cert: g.tls_cert,
            tls_cert_label: g.tls_cert_label,
            prefill: g.prefill,
            clock: g.clock,
            foreign: g.foreign,
        }
    }
}

impl Msg {
    /// The message's type as the wire names it (`ready`, `stop`), for
    /// errors about a message that came out of turn: a name, never the
    /// message's contents.
    pub fn name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("type")?.as_str().map(str::to_string))
            .unwrap_or_else(|| "an unreadable message".into())
    }
}

/// Latency histograms as text (see `measure::histogram::encode`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HistText {
    pub latency: String,
    pub corrected: String,
}

pub fn write_msg(w: &mut impl Write, m: &Msg) -> io::Result<()> {
    let body = serde_json::to_vec(m).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame)?;
    w.flush()
}

/// Reads one plain frame (the handshake's), refusing frames over
/// `MAX_HANDSHAKE_FRAME`.
pub fn read_msg(r: &mut impl Read) -> io::Result<Msg> {
    read_plain(r, MAX_HANDSHAKE_FRAME)
}

fn read_plain(r: &mut impl Read, max: usize) -> io::Result<Msg> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("control frame of {len} bytes: the peer does not speak the linerate control protocol"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| {
        // Tell a newer message we cannot parse from garbage.
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unreadable control message ({e}): {text}"),
        )
    })
}

/// Reads sealed control messages on a thread of their own, so the side
/// that runs a test can poll them without blocking. `None` on the channel,
/// and the flag set, mean the connection is gone; a broken seal arrives
/// first as an `Error` with code `ChannelBroken` and the reason.
pub fn spawn_reader(
    mut stream: std::net::TcpStream,
    mut opener: Opener,
) -> (Receiver<Option<Msg>>, Arc<AtomicBool>, Broken) {
    let (tx, rx) = channel();
    let gone = Arc::new(AtomicBool::new(false));
    let flag = gone.clone();
    let broken: Broken = Arc::new(std::sync::Mutex::new(None));
    let why = broken.clone();
    std::thread::spawn(move || loop {
        match opener.open(&mut stream) {
            Ok(m) => {
                if tx.send(Some(m)).is_err() {
                    break;
                }
            }
            Err(e) => {
                if let ChannelError::Broken(reason) = e {
                    *why.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
                    let _ = tx.send(Some(Msg::Error {
                        code: ErrorCode::ChannelBroken,
                        message: reason,
                    }));
                }
                flag.store(true, Ordering::Relaxed);
                let _ = tx.send(None);
                break;
            }
        }
    });
    (rx, gone, broken)
}

/// Why the reader stopped, when a sealed message failed (None: it did
/// not, or the connection simply closed).
pub type Broken = Arc<std::sync::Mutex<Option<String>>>;

/// The two keys of a session, one per direction, so a message can never
/// be reflected back to its sender as the peer's.
pub struct SessionKeys {
    pub to_agent: [u8; 32],
    pub to_controller: [u8; 32],
}

/// HKDF-SHA256 with the token as input key material and both nonces as
/// salt: fresh keys per connection, from a secret that never travels.
pub fn session_keys(token: &str, agent_nonce: &str, controller_nonce: &str) -> SessionKeys {
    let salt = format!("{agent_nonce}\0{controller_nonce}");
    let hk = hkdf::Hkdf::<Sha256>::new(Some(salt.as_bytes()), token.as_bytes());
    let mut keys = SessionKeys {
        to_agent: [0; 32],
        to_controller: [0; 32],
    };
    let info = |dir: &str| format!("{PROTOCOL} v{VERSION} {dir}");
    hk.expand(info("controller->agent").as_bytes(), &mut keys.to_agent)
        .expect("32 bytes is a valid HKDF-SHA256 length");
    hk.expand(
        info("agent->controller").as_bytes(),
        &mut keys.to_controller,
    )
    .expect("32 bytes is a valid HKDF-SHA256 length");
    keys
}

fn tag(key: &[u8; 32], seq: u64, body: &[u8]) -> [u8; 32] {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(&seq.to_be_bytes());
    m.update(&(body.len() as u64).to_be_bytes());
    m.update(body);
    m.finalize().into_bytes().into()
}

/// Seals outgoing messages: sequence number, tag, message.
pub struct Sealer {
    key: [u8; 32],
    seq: u64,
}

impl Sealer {
    pub fn new(key: [u8; 32]) -> Sealer {
        Sealer { key, seq: 0 }
    }

    /// The frame of `m`, the next in sequence.
    pub fn seal(&mut self, m: &Msg) -> io::Result<Vec<u8>> {
        let body = serde_json::to_vec(m).map_err(io::Error::other)?;
        let len = SEAL_HEADER + body.len();
        if len > MAX_FRAME {
            return Err(io::Error::other(format!(
                "a control message of {len} bytes is over the {MAX_FRAME}-byte limit"
            )));
        }
        let mut frame = Vec::with_capacity(4 + len);
        frame.extend_from_slice(&(len as u32).to_be_bytes());
        frame.extend_from_slice(&self.seq.to_be_bytes());
        frame.extend_from_slice(&tag(&self.key, self.seq, &body));
        frame.extend_from_slice(&body);
        self.seq += 1;
        Ok(frame)
    }
}

/// Why a sealed channel stopped.
#[derive(Debug)]
pub enum ChannelError {
    /// The peer closed between messages, or the socket failed.
    Closed(io::Error),
    /// A message failed its check, or was cut: the reason, one line.
    Broken(String),
}

/// Opens incoming sealed messages, in order.
pub struct Opener {
    key: [u8; 32],
    seq: u64,
    /// Who sends these messages ("the agent"), for the reasons.
    from: &'static str,
}

impl Opener {
    pub fn new(key: [u8; 32], from: &'static str) -> Opener {
        Opener { key, seq: 0, from }
    }

    /// The next message; any failure of the seal is `Broken` with what
    /// happened (the channel is unusable after it).
    pub fn open(&mut self, r: &mut impl Read) -> Result<Msg, ChannelError> {
        let mut len = [0u8; 4];
        r.read_exact(&mut len).map_err(ChannelError::Closed)?;
        let len = u32::from_be_bytes(len) as usize;
        let (n, from) = (self.seq, self.from);
        if !(SEAL_HEADER..=MAX_FRAME).contains(&len) {
            return Err(ChannelError::Broken(format!(
                "control message {n} from {from} has an impossible length ({len} bytes): changed in transit, or not a linerate peer"
            )));
        }
        let mut frame = vec![0u8; len];
        r.read_exact(&mut frame).map_err(|e| {
            ChannelError::Broken(format!(
                "control message {n} from {from} was cut short ({e}): the connection dropped mid-message"
            ))
        })?;
        let seq = u64::from_be_bytes(frame[..8].try_into().expect("8 bytes"));
        let body = &frame[SEAL_HEADER..];
        let expect = tag(&self.key, seq, body);
        if !mac_eq_bytes(&frame[8..SEAL_HEADER], &expect) {
            return Err(ChannelError::Broken(format!(
                "control message {n} from {from} failed its authentication tag: it was changed in transit (or the peer holds another token)"
            )));
        }
        if seq != self.seq {
            return Err(ChannelError::Broken(if seq < self.seq {
                format!("control message {seq} from {from} arrived again (message {} was next): replayed or reordered in transit", self.seq)
            } else {
                format!("control message {} from {from} never arrived (the next one, {seq}, did): dropped in transit", self.seq)
            }));
        }
        self.seq += 1;
        serde_json::from_slice(body).map_err(|e| {
            ChannelError::Broken(format!("control message {n} from {from} is authentic but unreadable ({e}): a linerate version mismatch?"))
        })
    }
}

/// One end of an authenticated control connection: the socket and the
/// sealer of what this end sends.
pub struct Wire {
    pub stream: std::net::TcpStream,
    sealer: Sealer,
}

impl Wire {
    pub fn new(stream: std::net::TcpStream, key: [u8; 32]) -> Wire {
        Wire {
            stream,
            sealer: Sealer::new(key),
        }
    }

    pub fn send(&mut self, m: &Msg) -> io::Result<()> {
        let frame = self.sealer.seal(m)?;
        self.stream.write_all(&frame)?;
        self.stream.flush()
    }
}

fn mac_eq_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).expect("OS random source");
    hex(&b)
}

pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("OS random source");
    u64::from_be_bytes(b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// HMAC-SHA256 over a role label and both nonces; the label keeps the
/// controller's proof from being replayed as the agent's.
pub fn mac(token: &str, role: &str, first: &str, second: &str) -> String {
    let mut m =
        Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes any key length");
    m.update(PROTOCOL.as_bytes());
    m.update(&[0]);
    m.update(role.as_bytes());
    m.update(&[0]);
    m.update(first.as_bytes());
    m.update(&[0]);
    m.update(second.as_bytes());
    hex(&m.finalize().into_bytes())
}

/// Compares MACs in constant time.
pub fn mac_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Reads a token file: the first line, trimmed; refuses empty tokens.
/// Warns (on stderr) when other users can read it: whoever holds the token
/// can run any test on the agents that trust it.
pub fn read_token_file(path: &std::path::Path) -> Result<String, super::ControlError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| super::ControlError::ReadTokenFile {
            path: path.to_path_buf(),
            source,
        })?;
    if let Some(w) = token_file_warning(path) {
        eprintln!("linerate: warning: {w}");
    }
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(super::ControlError::EmptyToken {
            path: path.to_path_buf(),
        });
    }
    Ok(token)
}

/// What is wrong with a token file's permissions, if anything.
pub fn token_file_warning(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o044 != 0).then(|| {
        format!(
            "token file {} can be read by other users (mode {:o}): `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        )
    })
}

/// An agent's answer to probes: its clock against ours, load, version.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub software: String,
    pub offset_ns: i64,
    pub uncertainty_ns: u64,
    pub rtt_ns: u64,
    pub load: [f64; 3],
    pub tests_running: u32,
    pub uptime_s: f64,
    /// The agent runs on the controller's kernel: the offset is the
    /// difference of the two processes' time namespaces, exact
    /// (`uncertainty_ns` 0), not a probes' estimate.
    pub same_kernel: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_roundtrip() {
        let mut buf = Vec::new();
        let spec = TestSpec {
            flows: 7,
            ..Default::default()
        };
        write_msg(
            &mut buf,
            &Msg::Setup {
                spec: Box::new(spec.clone()),
                listen: vec![],
                expect: vec![],
            },
        )
        .unwrap();
        write_msg(&mut buf, &Msg::Stop).unwrap();
        let len = u32::from_be_bytes(buf[0..4].try_into().unwrap()) as usize;
        assert!(std::str::from_utf8(&buf[4..4 + len])
            .unwrap()
            .contains("\"type\":\"setup\""));
        let mut r = &buf[..];
        match read_msg(&mut r).unwrap() {
            Msg::Setup { spec: s, .. } => assert_eq!(*s, spec),
            m => panic!("{m:?}"),
        }
        assert!(matches!(read_msg(&mut r).unwrap(), Msg::Stop));
        assert!(read_msg(&mut r).is_err());
    }

    #[test]
    fn rejects_oversized_and_garbage() {
        let mut r: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
        let e = read_msg(&mut r).unwrap_err();
        assert!(e.to_string().contains("does not speak"), "{e}");
        let mut buf = Vec::new();
        buf.extend_from_slice(&5u32.to_be_bytes());
        buf.extend_from_slice(b"{oops");
        assert!(read_msg(&mut &buf[..])
            .unwrap_err()
            .to_string()
            .contains("unreadable"));
    }

    fn broken(r: Result<Msg, ChannelError>) -> String {
        match r {
            Err(ChannelError::Broken(why)) => why,
            other => panic!("expected a broken seal, got {other:?}"),
        }
    }

    #[test]
    fn sealed_messages_open_in_order_and_nothing_else_does() {
        let k = session_keys("token", "agent-nonce", "ctl-nonce");
        assert_ne!(k.to_agent, k.to_controller, "one key per direction");
        let mut out = Sealer::new(k.to_agent);
        let frames: Vec<Vec<u8>> = (0..3)
            .map(|i| out.seal(&Msg::Probe { sent_ns: i }).unwrap())
            .collect();
        let open = |bytes: &[u8]| {
            let mut o = Opener::new(k.to_agent, "the controller");
            let mut r = bytes;
            let mut got = Vec::new();
            loop {
                match o.open(&mut r) {
                    Ok(Msg::Probe { sent_ns }) => got.push(sent_ns),
                    Ok(m) => panic!("{m:?}"),
                    Err(e) => return (got, e),
                }
            }
        };
        let (got, end) = open(&frames.concat());
        assert_eq!(got, vec![0, 1, 2]);
        assert!(matches!(end, ChannelError::Closed(_)), "{end:?}");

        // Every single bit flipped anywhere in a frame is caught.
        let f = &frames[0];
        for byte in 0..f.len() {
            for bit in 0..8 {
                let mut bad = f.clone();
                bad[byte] ^= 1 << bit;
                let mut o = Opener::new(k.to_agent, "the controller");
                assert!(
                    o.open(&mut &bad[..]).is_err(),
                    "bit {bit} of byte {byte} went unnoticed"
                );
            }
        }
        // Replayed, reordered, dropped, cut.
        let why = open(&[frames[0].clone(), frames[0].clone()].concat()).1;
        assert!(format!("{why:?}").contains("arrived again"), "{why:?}");
        let why = open(&[frames[1].clone(), frames[0].clone()].concat()).1;
        assert!(
            format!("{why:?}").contains("control message 0 from the controller never arrived"),
            "{why:?}"
        );
        let why = open(&[frames[0].clone(), frames[2].clone()].concat()).1;
        assert!(
            format!("{why:?}").contains("message 1 from the controller never arrived"),
            "{why:?}"
        );
        let why = open(&frames[0][..frames[0].len() - 3]).1;
        assert!(format!("{why:?}").contains("cut short"), "{why:?}");
        // A message sealed for the other direction (reflected back at its
        // sender) or under another token does not open.
        let mut o = Opener::new(k.to_controller, "the agent");
        assert!(broken(o.open(&mut &frames[0][..])).contains("authentication tag"));
        let other = session_keys("other", "agent-nonce", "ctl-nonce");
        let mut o = Opener::new(other.to_agent, "the controller");
        assert!(broken(o.open(&mut &frames[0][..])).contains("authentication tag"));
        // A length no sealed frame can have is refused before allocating.
        let mut huge = (u32::MAX).to_be_bytes().to_vec();
        huge.extend_from_slice(&[0; 64]);
        let mut o = Opener::new(k.to_agent, "the controller");
        assert!(broken(o.open(&mut &huge[..])).contains("impossible length"));
    }

    #[test]
    fn token_files_others_can_read_are_named() {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!("lr-tok-{}", std::process::id()));
        std::fs::write(&p, "t\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let w = token_file_warning(&p).expect("0644 is readable by others");
        assert!(w.contains("mode 644") && w.contains("chmod 600"), "{w}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(token_file_warning(&p).is_none());
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn handshake_frames_are_small() {
        let mut big = ((MAX_HANDSHAKE_FRAME + 1) as u32).to_be_bytes().to_vec();
        big.extend_from_slice(&[b' '; 16]);
        assert!(read_msg(&mut &big[..]).is_err());
    }

    #[test]
    fn macs_bind_token_role_and_nonces() {
        let a = mac("secret", "controller", "n1", "n2");
        assert_eq!(a.len(), 64);
        assert!(mac_eq(&a, &mac("secret", "controller", "n1", "n2")));
        assert!(!mac_eq(&a, &mac("Secret", "controller", "n1", "n2")));
        assert!(!mac_eq(&a, &mac("secret", "agent", "n1", "n2")));
        assert!(!mac_eq(&a, &mac("secret", "controller", "n2", "n1")));
        assert_ne!(random_hex(16), random_hex(16));
    }
}
