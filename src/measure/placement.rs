//! Where workers run. On a 2-core VM an RR rate changes 3x between client
//! and server on the same core or on different cores, so every result says
//! which CPUs each worker was allowed and which it was seen on.

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), super::MeasureError> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                return Err(super::MeasureError::CpuBeyondSet(c));
            }
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(super::MeasureError::Pin {
                cpus: cpus.to_vec(),
                source: std::io::Error::last_os_error(),
                allowed: crate::units::fmt_cpu_list(&allowed_cpus()),
            });
        }
    }
    Ok(())
}

/// CPUs the calling thread may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as above.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The CPU the calling thread runs on now.
#[inline]
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// Counts how often a worker was seen on each CPU.
#[derive(Clone, Debug, Default)]
pub struct CpuSeen {
    counts: Vec<u64>,
}

impl CpuSeen {
    #[inline]
    pub fn sample(&mut self) {
        if let Some(c) = current_cpu() {
            if c >= self.counts.len() {
                self.counts.resize(c + 1, 0);
            }
            self.counts[c] += 1;
        }
    }
    /// (cpu, share of samples in percent), most frequent first.
    pub fn shares(&self) -> Vec<(usize, f64)> {
        let total: u64 = self.counts.iter().sum();
        let mut v: Vec<(usize, f64)> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(c, &n)| (c, 100.0 * n as f64 / total as f64))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    }
}

/// CPUs for worker `i` of a list: round-robin, one CPU each.
pub fn cpu_for_worker(list: &[usize], i: usize) -> Vec<usize> {
    vec![list[i % list.len()]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_and_observe() {
        let first = allowed_cpus()[0];
        std::thread::spawn(move || {
            pin_current_thread(&[first]).unwrap();
            assert_eq!(allowed_cpus(), vec![first]);
            let mut seen = CpuSeen::default();
            for _ in 0..100 {
                seen.sample();
            }
            assert_eq!(seen.shares(), vec![(first, 100.0)]);
        })
        .join()
        .unwrap();
        assert_eq!(
            pin_current_thread(&[100_000]).unwrap_err().to_string(),
            "CPU 100000 is beyond CPU_SETSIZE"
        );
        assert_eq!(cpu_for_worker(&[2, 3], 3), vec![3]);
    }
}
