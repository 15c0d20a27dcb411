//! `conn`: connections per second (ethr's connections/s): each flow
//! connects to the agent, with `--tls` also completes a TLS handshake,
//! then closes, and connects again. No request, no response: crr without
//! its exchange. A connection is a transaction; its latency is the time
//! from connect(2) (the SYN) to established, or with TLS to the end of
//! the client's handshake.
//!
//! The agent accepts on one SO_REUSEPORT listener per worker. In clear
//! text it closes each connection as soon as it has it (it reads nothing
//! and serves nothing, so no cookie is checked); with TLS it first reads
//! the data header (checked against the test's cookie, before any
//! handshake work), completes the handshake, then closes. Closing follows
//! `--close` as in crr: `graceful`, the agent closes first (TIME_WAIT on
//! its side) and the client closes on EOF; `reset`, the client resets
//! (SO_LINGER 0) once established, and the agent waits for it.

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use std::io;
use std::sync::Arc;

use super::per_conn::{Acceptor, Carries, Connector, OnAccept};
use super::{crr, Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{decode_header, read_some, Ctx, Flow, Io, Status, HEADER_LEN};
use crate::engine::tls::{Role, TlsConn};
use crate::model::result::Iteration;
use crate::model::spec::{self, CloseMode, MainMetric, TestSpec};

/// Connect (and TLS handshake), close, again.
pub struct Conn;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("conn");

impl Plugin for Conn {
    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Connect (with TLS, handshake), close, again: connections/s and connect latency (ethr's connections/s)"
    }

    fn pattern(&self) -> Pattern {
        Pattern::PerTransaction
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn describe(&self, spec: &TestSpec) -> String {
        format!(
            "conn, {} close: transactions are connections, latency is connect to {}",
            format!("{:?}", spec.close).to_lowercase(),
            if spec.tls.is_some() {
                "TLS handshake done"
            } else {
                "established"
            }
        )
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        vec![crr::conns_line(it)]
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        if conns.connect_to.is_empty() {
            return Err(WorkloadError::NoDataAddress("conn"));
        }
        Ok(conns
            .connect_to
            .iter()
            .map(|&(id, to)| {
                Box::new(Connector::new(
                    id,
                    to,
                    spec,
                    Carries::Nothing,
                    conns.cookie,
                    conns.tls.clone(),
                )) as Box<dyn Flow>
            })
            .collect())
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        let reset = spec.close == CloseMode::Reset;
        Ok(conns
            .listeners
            .into_iter()
            .map(|l| {
                Box::new(Acceptor::new(
                    l,
                    CloseOrShake {
                        cookie: conns.cookie,
                        tls: conns.tls.clone(),
                        reset,
                    },
                )) as Box<dyn Flow>
            })
            .collect())
    }
}

/// The agent's conn server: in clear text each connection is closed as
/// soon as it is accepted; with TLS it goes to a `Handshake`.
struct CloseOrShake {
    cookie: u64,
    tls: Option<Arc<Role>>,
    reset: bool,
}

impl OnAccept for CloseOrShake {
    fn serve(&mut self, stream: TcpStream) -> Option<Box<dyn Flow>> {
        // Clear text: dropped here, so closed (FIN) at once.
        let role = self.tls.as_ref()?;
        Some(Box::new(Handshake {
            stream,
            cookie: self.cookie,
            header: [0; HEADER_LEN],
            got: 0,
            role: role.clone(),
            session: None,
            done: false,
            reset: self.reset,
        }))
    }
}

/// The agent's end of a TLS connection: the data header, the handshake,
/// then close_notify and close (graceful) or the client's reset.
struct Handshake {
    stream: TcpStream,
    cookie: u64,
    header: [u8; HEADER_LEN],
    got: usize,
    role: Arc<Role>,
    session: Option<TlsConn>,
    done: bool,
    reset: bool,
}

impl Handshake {
    fn step(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        // Only the header: the bytes after it are the session's.
        while self.got < HEADER_LEN {
            match read_some(&mut self.stream, &mut self.header[self.got..])? {
                Io::Moved(n) => self.got += n,
                Io::Blocked => return Ok(Status::Open),
                Io::Eof => return Err(io::ErrorKind::UnexpectedEof.into()),
            }
        }
        let session = match &mut self.session {
            Some(s) => s,
            None => {
                if decode_header(&self.header, self.cookie).is_none() {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "data connection with a wrong cookie",
                    ));
                }
                self.session.insert(self.role.session()?)
            }
        };
        if !self.done {
            if !session.handshake(&mut self.stream)? {
                return Ok(Status::Open);
            }
            self.done = true;
            cx.counters.tls_handshakes += 1;
            cx.counters.tls_resumed += u64::from(session.resumed());
        }
        if self.reset {
            // The client resets once its handshake is done: wait for it.
            return Ok(match session.read(&mut self.stream, cx.buf)? {
                Io::Blocked => Status::Open,
                Io::Eof => Status::Done,
                Io::Moved(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "data from the client on a conn connection",
                    ))
                }
            });
        }
        // close_notify, then the socket closes when the flow is dropped.
        Ok(if session.close(&mut self.stream)? {
            Status::Done
        } else {
            Status::Open
        })
    }
}

impl Flow for Handshake {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut self.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, _readable: bool, _writable: bool) -> Status {
        match self.step(cx) {
            Ok(s) => s,
            // `--close reset`: the client's reset ends it, whenever it lands.
            Err(e)
                if self.reset
                    && self.session.is_some()
                    && matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                    ) =>
            {
                cx.counters.resets += 1;
                Status::Done
            }
            Err(e) => Status::Failed(e),
        }
    }
}
