//! CPU accounting at the edges of the measurement window: host-wide from
//! `/proc/stat` (every core, split by user/system/softirq/steal) and this
//! process's own CPU from `getrusage`, so client and agent cost are known
//! separately even when both run on one machine (netperf's `-c -C`).

use crate::model::sample::{CpuCost, CpuWindow};
use std::time::Instant;

/// Jiffies of one CPU line of /proc/stat.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CoreTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CoreTimes {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
    /// Time a CPU spent running something of this machine's (steal excluded).
    fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }
    fn minus(&self, o: &CoreTimes) -> CoreTimes {
        CoreTimes {
            user: self.user.saturating_sub(o.user),
            nice: self.nice.saturating_sub(o.nice),
            system: self.system.saturating_sub(o.system),
            idle: self.idle.saturating_sub(o.idle),
            iowait: self.iowait.saturating_sub(o.iowait),
            irq: self.irq.saturating_sub(o.irq),
            softirq: self.softirq.saturating_sub(o.softirq),
            steal: self.steal.saturating_sub(o.steal),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct HostCpu {
    pub all: CoreTimes,
    pub cores: Vec<(usize, CoreTimes)>,
}

/// Parses the text of /proc/stat.
pub fn parse_proc_stat(text: &str) -> HostCpu {
    let mut host = HostCpu::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        if !name.starts_with("cpu") {
            continue;
        }
        let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        let t = CoreTimes {
            user: get(0),
            nice: get(1),
            system: get(2),
            idle: get(3),
            iowait: get(4),
            irq: get(5),
            softirq: get(6),
            steal: get(7),
        };
        if name == "cpu" {
            host.all = t;
        } else if let Ok(n) = name[3..].parse() {
            host.cores.push((n, t));
        }
    }
    host
}

fn read_host() -> HostCpu {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

/// This process's CPU time (all threads) in microseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcCpu {
    pub user_us: u64,
    pub system_us: u64,
}

/// This process's (`libc::RUSAGE_SELF`) or this thread's
/// (`libc::RUSAGE_THREAD`) CPU time so far, user and system.
pub fn rusage(who: libc::c_int) -> ProcCpu {
    // SAFETY: rusage is plain data; getrusage only writes into it, and
    // cannot fail for RUSAGE_SELF/RUSAGE_THREAD with a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    ProcCpu {
        user_us: us(ru.ru_utime),
        system_us: us(ru.ru_stime),
    }
}

impl ProcCpu {
    /// User + system, seconds.
    pub fn seconds(&self) -> f64 {
        (self.user_us + self.system_us) as f64 / 1e6
    }
}

fn read_proc() -> ProcCpu {
    rusage(libc::RUSAGE_SELF)
}

#[derive(Clone, Debug)]
pub struct CpuSnapshot {
    pub at: Instant,
    pub host: HostCpu,
    pub proc_: ProcCpu,
    /// The CPU so far of the helper processes counted as this end's (a
    /// userspace tunnel's, see [`tunnel_helpers`]); None: none.
    pub helpers: Option<ProcCpu>,
}

pub fn snapshot() -> CpuSnapshot {
    CpuSnapshot {
        at: Instant::now(),
        host: read_host(),
        proc_: read_proc(),
        helpers: None,
    }
}

/// The programs whose CPU is an end's own when they run in its network
/// namespace: a userspace tunnel does that end's encryption.
pub const TUNNEL_PROGRAMS: &[&str] = &["wireguard-go", "boringtun", "boringtun-cli"];

/// The userspace tunnel processes in the calling thread's network
/// namespace, unless that is the host's first one (where such a process
/// serves the host, not this test): a lab end's wireguard-go.
pub fn tunnel_helpers() -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let ns = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let Some(mine) = ns("/proc/thread-self/ns/net") else {
        return vec![];
    };
    if ns("/proc/1/ns/net") == Some(mine) {
        return vec![];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let named = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| TUNNEL_PROGRAMS.contains(&c.trim()));
        if named && ns(&format!("/proc/{pid}/ns/net")) == Some(mine) {
            out.push(pid);
        }
    }
    out
}

/// [`snapshot_of`] with `helpers`' CPU (processes counted as this end's).
pub fn snapshot_with(
    pid: Option<u32>,
    helpers: &[u32],
    before: Option<&CpuSnapshot>,
) -> CpuSnapshot {
    let mut s = snapshot_of(pid, before);
    if !helpers.is_empty() {
        let mut sum = ProcCpu::default();
        // A helper that is gone adds nothing (the window then undercounts
        // it, and the lab's record says the tunnel died).
        for c in helpers.iter().filter_map(|h| pid_cpu(*h)) {
            sum.user_us += c.user_us;
            sum.system_us += c.system_us;
        }
        s.helpers = Some(sum);
    }
    s
}

/// A snapshot whose process is `pid` (a server the agent started, such as
/// memcached) instead of this one; a process that is gone keeps the time
/// `before` it had (it used no more).
pub fn snapshot_of(pid: Option<u32>, before: Option<&CpuSnapshot>) -> CpuSnapshot {
    match pid {
        None => snapshot(),
        Some(p) => CpuSnapshot {
            at: Instant::now(),
            host: read_host(),
            proc_: pid_cpu(p)
                .or_else(|| before.map(|b| b.proc_))
                .unwrap_or_default(),
            helpers: None,
        },
    }
}

/// The CPU so far of this process's threads whose name `pick` takes
/// (/proc/self/task/TID/comm and stat): one part of a process, such as a
/// client and the server it started beside it. A thread gone before the
/// read counts nothing.
pub fn threads_cpu(pick: fn(&str) -> bool) -> ProcCpu {
    let mut sum = ProcCpu::default();
    for e in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let dir = e.path();
        let named = std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| pick(c.trim()));
        if !named {
            continue;
        }
        if let Some(c) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|t| parse_pid_stat(&t))
        {
            sum.user_us += c.user_us;
            sum.system_us += c.system_us;
        }
    }
    sum
}

/// A snapshot whose process CPU is that of the threads `pick` takes.
pub fn snapshot_threads(pick: fn(&str) -> bool) -> CpuSnapshot {
    CpuSnapshot {
        at: Instant::now(),
        host: read_host(),
        proc_: threads_cpu(pick),
        helpers: None,
    }
}

/// Another process's user and system time, from /proc/PID/stat (fields
/// 14 and 15, in clock ticks, after the parenthesised command name).
pub fn pid_cpu(pid: u32) -> Option<ProcCpu> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_pid_stat(&text)
}

fn parse_pid_stat(text: &str) -> Option<ProcCpu> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ProcCpu {
        user_us: utime * 1_000_000 / hz,
        system_us: stime * 1_000_000 / hz,
    })
}

/// /proc/stat's clock ticks per second (USER_HZ).
fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// A window's share of each kind of CPU time, percent of `span` ticks.
struct Shares {
    busy: f64,
    user: f64,
    system: f64,
    irq: f64,
    softirq: f64,
    iowait: f64,
    steal: f64,
}

/// The shares of `d` over `span` ticks of wall time (0: over the
/// counters' own sum). Busy time is what is left of the span when idle,
/// iowait and steal are taken out: those three are counted to the
/// nanosecond on a tickless kernel (idle from the idle loop's own clock),
/// while user, system and softirq are sampled at the timer tick. A load
/// that wakes on a precise period (an open loop paced by a timerfd) is in
/// phase with the tick and can be asleep at every one of them: its core
/// then reads 0% busy by the samples while it was busy a third of the time
/// (measured here: one core's samples 0 busy of 32 ticks over 50 ticks of
/// wall time). The samples only split the busy time by kind.
fn shares(d: &CoreTimes, span: f64) -> Shares {
    let span = if span > 0.0 { span } else { d.total() as f64 }.max(1.0);
    let unbusy = (d.idle + d.iowait + d.steal) as f64;
    let busy = (span - unbusy).clamp(0.0, span);
    let sampled = d.busy() as f64;
    let scale = if sampled > 0.0 { busy / sampled } else { 0.0 };
    let pct = |x: f64| (100.0 * x / span).min(100.0);
    Shares {
        busy: pct(busy),
        user: pct((d.user + d.nice) as f64 * scale),
        system: pct(d.system as f64 * scale),
        irq: pct(d.irq as f64 * scale),
        softirq: pct(d.softirq as f64 * scale),
        iowait: pct(d.iowait as f64),
        steal: pct(d.steal as f64),
    }
}

pub fn window(a: &CpuSnapshot, b: &CpuSnapshot) -> CpuWindow {
    let wall = b.at.saturating_duration_since(a.at).as_secs_f64();
    let per_core_span = wall * clk_tck();
    let d = b.host.all.minus(&a.host.all);
    let per_core: Vec<f64> = b
        .host
        .cores
        .iter()
        .map(|(n, t)| {
            let prev = a
                .host
                .cores
                .iter()
                .find(|(m, _)| m == n)
                .map(|(_, p)| *p)
                .unwrap_or_default();
            shares(&t.minus(&prev), per_core_span).busy
        })
        .collect();
    let ncores = b.host.cores.len().max(1);
    let all = shares(&d, per_core_span * ncores as f64);
    // A userspace tunnel's CPU is the end's: added to its process figures.
    let (help_user, help_sys) = match (a.helpers, b.helpers) {
        (Some(x), Some(y)) => (
            y.user_us.saturating_sub(x.user_us) as f64 / 1e6,
            y.system_us.saturating_sub(x.system_us) as f64 / 1e6,
        ),
        _ => (0.0, 0.0),
    };
    let tunnel_cpu_s = (a.helpers.is_some() && b.helpers.is_some()).then_some(help_user + help_sys);
    let user_s = b.proc_.user_us.saturating_sub(a.proc_.user_us) as f64 / 1e6 + help_user;
    let sys_s = b.proc_.system_us.saturating_sub(a.proc_.system_us) as f64 / 1e6 + help_sys;
    let cpu_s = user_s + sys_s;
    let cores = if wall > 0.0 { cpu_s / wall } else { 0.0 };
    CpuWindow {
        wall_s: wall,
        ncores,
        host_util_pct: all.busy,
        user_pct: all.user,
        system_pct: all.system,
        irq_pct: all.irq,
        softirq_pct: all.softirq,
        iowait_pct: all.iowait,
        steal_pct: all.steal,
        per_core_util_pct: per_core,
        process_util_pct: 100.0 * cores / ncores as f64,
        process_cores: cores,
        process_cpu_s: cpu_s,
        process_user_s: user_s,
        process_system_s: sys_s,
        tunnel_cpu_s,
    }
}

/// What both merges share: host percentages weighted by `weight`, the
/// process's and the tunnel's seconds added up.
fn blend(ws: &[&CpuWindow], weight: fn(&CpuWindow) -> f64) -> CpuWindow {
    let total = ws.iter().map(|w| weight(w)).sum::<f64>().max(1e-9);
    let weighted =
        |f: fn(&CpuWindow) -> f64| ws.iter().map(|w| f(w) * weight(w)).sum::<f64>() / total;
    CpuWindow {
        host_util_pct: weighted(|w| w.host_util_pct),
        user_pct: weighted(|w| w.user_pct),
        system_pct: weighted(|w| w.system_pct),
        irq_pct: weighted(|w| w.irq_pct),
        softirq_pct: weighted(|w| w.softirq_pct),
        iowait_pct: weighted(|w| w.iowait_pct),
        steal_pct: weighted(|w| w.steal_pct),
        process_cpu_s: ws.iter().map(|w| w.process_cpu_s).sum(),
        process_user_s: ws.iter().map(|w| w.process_user_s).sum(),
        process_system_s: ws.iter().map(|w| w.process_system_s).sum(),
        tunnel_cpu_s: ws
            .iter()
            .filter_map(|w| w.tunnel_cpu_s)
            .reduce(|x, y| x + y),
        ..Default::default()
    }
}

/// Several hosts' windows as one: process CPU adds up (cores, seconds),
/// host percentages are weighted by each host's cores, so the result reads
/// as if all their cores were one machine (the seeds' "client CPU" of many
/// drivers). Hosts that share a machine (a lab on one box) count its cores
/// once per host.
pub fn merge_hosts(ws: &[&CpuWindow]) -> Option<CpuWindow> {
    if ws.len() == 1 {
        return Some(ws[0].clone());
    }
    let first = ws.first()?;
    let cores: usize = ws.iter().map(|w| w.ncores).sum::<usize>().max(1);
    let process_cores: f64 = ws.iter().map(|w| w.process_cores).sum();
    Some(CpuWindow {
        wall_s: ws.iter().map(|w| w.wall_s).fold(first.wall_s, f64::max),
        ncores: cores,
        per_core_util_pct: ws
            .iter()
            .flat_map(|w| w.per_core_util_pct.iter().copied())
            .collect(),
        process_util_pct: 100.0 * process_cores / cores as f64,
        process_cores,
        ..blend(ws, |w| w.ncores as f64)
    })
}

/// One host's consecutive windows as one (`--duration auto` leaves its
/// warm-up's intervals out): seconds add up, percentages are weighted by
/// each window's wall time.
pub fn over_time(ws: &[&CpuWindow]) -> Option<CpuWindow> {
    let first = ws.first()?;
    let wall: f64 = ws.iter().map(|w| w.wall_s).sum::<f64>().max(1e-9);
    let b = blend(ws, |w| w.wall_s);
    let cores = first.ncores.max(1);
    Some(CpuWindow {
        wall_s: wall,
        ncores: first.ncores,
        per_core_util_pct: (0..first.per_core_util_pct.len())
            .map(|c| {
                ws.iter()
                    .map(|w| w.per_core_util_pct.get(c).copied().unwrap_or(0.0) * w.wall_s)
                    .sum::<f64>()
                    / wall
            })
            .collect(),
        process_util_pct: 100.0 * b.process_cpu_s / wall / cores as f64,
        process_cores: b.process_cpu_s / wall,
        ..b
    })
}

/// CPU per KiB and per transaction over a window. `polled_s` is time a
/// receiver spent polling an empty socket (`--rx-poll`): waiting, which a
/// receiver that sleeps does not pay, so the process's cost leaves it out
/// (the utilisation and the host-wide figure keep it: they are what the
/// host saw, other processes and the other end on loopback included).
pub fn cost(w: &CpuWindow, bytes: u64, transactions: u64, polled_s: f64) -> CpuCost {
    let kb = bytes as f64 / 1024.0;
    let proc_us = (w.process_cpu_s - polled_s).max(0.0) * 1e6;
    let host_us = w.host_util_pct / 100.0 * w.ncores as f64 * w.wall_s * 1e6;
    CpuCost {
        host_util_pct: w.host_util_pct,
        process_util_pct: w.process_util_pct,
        process_cores: w.process_cores,
        us_per_kb: (kb > 0.0).then(|| proc_us / kb),
        us_per_tx: (transactions > 0).then(|| proc_us / transactions as f64),
        host_us_per_kb: (kb > 0.0).then(|| host_us / kb),
        steal_pct: w.steal_pct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_process_cpu_from_its_stat_line() {
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let line = "42 (mem cached) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 1 1 1";
        let p = parse_pid_stat(line).unwrap();
        assert_eq!(p.user_us, 250 * 1_000_000 / hz);
        assert_eq!(p.system_us, 50 * 1_000_000 / hz);
        assert!(pid_cpu(std::process::id()).is_some());
        assert!(parse_pid_stat("garbage").is_none());
    }

    #[test]
    fn hosts_merge_as_one_machine() {
        let a = CpuWindow {
            wall_s: 2.0,
            ncores: 2,
            host_util_pct: 50.0,
            process_cores: 0.5,
            process_cpu_s: 1.0,
            per_core_util_pct: vec![40.0, 60.0],
            ..Default::default()
        };
        let b = CpuWindow {
            wall_s: 2.1,
            ncores: 6,
            host_util_pct: 10.0,
            process_cores: 1.5,
            process_cpu_s: 3.0,
            per_core_util_pct: vec![10.0; 6],
            ..Default::default()
        };
        let m = merge_hosts(&[&a, &b]).unwrap();
        assert_eq!(m.ncores, 8);
        assert!((m.host_util_pct - 20.0).abs() < 1e-9);
        assert!((m.process_cores - 2.0).abs() < 1e-9);
        assert!((m.process_util_pct - 25.0).abs() < 1e-9);
        assert_eq!(m.process_cpu_s, 4.0);
        assert_eq!(m.wall_s, 2.1);
        assert_eq!(m.per_core_util_pct.len(), 8);
        assert!(merge_hosts(&[]).is_none());
    }

    #[test]
    fn consecutive_windows_weigh_by_their_time() {
        let w = |wall: f64, host: f64, cpu: f64| CpuWindow {
            wall_s: wall,
            ncores: 2,
            host_util_pct: host,
            process_cpu_s: cpu,
            per_core_util_pct: vec![host, host],
            ..Default::default()
        };
        let (a, b) = (w(1.0, 40.0, 0.5), w(3.0, 80.0, 1.5));
        let m = over_time(&[&a, &b]).unwrap();
        assert_eq!(m.wall_s, 4.0);
        assert!((m.host_util_pct - 70.0).abs() < 1e-9);
        assert!((m.per_core_util_pct[1] - 70.0).abs() < 1e-9);
        assert!((m.process_cores - 0.5).abs() < 1e-9);
        assert!((m.process_util_pct - 25.0).abs() < 1e-9);
        assert!(over_time(&[]).is_none());
    }
    use std::time::Duration;

    const A: &str = "cpu  100 0 50 800 0 0 10 40 0 0\ncpu0 50 0 25 400 0 0 5 20 0 0\ncpu1 50 0 25 400 0 0 5 20 0 0\nintr 1\n";
    const B: &str =
        "cpu  200 0 100 1000 0 0 20 80 0 0\ncpu0 150 0 75 400 0 0 15 60 0 0\ncpu1 50 0 25 600 0 0 5 20 0 0\n";

    #[test]
    fn host_window_splits_busy_and_steal() {
        let t = Instant::now();
        let a = CpuSnapshot {
            at: t,
            host: parse_proc_stat(A),
            proc_: ProcCpu {
                user_us: 0,
                system_us: 0,
            },
            helpers: None,
        };
        let b = CpuSnapshot {
            at: t + Duration::from_secs(2),
            host: parse_proc_stat(B),
            proc_: ProcCpu {
                user_us: 1_000_000,
                system_us: 500_000,
            },
            helpers: None,
        };
        let w = window(&a, &b);
        // deltas: user 100, system 50, idle 200, softirq 10, steal 40 -> total 400
        assert!((w.host_util_pct - 40.0).abs() < 1e-9);
        assert!((w.steal_pct - 10.0).abs() < 1e-9);
        assert_eq!(w.ncores, 2);
        // core 0: busy 160 of 200 jiffies
        assert!((w.per_core_util_pct[0] - 80.0).abs() < 1e-9);
        assert!((w.per_core_util_pct[1]).abs() < 1e-9);
        assert!((w.process_cores - 0.75).abs() < 1e-9);
        assert!((w.process_util_pct - 37.5).abs() < 1e-9);
        let c = cost(&w, 1024 * 1000, 100, 0.0);
        assert!((c.us_per_kb.unwrap() - 1500.0).abs() < 1e-6);
        assert!((c.us_per_tx.unwrap() - 15_000.0).abs() < 1e-6);
        assert!(cost(&w, 0, 0, 0.0).us_per_tx.is_none());
        // A receiver's poll is waiting, not work: the cost leaves it out,
        // the utilisation keeps it.
        let polled = cost(&w, 1024 * 1000, 100, w.process_cpu_s / 3.0);
        assert!((polled.us_per_kb.unwrap() - 1000.0).abs() < 1e-6);
        assert_eq!(polled.process_util_pct, c.process_util_pct);
    }

    #[test]
    fn busy_time_is_the_wall_clock_less_idle_not_the_tick_samples() {
        // Measured on this machine kind: an open loop paced by a timerfd,
        // 0.5 s at 100 ticks/s. Core 0 was asleep at every tick (0 busy
        // samples) but idle only 32 of the 50 ticks' time; core 1's
        // samples over-count (50 busy, 18 idle, 68 > 50).
        let hz = clk_tck();
        let at = |t: [u64; 2]| -> HostCpu {
            let core = |busy: u64, idle: u64| CoreTimes {
                system: busy,
                idle,
                ..Default::default()
            };
            let cores = vec![(0, core(0, t[0])), (1, core(t[1], 18))];
            let mut all = CoreTimes::default();
            for (_, c) in &cores {
                all.system += c.system;
                all.idle += c.idle;
            }
            HostCpu { all, cores }
        };
        let t = Instant::now();
        let snap = |at: Instant, host: HostCpu| CpuSnapshot {
            at,
            host,
            proc_: ProcCpu::default(),
            helpers: None,
        };
        let a = snap(t, at([0, 0]));
        let a = CpuSnapshot {
            host: HostCpu {
                all: CoreTimes::default(),
                cores: vec![(0, CoreTimes::default()), (1, CoreTimes::default())],
            },
            ..a
        };
        let b = snap(t + Duration::from_secs_f64(50.0 / hz), at([32, 50]));
        let w = window(&a, &b);
        assert!((w.per_core_util_pct[0] - 36.0).abs() < 1e-6, "{w:?}");
        assert!((w.per_core_util_pct[1] - 64.0).abs() < 1e-6, "{w:?}");
        assert!((w.host_util_pct - 50.0).abs() < 1e-6, "{w:?}");
        // The samples split it: all of it was system time here.
        assert!((w.system_pct - 50.0).abs() < 1e-6, "{w:?}");
        // No wall time between the snapshots: the counters' own sum.
        let w0 = window(&a, &snap(t, at([32, 50])));
        assert!((w0.host_util_pct - 50.0).abs() < 1e-6, "{w0:?}");
    }

    #[test]
    fn live_snapshot_reads_this_machine() {
        let s = snapshot();
        assert!(!s.host.cores.is_empty());
        assert!(s.host.all.total() > 0);
    }
}
