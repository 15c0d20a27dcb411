//! TCP_INFO of other processes' sockets through sock_diag netlink (what
//! `ss -ti` reads), so the window an unmodified program's connection sees
//! (scp's) can be sampled mid-transfer without spawning `ss` every few ms.
//! Reads the calling thread's network namespace.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{tcpinfo, MeasureError};
use crate::model::sample::TcpInfo;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_INFO: u16 = 2;
const TCP_ESTABLISHED: u32 = 1;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct SockId {
    sport: [u8; 2],
    dport: [u8; 2],
    src: [u32; 4],
    dst: [u32; 4],
    ifindex: u32,
    cookie: [u32; 2],
}

#[repr(C)]
struct Request {
    nlh: libc::nlmsghdr,
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: SockId,
}

/// One established IPv4 TCP connection and its kernel state.
pub struct Conn {
    pub src: Ipv4Addr,
    pub sport: u16,
    pub dst: Ipv4Addr,
    pub dport: u16,
    pub info: TcpInfo,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Every established IPv4 TCP connection in this thread's namespace.
pub fn tcp_connections() -> Result<Vec<Conn>, MeasureError> {
    // SAFETY: plain socket call; the descriptor is owned right away.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(MeasureError::SockDiag(std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let req = Request {
        nlh: libc::nlmsghdr {
            nlmsg_len: std::mem::size_of::<Request>() as u32,
            nlmsg_type: SOCK_DIAG_BY_FAMILY,
            nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        family: libc::AF_INET as u8,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 1 << (INET_DIAG_INFO - 1),
        pad: 0,
        states: 1 << TCP_ESTABLISHED,
        id: SockId::default(),
    };
    // SAFETY: sends the bytes of a fully initialised repr(C) request.
    let rc = unsafe {
        libc::send(
            fd.as_raw_fd(),
            &req as *const Request as *const libc::c_void,
            std::mem::size_of::<Request>(),
            0,
        )
    };
    if rc < 0 {
        return Err(MeasureError::SockDiag(std::io::Error::last_os_error()));
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: receives into a buffer of the length given.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n < 0 {
            return Err(MeasureError::SockDiag(std::io::Error::last_os_error()));
        }
        let n = n as usize;
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
            let typ = u16::from_ne_bytes(buf[off + 4..off + 6].try_into().unwrap());
            if len < 16 || off + len > n {
                return Ok(out);
            }
            if typ == libc::NLMSG_DONE as u16 {
                return Ok(out);
            }
            if typ == libc::NLMSG_ERROR as u16 {
                return Err(MeasureError::DumpRefused);
            }
            if let Some(c) = parse(&buf[off + 16..off + len]) {
                out.push(c);
            }
            off += align4(len);
        }
    }
}

/// An inet_diag_msg (72 bytes) followed by attributes.
fn parse(m: &[u8]) -> Option<Conn> {
    const MSG: usize = 72;
    if m.len() < MSG {
        return None;
    }
    let sport = u16::from_be_bytes([m[4], m[5]]);
    let dport = u16::from_be_bytes([m[6], m[7]]);
    let src = Ipv4Addr::new(m[8], m[9], m[10], m[11]);
    let dst = Ipv4Addr::new(m[24], m[25], m[26], m[27]);
    let mut off = MSG;
    while off + 4 <= m.len() {
        let len = u16::from_ne_bytes([m[off], m[off + 1]]) as usize;
        let typ = u16::from_ne_bytes([m[off + 2], m[off + 3]]);
        if len < 4 || off + len > m.len() {
            break;
        }
        if typ == INET_DIAG_INFO {
            let info = tcpinfo::from_bytes(&m[off + 4..off + len])?;
            return Some(Conn {
                src,
                sport,
                dst,
                dport,
                info,
            });
        }
        off += align4(len);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn sees_a_loopback_connection_and_its_window() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_s, _) = l.accept().unwrap();
        c.write_all(b"hello").unwrap();
        let conns = tcp_connections().unwrap();
        let mine = conns
            .iter()
            .find(|k| k.dport == port && k.dst == Ipv4Addr::LOCALHOST)
            .expect("the connection is listed");
        assert!(mine.info.snd_wnd.unwrap_or(0) > 0);
        assert!(mine.info.snd_mss > 0);
    }
}
