//! A lab's tunnel between its client and server (`lab up --tunnel`, the
//! `lab.tunnel` axis): which kind, what it costs per packet (so its MTU
//! keeps the outer packets within the lab's MTU), what a result records
//! about it, and whether its own byte counters agree with linerate's.
//!
//! The tunnel runs client <-> server across the router, so the emulator's
//! delay and rate apply to the encapsulated packets; the addresses the
//! tests use become the tunnel's inner ones (see [`INNER_CLIENT`]).

use serde::{Deserialize, Serialize};

use super::error::ModelError;

/// The tunnel's inner addresses, in 198.19.254.0/24: inside the lab's
/// benchmarking range (198.18.0.0/15), clear of the links' 198.18.0-31.x.
pub const INNER_CLIENT: &str = "198.19.254.1";
pub const INNER_SERVER: &str = "198.19.254.2";
pub const INNER_PREFIX: u8 = 24;

/// What carries the lab's test traffic between client and server.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TunnelKind {
    /// The clear path (no tunnel).
    #[default]
    None,
    /// WireGuard: the kernel's module where present, else wireguard-go.
    Wireguard,
    /// ESP (AES-GCM-256, rfc4106) set up with `ip xfrm`, tunnel mode.
    Ipsec,
    /// ESP with AES-CCM-256 (rfc4309), the seeds' IPsec cipher.
    #[serde(rename = "ipsec-ccm")]
    IpsecCcm,
    /// A VXLAN overlay (no encryption): the cloud network's encapsulation.
    Vxlan,
}

impl TunnelKind {
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::None => "none",
            TunnelKind::Wireguard => "wireguard",
            TunnelKind::Ipsec => "ipsec",
            TunnelKind::IpsecCcm => "ipsec-ccm",
            TunnelKind::Vxlan => "vxlan",
        }
    }

    /// ESP (either AEAD): no interface, SAs and policies set up by `ip xfrm`.
    pub fn is_esp(self) -> bool {
        matches!(self, TunnelKind::Ipsec | TunnelKind::IpsecCcm)
    }

    /// The kernel's AEAD template for ESP ("rfc4106(gcm(aes))"), its key
    /// length in bytes (an AES-256 key plus the nonce's salt: 4 bytes for
    /// GCM, 3 for CCM) and the kernel option that provides it.
    pub fn esp_aead(self) -> Option<(&'static str, usize, &'static str)> {
        match self {
            TunnelKind::Ipsec => Some(("rfc4106(gcm(aes))", 36, "CONFIG_CRYPTO_GCM")),
            TunnelKind::IpsecCcm => Some(("rfc4309(ccm(aes))", 35, "CONFIG_CRYPTO_CCM")),
            _ => None,
        }
    }

    /// The AEAD that protects the inner packets ("none" for VXLAN).
    pub fn cipher(self) -> &'static str {
        match self {
            TunnelKind::None | TunnelKind::Vxlan => "none",
            TunnelKind::Wireguard => "ChaCha20-Poly1305",
            TunnelKind::Ipsec => "AES-GCM-256",
            TunnelKind::IpsecCcm => "AES-CCM-256",
        }
    }

    /// Bytes each inner packet gains on the outer link, over IPv4 (`ipv6`:
    /// an IPv6 outer header). WireGuard: IP 20 (40) + UDP 8 + its header
    /// 16 + the Poly1305 tag 16 = 60 (80). VXLAN: the inner Ethernet
    /// header 14 + VXLAN 8 + UDP 8 + IP 20 (40) = 50 (70). ESP in tunnel
    /// mode with AES-GCM or AES-CCM (both carry an 8-byte IV and a 16-byte
    /// ICV): IP 20 (40) + ESP header 8 + IV 8 + ICV 16 + trailer 2, padded
    /// to 4 bytes (see [`TunnelKind::mtu`]).
    pub fn overhead(self, ipv6: bool) -> u32 {
        let ip = if ipv6 { 40 } else { 20 };
        match self {
            TunnelKind::None => 0,
            TunnelKind::Wireguard => ip + 8 + 32,
            TunnelKind::Vxlan => 14 + 8 + 8 + ip,
            TunnelKind::Ipsec | TunnelKind::IpsecCcm => ip + 8 + 8 + 16 + 2,
        }
    }

    /// The tunnel interface's MTU that keeps its outer packets within the
    /// lab's `lab_mtu` (IPv4 outside). ESP pads payload + trailer to a
    /// multiple of 4, so its MTU is the largest that needs no padding.
    pub fn mtu(self, lab_mtu: u32) -> u32 {
        match self {
            TunnelKind::Ipsec | TunnelKind::IpsecCcm => {
                let room = lab_mtu.saturating_sub(20 + 8 + 8 + 16);
                (room / 4 * 4).saturating_sub(2)
            }
            k => lab_mtu.saturating_sub(k.overhead(false)),
        }
    }

    /// Bytes of headers in each packet the tunnel interface counts, beyond
    /// the TCP payload: IP 20 + TCP 20 + timestamps 12, and VXLAN's
    /// interface counts the inner Ethernet header (14) too.
    pub fn counted_header(self) -> u64 {
        match self {
            TunnelKind::Vxlan => 14 + 52,
            _ => 52,
        }
    }
}

impl std::str::FromStr for TunnelKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "none" | "off" | "clear" => Ok(TunnelKind::None),
            "wireguard" | "wg" => Ok(TunnelKind::Wireguard),
            "ipsec" | "esp" | "ipsec-gcm" => Ok(TunnelKind::Ipsec),
            "ipsec-ccm" | "esp-ccm" => Ok(TunnelKind::IpsecCcm),
            "vxlan" => Ok(TunnelKind::Vxlan),
            _ => Err(ModelError::Form {
                input: s.into(),
                form: "none, wireguard, ipsec (AES-GCM), ipsec-ccm or vxlan",
            }),
        }
    }
}

/// The tunnel a lab's test ran through, as the lab set it up.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TunnelInfo {
    /// "wireguard", "ipsec", "ipsec-ccm" or "vxlan".
    pub kind: TunnelKind,
    /// "kernel" or "userspace" (wireguard-go).
    pub implementation: String,
    /// The program and version where userspace ("wireguard-go v0.0.20220316").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// "ChaCha20-Poly1305", "AES-GCM-256" or "none".
    pub cipher: String,
    /// The tunnel interface's MTU (the lab's MTU less `overhead_bytes`).
    pub mtu: u32,
    pub overhead_bytes: u32,
    /// The tunnel's interface in the client's and the server's namespace
    /// (ESP has none: "").
    pub interfaces: [String; 2],
    /// Inner addresses (the tests' data addresses) and outer ones (the lab links').
    pub client_inner: String,
    pub server_inner: String,
    pub client_outer: String,
    pub server_outer: String,
    /// Why this host's kernel cannot run IPsec (ESP), as found when the
    /// tunnel was set up ("kernel 6.18.44: CONFIG_INET_ESP not set in
    /// /proc/config.gz"); None: it can, or it was not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub esp_unavailable: Option<String>,
}

impl TunnelInfo {
    /// "wireguard (userspace wireguard-go v0.0.20220316, ChaCha20-Poly1305, MTU 1440)".
    pub fn describe(&self) -> String {
        let how = match &self.program {
            Some(p) => format!("{} {p}", self.implementation),
            None => self.implementation.clone(),
        };
        format!(
            "{} ({how}, {}, MTU {})",
            self.kind.name(),
            if self.cipher == "none" {
                "no encryption"
            } else {
                &self.cipher
            },
            self.mtu
        )
    }
}

/// One end's tunnel interface counters (/sys/class/net/IF/statistics).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct IfCounters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
}

impl IfCounters {
    pub fn since(&self, before: &IfCounters) -> IfCounters {
        IfCounters {
            rx_bytes: self.rx_bytes.saturating_sub(before.rx_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(before.tx_bytes),
            rx_packets: self.rx_packets.saturating_sub(before.rx_packets),
            tx_packets: self.tx_packets.saturating_sub(before.tx_packets),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.rx_bytes + self.tx_bytes
    }

    pub fn packets(&self) -> u64 {
        self.rx_packets + self.tx_packets
    }
}

/// How far the tunnel's payload may stray from linerate's before the
/// record says they disagree: 3% of it, plus 256 KiB for the control
/// connection's messages and the handshakes, which cross the tunnel too.
pub const AGREE_PCT: f64 = 3.0;
pub const AGREE_SLACK_BYTES: u64 = 256 << 10;

/// The tunnel's counters over one test (read before and after it, both
/// ends), against the payload linerate's receivers counted.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TunnelBytes {
    pub client: IfCounters,
    pub server: IfCounters,
    /// The TCP/UDP payload linerate's receivers counted over the test
    /// (both directions, warm-up included; None: a program ran).
    pub payload_bytes: Option<u64>,
    /// The headers in the packets the client's interface counted
    /// (packets x [`TunnelKind::counted_header`]).
    pub header_bytes: u64,
    /// The client interface's bytes less its headers, over linerate's
    /// payload, minus one, percent (None: no payload to compare).
    pub excess_pct: Option<f64>,
    /// Whether the two agree within [`AGREE_PCT`] plus [`AGREE_SLACK_BYTES`].
    pub agrees: Option<bool>,
}

impl TunnelBytes {
    /// Compares the client interface's counters with `payload` (linerate's
    /// bytes); sets `header_bytes`, `excess_pct` and `agrees`. Returns the
    /// warning when they disagree beyond the headers.
    pub fn judge(&mut self, kind: TunnelKind, payload: Option<u64>) -> Option<String> {
        self.payload_bytes = payload;
        self.excess_pct = None;
        self.agrees = None;
        self.header_bytes = self.client.packets() * kind.counted_header();
        let payload = payload.filter(|p| *p > 0)?;
        let carried = self.client.bytes().saturating_sub(self.header_bytes);
        let diff = carried as f64 - payload as f64;
        self.excess_pct = Some(diff / payload as f64 * 100.0);
        let ok = diff.abs() <= payload as f64 * AGREE_PCT / 100.0 + AGREE_SLACK_BYTES as f64;
        self.agrees = Some(ok);
        (!ok).then(|| {
            format!(
                "the tunnel's counters disagree with linerate's bytes beyond the headers: its interface carried {} of payload ({} bytes in {} packets less {} of headers), linerate's receivers counted {} ({:+.1}%)",
                carried,
                self.client.bytes(),
                self.client.packets(),
                self.header_bytes,
                payload,
                diff / payload as f64 * 100.0
            )
        })
    }

    /// "tunnel counted 1.2 GB in 830k packets at the client (linerate's
    /// payload +2.1% after headers)".
    pub fn describe(&self) -> String {
        let mut s = format!(
            "tunnel interfaces over the test: client {} B in {} packets, server {} B in {} packets",
            self.client.bytes(),
            self.client.packets(),
            self.server.bytes(),
            self.server.packets()
        );
        match (self.excess_pct, self.agrees) {
            (Some(x), Some(true)) => s.push_str(&format!(
                "; agrees with linerate's payload ({x:+.1}% after {} B of headers)",
                self.header_bytes
            )),
            (Some(x), _) => s.push_str(&format!(
                "; DISAGREES with linerate's payload ({x:+.1}% after headers)"
            )),
            _ => s.push_str("; no payload of linerate's to compare"),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_mtus_keep_the_outer_packets_within_the_lab_mtu() {
        assert_eq!(TunnelKind::Wireguard.overhead(false), 60);
        assert_eq!(TunnelKind::Wireguard.overhead(true), 80);
        assert_eq!(TunnelKind::Vxlan.overhead(false), 50);
        assert_eq!(TunnelKind::Vxlan.overhead(true), 70);
        assert_eq!(TunnelKind::Wireguard.mtu(1500), 1440);
        assert_eq!(TunnelKind::Vxlan.mtu(1500), 1450);
        assert_eq!(TunnelKind::Wireguard.mtu(9000), 8940);
        assert_eq!(TunnelKind::None.mtu(1500), 1500);
        // ESP: 1446 + trailer 2 = 1448, a multiple of 4: no padding; + 8
        // header + 8 IV + 16 ICV + 20 IP = 1500.
        assert_eq!(TunnelKind::Ipsec.mtu(1500), 1446);
        let esp = TunnelKind::Ipsec.mtu(1500);
        assert_eq!((esp + 2) % 4, 0);
        assert_eq!(esp + 2 + 8 + 8 + 16 + 20, 1500);
        // An MTU whose room is not a multiple of 4 rounds down.
        let odd = TunnelKind::Ipsec.mtu(1499);
        assert_eq!((odd + 2) % 4, 0);
        assert!(odd + 2 + 52 <= 1499);
    }

    #[test]
    fn kinds_parse_and_name_their_cipher() {
        for k in ["none", "wireguard", "ipsec", "ipsec-ccm", "vxlan"] {
            assert_eq!(k.parse::<TunnelKind>().unwrap().name(), k);
        }
        assert!("gre".parse::<TunnelKind>().is_err());
        assert_eq!(TunnelKind::Wireguard.cipher(), "ChaCha20-Poly1305");
        assert_eq!(TunnelKind::Ipsec.cipher(), "AES-GCM-256");
        assert_eq!(TunnelKind::IpsecCcm.cipher(), "AES-CCM-256");
        assert_eq!(
            "ipsec-ccm".parse::<TunnelKind>().unwrap(),
            TunnelKind::IpsecCcm
        );
        assert_eq!(TunnelKind::IpsecCcm.mtu(1500), TunnelKind::Ipsec.mtu(1500));
        assert_eq!(
            serde_json::to_string(&TunnelKind::IpsecCcm).unwrap(),
            "\"ipsec-ccm\""
        );
        assert_eq!(TunnelKind::Vxlan.cipher(), "none");
    }

    #[test]
    fn counters_agree_within_headers_and_disagree_beyond() {
        // 100 MB of payload in 1388-byte segments: 72k data packets, 36k acks.
        let payload = 100_000_000u64;
        let packets = payload / 1388 + payload / 1388 / 2;
        let client = IfCounters {
            tx_bytes: payload + (payload / 1388) * 52,
            rx_bytes: (payload / 1388 / 2) * 52,
            tx_packets: payload / 1388,
            rx_packets: payload / 1388 / 2,
        };
        assert_eq!(client.packets(), packets);
        let mut b = TunnelBytes {
            client,
            ..Default::default()
        };
        assert_eq!(b.judge(TunnelKind::Wireguard, Some(payload)), None);
        assert_eq!(b.agrees, Some(true));
        assert!(b.excess_pct.unwrap().abs() < 0.1, "{:?}", b.excess_pct);
        // Half the payload missing from the tunnel: a disagreement, said.
        let w = b.judge(TunnelKind::Wireguard, Some(payload * 2)).unwrap();
        assert!(w.contains("disagree"), "{w}");
        assert_eq!(b.agrees, Some(false));
        assert!(b.describe().contains("DISAGREES"));
        // No payload (a program): nothing judged.
        assert_eq!(b.judge(TunnelKind::Wireguard, None), None);
    }
}
