//! Who may hold one of the agent's few authentication slots.
//!
//! A connection that has sent its first bytes (the lobby holds the silent
//! ones, see `lobby.rs`) costs the agent a thread while it proves the
//! token, so only [`MAX_UNAUTHENTICATED`] may be doing so at once.
//! Refusing the newest past that cap let anyone who reaches the port lock
//! every controller out by keeping 16 connections busy (issue 28). Instead,
//! as OpenSSH's MaxStartups and nginx's header timeouts do in spirit, a
//! slot is cheap to lose and quick to free:
//!
//! - a connection must finish within [`HANDSHAKE_DEADLINE`] of its accept,
//!   however it trickles;
//! - a new connection past the cap evicts a waiting one instead of being
//!   refused: the oldest of the source address that holds the most slots,
//!   so one flooding host evicts its own connections first, and a
//!   controller, which needs one round trip to authenticate, is the newest
//!   and so the last to go;
//! - a connection that has proven the token leaves the waiting list under
//!   the same lock that evicts (`Ticket::settle`), so an eviction cannot
//!   land between its proof and its session (the soak's flood found that
//!   race: one controller in about a thousand lost its connection at
//!   setup).
//!
//! What it does not protect against: a flood that fills the link, the
//! kernel's accept queue or the host's file descriptors; many sources
//! (more than the cap) sending bytes on new connections faster than a
//! controller authenticates (one round trip); anyone holding the token.

use std::collections::BTreeMap;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections allowed to be authenticating at once; a new one past this
/// evicts a waiting one.
pub const MAX_UNAUTHENTICATED: usize = 16;

/// Time a connection has to prove the token, in all (a peer trickling one
/// byte at a time gets no more).
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);

struct Waiting {
    id: u64,
    ip: IpAddr,
    since: Instant,
    /// A second handle on the socket, to wake its session when evicted.
    socket: TcpStream,
    evicted: Arc<AtomicBool>,
}

/// The connections authenticating now, oldest first.
#[derive(Default)]
pub struct Admission {
    waiting: Mutex<(u64, Vec<Waiting>)>,
}

/// One connection's slot: given back when dropped (authenticated, refused
/// or gone).
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    evicted: Arc<AtomicBool>,
}

impl Ticket {
    /// Whether a newer connection took this one's slot (its socket was
    /// shut for reading, so its handshake read ended).
    pub fn evicted(&self) -> bool {
        self.evicted.load(Ordering::SeqCst)
    }

    /// The token is proven: leave the waiting list, unless an eviction
    /// came first (false: the socket is already shut for reading).
    pub fn settle(&self) -> bool {
        let mut w = self.admission.lock();
        if self.evicted() {
            return false;
        }
        w.1.retain(|c| c.id != self.id);
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut w = self.admission.lock();
        w.1.retain(|c| c.id != self.id);
    }
}

/// What an admission did to make room, for the agent's log.
pub struct Evicted {
    pub ip: IpAddr,
    pub waited: Duration,
}

impl Admission {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Vec<Waiting>)> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits `conn` (from `ip`), evicting a waiting connection if the
    /// slots are full. None if the socket cannot be duplicated (out of
    /// file descriptors): the caller drops the connection.
    pub fn admit(
        self: &Arc<Self>,
        conn: &TcpStream,
        ip: IpAddr,
    ) -> Option<(Ticket, Option<Evicted>)> {
        let socket = conn.try_clone().ok()?;
        let evicted = Arc::new(AtomicBool::new(false));
        let mut w = self.lock();
        let mut out = None;
        if w.1.len() >= MAX_UNAUTHENTICATED {
            let victim = victim(&w.1);
            let v = w.1.remove(victim);
            v.evicted.store(true, Ordering::SeqCst);
            // Reading ends (the session sees end of file and says why);
            // the session closes the socket.
            let _ = v.socket.shutdown(Shutdown::Read);
            out = Some(Evicted {
                ip: v.ip,
                waited: v.since.elapsed(),
            });
        }
        w.0 += 1;
        let id = w.0;
        w.1.push(Waiting {
            id,
            ip,
            since: Instant::now(),
            socket,
            evicted: evicted.clone(),
        });
        Some((
            Ticket {
                admission: self.clone(),
                id,
                evicted,
            },
            out,
        ))
    }

    /// Connections authenticating now.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.lock().1.len()
    }
}

/// The index of the connection to evict: the oldest of the source that
/// holds the most slots (ties: the one whose oldest connection is oldest).
fn victim(waiting: &[Waiting]) -> usize {
    let mut per_ip: BTreeMap<IpAddr, (usize, usize)> = BTreeMap::new();
    for (i, c) in waiting.iter().enumerate() {
        // Oldest first, so the first index seen is the source's oldest.
        per_ip.entry(c.ip).or_insert((0, i)).0 += 1;
    }
    per_ip
        .values()
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map_or(0, |&(_, first)| first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn past_the_cap_the_oldest_of_the_busiest_source_goes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Arc::new(Admission::default());
        let flood: IpAddr = "198.18.0.9".parse().unwrap();
        let other: IpAddr = "198.18.0.7".parse().unwrap();
        let mut keep = Vec::new();
        let mut tickets = Vec::new();
        // One connection from another source first (the oldest of all).
        let (c0, s0) = pair(&l);
        let (t0, none) = a.admit(&s0, other).unwrap();
        assert!(none.is_none());
        for _ in 1..MAX_UNAUTHENTICATED {
            let (c, s) = pair(&l);
            let (t, none) = a.admit(&s, flood).unwrap();
            assert!(none.is_none());
            keep.push((c, s));
            tickets.push(t);
        }
        assert_eq!(a.waiting(), MAX_UNAUTHENTICATED);
        let (_c, s) = pair(&l);
        let (_t, ev) = a.admit(&s, flood).unwrap();
        let ev = ev.expect("the cap is reached: one is evicted");
        assert_eq!(
            ev.ip, flood,
            "the flooding source loses a slot, not the other"
        );
        assert!(!t0.evicted());
        assert!(tickets[0].evicted(), "the flood's oldest");
        assert!(tickets[1..].iter().all(|t| !t.evicted()));
        assert_eq!(a.waiting(), MAX_UNAUTHENTICATED);
        // The evicted socket reads end of file at once.
        use std::io::Read;
        let mut b = [0u8; 1];
        assert_eq!((&keep[0].1).read(&mut b).unwrap(), 0);
        drop(tickets);
        assert_eq!(a.waiting(), 2, "dropped tickets give their slots back");
        drop((c0, s0));
    }

    #[test]
    fn a_settled_connection_is_never_evicted_and_an_evicted_one_cannot_settle() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Arc::new(Admission::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut keep = Vec::new();
        let mut tickets = Vec::new();
        for _ in 0..MAX_UNAUTHENTICATED {
            let (c, s) = pair(&l);
            tickets.push(a.admit(&s, ip).unwrap().0);
            keep.push((c, s));
        }
        assert!(tickets[0].settle(), "proven before any eviction");
        for _ in 0..2 * MAX_UNAUTHENTICATED {
            let (c, s) = pair(&l);
            tickets.push(a.admit(&s, ip).unwrap().0);
            keep.push((c, s));
        }
        assert!(!tickets[0].evicted(), "settled: out of reach");
        assert!(tickets[1].evicted());
        assert!(!tickets[1].settle(), "evicted first: cannot settle");
    }

    #[test]
    fn with_one_source_the_oldest_goes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Arc::new(Admission::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut tickets = Vec::new();
        let mut keep = Vec::new();
        for _ in 0..MAX_UNAUTHENTICATED + 3 {
            let (c, s) = pair(&l);
            tickets.push(a.admit(&s, ip).unwrap().0);
            keep.push((c, s));
        }
        let evicted: Vec<bool> = tickets.iter().map(|t| t.evicted()).collect();
        assert_eq!(evicted[..3], [true, true, true]);
        assert!(evicted[3..].iter().all(|e| !e));
    }
}
