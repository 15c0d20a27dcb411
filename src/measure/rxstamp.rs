//! The kernel's receive stamps (`SO_TIMESTAMPNS`): when a packet reached
//! the host, on CLOCK_REALTIME, read off a received message's control
//! data. The lab's tap times the link's packets with them, and an open
//! loop's flows how long a message waited in their socket.

/// Room for one SCM_TIMESTAMPNS (a timespec) with its header, as `u64`s
/// for alignment.
pub const CONTROL_WORDS: usize = 8;

/// The SCM_TIMESTAMPNS of a received message, ns since the epoch.
pub fn stamp_ns(msg: &libc::msghdr) -> Option<u64> {
    // SAFETY: CMSG_* walk the control buffer `msg` points to, within the
    // length the kernel wrote into it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// CLOCK_REALTIME now, ns since the epoch: the stamps' clock.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for the call; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_tcp_read_carries_the_time_its_data_arrived() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let on: libc::c_int = 1;
        // SAFETY: an int option of the right size on our own socket.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                4,
            );
        }
        // The kernel turns stamping on host-wide a moment after the first
        // socket asks (deferred work): a segment sent at once may have none.
        std::thread::sleep(std::time::Duration::from_millis(50));
        c.write_all(b"x").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = [0u8; 16];
        let mut control = [0u64; CONTROL_WORDS];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; its pointers are valid below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: every pointer in `msg` is valid for the lengths it gives.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
        assert_eq!(n, 1);
        let waited = realtime_ns() - stamp_ns(&msg).expect("a stamp");
        // It waited in the socket for the 20 ms the reader slept.
        assert!((19_000_000..1_000_000_000).contains(&waited), "{waited} ns");
    }
}
