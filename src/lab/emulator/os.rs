//! The emulator's dealings with the kernel beside its queues: epoll with a
//! sub-millisecond timeout, the stats file (written whole, off the packet
//! loop), the kernel's drop counters, the thread's scheduling class and
//! its CPU time.

use super::*;

/// epoll over the queues' socket, with a sub-millisecond timeout.
pub(super) struct Epoll {
    pub(super) fd: OwnedFd,
    /// `epoll_pwait2` exists (Linux >= 5.11); else `epoll_wait` in whole ms.
    pub(super) pwait2: bool,
}

impl Epoll {
    pub(super) fn new() -> Result<Epoll, EmulatorError> {
        // SAFETY: plain syscall; the result is checked before use.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(EmulatorError::Call {
                call: "epoll_create1",
                source: OsText(io::Error::last_os_error()),
            });
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Epoll { fd, pwait2: true })
    }

    /// Adds `fd` to the set, watched for reading.
    pub(super) fn add(&self, fd: RawFd) -> Result<(), EmulatorError> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, true)
    }

    /// Turns reading interest in `fd` on or off (it stays in the set).
    pub(super) fn watch(&self, fd: RawFd, on: bool) -> Result<(), EmulatorError> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, on)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, readable: bool) -> Result<(), EmulatorError> {
        let mut ev = libc::epoll_event {
            events: if readable { libc::EPOLLIN as u32 } else { 0 },
            u64: 0,
        };
        // SAFETY: both descriptors are open and `ev` is valid for the call.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if rc != 0 {
            return Err(EmulatorError::Call {
                call: "epoll_ctl",
                source: OsText(io::Error::last_os_error()),
            });
        }
        Ok(())
    }

    /// Waits up to `timeout`; returns whether a watched descriptor is ready
    /// (false on a timeout or a signal).
    pub(super) fn wait(&mut self, timeout: Duration) -> Result<bool, EmulatorError> {
        // One descriptor in the set: one event is all a wait can report.
        // SAFETY: epoll_event is plain data; zero is valid.
        let mut evs: [libc::epoll_event; 1] = unsafe { std::mem::zeroed() };
        let n = loop {
            let rc = if self.pwait2 {
                let ts = libc::timespec {
                    tv_sec: timeout.as_secs() as libc::time_t,
                    tv_nsec: timeout.subsec_nanos() as libc::c_long,
                };
                // SAFETY: epoll_pwait2(epfd, events, maxevents, timeout,
                // sigmask = NULL, sigsetsize); `evs` and `ts` outlive the call.
                unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        libc::c_long::from(self.fd.as_raw_fd()),
                        evs.as_mut_ptr(),
                        evs.len() as libc::c_long,
                        &ts as *const libc::timespec,
                        std::ptr::null::<libc::sigset_t>(),
                        0 as libc::c_long,
                    ) as libc::c_int
                }
            } else {
                let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128);
                // SAFETY: `evs` is valid for `evs.len()` events during the call.
                unsafe {
                    libc::epoll_wait(
                        self.fd.as_raw_fd(),
                        evs.as_mut_ptr(),
                        evs.len() as libc::c_int,
                        ms as libc::c_int,
                    )
                }
            };
            if rc >= 0 {
                break rc as usize;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSYS) if self.pwait2 => self.pwait2 = false,
                Some(libc::EINTR) => return Ok(false),
                _ => {
                    return Err(EmulatorError::Call {
                        call: "epoll wait",
                        source: OsText(e),
                    })
                }
            }
        };
        Ok(n > 0)
    }
}

/// Writes the counters so that readers never see a partial file: a
/// temporary file in the same directory, then rename.
pub(super) struct StatsFile {
    pub(super) path: PathBuf,
    pub(super) tmp: PathBuf,
}

impl StatsFile {
    pub(super) fn new(path: &Path) -> Result<StatsFile, EmulatorError> {
        let name = path
            .file_name()
            .ok_or_else(|| EmulatorError::StatsName(path.into()))?;
        // Checked now so that a bad path fails before the queues are bound.
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(EmulatorError::StatsDir(dir.into()));
        }
        let tmp_name = format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id());
        Ok(StatsFile {
            path: path.to_path_buf(),
            tmp: path.with_file_name(tmp_name),
        })
    }

    pub(super) fn write(&self, stats: &Stats) -> Result<(), EmulatorError> {
        let json = serde_json::to_vec(stats).map_err(EmulatorError::StatsJson)?;
        std::fs::write(&self.tmp, json).map_err(|e| EmulatorError::Io {
            path: self.tmp.clone(),
            source: OsText(e),
        })?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| EmulatorError::Io {
            path: self.path.clone(),
            source: OsText(e),
        })
    }
}

/// Adds the kernel's drop counters of each queue to a snapshot; once a
/// queue is gone (at exit) its last values are kept.
pub(super) struct KernelView {
    pub(super) queues: [u16; 2],
    pub(super) last: [nfqueue::KernelCounters; 2],
}

impl KernelView {
    pub(super) fn fill(&mut self, stats: &mut Stats) {
        for (d, dir) in stats.dirs.iter_mut().enumerate() {
            if let Some(k) = nfqueue::kernel_counters(self.queues[d]) {
                self.last[d] = k;
            }
            dir.kernel_queue_dropped = self.last[d].queue_dropped;
            dir.kernel_user_dropped = self.last[d].user_dropped;
        }
    }
}

/// Writes snapshots off the packet loop: a write to a disk-backed file takes
/// 0.5-1.5 ms, which would delay releases. The loop hands over a snapshot
/// without ever blocking (one is skipped if the writer is still busy).
pub(super) struct Writer {
    pub(super) tx: Option<mpsc::SyncSender<Stats>>,
    pub(super) handle: Option<thread::JoinHandle<Result<(), EmulatorError>>>,
}

impl Writer {
    /// Writes `first` before returning (so the file exists once the queues
    /// are bound), then starts the writer thread.
    pub(super) fn start(
        file: StatsFile,
        mut kernel: KernelView,
        mut first: Stats,
    ) -> Result<Writer, EmulatorError> {
        kernel.fill(&mut first);
        file.write(&first)?;
        let (tx, rx) = mpsc::sync_channel::<Stats>(1);
        let handle = thread::Builder::new()
            .name("emulator-stats".into())
            .spawn(move || {
                let mut warned = false;
                let mut last = Ok(());
                for mut st in rx {
                    kernel.fill(&mut st);
                    last = file.write(&st);
                    if let (Err(e), false) = (&last, warned) {
                        eprintln!("lab emulate: cannot write counters: {e}");
                        warned = true;
                    }
                }
                last
            })
            .map_err(EmulatorError::Writer)?;
        Ok(Writer {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    pub(super) fn offer(&self, st: Stats) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(st);
        }
    }

    /// Writes the final snapshot and waits for the writer; Err if that write failed.
    pub(super) fn finish(mut self, st: Stats) -> Result<(), EmulatorError> {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(st);
        }
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(res)) => res,
            Some(Err(_)) => Err(EmulatorError::WriterPanicked),
            None => Ok(()),
        }
    }
}

/// CPU time of the calling thread, seconds.
pub(super) fn thread_cpu_seconds() -> f64 {
    crate::measure::cpu::rusage(libc::RUSAGE_THREAD).seconds()
}

/// The packet loop's scheduling policy, chosen from its own CPU use.
///
/// Light loops (GSO mode: ~15% of a core at 1 Gbit/s) run SCHED_FIFO: on a
/// busy 2-CPU machine the flows' own processes otherwise delay the timer
/// wake-ups by 1-3 ms (measured: 42 late releases in 5 s under SCHED_OTHER,
/// 8 under SCHED_FIFO). Heavy loops (per-packet mode: ~75% of a core, the
/// kernel's forwarding of released packets runs in the loop's verdict
/// calls) go back to SCHED_OTHER: an RT thread that starves a CPU makes the
/// kernel's fair-class server preempt it for up to 50 ms (measured: 54 ms
/// late releases). Best effort: without CAP_SYS_NICE it stays SCHED_OTHER.
pub(super) struct Priority {
    pub(super) realtime: bool,
    pub(super) allowed: bool,
    pub(super) cpu: f64,
    pub(super) at: Instant,
}

impl Priority {
    /// Above this share of a core the loop leaves SCHED_FIFO; below the
    /// lower one it returns.
    pub(super) const LEAVE: f64 = 0.5;
    pub(super) const RETURN: f64 = 0.25;

    pub(super) fn new() -> Priority {
        let mut p = Priority {
            realtime: false,
            allowed: true,
            cpu: thread_cpu_seconds(),
            at: Instant::now(),
        };
        p.set(true);
        p
    }

    pub(super) fn set(&mut self, realtime: bool) {
        if !self.allowed || realtime == self.realtime {
            return;
        }
        let (policy, prio) = if realtime {
            (libc::SCHED_FIFO, 10)
        } else {
            (libc::SCHED_OTHER, 0)
        };
        let param = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: pid 0 is the calling thread; `param` is valid for the call.
        if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
            self.realtime = realtime;
        } else {
            self.allowed = false;
        }
    }

    /// Called every tick from the loop thread: re-chooses from the CPU share since the last call.
    pub(super) fn adjust(&mut self) {
        let (cpu, at) = (thread_cpu_seconds(), Instant::now());
        let dt = at.duration_since(self.at).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let share = (cpu - self.cpu) / dt;
        (self.cpu, self.at) = (cpu, at);
        if self.realtime && share > Self::LEAVE {
            self.set(false);
        } else if !self.realtime && share < Self::RETURN {
            self.set(true);
        }
    }
}

/// CPU time of this process (user + system), seconds.
pub(super) fn cpu_seconds() -> f64 {
    crate::measure::cpu::rusage(libc::RUSAGE_SELF).seconds()
}
