//! A test's connections, made before its window opens. Each workload names
//! its connection pattern; how a pattern's connections are made is here,
//! once, for the controller, the agent and the fleet.

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
