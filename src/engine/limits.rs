//! File descriptors: every flow is a socket, so thousands of flows need
//! thousands of descriptors. linerate raises its soft RLIMIT_NOFILE to the
//! hard limit at start (allowed without privileges) and, before a test
//! opens its flows, checks that they fit, so a short limit is one clear
//! error naming `ulimit -n` instead of EMFILE on flow 1,021.

use super::EngineError;

/// Descriptors a side needs beyond its flows: stdio, the control
/// connection, one epoll per worker, listeners, the memfd of --zerocopy.
const SPARE: u64 = 64;

fn get() -> Option<libc::rlimit> {
    // SAFETY: getrlimit writes into the plain struct it is given.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r)
}

/// Raises the soft descriptor limit to the hard one; returns (soft, hard).
pub fn raise_nofile() -> (u64, u64) {
    let Some(mut r) = get() else {
        return (0, 0);
    };
    if r.rlim_cur < r.rlim_max {
        let want = r.rlim_max;
        r.rlim_cur = want;
        // SAFETY: setrlimit reads the plain struct it is given.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    }
    get().map_or((0, 0), |r| (r.rlim_cur, r.rlim_max))
}

/// Checks that `flows` sockets (plus `workers` event loops and spares) fit
/// under the descriptor limit of this process, raised first if it can be.
/// `who` names this end in the error ("the client", "the agent").
pub fn ensure_fds(flows: u32, workers: u32, who: &str) -> Result<(), EngineError> {
    let need = flows as u64 + 2 * workers as u64 + SPARE;
    let (soft, hard) = raise_nofile();
    if soft == 0 || need <= soft {
        return Ok(());
    }
    Err(EngineError::TooFewFds {
        flows,
        need,
        who: who.to_string(),
        soft,
        hard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_too_small_names_ulimit() {
        let (soft, _) = raise_nofile();
        assert!(ensure_fds(10, 2, "the client").is_ok());
        let too_many = (soft.min(u32::MAX as u64 - 1000) + 1) as u32;
        let e = ensure_fds(too_many, 2, "the client")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ulimit -n") && e.contains("the client may open"),
            "{e}"
        );
    }
}
