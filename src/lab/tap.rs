//! What a lab link delivered, as the receiving host's kernel saw it: a
//! packet socket on a namespace's link device, every arriving packet timed
//! by the kernel (`SO_TIMESTAMPNS`) when it reached the device.
//!
//! Why not the receiving program's reads, or TCP's byte counters: both are
//! late in their own ways. A reader that was descheduled reads the backlog
//! of its stall at once, and TCP hands over what arrived behind a lost
//! segment only when the retransmission fills the hole, so a window that
//! opens just before either sees more bytes than the link carried. The
//! kernel's arrival stamps are taken on the packet's way in, whoever is
//! late to read them: the tap may fall behind and still times every packet
//! right (its buffer holds seconds of headers; drops are counted).
//!
//! Used by calibration (the rate one flow gets, and the most the link
//! carried over any window) and by the tests that hold the emulator to its
//! rate on a starved host.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::emulator::{header_len, wire_size, DEFAULT_SEGMENT_HEADER};
use super::{netns, LabError};
use crate::measure::rxstamp;

/// The most packets a tap keeps (about 80 s of 1 Gbit/s in single
/// packets; 24 bytes each): past it, arrivals are counted, not kept.
const MAX_PACKETS: usize = 8_000_000;
/// Bytes of each packet copied to the tap: IP and TCP headers.
const SNAP: usize = 128;

/// One packet that arrived: when (ns, CLOCK_REALTIME), its size on the
/// wire (framing included, per segment of a GSO packet) and its payload
/// above the transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub at_ns: u64,
    pub wire_bytes: u64,
    pub payload: u64,
}

/// What a tap saw.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// Arrivals in order of their kernel stamps.
    pub arrivals: Vec<Arrival>,
    /// Packets the tap's socket dropped (it fell behind by its whole
    /// buffer) or that came past [`MAX_PACKETS`]: the figures then miss them.
    pub missed: u64,
}

/// A running tap: reads until [`Tap::stop`].
pub struct Tap {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Seen, LabError>>>,
}

impl Tap {
    /// Starts timing the packets that arrive on device `dev` of namespace
    /// `ns` (a link of `mtu`, for the wire size of GSO packets).
    pub fn start(ns: &str, dev: &str, mtu: u32) -> Result<Tap, LabError> {
        let (ns, dev) = (ns.to_string(), dev.to_string());
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("linerate-tap".into())
            .spawn(move || {
                let sock = netns::enter(&ns).and_then(|_| open(&dev).map_err(LabError::Os));
                let sock = match sock {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return Err(e);
                    }
                };
                read_until(&sock, &flag, mtu)
            })
            .map_err(LabError::Os)?;
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => Ok(Tap {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(_)) | Err(_) => {
                stop.store(true, Ordering::Relaxed);
                match thread.join() {
                    Ok(Err(e)) => Err(e),
                    _ => Err(LabError::ThreadPanicked),
                }
            }
        }
    }

    /// Stops the tap and returns what it saw.
    pub fn stop(mut self) -> Result<Seen, LabError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(LabError::ThreadPanicked),
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A packet socket (IP layer: no link header) bound to `dev`, with kernel
/// receive stamps, a 32 MiB buffer and a 50 ms receive timeout (the stop
/// flag's latency).
fn open(dev: &str) -> io::Result<OwnedFd> {
    let proto = (libc::ETH_P_IP as u16).to_be();
    // SAFETY: plain syscall; the result is checked before use.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            i32::from(proto),
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let name = std::ffi::CString::new(dev)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "device name"))?;
    // SAFETY: a NUL-terminated name that outlives the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no device {dev}: {}", io::Error::last_os_error()),
        ));
    }
    // SAFETY: sockaddr_ll is plain data; zeroes are valid for every field.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = index as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the length given.
    let rc = unsafe {
        libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let set = |level, name, v: libc::c_int| {
        // SAFETY: an int option of the right size on our own socket.
        let rc = unsafe {
            libc::setsockopt(
                raw,
                level,
                name,
                (&v as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    set(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    // Root may go past net.core.rmem_max; without it, the default stays.
    let _ = set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 32 << 20);
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 50_000,
    };
    // SAFETY: a timeval of the right size on our own socket.
    let rc = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Reads arrivals until `stop`; the socket's drop count at the end.
fn read_until(sock: &OwnedFd, stop: &AtomicBool, mtu: u32) -> Result<Seen, LabError> {
    let mut seen = Seen::default();
    let mut buf = [0u8; SNAP];
    let mut control = [0u64; rxstamp::CONTROL_WORDS];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: sockaddr_ll and msghdr are plain data; zeroes are valid.
        let mut from: libc::sockaddr_ll = unsafe { zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: every pointer in `msg` is valid for the lengths it gives.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => continue,
                _ => return Err(LabError::Os(e)),
            }
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let Some(at_ns) = rxstamp::stamp_ns(&msg) else {
            continue;
        };
        let ip_len = n as u32;
        let head = &buf[..(n as usize).min(SNAP)];
        let hdr = header_len(head).unwrap_or(DEFAULT_SEGMENT_HEADER);
        let size = wire_size(ip_len, hdr, mtu);
        if seen.arrivals.len() < MAX_PACKETS {
            seen.arrivals.push(Arrival {
                at_ns,
                wire_bytes: size.wire_bytes,
                payload: u64::from(ip_len.saturating_sub(hdr)),
            });
        } else {
            seen.missed += 1;
        }
    }
    seen.missed += dropped(sock);
    // Stamps come in arrival order but for a rare reordering between CPUs.
    seen.arrivals.sort_by_key(|a| a.at_ns);
    Ok(seen)
}

/// Packets the socket dropped since it opened (PACKET_STATISTICS).
fn dropped(sock: &OwnedFd) -> u64 {
    // SAFETY: tpacket_stats is plain data; the length matches it.
    let mut st: libc::tpacket_stats = unsafe { zeroed() };
    let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` and `len` are valid for the call.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        u64::from(st.tp_drops)
    } else {
        0
    }
}

impl Seen {
    /// The most wire bits per second the link delivered over any window of
    /// `window_ns` that starts at an arrival: the bytes of the packets
    /// after it up to `window_ns` later, over `window_ns`. None when the
    /// arrivals span less than one window.
    pub fn peak_bps(&self, window_ns: u64) -> Option<f64> {
        let a = &self.arrivals;
        let (first, last) = (a.first()?, a.last()?);
        if window_ns == 0 || last.at_ns - first.at_ns < window_ns {
            return None;
        }
        let mut best = 0u64;
        let (mut j, mut sum) = (0usize, 0u64);
        for i in 0..a.len() {
            // Window (a[i], a[i] + w]: a[i]'s own bytes ended at its stamp.
            if j <= i {
                j = i + 1;
                sum = 0;
            }
            while j < a.len() && a[j].at_ns <= a[i].at_ns + window_ns {
                sum += a[j].wire_bytes;
                j += 1;
            }
            best = best.max(sum);
            if j == a.len() {
                break;
            }
            if i + 1 < j {
                sum -= a[i + 1].wire_bytes;
            }
        }
        Some(best as f64 * 8e9 / window_ns as f64)
    }

    /// Payload bits per second over the second half of the packets that
    /// carried data (after slow start; a closing handshake's last ACK, an
    /// RTT after the data, is not part of it): the rate one flow got.
    pub fn second_half_goodput_bps(&self) -> Option<f64> {
        let data: Vec<Arrival> = self
            .arrivals
            .iter()
            .filter(|x| x.payload > 0)
            .copied()
            .collect();
        let a = &data;
        let (first, last) = (a.first()?, a.last()?);
        let mid = first.at_ns + (last.at_ns - first.at_ns) / 2;
        let m = a.partition_point(|x| x.at_ns <= mid);
        let span = last.at_ns.checked_sub(a.get(m.checked_sub(1)?)?.at_ns)?;
        if span == 0 {
            return None;
        }
        let bytes: u64 = a[m..].iter().map(|x| x.payload).sum();
        Some(bytes as f64 * 8e9 / span as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(v: &[(u64, u64)]) -> Seen {
        Seen {
            arrivals: v
                .iter()
                .map(|&(at_ns, wire_bytes)| Arrival {
                    at_ns,
                    wire_bytes,
                    payload: wire_bytes,
                })
                .collect(),
            missed: 0,
        }
    }

    #[test]
    fn an_even_stream_peaks_at_its_rate_and_a_burst_above_it() {
        // 1000 B every 8 µs: 1 Gbit/s for 10 ms.
        let even: Vec<(u64, u64)> = (0..1250).map(|i| (i * 8_000, 1000)).collect();
        let p = seen(&even).peak_bps(1_000_000).unwrap();
        assert!((p - 1e9).abs() < 1e-6 * 1e9, "{p}");
        // The same bytes with a 1 ms hole whose packets come at once after it.
        let mut bunched = even.clone();
        for x in bunched.iter_mut() {
            if (2_000_000..3_000_000).contains(&x.0) {
                x.0 = 3_000_000;
            }
        }
        let p = seen(&bunched).peak_bps(1_000_000).unwrap();
        assert!(p > 1.9e9, "{p}");
        // Too short for a window.
        assert_eq!(seen(&even[..10]).peak_bps(1_000_000), None);
    }

    #[test]
    fn the_second_half_is_read_after_slow_start() {
        // Half rate for the first 5 ms, full rate for the next 5.
        let mut v: Vec<(u64, u64)> = (0..312).map(|i| (i * 16_000, 1000)).collect();
        v.extend((0..625).map(|i| (5_000_000 + i * 8_000, 1000)));
        let mut s = seen(&v);
        // The last ACK of the close, 10 ms later, carries nothing.
        s.arrivals.push(Arrival {
            at_ns: 20_000_000,
            wire_bytes: 90,
            payload: 0,
        });
        let g = s.second_half_goodput_bps().unwrap();
        assert!((g / 1e9 - 1.0).abs() < 0.01, "{g}");
    }
}
