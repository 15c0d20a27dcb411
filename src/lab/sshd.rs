//! A real OpenSSH server of linerate's own in a lab's server namespace: its
//! own host key, client key, config and known_hosts in a private folder, so
//! scp runs unmodified (`scp -F {ssh_config} FILE server:...`) without
//! touching the host's sshd, keys or ~/.ssh.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::netns;
use super::state::LabState;
use super::LabError;

pub const SSHD: &str = "/usr/sbin/sshd";

pub struct Sshd {
    child: Child,
    pub addr: String,
    pub port: u16,
    /// An ssh_config naming `Host server`; pass it with `-F`.
    pub config: PathBuf,
    pub version: String,
}

fn run(cmd: &mut Command, what: &str) -> Result<String, LabError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| LabError::NoOpenssh {
            what: what.into(),
            source,
        })?;
    if !out.status.success() {
        return Err(LabError::Openssh {
            what: what.into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

fn keygen(path: &Path) -> Result<String, LabError> {
    run(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "linerate", "-f"])
            .arg(path),
        "ssh-keygen",
    )?;
    let public = path.with_extension("pub");
    std::fs::read_to_string(&public)
        .map(|s| s.trim().to_string())
        .map_err(|source| LabError::Io {
            path: public,
            source,
        })
}

/// `ssh -V` (it prints to stderr).
pub fn version() -> String {
    Command::new("ssh")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
        .unwrap_or_else(|_| "ssh not found".into())
}

impl Sshd {
    /// Writes keys and configs into `dir` and starts sshd on port 22 of the
    /// lab's server address; returns once it accepts connections.
    pub fn start(dir: &Path, lab: &LabState) -> Result<Sshd, LabError> {
        if !Path::new(SSHD).exists() {
            return Err(LabError::NoSshd(SSHD));
        }
        // sshd's privilege separation needs this directory.
        std::fs::create_dir_all("/run/sshd").map_err(|source| LabError::Io {
            path: "/run/sshd".into(),
            source,
        })?;
        let host_key = dir.join("host_ed25519");
        let user_key = dir.join("id_ed25519");
        let host_pub = keygen(&host_key)?;
        let user_pub = keygen(&user_key)?;
        let addr = lab.server_addr.clone();
        let port = 22u16;
        let auth = dir.join("authorized_keys");
        std::fs::write(&auth, format!("{user_pub}\n")).map_err(LabError::Os)?;
        let known = dir.join("known_hosts");
        std::fs::write(&known, format!("{addr} {host_pub}\n")).map_err(LabError::Os)?;
        let sshd_config = dir.join("sshd_config");
        std::fs::write(
            &sshd_config,
            format!(
                "# linerate's own sshd for lab {lab}\n\
                 ListenAddress {addr}\nPort {port}\nHostKey {hk}\nAuthorizedKeysFile {auth}\n\
                 PidFile {pid}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
                 Subsystem sftp internal-sftp\nLogLevel ERROR\nUseDNS no\n",
                lab = lab.name,
                hk = host_key.display(),
                auth = auth.display(),
                pid = dir.join("sshd.pid").display(),
            ),
        )
        .map_err(LabError::Os)?;
        let config = dir.join("ssh_config");
        std::fs::write(
            &config,
            format!(
                "Host server\n  HostName {addr}\n  Port {port}\n  User root\n  IdentityFile {key}\n\
                 \x20 IdentitiesOnly yes\n  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n\
                 \x20 BatchMode yes\n  LogLevel ERROR\n  Compression no\n",
                key = user_key.display(),
                known = known.display(),
            ),
        )
        .map_err(LabError::Os)?;
        run(
            Command::new(SSHD).arg("-t").arg("-f").arg(&sshd_config),
            "sshd -t (config check)",
        )?;
        let mut cmd = Command::new(SSHD);
        cmd.arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&sshd_config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(dir.join("sshd.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            );
        netns::command_in(&mut cmd, &lab.server_ns)?;
        let mut child = cmd.spawn().map_err(|source| LabError::Start {
            what: "sshd",
            source,
        })?;
        let target: SocketAddr = format!("{addr}:{port}")
            .parse()
            .map_err(LabError::Address)?;
        let ns = lab.client_ns.clone();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default();
                return Err(LabError::ExitedAtStart {
                    what: "sshd",
                    status: st,
                    log: log.trim().into(),
                });
            }
            let up = netns::run_in(&ns, move || {
                Ok(TcpStream::connect_timeout(&target, Duration::from_secs(2)).is_ok())
            })
            .unwrap_or(false);
            if up {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LabError::SshdSilent);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Sshd {
            child,
            addr,
            port,
            config,
            version: version(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
