//! The embedded local agent: `linerate run` without `--agent` starts
//! `linerate serve` as a child process on 127.0.0.1 (or ::1), on a random
//! port with a random token, so the local case takes the same code path as a
//! remote agent and client and agent CPU are measured separately.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::error::ControllerError;
use crate::control::protocol::random_hex;

pub struct LocalAgent {
    child: Child,
    pub addr: SocketAddr,
    pub token: String,
}

impl LocalAgent {
    /// Starts the agent on `listen` (port 0: any); `extra` are more `serve`
    /// arguments (its TLS files, a lab's server namespace).
    pub fn spawn(listen: &str, extra: &[String]) -> Result<LocalAgent, ControllerError> {
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            listen,
            "--once",
            "--exit-with-parent",
            "--quiet",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().cloned());
        LocalAgent::spawn_with(&args, random_hex(32), None)
    }

    /// Starts `linerate ARGS` (a `serve` that announces its address on
    /// stdout) with `token` on its standard input; `crypto_mask` Some(true)
    /// runs it with the crypto extensions masked, Some(false) without a
    /// mask this process may have.
    pub fn spawn_with(
        args: &[String],
        token: String,
        crypto_mask: Option<bool>,
    ) -> Result<LocalAgent, ControllerError> {
        let exe = std::env::current_exe().map_err(ControllerError::NoExe)?;
        let mut cmd = Command::new(exe);
        // The token goes on standard input: never in a command line or an
        // environment that other processes could read.
        // An empty token: the agent holds none (a companion of an agent
        // started with --insecure-no-token or on loopback without one).
        cmd.args(args)
            .arg(if token.is_empty() {
                "--insecure-no-token"
            } else {
                "--token-stdin"
            })
            .env_remove("LINERATE_TOKEN");
        match crypto_mask {
            Some(true) => {
                cmd.env("OPENSSL_ia32cap", crate::measure::crypto::HW_OFF_MASK);
            }
            Some(false) => {
                cmd.env_remove("OPENSSL_ia32cap");
            }
            None => {}
        }
        // A process group of its own: a terminal's Ctrl-C goes to the
        // controller, which ends the test and then the agent; the agent
        // still dies with its parent (--exit-with-parent).
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(ControllerError::LocalStart)?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("piped stdin");
            if let Err(e) = writeln!(stdin, "{token}") {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ControllerError::LocalToken(e));
            }
        }
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ControllerError::LocalSilent);
            }
        };
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| {
                let _ = child.kill();
                let _ = child.wait();
                ControllerError::LocalAddress(line.trim().to_string())
            })?;
        Ok(LocalAgent { child, addr, token })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for LocalAgent {
    fn drop(&mut self) {
        // It exits by itself after its controller leaves; do not wait long.
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
