//! A tunnel between a lab's client and server (`lab up --tunnel`, the
//! `lab.tunnel` axis): WireGuard (the kernel's module where present, else
//! the userspace `wireguard-go`, configured with `wg`), IPsec (ESP with
//! AES-GCM-256 by `ip xfrm`, where the kernel has ESP) or a VXLAN overlay.
//!
//! The tunnel's outer packets cross the router, so the emulator's delay,
//! rate and loss apply to them; the tests' data addresses become its inner
//! ones ([`INNER_CLIENT`], [`INNER_SERVER`]), so every workload, the
//! calibration and a program's sshd take it without knowing.
//!
//! ```text
//!  client ns                                            server ns
//!  lwXXXXXXXXc 198.19.254.1 ==== lr0 -- router -- lr0 ==== lwXXXXXXXXs 198.19.254.2
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::netns;
use super::plumb::{in_ns, ip, sh, start_daemon, Daemon};
use super::state::{self, LabState, TunnelProc, TunnelState, TUNNEL_PROGRAM};
use super::LabError;
use crate::model::result::TestResult;
use crate::model::tunnel::{
    IfCounters, TunnelInfo, TunnelKind, INNER_CLIENT, INNER_PREFIX, INNER_SERVER,
};
use crate::model::Invalid;

/// WireGuard's UDP port at both ends; VXLAN's is the IANA one.
const WG_PORT: u16 = 51820;
const VXLAN_PORT: u16 = 4789;
const VXLAN_ID: u32 = 4242;
/// Where wireguard-go puts the socket `wg` configures it through.
const WG_SOCKET_DIR: &str = "/var/run/wireguard";

// ---------------------------------------------------------------- checks

/// Which kernel options ESP with `kind`'s AEAD needs that `config` (a
/// kernel .config) does not have: `CONFIG_INET_ESP` (the ESP transform)
/// and `CONFIG_CRYPTO_GCM` or `CONFIG_CRYPTO_CCM` (the AEAD), each set
/// `=y` or `=m`. Empty: the kernel has them.
pub fn esp_missing(config: &str, kind: TunnelKind) -> Vec<&'static str> {
    let has = |opt: &str| {
        config.lines().any(|l| {
            l.trim()
                .strip_prefix(opt)
                .and_then(|r| r.strip_prefix('='))
                .is_some_and(|v| v == "y" || v == "m")
        })
    };
    let aead = kind.esp_aead().map_or("CONFIG_CRYPTO_GCM", |a| a.2);
    ["CONFIG_INET_ESP", aead]
        .into_iter()
        .filter(|o| !has(o))
        .collect()
}

/// The running kernel's release (`uname -r`).
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The running kernel's configuration and where it came from:
/// /proc/config.gz, else /boot/config-RELEASE (never another kernel's).
fn kernel_config() -> Option<(String, String)> {
    if let Ok(out) = Command::new("gzip")
        .args(["-dc", "/proc/config.gz"])
        .stderr(Stdio::null())
        .output()
    {
        if out.status.success() && !out.stdout.is_empty() {
            return Some((
                "/proc/config.gz".into(),
                String::from_utf8_lossy(&out.stdout).into(),
            ));
        }
    }
    let boot = format!("/boot/config-{}", kernel_release());
    std::fs::read_to_string(&boot).ok().map(|t| (boot, t))
}

/// Refuses `ipsec` on a kernel without ESP, in one line naming the missing
/// option and what to use instead; checked before anything is set up.
/// A kernel whose configuration cannot be read is tried (`ip xfrm state
/// add` fails there with the same advice).
pub fn check(kind: TunnelKind) -> Result<(), LabError> {
    if !kind.is_esp() {
        return Ok(());
    }
    match esp_unavailable(kind) {
        Some(why) => Err(no_esp(kind, &why)),
        None => Ok(()),
    }
}

/// Why this kernel has no ESP with `kind`'s AEAD ("CONFIG_INET_ESP not
/// set in /proc/config.gz"); None: it has, or its configuration is unknown.
pub fn esp_unavailable(kind: TunnelKind) -> Option<String> {
    let (source, text) = kernel_config()?;
    let missing = esp_missing(&text, kind);
    (!missing.is_empty()).then(|| format!("{} not set in {source}", missing.join(" and ")))
}

fn no_esp(kind: TunnelKind, why: &str) -> LabError {
    Invalid(format!(
        "--tunnel {}: kernel {} has no ESP ({why}): use --tunnel wireguard or vxlan",
        kind.name(),
        kernel_release()
    ))
    .into()
}

/// What a tunnel cannot do in this lab, said before it is built.
pub fn check_plan(kind: TunnelKind, rack: bool) -> Result<(), LabError> {
    if kind != TunnelKind::None && rack {
        return Err(Invalid::from(
            "--tunnel joins one client and one server: drop --clients/--servers (or --tunnel)",
        )
        .into());
    }
    check(kind)
}

// ---------------------------------------------------------------- plumbing

/// The tunnel interfaces of lab `lab`: `lw` and 8 hex digits of the name's
/// hash, then `c` or `s`. wireguard-go's control socket is named by its
/// interface in one directory for the whole host, so the two ends, and
/// two labs, must not share a name; 11 characters fit IFNAMSIZ.
pub fn interfaces(lab: &str) -> [String; 2] {
    // FNV-1a, 32 bits: stable across builds (std's hasher is not).
    let mut h: u32 = 0x811c_9dc5;
    for b in lab.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    [format!("lw{h:08x}c"), format!("lw{h:08x}s")]
}

fn key_path(lab: &str, end: char) -> PathBuf {
    PathBuf::from(state::STATE_DIR).join(format!("{lab}.tunnel-{end}.key"))
}

fn socket_path(interface: &str) -> PathBuf {
    PathBuf::from(WG_SOCKET_DIR).join(format!("{interface}.sock"))
}

// ---------------------------------------------------------------- set up

/// One end of the tunnel: its namespace, interface, inner and outer
/// addresses, the peer's outer address.
struct End<'a> {
    ns: &'a str,
    interface: &'a str,
    inner: &'static str,
    outer: &'a str,
    peer_inner: &'static str,
    peer_outer: &'a str,
    tag: char,
}

/// Sets up a `kind` tunnel in lab `st` (which has none) and makes its inner
/// addresses the lab's data addresses. On failure whatever was made is
/// removed again and the lab is left as it was.
pub fn attach(st: &mut LabState, kind: TunnelKind) -> Result<(), LabError> {
    if kind == TunnelKind::None || st.tunnel.is_some() {
        return Ok(());
    }
    check(kind)?;
    let client_outer = st.client_hosts()[0].addr.clone();
    let server_outer = st.server_hosts()[0].addr.clone();
    let ifs = interfaces(&st.name);
    let ends = [
        End {
            ns: &st.client_ns,
            interface: &ifs[0],
            inner: INNER_CLIENT,
            outer: &client_outer,
            peer_inner: INNER_SERVER,
            peer_outer: &server_outer,
            tag: 'c',
        },
        End {
            ns: &st.server_ns,
            interface: &ifs[1],
            inner: INNER_SERVER,
            outer: &server_outer,
            peer_inner: INNER_CLIENT,
            peer_outer: &client_outer,
            tag: 's',
        },
    ];
    let mtu = kind.mtu(st.spec.mtu);
    let mut ts = TunnelState {
        info: TunnelInfo {
            kind,
            implementation: "kernel".into(),
            program: None,
            cipher: kind.cipher().into(),
            mtu,
            overhead_bytes: st.spec.mtu - mtu,
            interfaces: [ifs[0].clone(), ifs[1].clone()],
            client_inner: INNER_CLIENT.into(),
            server_inner: INNER_SERVER.into(),
            client_outer: client_outer.clone(),
            server_outer: server_outer.clone(),
            esp_unavailable: esp_unavailable(TunnelKind::Ipsec)
                .map(|why| format!("kernel {}: {why}", kernel_release())),
        },
        procs: Vec::new(),
    };
    let made = match kind {
        TunnelKind::Wireguard => wireguard(&st.name, &ends, mtu, &mut ts),
        TunnelKind::Vxlan => vxlan(&ends, mtu),
        TunnelKind::Ipsec | TunnelKind::IpsecCcm => {
            ts.info.interfaces = [String::new(), String::new()];
            ipsec(&ends, mtu, kind)
        }
        TunnelKind::None => Ok(()),
    };
    if let Err(e) = made {
        remove(&st.name, &ts, [&st.client_ns, &st.server_ns]);
        return Err(e);
    }
    set_data_addresses(st, INNER_CLIENT, INNER_SERVER);
    st.tunnel = Some(ts);
    Ok(())
}

/// Takes the lab's tunnel down (processes, interfaces, SAs, keys) and
/// gives the lab its links' addresses back.
pub fn detach(st: &mut LabState) {
    let Some(ts) = st.tunnel.take() else { return };
    remove(&st.name, &ts, [&st.client_ns, &st.server_ns]);
    set_data_addresses(st, &ts.info.client_outer, &ts.info.server_outer);
}

fn set_data_addresses(st: &mut LabState, client: &str, server: &str) {
    st.client_addr = client.into();
    st.server_addr = server.into();
    if let Some(c) = st.clients.first_mut() {
        c.addr = client.into();
    }
    if let Some(s) = st.servers.first_mut() {
        s.addr = server.into();
    }
}

fn inner_up(e: &End, dev: &str, mtu: u32) -> Result<(), LabError> {
    ip(
        e.ns,
        &[
            "addr",
            "add",
            &format!("{}/{INNER_PREFIX}", e.inner),
            "dev",
            dev,
        ],
    )?;
    ip(
        e.ns,
        &["link", "set", "dev", dev, "mtu", &mtu.to_string(), "up"],
    )?;
    Ok(())
}

fn vxlan(ends: &[End; 2], mtu: u32) -> Result<(), LabError> {
    for e in ends {
        ip(
            e.ns,
            &[
                "link",
                "add",
                e.interface,
                "type",
                "vxlan",
                "id",
                &VXLAN_ID.to_string(),
                "remote",
                e.peer_outer,
                "local",
                e.outer,
                "dstport",
                &VXLAN_PORT.to_string(),
                "dev",
                "lr0",
            ],
        )?;
        inner_up(e, e.interface, mtu)?;
    }
    Ok(())
}

/// Whether this kernel makes WireGuard interfaces: tried in namespace `ns`.
fn wireguard_in_kernel(ns: &str, interface: &str) -> bool {
    let ok = ip(ns, &["link", "add", interface, "type", "wireguard"]).is_ok();
    if ok {
        let _ = ip(ns, &["link", "del", interface]);
    }
    ok
}

/// "wireguard-go v0.0.20220316" (None: not installed).
fn wireguard_go_version() -> Option<String> {
    let out = Command::new(TUNNEL_PROGRAM)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_string())
}

fn wg_genkey(lab: &str, end: char) -> Result<(PathBuf, String), LabError> {
    let private = sh("wg", &["genkey"])?;
    let path = key_path(lab, end);
    state::private_dir(state::STATE_DIR)?;
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| LabError::Io {
                path: path.clone(),
                source,
            })?;
        f.write_all(private.as_bytes())
            .map_err(|source| LabError::Io {
                path: path.clone(),
                source,
            })?;
    }
    let mut child = Command::new("wg")
        .arg("pubkey")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| LabError::NoPlumbing {
            program: "wg".into(),
            source,
        })?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(private.as_bytes()).map_err(LabError::Os)?;
    }
    let out = child.wait_with_output().map_err(LabError::Os)?;
    if !out.status.success() {
        return Err(LabError::Plumbing {
            command: "wg pubkey".into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    Ok((path, String::from_utf8_lossy(&out.stdout).trim().into()))
}

fn wireguard(lab: &str, ends: &[End; 2], mtu: u32, ts: &mut TunnelState) -> Result<(), LabError> {
    let kernel = wireguard_in_kernel(ends[0].ns, ends[0].interface);
    if !kernel {
        let version = wireguard_go_version().ok_or_else(|| {
            Invalid::from(
                "--tunnel wireguard: this kernel has no WireGuard module and wireguard-go is not installed (apt-get install wireguard-go wireguard-tools), or use --tunnel vxlan",
            )
        })?;
        ts.info.implementation = "userspace".into();
        ts.info.program = Some(version);
    }
    let keys = [wg_genkey(lab, ends[0].tag)?, wg_genkey(lab, ends[1].tag)?];
    for e in ends {
        if kernel {
            ip(e.ns, &["link", "add", e.interface, "type", "wireguard"])?;
        } else {
            ts.procs.push(spawn_wireguard_go(lab, e)?);
        }
    }
    for (i, e) in ends.iter().enumerate() {
        let key = keys[i].0.to_string_lossy().to_string();
        let peer_pub = &keys[1 - i].1;
        in_ns(
            e.ns,
            "wg",
            &[
                "set",
                e.interface,
                "private-key",
                &key,
                "listen-port",
                &WG_PORT.to_string(),
                "peer",
                peer_pub,
                "allowed-ips",
                &format!("{}/32", e.peer_inner),
                "endpoint",
                &format!("{}:{WG_PORT}", e.peer_outer),
            ],
        )?;
        inner_up(e, e.interface, mtu)?;
    }
    Ok(())
}

/// Starts wireguard-go in the foreground inside the end's namespace, in
/// its own session (it outlives `lab up`), and waits for its control
/// socket. It belongs to the lab: stopped by PID at `lab down`.
fn spawn_wireguard_go(lab: &str, e: &End) -> Result<TunnelProc, LabError> {
    let log = PathBuf::from(state::STATE_DIR).join(format!("{lab}.tunnel-{}.log", e.tag));
    let sock = socket_path(e.interface);
    let _ = std::fs::remove_file(&sock);
    let mut cmd = Command::new(TUNNEL_PROGRAM);
    cmd.args(["-f", e.interface])
        // Without it wireguard-go prints a banner urging the kernel module.
        .env("WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD", "1");
    let silent = || LabError::Start {
        what: "wireguard-go",
        source: std::io::Error::other(format!("no control socket {} within 5 s", sock.display())),
    };
    let Daemon { pid, start_ticks } = start_daemon(cmd, e.ns, "wireguard-go", &log, &sock, silent)?;
    Ok(TunnelProc {
        ns: e.ns.into(),
        pid,
        start_ticks,
        interface: e.interface.into(),
    })
}

/// `len` random bytes as hex: an AES-256 key and the AEAD's salt (36
/// bytes, 288 bits, for rfc4106(gcm(aes)); 35 for rfc4309(ccm(aes))).
fn esp_key(len: usize) -> Result<String, LabError> {
    let mut k = vec![0u8; len];
    getrandom::fill(&mut k).map_err(|e| LabError::Os(std::io::Error::other(e.to_string())))?;
    Ok(format!(
        "0x{}",
        k.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// ESP in tunnel mode: one SA per direction (SPI 0x1001 client->server,
/// 0x1002 back) and the policies that send the inner addresses' traffic
/// through them; the inner addresses sit on the lab link, with a route
/// whose MTU leaves room for ESP.
fn ipsec(ends: &[End; 2], mtu: u32, kind: TunnelKind) -> Result<(), LabError> {
    let (aead, key_len, option) = kind.esp_aead().unwrap_or(("rfc4106(gcm(aes))", 36, "-"));
    let keys = [esp_key(key_len)?, esp_key(key_len)?];
    // (from outer, to outer, spi, key) of each direction.
    let dirs = [
        (ends[0].outer, ends[1].outer, "0x1001", &keys[0]),
        (ends[1].outer, ends[0].outer, "0x1002", &keys[1]),
    ];
    for e in ends {
        for (i, (src, dst, spi, key)) in dirs.iter().enumerate() {
            let reqid = (i + 1).to_string();
            ip(
                e.ns,
                &[
                    "xfrm", "state", "add", "src", src, "dst", dst, "proto", "esp", "spi", spi,
                    "reqid", &reqid, "mode", "tunnel", "aead", aead, key, "128",
                ],
            )
            .map_err(|err| match err {
                LabError::Plumbing { stderr, .. } => no_esp(
                    kind,
                    &format!("ip xfrm state add: {stderr}; ESP needs CONFIG_INET_ESP and {option}"),
                ),
                other => other,
            })?;
        }
        let (out_reqid, in_reqid) = if e.tag == 'c' { ("1", "2") } else { ("2", "1") };
        let me = format!("{}/32", e.inner);
        let peer = format!("{}/32", e.peer_inner);
        for (dir, src, dst, tsrc, tdst, reqid) in [
            ("out", &me, &peer, e.outer, e.peer_outer, out_reqid),
            ("in", &peer, &me, e.peer_outer, e.outer, in_reqid),
        ] {
            ip(
                e.ns,
                &[
                    "xfrm", "policy", "add", "src", src, "dst", dst, "dir", dir, "tmpl", "src",
                    tsrc, "dst", tdst, "proto", "esp", "reqid", reqid, "mode", "tunnel",
                ],
            )?;
        }
        ip(e.ns, &["addr", "add", &me, "dev", "lr0"])?;
        let gw = ip(e.ns, &["-4", "route", "show", "default"])?
            .split_whitespace()
            .skip_while(|w| *w != "via")
            .nth(1)
            .map(str::to_string)
            .unwrap_or_default();
        ip(
            e.ns,
            &[
                "route",
                "add",
                &peer,
                "via",
                &gw,
                "dev",
                "lr0",
                "src",
                e.inner,
                "mtu",
                &mtu.to_string(),
            ],
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------- down

/// Stops the tunnel's processes and removes its interfaces, SAs,
/// policies, inner addresses and keys (each step best effort: the
/// namespaces may be going anyway).
fn remove(lab: &str, ts: &TunnelState, ns: [&str; 2]) {
    stop_procs(&ts.procs);
    for (i, n) in ns.iter().enumerate() {
        if !netns::exists(n) {
            continue;
        }
        match ts.info.kind {
            TunnelKind::Ipsec | TunnelKind::IpsecCcm => {
                let _ = ip(n, &["xfrm", "policy", "flush"]);
                let _ = ip(n, &["xfrm", "state", "flush"]);
                let me = if i == 0 {
                    &ts.info.client_inner
                } else {
                    &ts.info.server_inner
                };
                let _ = ip(n, &["addr", "del", &format!("{me}/32"), "dev", "lr0"]);
            }
            _ => {
                let _ = ip(n, &["link", "del", &ts.info.interfaces[i]]);
            }
        }
    }
    for end in ['c', 's'] {
        let _ = std::fs::remove_file(key_path(lab, end));
    }
    for i in interfaces(lab) {
        let _ = std::fs::remove_file(socket_path(&i));
    }
}

/// SIGTERM to each live tunnel process (checked by PID, start time and
/// name), SIGKILL to any still running after 2 s.
fn stop_procs(procs: &[TunnelProc]) {
    let running = || {
        procs
            .iter()
            .filter(|p| state::is_tunnel_process(p.pid, p.start_ticks))
    };
    for p in running() {
        // SAFETY: signals a PID we checked is the wireguard-go we started.
        unsafe { libc::kill(p.pid as i32, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while running().next().is_some() && Instant::now() < deadline {
        procs.iter().for_each(|p| reap(p.pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    for p in running() {
        // SAFETY: as above.
        unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
    }
    std::thread::sleep(Duration::from_millis(20));
    procs.iter().for_each(|p| reap(p.pid));
}

fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: non-blocking wait on one PID; harmless if not our child.
    unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
}

/// The wireguard-go processes inside namespace `ns` (a lab whose state
/// file was lost): found by their network namespace, so only the lab's
/// own are stopped.
pub fn stray_procs(ns: &str) -> Vec<TunnelProc> {
    use std::os::unix::fs::MetadataExt;
    let Ok(want) = std::fs::metadata(netns::path(ns)) else {
        return vec![];
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let is_wg = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == TUNNEL_PROGRAM);
        if !is_wg {
            continue;
        }
        let same = std::fs::metadata(format!("/proc/{pid}/ns/net"))
            .is_ok_and(|m| m.ino() == want.ino() && m.dev() == want.dev());
        if same {
            if let Some(t) = state::start_ticks(pid) {
                out.push(TunnelProc {
                    ns: ns.into(),
                    pid,
                    start_ticks: t,
                    interface: String::new(),
                });
            }
        }
    }
    out
}

/// Stops every wireguard-go left in the lab's namespaces (see [`stray_procs`]).
pub fn stop_strays(namespaces: &[String]) {
    let procs: Vec<TunnelProc> = namespaces.iter().flat_map(|n| stray_procs(n)).collect();
    if !procs.is_empty() {
        stop_procs(&procs);
    }
}

// ---------------------------------------------------------------- measuring

/// Both ends' counters now, client's first (None: unreadable).
pub fn counters(st: &LabState) -> Option<[IfCounters; 2]> {
    let ts = st.tunnel.as_ref()?;
    let nss = [&st.client_ns, &st.server_ns];
    let mut out = [IfCounters::default(); 2];
    for (i, ns) in nss.iter().enumerate() {
        out[i] = match ts.info.kind {
            TunnelKind::Ipsec | TunnelKind::IpsecCcm => esp_counters(ns, &ts.info, i)?,
            _ => if_counters(ns, &ts.info.interfaces[i])?,
        };
    }
    Some(out)
}

/// /sys/class/net/IF/statistics in namespace `ns`.
fn if_counters(ns: &str, interface: &str) -> Option<IfCounters> {
    let base = format!("/sys/class/net/{interface}/statistics");
    let files: Vec<String> = ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]
        .iter()
        .map(|f| format!("{base}/{f}"))
        .collect();
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    let text = in_ns(ns, "cat", &refs).ok()?;
    let v: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    (v.len() == 4).then(|| IfCounters {
        rx_bytes: v[0],
        tx_bytes: v[1],
        rx_packets: v[2],
        tx_packets: v[3],
    })
}

/// The SAs' "lifetime current" counts (`ip -s xfrm state`) in namespace
/// `ns`: the one leaving from this end's outer address is tx.
fn esp_counters(ns: &str, info: &TunnelInfo, end: usize) -> Option<IfCounters> {
    let text = ip(ns, &["-s", "xfrm", "state"]).ok()?;
    let me = if end == 0 {
        &info.client_outer
    } else {
        &info.server_outer
    };
    Some(parse_xfrm_counters(&text, me))
}

/// Parses `ip -s xfrm state`: each SA starts `src A dst B`, and its
/// `lifetime current:` line is followed by `N(bytes), M(packets)`.
pub fn parse_xfrm_counters(text: &str, me: &str) -> IfCounters {
    let mut c = IfCounters::default();
    let mut outbound = None;
    let mut after_current = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("src ") {
            outbound = Some(rest.split_whitespace().next() == Some(me));
            continue;
        }
        if t.starts_with("lifetime current:") {
            after_current = true;
            continue;
        }
        if after_current {
            after_current = false;
            let nums: Vec<u64> = t
                .split(',')
                .filter_map(|p| p.trim().split('(').next()?.trim().parse().ok())
                .collect();
            if let (Some(&b), Some(&p), Some(out)) = (nums.first(), nums.get(1), outbound) {
                if out {
                    c.tx_bytes += b;
                    c.tx_packets += p;
                } else {
                    c.rx_bytes += b;
                    c.rx_packets += p;
                }
            }
        }
    }
    c
}

/// CPU seconds of the userspace tunnel's processes so far, [client, server]
/// (None: a kernel tunnel, or a process gone).
pub fn proc_cpu_s(st: &LabState) -> Option<[f64; 2]> {
    let ts = st.tunnel.as_ref()?;
    if ts.procs.len() != 2 {
        return None;
    }
    let c = crate::measure::cpu::pid_cpu(ts.procs[0].pid)?.seconds();
    let s = crate::measure::cpu::pid_cpu(ts.procs[1].pid)?.seconds();
    Some([c, s])
}

/// Payload linerate's receivers counted over the whole test (warm-up
/// included, as the tunnel's counters are): what the agent's flows and
/// the client's flows read, over every iteration and group. None when no
/// flow ran (a program).
pub fn payload_bytes(r: &TestResult) -> Option<u64> {
    let iterations = r
        .iterations
        .iter()
        .chain(r.groups.iter().flat_map(|g| g.iterations.iter()));
    let mut total = 0;
    let mut any = false;
    for it in iterations {
        for f in it.flows.client.iter().chain(it.flows.agent.iter()) {
            any = true;
            total += f.bytes_rx;
        }
    }
    any.then_some(total)
}

/// Checks the tunnel's counters in `r`'s lab record against linerate's
/// bytes, and adds a warning to the record when they disagree beyond the
/// headers.
pub fn judge_bytes(r: &mut TestResult) {
    let payload = payload_bytes(r);
    let Some(rec) = r.lab.as_mut() else { return };
    let (Some(info), Some(b)) = (&rec.tunnel, rec.tunnel_bytes.as_mut()) else {
        return;
    };
    if let Some(w) = b.judge(info.kind, payload) {
        rec.warnings.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esp_is_found_missing_in_a_kernel_config() {
        let here = "CONFIG_XFRM=y\nCONFIG_XFRM_USER=y\n# CONFIG_INET_ESP is not set\n# CONFIG_INET6_ESP is not set\n# CONFIG_CRYPTO_GCM is not set\n";
        assert_eq!(
            esp_missing(here, TunnelKind::Ipsec),
            ["CONFIG_INET_ESP", "CONFIG_CRYPTO_GCM"]
        );
        let module = "CONFIG_INET_ESP=m\nCONFIG_INET_ESP_OFFLOAD=m\nCONFIG_CRYPTO_GCM=y\n";
        assert!(esp_missing(module, TunnelKind::Ipsec).is_empty());
        // CONFIG_INET_ESP_OFFLOAD alone is not ESP.
        let offload_only = "CONFIG_INET_ESP_OFFLOAD=m\nCONFIG_CRYPTO_GCM=m\n";
        assert_eq!(
            esp_missing(offload_only, TunnelKind::Ipsec),
            ["CONFIG_INET_ESP"]
        );
        assert_eq!(esp_missing("", TunnelKind::Ipsec).len(), 2);
        // The seeds' CCM needs its own AEAD: a GCM-only kernel lacks it.
        assert_eq!(
            esp_missing(module, TunnelKind::IpsecCcm),
            ["CONFIG_CRYPTO_CCM"]
        );
        let both = "CONFIG_INET_ESP=y\nCONFIG_CRYPTO_GCM=y\nCONFIG_CRYPTO_CCM=m\n";
        assert!(esp_missing(both, TunnelKind::IpsecCcm).is_empty());
    }

    #[test]
    fn the_refusal_names_the_option_and_the_way_out() {
        let e = no_esp(
            TunnelKind::Ipsec,
            "CONFIG_INET_ESP not set in /proc/config.gz",
        )
        .to_string();
        assert!(e.starts_with("--tunnel ipsec: kernel "), "{e}");
        assert!(e.contains("CONFIG_INET_ESP"), "{e}");
        assert!(e.contains("use --tunnel wireguard or vxlan"), "{e}");
        assert!(!e.contains('\n'));
        assert!(no_esp(TunnelKind::IpsecCcm, "x").is_usage());
        assert!(no_esp(TunnelKind::IpsecCcm, "x")
            .to_string()
            .starts_with("--tunnel ipsec-ccm: "));
        // A rack is refused whatever the kind; no tunnel is always fine.
        assert!(check_plan(TunnelKind::Vxlan, true).is_err());
        assert!(check_plan(TunnelKind::None, true).is_ok());
        assert!(check(TunnelKind::Wireguard).is_ok());
    }

    #[test]
    fn interface_names_fit_and_differ_by_end_and_lab() {
        let [c, s] = interfaces("a-very-long-lab-name-x24");
        assert_eq!(c.len(), 11);
        assert!(c.ends_with('c') && s.ends_with('s'));
        assert_eq!(c[..10], s[..10]);
        assert_ne!(interfaces("tun-a")[0], interfaces("tun-b")[0]);
        assert_eq!(interfaces("wan"), interfaces("wan"));
    }

    #[test]
    fn xfrm_counters_split_by_direction() {
        let text = "src 198.18.0.1 dst 198.18.1.1\n\tproto esp spi 0x00001001 reqid 1 mode tunnel\n\tlifetime current:\n\t  1000(bytes), 10(packets)\n\t  add 2026-01-01 use 2026-01-01\nsrc 198.18.1.1 dst 198.18.0.1\n\tproto esp spi 0x00001002 reqid 2 mode tunnel\n\tlifetime current:\n\t  400(bytes), 8(packets)\n";
        let c = parse_xfrm_counters(text, "198.18.0.1");
        assert_eq!((c.tx_bytes, c.tx_packets), (1000, 10));
        assert_eq!((c.rx_bytes, c.rx_packets), (400, 8));
        let s = parse_xfrm_counters(text, "198.18.1.1");
        assert_eq!((s.tx_bytes, s.rx_bytes), (400, 1000));
    }
}
