//! The process's signal handling, in one place.
//!
//! SIGPIPE stays fatal for the main thread (so `linerate ... | head` ends
//! quietly, as Unix tools do) but must never kill a worker: `sendfile(2)` and
//! `writev(2)` on a socket the peer has reset raise SIGPIPE, unlike std's
//! `send` which passes MSG_NOSIGNAL. A peer closing at the end of a test is
//! normal, so workers block the signal and see EPIPE as an error instead.
//! SIGPIPE is sent to the thread that wrote, so a per-thread mask suffices;
//! a blocked, pending SIGPIPE is discarded when the thread exits.

use std::sync::atomic::{AtomicBool, Ordering};

/// The flag `on_signals` handlers raise (one per process: a study's Ctrl-C,
/// the emulator's SIGTERM).
static RAISED: AtomicBool = AtomicBool::new(false);

extern "C" fn raise(_: libc::c_int) {
    RAISED.store(true, Ordering::SeqCst);
}

/// Raised by SIGTERM where `on_terminate` asked for it: the running test
/// ends now, whatever `ENDS_TEST` says.
static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn terminate(_: libc::c_int) {
    RAISED.store(true, Ordering::SeqCst);
    TERMINATED.store(true, Ordering::SeqCst);
}

/// SIGTERM (what `timeout`, `kill` and a service manager send) ends the
/// running test now and raises the flag, so what was measured is kept and
/// what the process set up (a study's lab) is taken down as after a
/// Ctrl-C; a second SIGTERM kills as usual. Call after `on_signals`.
pub fn on_terminate() {
    TERMINATED.store(false, Ordering::SeqCst);
    // SAFETY: the handler only stores to atomics (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = terminate as *const () as usize;
        sa.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// What stopped the work, for messages: "interrupted (Ctrl-C)" or
/// "terminated (SIGTERM)".
pub fn stopped_by() -> &'static str {
    if terminated() {
        "terminated (SIGTERM)"
    } else {
        "interrupted (Ctrl-C)"
    }
}

/// A SIGTERM arrived (see `on_terminate`).
pub fn terminated() -> bool {
    TERMINATED.load(Ordering::SeqCst)
}

/// Turns `signals` into a flag (see `raised`) instead of death. With `once`,
/// the first signal only raises the flag and the next one kills as usual
/// (SA_RESETHAND): a second Ctrl-C always works.
pub fn on_signals(signals: &[libc::c_int], once: bool) {
    RAISED.store(false, Ordering::SeqCst);
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = raise as *const () as usize;
        sa.sa_flags = libc::SA_RESTART | if once { libc::SA_RESETHAND } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        for &s in signals {
            libc::sigaction(s, &sa, std::ptr::null_mut());
        }
    }
}

/// The flag `on_signals` raises.
pub fn raised() -> &'static AtomicBool {
    &RAISED
}

/// Whether the raised flag ends the running test (`linerate run`: the
/// first Ctrl-C ends the window now and keeps what was measured) or only
/// the work after it (a study finishes its current test).
static ENDS_TEST: AtomicBool = AtomicBool::new(false);

/// From now on the first Ctrl-C ends the running test (see `ENDS_TEST`).
pub fn interrupt_ends_test() {
    ENDS_TEST.store(true, Ordering::SeqCst);
}

/// A Ctrl-C asked the running test to end.
pub fn test_interrupted() -> bool {
    (ENDS_TEST.load(Ordering::SeqCst) && RAISED.load(Ordering::SeqCst))
        || TERMINATED.load(Ordering::SeqCst)
}

/// Blocks SIGPIPE in the calling thread.
pub fn block_in_this_thread() {
    // SAFETY: plain sigset manipulation on a stack value; pthread_sigmask only
    // changes the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use std::io::IoSlice;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::process::Command;

    const CHILD: &str = "LINERATE_SIGPIPE_CHILD";

    /// Writes to a socket whose peer is gone, with SIGPIPE at its default
    /// (fatal) disposition, from a thread that blocked it the way workers do.
    /// Run in a child process so a regression kills the child, not the
    /// test harness.
    #[test]
    fn a_worker_survives_writing_to_a_closed_peer() {
        if std::env::var_os(CHILD).is_some() {
            // SAFETY: this child process exists only to run this check.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
            let t = std::thread::spawn(|| {
                super::block_in_this_thread();
                let (a, b) = UnixStream::pair().unwrap();
                drop(b);
                let buf = [1u8; 64];
                let iov = [IoSlice::new(&buf)];
                // SAFETY: a valid fd and one valid iovec.
                let rc =
                    unsafe { libc::writev(a.as_raw_fd(), iov.as_ptr().cast(), iov.len() as i32) };
                assert_eq!(rc, -1);
                assert_eq!(
                    std::io::Error::last_os_error().raw_os_error(),
                    Some(libc::EPIPE)
                );
            });
            t.join().unwrap();
            return;
        }
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "engine::signals::tests::a_worker_survives_writing_to_a_closed_peer",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "child died: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    }
}
