//! Asking a host tool for its state (`nft -j list ruleset`, `auditctl -s`)
//! without hanging on it: its output read while it runs (a ruleset of
//! thousands of rules is more than a pipe holds, and a child blocked on a
//! full pipe never exits), and a bound on how long it may take.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why a tool gave no answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// It could not be started (not installed).
    Missing,
    /// It did not finish within the bound (killed).
    Silent,
}

/// Runs `prog args` for at most `bound`; its exit success and stdout.
pub fn ask(prog: &str, args: &[&str], bound: Duration) -> Result<(bool, String), Unanswered> {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|_| Unanswered::Missing)?;
    let mut stdout = child.stdout.take().expect("piped above");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + bound;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Unanswered::Silent);
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    Ok((status.success(), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_larger_than_a_pipe_comes_back_whole_and_a_slow_tool_is_cut() {
        // 1 MiB on stdout: more than a pipe holds before the tool exits.
        let (ok, out) = ask(
            "head",
            &["-c", "1048576", "/dev/zero"],
            Duration::from_secs(5),
        )
        .unwrap();
        assert!(ok);
        assert_eq!(out.len(), 1 << 20);
        let t = Instant::now();
        assert_eq!(
            ask("sleep", &["5"], Duration::from_millis(200)),
            Err(Unanswered::Silent)
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(
            ask("no-such-tool-here", &[], Duration::from_secs(1)),
            Err(Unanswered::Missing)
        );
    }
}
