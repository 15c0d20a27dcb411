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
    pub fn default_workers_for(worker_per_flow: bool, flows: u32) -> u32 {
        let ncpu = cpus();
        if worker_per_flow && flows <= STREAM_FLOWS_PER_CPU * ncpu {
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

    /// Whether the agent's (or the client's) end receives payload: where
    /// only the direction's receiver takes payload (`one_way_payload`, a
    /// TCP stream), that end; otherwise both (rr, crr).
    pub fn receives(&self, agent: bool, one_way_payload: bool) -> bool {
        match (one_way_payload, self.direction) {
            (true, Direction::Tx) => agent,
            (true, Direction::Rx) => !agent,
            _ => true,
        }
    }

    /// `--io threads`: a blocking thread per flow on each end, for the
    /// flows that wait on one socket in one direction at a time.
    /// Which kinds take it is the kind's rule (`workload::rules`).
    fn validate_threads(&self) -> Result<(), Invalid> {
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
    pub fn default_io(&self, threads_when_closed: bool) -> IoMode {
        let one_flow_per_worker = self.workers == self.flows && self.agent_workers == self.flows;
        if threads_when_closed
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
    /// 16 KiB..1 MiB (as iperf3 reads its block size), and for a lone
    /// flow within 16..64 KiB. Measured on loopback (bench/RESULTS.md):
    /// under bbr a receiver that asks for more than the sender writes (the
    /// old fixed 256 KiB for 16 KiB writes) ACKs in larger, rarer steps,
    /// and bbr, which sizes its window and pacing rate from the ACKs, sends
    /// 10-25% slower (2026-11-25). A lone receiver that reads 128 KiB at a
    /// time opens the sender's window in bursts that the ACK's processing
    /// sends from the receiver's CPU, out of order with the sender's own
    /// segments: 5-35x the retransmissions and 1.36-1.40x less throughput
    /// than 64 KiB reads under bbr, the same under cubic (2026-11-27).
    /// Several flows' receivers share the CPUs with their senders, and
    /// there each extra call costs: 4 flows lost 5-10% under cubic with
    /// 64 KiB reads, so they read the message.
    pub fn default_read_size(&self) -> usize {
        let most = if self.flows <= 1 {
            READ_SIZE_LONE_MAX
        } else {
            READ_SIZE_MAX
        };
        self.largest_message().clamp(READ_SIZE_MIN, most)
    }

    /// The read size the engine uses (`read_size`, or for results before
    /// it was an option what the engine chose then).
    pub fn effective_read_size(&self) -> usize {
        match self.read_size {
            0 => self.largest_message().clamp(256 << 10, READ_SIZE_MAX),
            n => n,
        }
    }

    /// A finite test ends when every flow is done, not after `duration_s`.
    pub fn is_finite(&self) -> bool {
        // Only a stream takes --bytes among flows (workload::validate); a
        // program's --bytes is its file.
        self.exec.is_none() && self.bytes.is_some() && self.per == Per::Flow
    }

    /// `--search`, `--duration auto` and `--rate-ramp`: what they need
    /// whatever the kind (which kinds take them is the kind's rule,
    /// `workload::rules`).
    fn validate_sizing(&self) -> Result<(), Invalid> {
        if self.search.is_some() {
            if self.bytes.is_some() {
                return Err("--search runs open loops of transactions: drop --bytes".into());
            }
            if self.auto.is_some() {
                return Err("--search sizes each step itself: drop --duration auto".into());
            }
        }
        if self.auto.is_some() && self.bytes.is_some() {
            return Err(format!(
                "--duration auto does not apply to {}: a finite transfer ends when it is done; give -d a time",
                self.workload.name()
            )
            .into());
        }
        if self.arrivals == Arrivals::Poisson && self.rate.is_none() && self.search.is_none() {
            return Err(
                "--arrivals poisson spaces an open loop's requests: rr, udp-rr or memcache with --rate (or --search)"
                    .into(),
            );
        }
        if let Some(r) = self.rate_ramp_s {
            if self.rate.is_none() {
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
        if let (false, Some(why)) = (self.crypto_hw, crate::model::cryptohw::mask_refused_here()) {
            return Err(why.into());
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
