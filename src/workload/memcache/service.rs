//! memcache's server side: memcached started on the agent's host (or a
//! target the user runs), its own counts over the window, and the prefill
//! that sets every key before the window (so a get's hit means something).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream as StdStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::params::KvSpec;
use super::{mix_of, Mix};
use crate::engine::side::{ServiceProbe, ServiceStats, Stats};
use crate::kv::keyspace;
use crate::kv::protocol::{self, Reply};
use crate::kv::service::Service;
use crate::model::sample::{KvPrefill, ServiceWindow};
use crate::model::spec::TestSpec;
use crate::workload::{Conns, PrefillError, WorkloadError};

/// The server half of a memcache test: memcached started on `ip`
/// (`--service`), or nothing at all (`--target`: the clients load a
/// server this agent does not own). No flows arrive at the agent.
pub fn serve(spec: &TestSpec, ip: IpAddr) -> Result<Option<Service>, WorkloadError> {
    let kv = &mix_of(spec)?;
    kv.service
        .as_deref()
        .map(|cmd| Service::start(cmd, ip).map_err(|e| WorkloadError::Service(e.to_string())))
        .transpose()
}

/// `--target`, resolved: the memcached every client loads (None: each
/// server agent starts its own).
pub fn target(spec: &TestSpec) -> Result<Option<SocketAddr>, WorkloadError> {
    mix_of(spec)?
        .target
        .as_deref()
        .map(|t| crate::kv::resolve_target(t).map_err(|e| WorkloadError::KvInput(e.to_string())))
        .transpose()
}

/// memcached's own counts, read by a side that watches it: its `stats`
/// at the window's edges (the engine never speaks memcached).
struct MemcachedStats {
    /// "memcached 1.6.38".
    name: String,
    pid: Option<u32>,
    addr: SocketAddr,
}

impl ServiceStats for MemcachedStats {
    fn read(&self) -> Option<Stats> {
        crate::kv::service::stats(self.addr).ok()
    }

    fn window(&self, first: &Stats, last: &Stats) -> ServiceWindow {
        crate::kv::service::window(&self.name, self.pid, first, last)
    }
}

/// The memcached this agent started, watched over the window: its CPU
/// and its counts.
pub(super) fn watch(svc: &Service) -> ServiceProbe {
    ServiceProbe {
        pid: Some(svc.pid()),
        stats: Some(Box::new(MemcachedStats {
            name: svc.name.clone(),
            pid: Some(svc.pid()),
            addr: svc.addr,
        })),
    }
}

/// A memcached nobody here started (`--target`), watched from the client
/// side: its counts only.
pub fn watch_target(addr: SocketAddr) -> ServiceProbe {
    ServiceProbe {
        pid: None,
        stats: Some(Box::new(MemcachedStats {
            name: crate::kv::service::version(addr).unwrap_or_else(|_| "memcached".into()),
            pid: None,
            addr,
        })),
    }
}

/// The client side's connections to one memcached: one per flow, no
/// header (memcached's protocol from the first byte). With `fill`, the key
/// space is set first (one client per server is asked to).
pub fn open(
    targets: &[(u32, SocketAddr)],
    spec: &TestSpec,
    timeout: Duration,
    fill: bool,
) -> Result<(Conns, Option<KvPrefill>), WorkloadError> {
    let kv = &mix_of(spec)?;
    let prefill = match targets.first() {
        Some((_, addr)) if fill => Some(prefill(*addr, kv, spec.flows.min(8), timeout)?),
        _ => None,
    };
    let flows = crate::engine::setup::connect_plain(targets, spec, timeout)?;
    let mut conns = Conns::new(0, None);
    conns.established = flows.into_iter().map(|(id, s)| (id, s, None)).collect();
    Ok((conns, prefill))
}

/// Sets every key once, version 0, from `conns` blocking connections in
/// parallel (each a share of the keys, pipelined 256 sets at a time).
pub fn prefill(
    addr: SocketAddr,
    kv: &KvSpec,
    conns: u32,
    timeout: Duration,
) -> Result<KvPrefill, WorkloadError> {
    let mix = Arc::new(Mix::of(kv)?);
    let n = conns.max(1) as u64;
    let t0 = Instant::now();
    let deadline = t0 + timeout;
    let handles: Vec<_> = (0..n)
        .map(|k| {
            let mix = mix.clone();
            std::thread::spawn(move || prefill_share(addr, &mix, k, n, deadline))
        })
        .collect();
    let mut total = KvPrefill {
        connections: n as u32,
        ..Default::default()
    };
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok((keys, bytes, errors))) => {
                total.keys += keys;
                total.bytes += bytes;
                total.errors += errors;
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(PrefillError::Panicked);
            }
        }
    }
    if let Some(source) = first_err {
        return Err(WorkloadError::Prefill { addr, source });
    }
    total.seconds = t0.elapsed().as_secs_f64();
    Ok(total)
}

/// Keys k, k+n, k+2n, ...: (keys set, value bytes, error replies).
fn prefill_share(
    addr: SocketAddr,
    mix: &Mix,
    k: u64,
    n: u64,
    deadline: Instant,
) -> Result<(u64, u64, u64), PrefillError> {
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let mut s = StdStream::connect_timeout(&addr, left()).map_err(PrefillError::Io)?;
    let _ = s.set_nodelay(true);
    let mut out = Vec::with_capacity(1 << 20);
    let mut inbuf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    let mut key = Vec::new();
    let (mut keys, mut bytes, mut errors) = (0u64, 0u64, 0u64);
    let mut i = k;
    while i < mix.keys.len() {
        out.clear();
        let mut batch = 0;
        while i < mix.keys.len() && batch < 256 && out.len() < (1 << 20) {
            let len = mix.sizes.size_for(i, 0);
            let w = keyspace::word(i, 0);
            mix.keys.key(i, &mut key);
            protocol::encode_set(
                mix.dialect,
                &key,
                0,
                len,
                |b| keyspace::fill(b, w),
                &mut out,
            );
            bytes += len as u64;
            batch += 1;
            i += n;
        }
        s.set_write_timeout(Some(left()))
            .map_err(PrefillError::Io)?;
        s.write_all(&out).map_err(PrefillError::Gone)?;
        let mut got = 0;
        while got < batch {
            let mut at = 0;
            while let Some((reply, used)) = protocol::parse(mix.dialect, &inbuf[at..])? {
                at += used;
                got += 1;
                match reply {
                    Reply::Stored => keys += 1,
                    Reply::Error { .. } | Reply::NotStored => errors += 1,
                    other => return Err(PrefillError::UnexpectedReply(format!("{other:?}"))),
                }
                if got == batch {
                    break;
                }
            }
            inbuf.drain(..at);
            if got == batch {
                break;
            }
            s.set_read_timeout(Some(left())).map_err(PrefillError::Io)?;
            let r = s.read(&mut chunk).map_err(PrefillError::Gone)?;
            if r == 0 {
                return Err(PrefillError::Closed);
            }
            inbuf.extend_from_slice(&chunk[..r]);
        }
        if Instant::now() >= deadline {
            return Err(PrefillError::Late { keys });
        }
    }
    Ok((keys, bytes, errors))
}

/// memcached's worker threads from its command line (`-t N`, default 4).
pub(super) fn memcached_threads(command: &str) -> usize {
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == "-t" || *w == "--threads")
        .and_then(|i| words.get(i + 1))
        .or_else(|| {
            words
                .iter()
                .find_map(|w| w.strip_prefix("--threads=").map(|_| w))
        })
        .and_then(|w| w.trim_start_matches("--threads=").parse().ok())
        .unwrap_or(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcacheds_threads_are_read_from_its_command_line() {
        assert_eq!(memcached_threads("memcached -t 2 -m 1024"), 2);
        assert_eq!(memcached_threads("memcached --threads=8"), 8);
        assert_eq!(memcached_threads("memcached -m 64"), 4);
    }
}
