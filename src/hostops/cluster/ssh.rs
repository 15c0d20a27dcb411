//! What `cluster` does on each host over OpenSSH, every call bounded in
//! time: logging in, copying the binary where its version or hash differs,
//! and starting, stopping and checking the agent.

use super::*;

/// `s` quoted for a POSIX shell.
pub(super) fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:=@%+-,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The remote binary's path as the remote shell runs it: relative paths are
/// under the login's home (`~/` is dropped), and get a `./` so that a bare
/// name is never looked up in PATH. Only characters that need no quoting in
/// scp's remote path are allowed.
pub fn remote_binary(host: &Host) -> Result<String, OpsError> {
    let raw = host.remote_binary.trim();
    let p = raw.strip_prefix("~/").unwrap_or(raw);
    let ok = !p.is_empty()
        && !p.ends_with('/')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/+-".contains(c));
    if !ok {
        return Err(OpsError::host(
            &host.name,
            HostError::RemoteBinary(raw.into()),
        ));
    }
    Ok(if p.starts_with('/') || p.starts_with("./") {
        p.to_string()
    } else {
        format!("./{p}")
    })
}

/// The folder of a remote path ("." for a name alone).
pub(super) fn remote_dir(bin: &str) -> &str {
    match bin.rfind('/') {
        Some(0) => "/",
        Some(i) => &bin[..i],
        None => ".",
    }
}

/// How one host is reached over ssh.
#[derive(Clone, Debug)]
pub(super) struct Login {
    pub(super) name: String,
    pub(super) dest: String,
    pub(super) options: Vec<String>,
}

impl Login {
    pub(super) fn of(host: &Host) -> Result<Login, OpsError> {
        Login::new(&host.name, &host.ssh, &host.ssh_options)
    }

    pub(super) fn new(name: &str, dest: &str, options: &[String]) -> Result<Login, OpsError> {
        if dest.is_empty() || dest.starts_with('-') || dest.contains(char::is_whitespace) {
            return Err(OpsError::host(name, HostError::Destination(dest.into())));
        }
        Ok(Login {
            name: name.to_string(),
            dest: dest.to_string(),
            options: options.to_vec(),
        })
    }

    /// ssh keeps the first value it gets of each setting: BatchMode comes
    /// first (never a password prompt), ConnectTimeout after the file's
    /// `ssh_options` (which may set a longer one).
    pub(super) fn with_options(&self, cmd: &mut Command, options: &[String]) {
        cmd.args(["-o", "BatchMode=yes"])
            .args(options)
            .args(["-o", "ConnectTimeout=5"]);
    }

    /// scp's spelling of the ssh options: the port is -P.
    pub(super) fn scp_options(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut it = self.options.iter();
        while let Some(o) = it.next() {
            if o == "-p" {
                out.push("-P".to_string());
                if let Some(v) = it.next() {
                    out.push(v.clone());
                }
            } else if let Some(v) = o.strip_prefix("-p").filter(|v| !v.is_empty()) {
                out.push(format!("-P{v}"));
            } else {
                out.push(o.clone());
            }
        }
        out
    }

    /// scp's form of the destination: an IPv6 literal in brackets.
    pub(super) fn scp_dest(&self) -> String {
        let (user, host) = match self.dest.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), self.dest.as_str()),
        };
        if host.contains(':') && !host.starts_with('[') {
            format!("{user}[{host}]")
        } else {
            format!("{user}{host}")
        }
    }

    /// Runs `script` with `sh -c` on the host (whatever the login shell),
    /// `stdin` on its standard input; returns its standard output.
    pub(super) fn sh(
        &self,
        script: &str,
        stdin: Option<&str>,
        what: &str,
    ) -> Result<String, OpsError> {
        let mut cmd = Command::new("ssh");
        self.with_options(&mut cmd, &self.options);
        cmd.arg("--")
            .arg(&self.dest)
            .arg(format!("sh -c {}", sh_quote(script)));
        let out = bounded(cmd, stdin, SSH_LIMIT, &self.name, "ssh")?;
        if !out.status.success() {
            let (dest, reason) = (self.dest.clone(), last_line(&out));
            let e = if out.status.code() == Some(255) {
                HostError::Ssh { dest, reason }
            } else {
                HostError::Remote {
                    what: what.into(),
                    dest,
                    reason,
                }
            };
            return Err(OpsError::host(&self.name, e));
        }
        Ok(out.stdout)
    }

    pub(super) fn scp(&self, local: &Path, remote: &str) -> Result<(), OpsError> {
        let mut cmd = Command::new("scp");
        cmd.arg("-q");
        self.with_options(&mut cmd, &self.scp_options());
        cmd.arg("--")
            .arg(local)
            .arg(format!("{}:{remote}", self.scp_dest()));
        let out = bounded(cmd, None, SCP_LIMIT, &self.name, "scp")?;
        if !out.status.success() {
            return Err(OpsError::host(
                &self.name,
                HostError::Scp {
                    dest: self.dest.clone(),
                    remote: remote.into(),
                    reason: last_line(&out),
                },
            ));
        }
        Ok(())
    }
}

pub(super) struct Output {
    pub(super) status: ExitStatus,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

/// The last non-empty line of standard error (ssh's own reason), else the
/// exit status.
pub(super) fn last_line(o: &Output) -> String {
    o.stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("{} with nothing on standard error", o.status))
}

/// Runs `cmd` with `stdin` written to it, killing it (by its pid) after `limit`.
pub(super) fn bounded(
    mut cmd: Command,
    stdin: Option<&str>,
    limit: Duration,
    host: &str,
    program: &'static str,
) -> Result<Output, OpsError> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| {
        let e = if source.kind() == std::io::ErrorKind::NotFound {
            HostError::NoClient(program)
        } else {
            HostError::Spawn { program, source }
        };
        OpsError::host(host, e)
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // ssh may be gone already (it failed to connect): then the write
        // fails with EPIPE, which must not kill this process.
        crate::engine::signals::block_in_this_thread();
        let _ = pipe.write_all(text.as_bytes());
    }
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out_pipe.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(OpsError::host(
                    host,
                    HostError::Timeout {
                        program,
                        secs: limit.as_secs_f64(),
                    },
                ));
            }
            Err(source) => return Err(OpsError::host(host, HostError::Wait { program, source })),
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(Output {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

// ---------------------------------------------------------------- the binary

/// sha256 of this binary (what `up` compares with the remote file),
/// computed once: the hosts' threads wait for the first; a failure is not
/// kept (an io::Error cannot be shared), so each later caller tries again.
pub(super) fn local_sha256(exe: &Path) -> Result<String, OpsError> {
    static HASH: Mutex<Option<String>> = Mutex::new(None);
    let mut hash = HASH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = &*hash {
        return Ok(h.clone());
    }
    let io = |source| OpsError::Io {
        path: exe.into(),
        source,
    };
    let mut f = std::fs::File::open(exe).map_err(io)?;
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    let h: String = ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    *hash = Some(h.clone());
    Ok(h)
}

/// What the remote binary is: its `--version` line (or "missing"/"broken")
/// and its sha256 when the host has sha256sum.
pub(super) fn remote_version(
    login: &Login,
    bin: &str,
) -> Result<(String, Option<String>), OpsError> {
    let b = sh_quote(bin);
    let script = format!(
        "b={b}; if [ -x \"$b\" ]; then \"$b\" --version 2>/dev/null || echo broken; \
         sha256sum \"$b\" 2>/dev/null | cut -c1-64; else echo missing; fi"
    );
    let out = login.sh(&script, None, "checking the linerate binary")?;
    let mut lines = out.lines().map(str::trim);
    let version = lines.next().unwrap_or("broken").to_string();
    let sha = lines
        .next()
        .filter(|l| l.len() == 64 && l.chars().all(|c| c.is_ascii_hexdigit()))
        .map(str::to_string);
    Ok((version, sha))
}

/// What `up` did about a host's binary.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub enum Binary {
    /// It was there, the same version and build.
    Present,
    /// It was copied; what the host had before ("missing", a version, or
    /// "linerate X (another build)").
    Copied { before: String },
}

/// Makes sure `bin` on the host is this binary: checks, and copies with scp
/// (to a temporary name, then renamed: a running agent keeps its file).
pub(super) fn ensure_binary(login: &Login, bin: &str, exe: &Path) -> Result<Binary, OpsError> {
    let ours = software();
    let local_sha = local_sha256(exe)?;
    let (version, sha) = remote_version(login, bin)?;
    let same_build = sha.as_deref().is_none_or(|s| s == local_sha);
    if version == ours && same_build {
        return Ok(Binary::Present);
    }
    let before = if version == ours {
        format!("{version} (another build)")
    } else {
        version
    };
    let dir = remote_dir(bin);
    if dir != "." {
        login.sh(
            &format!("mkdir -p {}", sh_quote(dir)),
            None,
            "creating the binary's folder",
        )?;
    }
    let tmp = format!("{bin}.tmp.{}", random_hex(4));
    if let Err(e) = login.scp(exe, &tmp) {
        let _ = login.sh(&format!("rm -f {}", sh_quote(&tmp)), None, "cleaning up");
        return Err(e);
    }
    let script = format!(
        "t={}; b={}; chmod 755 \"$t\" && mv -f \"$t\" \"$b\" || {{ rm -f \"$t\"; exit 1; }}; \"$b\" --version",
        sh_quote(&tmp),
        sh_quote(bin)
    );
    let out = login.sh(&script, None, "installing the binary")?;
    let got = out.lines().next().unwrap_or("").trim();
    if got != ours {
        return Err(OpsError::host(
            &login.name,
            HostError::Foreign {
                got: got.into(),
                ours,
            },
        ));
    }
    Ok(Binary::Copied { before })
}

// ---------------------------------------------------------------- agents

/// The start of the agent's command line as `up` runs it; `down` stops a
/// process only if its /proc/PID/cmdline begins with this.
pub(super) fn serve_prefix(bin: &str, control: SocketAddr) -> String {
    format!("{bin} serve --listen {control} ")
}

/// Starts the agent in the background over ssh, the token on stdin.
pub(super) fn start_agent(
    login: &Login,
    bin: &str,
    control: SocketAddr,
    token: &str,
) -> Result<u32, OpsError> {
    let log = format!("{}/agent-{}.log", remote_dir(bin), control.port());
    let script = format!(
        "exec {} serve --listen {} --token-stdin --detach --quiet --log {}",
        sh_quote(bin),
        sh_quote(&control.to_string()),
        sh_quote(&log)
    );
    let out = login.sh(&script, Some(&format!("{token}\n")), "starting the agent")?;
    out.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("linerate agent listening on ")?;
            rest.rsplit_once(" pid ")?.1.trim().parse().ok()
        })
        .ok_or_else(|| OpsError::host(&login.name, HostError::NotListening(out.trim().into())))
}

/// What `down` found for one agent.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub enum Stopped {
    /// Sent SIGTERM and saw it exit.
    Stopped,
    /// The pid had no agent of ours any more (exited, or reused).
    NotRunning,
}

/// Stops the agent `a` if its pid still runs the command `up` started;
/// waits (bounded) until it is gone.
pub(super) fn stop_agent(name: &str, a: &Started) -> Result<Stopped, OpsError> {
    let login = Login::new(name, &a.ssh, &a.ssh_options)?;
    let prefix = serve_prefix(&a.remote_binary, a.control());
    let script = format!(
        "p={pid}; c=$(tr '\\000' ' ' < /proc/$p/cmdline 2>/dev/null) || c=; \
         case \"$c\" in {pat}*) ;; *) echo not-running; exit 0;; esac; \
         kill $p || exit 1; i=0; \
         while [ $i -lt {STOP_WAIT_DECIS} ]; do \
           if [ ! -e /proc/$p ] || grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; then echo stopped; exit 0; fi; \
           sleep 0.1; i=$((i+1)); \
         done; echo \"pid $p did not exit within {} s of SIGTERM\" >&2; exit 1",
        STOP_WAIT_DECIS / 10,
        pid = a.pid,
        pat = sh_quote(&prefix),
    );
    let out = login.sh(&script, None, &format!("stopping pid {}", a.pid))?;
    Ok(if out.contains("not-running") {
        Stopped::NotRunning
    } else {
        Stopped::Stopped
    })
}

/// Connects, authenticates and probes (clock, load, version) one agent:
/// the controller's side does that, handed in by the caller, so host
/// operations stay below both processes. Its error stays the text the
/// controller's connection gives (`controller::conn::probe_agent`, a floor
/// above that hostops cannot name); `check_agent` makes it a `HostError`.
pub type Prober<'a> = &'a (dyn Fn(SocketAddr, &str) -> Result<Probe, String> + Sync);

/// The probe of host `name`'s agent, the error naming the host.
pub(super) fn check_agent(
    name: &str,
    control: SocketAddr,
    token: &str,
    probe: Prober,
) -> Result<Probe, OpsError> {
    probe(control, token).map_err(|e| OpsError::host(name, HostError::Probe(e)))
}

/// The probe of an agent that must run this linerate.
pub(super) fn check_same(
    name: &str,
    control: SocketAddr,
    token: &str,
    probe: Prober,
) -> Result<Probe, OpsError> {
    let p = check_agent(name, control, token, probe)?;
    if p.software != software() {
        return Err(OpsError::host(
            name,
            HostError::Version {
                control,
                theirs: p.software,
                ours: software(),
            },
        ));
    }
    Ok(p)
}

// ---------------------------------------------------------------- up
