//! Network interfaces for the Configuration Summary: MTU, speed, state from
//! sysfs, and the offloads that change what a CPU-per-KB figure means (TSO,
//! GSO, GRO, checksums, scatter-gather) from the kernel's ethtool ioctl, so
//! no `ethtool` binary is needed on either host.

use crate::model::host::LinkInfo;
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

fn offloads(name: &str) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    if name.len() >= libc::IFNAMSIZ {
        return out;
    }
    // SAFETY: a datagram socket used only for ioctls, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return out;
    }
    for (feature, cmd) in OFFLOADS {
        let mut v = EthtoolValue { cmd: *cmd, data: 0 };
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: (&mut v as *mut EthtoolValue).cast(),
            _pad: [0; 16],
        };
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: SIOCETHTOOL reads ifr_name and writes the ethtool_value
        // that ifr_data points to; both live for the call.
        let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
        if rc == 0 {
            out.insert(feature.to_string(), v.data != 0);
        }
    }
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    out
}

/// Every interface of this network namespace, sorted by name.
pub fn links() -> Vec<LinkInfo> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return vec![];
    };
    let mut out: Vec<LinkInfo> = dir
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let base = format!("/sys/class/net/{name}");
            LinkInfo {
                mtu: read(&format!("{base}/mtu")).and_then(|v| v.parse().ok()),
                speed_mbps: read(&format!("{base}/speed"))
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|v| *v > 0)
                    .map(|v| v as u64),
                state: read(&format!("{base}/operstate")).unwrap_or_default(),
                offloads: offloads(&name),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_is_listed_with_its_mtu_and_offloads() {
        let links = super::links();
        let lo = links.iter().find(|l| l.name == "lo").expect("lo exists");
        assert!(lo.mtu.unwrap_or(0) >= 1500);
        // The kernel answers the ethtool ioctl for lo (GSO is a software
        // offload every device has).
        assert!(lo.offloads.contains_key("gso"), "{:?}", lo.offloads);
        assert!(lo.describe().contains("mtu"));
    }
}
