//! What a spec's defaults are where they depend on the host or the
//! workload (workers, I/O mode, read size), and which specs are valid:
//! every check `build` and the agent run before a test starts.

use super::*;

impl TestSpec {
    /// Worker threads when none are asked for: one per flow up to the CPUs.
    pub fn default_workers(flows: u32) -> u32 {
        flows.min(cpus()).max(1)
    }

    /// Worker threads of this workload when none are asked for. A bulk
    /// stream of a few flows gets a worker per flow (iperf3 3.16+ runs a
    /// thread per stream): two bulk flows in one worker take turns, each
    /// waiting while the other is served, and on a 2-CPU loopback 4 flows
    /// moved 37.9 Gbit/s on 2+2 workers against 48.7 on 4+4, 8 flows 34-40
    /// against 43-49 (bench/RESULTS.md). Beyond 4 flows per CPU the threads
    /// only contend (16 flows: 41 on 2+2, 38 on 16+16), and the other
    /// workloads wait on their peers, so one worker per CPU multiplexes.
    pub fn default_workers_for(workload: Workload, flows: u32) -> u32 {
        let ncpu = cpus();
        if workload == Workload::Stream && flows <= STREAM_FLOWS_PER_CPU * ncpu {
            flows.max(1)
        } else {
            Self::default_workers(flows)
        }
    }

    /// The window when none is asked for; a finite transfer gets a time limit.
    pub fn default_duration_s(finite: bool) -> f64 {
        if finite {
            300.0
        } else {
            10.0
        }
    }

    /// Whether the agent's (or the client's) end receives payload: in a
    /// stream only the direction's receiver does; rr and crr both do.
    pub fn receives(&self, agent: bool) -> bool {
        match (self.workload, self.direction) {
            (Workload::Stream, Direction::Tx) => agent,
            (Workload::Stream, Direction::Rx) => !agent,
            _ => true,
        }
    }

    fn validate_exec(&self) -> Result<(), Invalid> {
        let e = self.exec.as_ref();
        if self.workload == Workload::Exec && e.is_none_or(|e| e.command.is_empty()) {
            return Err(
                "exec needs a command: linerate run exec [--lab NAME] -- COMMAND ARGS".into(),
            );
        }
        if self.workload == Workload::Scp && self.bytes.is_none() {
            return Err("scp needs --bytes (the size of the file copied)".into());
        }
        if self.flows != 1 {
            return Err("exec and scp run one command (no --flows)".into());
        }
        if let Some(e) = e {
            let uses = |p: &str| e.command.iter().any(|a| a.contains(p));
            if uses("{ssh_config}") && !e.sshd {
                return Err("{ssh_config} names linerate's own sshd: add --sshd".into());
            }
            if uses("{file}") && self.bytes.is_none() {
                return Err("{file} is a file of --bytes: add --bytes SIZE".into());
            }
        }
        if self.window == WindowMode::Exact {
            return Err(
                "--window exact needs linerate's own sockets; an unmodified program (exec, scp) gets --rcvbuf through the server's tcp_rmem"
                    .into(),
            );
        }
        if self.tls.is_some() {
            return Err("--tls applies to linerate's own flows, not to exec or scp".into());
        }
        if self.read_size != 0 {
            return Err("--read-size applies to linerate's own flows, not to exec or scp".into());
        }
        Ok(())
    }

    /// `--io threads`: a blocking thread per flow on each end, for the
    /// flows that wait on one socket in one direction at a time.
    fn validate_threads(&self) -> Result<(), Invalid> {
        let what = match self.workload {
            Workload::Stream if self.direction == Direction::Bidir => {
                Some("a bidir stream (one thread cannot block on its reads and its writes at once)")
            }
            Workload::Stream | Workload::Rr | Workload::Crr => None,
            w => Some(w.name()),
        };
        if let Some(w) = what {
            return Err(format!(
                "--io threads runs stream (tx or rx), closed-loop rr and crr, not {w}: use --io epoll"
            ).into());
        }
        if self.rate.is_some() {
            return Err(
                "--io threads runs closed loops; an open loop (--rate) needs the event loop's timers: use --io epoll"
                    .into(),
            );
        }
        if self.spin {
            return Err("--spin polls in the event loop: use --io epoll".into());
        }
        if self.workers != self.flows || self.agent_workers != self.flows {
            return Err(format!(
                "--io threads runs one thread per flow on each end ({} flows): leave --workers and --agent-workers out",
                self.flows
            ).into());
        }
        if self.flows > MAX_THREAD_FLOWS {
            return Err(format!(
                "--io threads is for a few flows (at most {MAX_THREAD_FLOWS} threads per end): use --io epoll"
            ).into());
        }
        Ok(())
    }

    /// The I/O mode when none is asked for: a thread per flow where each
    /// worker would hold one flow anyway and the flow is a closed-loop rr
    /// or a crr (rr 1/1: 46.5-47.8k transactions/s against 41.6-42.2k with
    /// epoll, netperf 48.4k; crr 64/8192 1.04-1.10x epoll; bench/RESULTS.md);
    /// epoll elsewhere, where it was as fast or faster (a 128K stream: 32.7
    /// Gbit/s against 28.6).
    pub fn default_io(&self) -> IoMode {
        let one_flow_per_worker = self.workers == self.flows && self.agent_workers == self.flows;
        if matches!(self.workload, Workload::Rr | Workload::Crr)
            && self.rate.is_none()
            && !self.spin
            && one_flow_per_worker
            && self.flows <= cpus()
        {
            IoMode::Threads
        } else {
            IoMode::Epoll
        }
    }

    /// Datagrams per sendmmsg/recvmmsg call; with GSO, per send: as many
    /// as the kernel takes in one datagram (iperf3 --gsro does the same).
    pub fn udp_batch(&self) -> u32 {
        match (self.batch, self.gso) {
            (0, true) => ((UDP_MAX / self.message.max(1)) as u32).clamp(1, UDP_MAX_SEGMENTS),
            (0, false) => UDP_BATCH,
            (b, _) => b,
        }
    }

    /// The largest message a flow of this test receives (and so sends).
    pub fn largest_message(&self) -> usize {
        let biggest = [
            self.message as u64,
            self.request,
            self.response,
            self.reply,
            self.bytes.unwrap_or(0),
        ]
        .into_iter()
        .max()
        .unwrap_or(1);
        biggest.clamp(1, usize::MAX as u64) as usize
    }

    /// The read size when none is asked for: the largest message, within
    /// 16 KiB..1 MiB, as iperf3 reads its block size. Measured on loopback
    /// under bbr (bench/RESULTS.md, 2026-11-25): a receiver that asks for
    /// more than the sender writes (the old fixed 256 KiB for 16 KiB and
    /// 128 KiB writes) ACKs in larger, rarer steps, and BBR, which sizes
    /// its window and pacing rate from the ACKs, sends 10-25% slower.
    pub fn default_read_size(&self) -> usize {
        self.largest_message().clamp(READ_SIZE_MIN, READ_SIZE_MAX)
    }

    /// The read size the engine uses (`read_size`, or for results before
    /// it was an option what the engine chose then).
    pub fn effective_read_size(&self) -> usize {
        match self.read_size {
            0 => self.largest_message().clamp(256 << 10, READ_SIZE_MAX),
            n => n,
        }
    }

    fn validate_udp(&self) -> Result<(), Invalid> {
        let size = |name: &str, v: u64| {
            if (v as usize) < UDP_HEADER || v as usize > UDP_MAX {
                Err(format!(
                    "{name} {v}: a UDP message is {UDP_HEADER} to {UDP_MAX} bytes (linerate's header takes {UDP_HEADER})"
                ))
            } else {
                Ok(())
            }
        };
        match self.workload {
            Workload::UdpStream => size("--message", self.message as u64)?,
            _ => {
                size("--request", self.request)?;
                size("--response", self.response)?;
            }
        }
        if self.batch > 1024 {
            return Err("--batch is 1 to 1024 datagrams".into());
        }
        if (self.gso || self.gro) && self.workload != Workload::UdpStream {
            return Err("--gso and --gro apply to udp-stream".into());
        }
        if self.gso && self.batch > UDP_MAX_SEGMENTS {
            return Err(format!(
                "--gso carries at most {UDP_MAX_SEGMENTS} datagrams per send (the kernel's UDP_MAX_SEGMENTS): lower --batch"
            ).into());
        }
        if self.read_size != 0 {
            return Err("--read-size applies to TCP workloads (UDP reads whole datagrams)".into());
        }
        if self.gso && self.message * self.udp_batch() as usize > UDP_MAX {
            return Err(format!(
                "--gso sends --batch x --message in one datagram of at most {UDP_MAX} bytes: lower --batch"
            ).into());
        }
        if self.rate.is_some() && self.rate_bps.is_some() {
            return Err("--rate is packets/s or a bit rate, not both".into());
        }
        if self.rate_bps.is_some() && self.workload != Workload::UdpStream {
            return Err("a bit rate applies to udp-stream (udp-rr takes transactions/s)".into());
        }
        if !(0.001..=60.0).contains(&self.timeout_s) {
            return Err("--timeout is 1ms to 60s".into());
        }
        if self.tls.is_some() {
            return Err("--tls applies to TCP workloads".into());
        }
        if self.bytes.is_some() || self.zerocopy || self.window == WindowMode::Exact {
            return Err("--bytes, --zerocopy and --window exact apply to TCP workloads".into());
        }
        Ok(())
    }

    /// A finite test ends when every flow is done, not after `duration_s`.
    pub fn is_finite(&self) -> bool {
        self.workload == Workload::Stream && self.bytes.is_some() && self.per == Per::Flow
    }

    /// `--search`, `--duration auto` and `--rate-ramp`: where they apply.
    fn validate_sizing(&self) -> Result<(), Invalid> {
        use crate::model::search::SearchMetric;
        use Workload::*;
        if let Some(s) = &self.search {
            let fits = match s.target.metric {
                SearchMetric::LossPct => matches!(self.workload, UdpRr | UdpStream),
                _ => matches!(self.workload, Rr | UdpRr | Memcache),
            };
            if !fits {
                return Err(format!(
                    "--search {} does not apply to {}: a latency percentile is searched on rr, udp-rr and memcache, loss_pct on udp-rr and udp-stream (open loops)",
                    s.target,
                    self.workload.name()
                )
                .into());
            }
            if self.bytes.is_some() {
                return Err("--search runs open loops of transactions: drop --bytes".into());
            }
            if self.auto.is_some() {
                return Err("--search sizes each step itself: drop --duration auto".into());
            }
        }
        if self.auto.is_some() {
            let refused = match self.workload {
                Exec | Scp => Some("a program runs until it ends"),
                Mix | Rrul => Some("a mixed test's groups share one window"),
                Cipher => Some("it runs in linerate's own process"),
                _ if self.bytes.is_some() => Some("a finite transfer ends when it is done"),
                _ => None,
            };
            if let Some(why) = refused {
                return Err(format!(
                    "--duration auto does not apply to {}: {why}; give -d a time",
                    self.workload.name()
                )
                .into());
            }
        }
        if self.arrivals == Arrivals::Poisson
            && (!matches!(self.workload, Rr | UdpRr | Memcache) || self.rate.is_none())
            && self.search.is_none()
        {
            return Err(
                "--arrivals poisson spaces an open loop's requests: rr, udp-rr or memcache with --rate (or --search)"
                    .into(),
            );
        }
        if let Some(r) = self.rate_ramp_s {
            if !matches!(self.workload, Rr | UdpRr | Memcache) || self.rate.is_none() {
                return Err(
                    "--rate-ramp raises an open loop's rate: rr, udp-rr or memcache with --rate"
                        .into(),
                );
            }
            if !(r > 0.0 && r <= MAX_SECONDS) {
                return Err(format!("--rate-ramp must be between 0 and {MAX_SECONDS} s").into());
            }
        }
        Ok(())
    }

    /// Checks combinations that flags alone cannot rule out. Used by the
    /// controller before it starts and by the agent before it accepts.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.flows == 0 {
            return Err("--flows must be at least 1".into());
        }
        if self.workers == 0 || self.agent_workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        if self.ports == Some(0) {
            return Err("--ports must be at least 1 (the server's first N data addresses)".into());
        }
        if self.io == IoMode::Threads {
            self.validate_threads()?;
        }
        self.validate_sizing()?;
        if self.workers > 256 || self.agent_workers > 256 {
            return Err("--workers is capped at 256".into());
        }
        if self.message == 0 || self.message > 64 * 1024 * 1024 {
            return Err("--message must be between 1 byte and 64 MiB".into());
        }
        if self.request == 0 || self.response == 0 {
            return Err("--request and --response must be at least 1 byte".into());
        }
        // Bounds on what a peer may ask an agent to allocate or wait for,
        // checked before anything is: a message is buffered whole.
        if self.request > MAX_MESSAGE_BYTES || self.response > MAX_MESSAGE_BYTES {
            return Err(format!(
                "--request and --response are capped at {} MiB",
                MAX_MESSAGE_BYTES >> 20
            )
            .into());
        }
        for (name, v) in [
            ("--duration", self.duration_s),
            ("--warmup", self.warmup_s),
            ("--interval", self.interval_s),
        ] {
            if !v.is_finite() || !(0.0..=MAX_SECONDS).contains(&v) {
                return Err(format!("{name} must be between 0 and {MAX_SECONDS} s").into());
            }
        }
        if self.flows > MAX_FLOWS {
            return Err(format!("--flows is capped at {MAX_FLOWS}").into());
        }
        if self.sysctl.len() > 64
            || self
                .sysctl
                .values()
                .any(|v| v.len() > 256 || v.chars().any(|c| c.is_control()))
        {
            return Err("sysctl values: at most 64, each under 256 characters, on one line".into());
        }
        if self.interval_s < 0.05 {
            return Err("--interval must be at least 50ms".into());
        }
        if !self.is_finite() && self.duration_s < self.interval_s.min(0.1) {
            return Err("--duration must be at least 0.1 s".into());
        }
        if self.read_size > MAX_READ_SIZE {
            return Err(format!("--read-size is capped at {} MiB", MAX_READ_SIZE >> 20).into());
        }
        if self.outstanding == 0 || self.outstanding > 1024 {
            return Err("--outstanding must be between 1 and 1024".into());
        }
        if self.workload.is_program() {
            return self.validate_exec();
        }
        if self.workload.is_udp() {
            self.validate_udp()?;
        } else if self.batch != 0 || self.gso || self.gro || self.rate_bps.is_some() {
            return Err(
                "--batch, --gso, --gro and a bit rate apply to udp-stream and udp-rr".into(),
            );
        }
        if self.exec.is_some() {
            return Err("a command applies to the exec workload".into());
        }
        match (&self.rrul, self.workload) {
            (Some(r), Workload::Rrul) => r.validate(self.warmup_s, self.interval_s)?,
            (None, Workload::Rrul) => return Err("rrul needs its phases and probes".into()),
            (Some(_), _) => {
                return Err("--idle, --probe-rate and --streams apply to rrul".into());
            }
            (None, _) => {}
        }
        match (&self.kv, self.workload) {
            (Some(kv), Workload::Memcache) => kv.validate()?,
            (None, Workload::Memcache) => return Err("memcache needs its key-value mix".into()),
            (Some(_), _) => {
                return Err(
                    "--service, --target, --keys, --values, --get-set apply to memcache".into(),
                )
            }
            (None, _) => {}
        }
        if !self.crypto_hw && self.tls.is_none() && self.workload != Workload::Cipher {
            return Err("--crypto-hw off applies to TLS tests (--tls, tls-handshake)".into());
        }
        if let (false, Some(why)) = (self.crypto_hw, crate::model::cryptohw::mask_refused_here()) {
            return Err(why.into());
        }
        match (&self.cipher, self.workload) {
            (Some(c), Workload::Cipher) => c.validate()?,
            (None, Workload::Cipher) => return Err("cipher needs its algorithm".into()),
            (Some(_), _) => return Err("the cipher spec belongs to the cipher workload".into()),
            (None, _) => {}
        }
        if self.workload == Workload::Memcache && self.tls.is_some() {
            return Err(
                "--tls: memcached's TLS is not supported by linerate's memcache load".into(),
            );
        }
        if self.window == WindowMode::Exact && self.rcvbuf.is_none() {
            return Err("--window exact needs --rcvbuf (the window)".into());
        }
        for k in self.sysctl.keys() {
            let ok = k.starts_with("net.")
                && k.len() < 100
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                && !k.contains("..");
            if !ok {
                return Err(format!(
                    "sysctl.\"{k}\": only net.* sysctls are set in a lab's namespaces"
                )
                .into());
            }
        }
        crate::model::nic::normalize_all(&self.nic)?;
        if self.rtt_s.is_some_and(|r| !(0.0..=20.0).contains(&r)) {
            return Err("rtt must be between 0 and 20 s".into());
        }
        if self.bytes == Some(0) {
            return Err("--bytes must be at least 1 byte".into());
        }
        if self.bytes.is_some() && self.direction == Direction::Bidir {
            return Err("--bytes works with --direction tx or rx, not bidir".into());
        }
        if self.zerocopy && self.tls.is_some() {
            return Err(
                "--zerocopy cannot be combined with --tls (sendfile bypasses user-space encryption, and this kernel has no kTLS)"
                    .into(),
            );
        }
        if let Some(t) = &self.tls {
            if let Some(v) = &t.version {
                if v != "1.2" && v != "1.3" {
                    return Err(format!("--tls-version {v}: use 1.2 or 1.3").into());
                }
            }
        }
        if let Some(cc) = &self.cc {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(format!("--cc '{cc}' is not a congestion control name").into());
            }
        }
        Ok(())
    }
}
