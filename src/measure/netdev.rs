//! Network interfaces for the Configuration Summary: MTU, speed, state from
//! sysfs, and the offloads that change what a CPU-per-KB figure means (TSO,
//! GSO, GRO, checksums, scatter-gather) from the kernel's ethtool ioctl, so
//! no `ethtool` binary is needed on either host.

use crate::model::host::{Coalesce, DriverInfo, IrqInfo, LinkInfo};
use std::collections::BTreeMap;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// (name, ETHTOOL_G* command) of the legacy per-feature getters.
const OFFLOADS: &[(&str, u32)] = &[
    ("rx-checksum", 0x14),
    ("tx-checksum", 0x16),
    ("scatter-gather", 0x18),
    ("tso", 0x1e),
    ("gso", 0x23),
    ("gro", 0x2b),
];

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// A datagram socket for ethtool ioctls, closed on drop.
struct IoctlSocket(libc::c_int);

impl IoctlSocket {
    fn open() -> Option<IoctlSocket> {
        // SAFETY: plain socket(2); the descriptor is owned by the value.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        (fd >= 0).then_some(IoctlSocket(fd))
    }

    /// SIOCETHTOOL on interface `name` with `data`, a `#[repr(C)]` ethtool
    /// struct whose first field is its command. True when the kernel
    /// answered.
    fn ethtool<T>(&self, name: &str, data: &mut T) -> bool {
        if name.len() >= libc::IFNAMSIZ {
            return false;
        }
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: (data as *mut T).cast(),
            _pad: [0; 16],
        };
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: SIOCETHTOOL reads ifr_name and the command at ifr_data,
        // and writes at most the struct of that command, which `data` is;
        // both live for the call.
        unsafe { libc::ioctl(self.0, SIOCETHTOOL as _, &mut req) == 0 }
    }
}

impl Drop for IoctlSocket {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this value owns.
        unsafe { libc::close(self.0) };
    }
}

fn offloads(sock: &IoctlSocket, name: &str) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for (feature, cmd) in OFFLOADS {
        let mut v = EthtoolValue { cmd: *cmd, data: 0 };
        if sock.ethtool(name, &mut v) {
            out.insert(feature.to_string(), v.data != 0);
        }
    }
    out
}

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCOALESCE: u32 = 0x0e;

/// `struct ethtool_drvinfo` (linux/ethtool.h).
#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

fn c_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).trim().to_string()
}

fn driver(sock: &IoctlSocket, name: &str) -> Option<DriverInfo> {
    let mut d = DrvInfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    if !sock.ethtool(name, &mut d) {
        return None;
    }
    let driver = c_text(&d.driver);
    (!driver.is_empty()).then(|| DriverInfo {
        driver,
        version: c_text(&d.version),
        firmware: c_text(&d.fw_version),
        bus: c_text(&d.bus_info),
    })
}

/// `struct ethtool_coalesce`: the command and 22 u32 settings, of which
/// the first eleven are read here.
#[repr(C)]
struct CoalesceRaw {
    cmd: u32,
    v: [u32; 22],
}

fn coalesce(sock: &IoctlSocket, name: &str) -> Option<Coalesce> {
    let mut c = CoalesceRaw {
        cmd: ETHTOOL_GCOALESCE,
        v: [0; 22],
    };
    if !sock.ethtool(name, &mut c) {
        return None;
    }
    // rx_coalesce_usecs, rx_max_coalesced_frames, rx_*_irq (2),
    // tx_coalesce_usecs, tx_max_coalesced_frames, tx_*_irq (2),
    // stats_block_coalesce_usecs, use_adaptive_rx, use_adaptive_tx.
    Some(Coalesce {
        rx_usecs: c.v[0],
        rx_frames: c.v[1],
        tx_usecs: c.v[4],
        tx_frames: c.v[5],
        adaptive_rx: c.v[9] != 0,
        adaptive_tx: c.v[10] != 0,
    })
}

/// Queues of `name` the kernel set up, counted in sysfs (`rx-0`, `tx-3`).
fn queues(name: &str) -> (Option<u32>, Option<u32>) {
    let Ok(dir) = std::fs::read_dir(format!("/sys/class/net/{name}/queues")) else {
        return (None, None);
    };
    let names: Vec<String> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    let count = |p: &str| names.iter().filter(|n| n.starts_with(p)).count() as u32;
    (Some(count("rx-")), Some(count("tx-")))
}

/// The queue interrupts of a device in `/proc/interrupts` text: lines
/// that name the interface ("eth0-TxRx-0") or its bus address (virtio and
/// other MSI-X devices name only the bus), except configuration vectors.
/// Affinity comes from `affinity(irq)`.
pub fn irqs_in(
    interrupts: &str,
    name: &str,
    bus: Option<&str>,
    affinity: impl Fn(u32) -> Option<String>,
) -> Vec<IrqInfo> {
    let mut lines = interrupts.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    let mut out = Vec::new();
    for line in lines {
        let Some((irq, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = irq.parse::<u32>() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = fields
            .iter()
            .take(cpus)
            .map_while(|f| f.parse().ok())
            .collect();
        let label = fields.last().copied().unwrap_or_default();
        let ours = fields.iter().any(|f| {
            f.starts_with(&format!("{name}-"))
                || *f == name
                || bus.is_some_and(|b| !b.is_empty() && f.ends_with(b))
        });
        if !ours || label.ends_with("-config") || label.ends_with("-event") {
            continue;
        }
        let busiest_cpu = counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .max_by_key(|(_, n)| **n)
            .map(|(c, _)| c);
        out.push(IrqInfo {
            irq,
            name: label.to_string(),
            affinity: affinity(irq).unwrap_or_else(|| "?".into()),
            busiest_cpu,
        });
    }
    out
}

/// Every interface of this network namespace, sorted by name.
pub fn links() -> Vec<LinkInfo> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return vec![];
    };
    let sock = IoctlSocket::open();
    let interrupts = read("/proc/interrupts").unwrap_or_default();
    let mut out: Vec<LinkInfo> = dir
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let base = format!("/sys/class/net/{name}");
            let driver = sock.as_ref().and_then(|s| driver(s, &name));
            // Only a device on a bus has queue interrupts of its own (a
            // veth or bridge would match nothing, lo has no driver).
            let irqs = match &driver {
                Some(d) if !d.bus.is_empty() && d.bus != "N/A" => {
                    irqs_in(&interrupts, &name, Some(&d.bus), |irq| {
                        read(&format!("/proc/irq/{irq}/smp_affinity_list"))
                    })
                }
                _ => Vec::new(),
            };
            let (rx_queues, tx_queues) = queues(&name);
            LinkInfo {
                mtu: read(&format!("{base}/mtu")).and_then(|v| v.parse().ok()),
                speed_mbps: read(&format!("{base}/speed"))
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|v| *v > 0)
                    .map(|v| v as u64),
                state: read(&format!("{base}/operstate")).unwrap_or_default(),
                offloads: sock
                    .as_ref()
                    .map(|s| offloads(s, &name))
                    .unwrap_or_default(),
                coalesce: sock.as_ref().and_then(|s| coalesce(s, &name)),
                driver,
                rx_queues,
                tx_queues,
                irqs,
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    const INTERRUPTS: &str = "           CPU0       CPU1
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 36:          0      95377 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       3648 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:       2717          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 90:        500        700 IR-PCI-MSI 524288-edge      eth1-TxRx-0
 91:          0          0 IR-PCI-MSI 524289-edge      eth1-TxRx-1
NMI:          0          0   Non-maskable interrupts
";

    #[test]
    fn queue_interrupts_are_found_by_bus_or_by_name() {
        let aff = |irq: u32| Some(if irq.is_multiple_of(2) { "0-1" } else { "1" }.to_string());
        // virtio names only its bus: the config vector is left out.
        let v = super::irqs_in(INTERRUPTS, "eth0", Some("0000:00:03.0"), aff);
        let got: Vec<(u32, &str, &str, Option<usize>)> = v
            .iter()
            .map(|q| (q.irq, q.name.as_str(), q.affinity.as_str(), q.busiest_cpu))
            .collect();
        assert_eq!(
            got,
            vec![
                (38, "virtio2-input.0", "0-1", Some(1)),
                (39, "virtio2-output.0", "1", Some(0))
            ]
        );
        // A NIC that names its queues after the interface; an idle queue
        // has no busiest CPU.
        let v = super::irqs_in(INTERRUPTS, "eth1", Some("0000:3b:00.0"), aff);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!((v[0].busiest_cpu, v[1].busiest_cpu), (Some(1), None));
        // Another device's interrupts are not ours.
        assert!(super::irqs_in(INTERRUPTS, "eth2", Some("0000:00:09.0"), aff).is_empty());
    }

    #[test]
    fn loopback_is_listed_with_its_mtu_and_offloads() {
        let links = super::links();
        let lo = links.iter().find(|l| l.name == "lo").expect("lo exists");
        assert!(lo.mtu.unwrap_or(0) >= 1500);
        // The kernel answers the ethtool ioctl for lo (GSO is a software
        // offload every device has).
        assert!(lo.offloads.contains_key("gso"), "{:?}", lo.offloads);
        assert!(lo.describe().contains("mtu"));
        // lo has no driver, bus or queue interrupts; every device has
        // sysfs queues.
        assert!(lo.irqs.is_empty());
        assert!(lo.rx_queues.is_some());
    }
}
