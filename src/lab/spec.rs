//! What a lab's link does, as a user writes it: `--rtt 100ms --rate 1gbit
//! --loss 0.5%`. Every per-link value takes `X` (both directions) or `X/Y`
//! (client->server / server->client), so asymmetric links need no new flags.

use serde::{Deserialize, Serialize};

use super::emulator::Shaping;
use super::error::{LabError, ValueError};
use crate::model::lab::{default_queue_bytes, LabSpec};
use crate::model::{Invalid, ModelError};
use crate::units;

/// The options as typed: `lab up`'s flags and a study's `[lab]` table are
/// this one struct; `build` checks and combines them. Values stay strings
/// here so errors can name the option and quote what was written.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct LabOptions {
    /// Round-trip time added by the router (split evenly), e.g. 100ms.
    #[arg(long, allow_hyphen_values = true)]
    pub rtt: Option<String>,
    /// One-way delay instead of --rtt: D or CLIENT_TO_SERVER/SERVER_TO_CLIENT (10ms/40ms).
    #[arg(long, allow_hyphen_values = true)]
    pub delay: Option<String>,
    /// Extra random delay up to this (no reordering), e.g. 1ms.
    #[arg(long, allow_hyphen_values = true)]
    pub jitter: Option<String>,
    /// Wire rate (38 B Ethernet framing per packet counted), e.g. 1gbit or 100mbit/1gbit.
    #[arg(long)]
    pub rate: Option<String>,
    /// Drop-tail queue before the bottleneck: bytes (4M) or time at the
    /// rate (100ms). Default: one bandwidth-delay product (rate x RTT), at
    /// least 1 MiB.
    ///
    /// Why: one BDP of drop-tail buffer is the least with which a single
    /// flow keeps the link busy after a loss (Reno halves its window and
    /// needs one BDP; cubic keeps 0.7 of it and needs 0.43), so a bulk test
    /// measures the link, not the buffer; more only adds queueing delay to
    /// every round trip under load (the former default, 100 ms, made a 1 ms
    /// lab a 100 ms one for a loaded flow). The floor is room
    /// for 16 GSO bursts of 64 KiB, which the emulator passes as one unit:
    /// at 1 ms and 1 Gbit/s (BDP 122 KiB) one flow got 862 Mbit/s through
    /// 256 KiB, 940 through 512 KiB, 941.5 (the limit) through 1 MiB.
    /// Give a deeper queue to study bufferbloat, a shallower one for loss.
    #[arg(long)]
    pub queue: Option<String>,
    /// Random loss: 0.5% or 0.005 (per direction with A/B).
    #[arg(long, allow_hyphen_values = true)]
    pub loss: Option<String>,
    /// MTU of the lab links.
    #[arg(long)]
    pub mtu: Option<u32>,
    /// TSO/GSO/GRO on the lab links: on or off.
    #[arg(long, value_parser = on_off, value_name = "on|off")]
    pub offloads: Option<bool>,
    /// Congestion control in the client and server namespaces (default cubic; this kernel defaults to bbr).
    #[arg(long)]
    pub cc: Option<String>,
    /// Emulate per packet even without loss (GSO super-packets are one unit otherwise; costs CPU). Links below 250 Mbit/s are emulated per packet anyway.
    #[arg(long)]
    #[serde(default)]
    pub per_packet: bool,
    /// Queue discipline before the bottleneck: fifo (drop-tail, the
    /// default), codel (RFC 8289) or fq_codel (RFC 8290).
    #[arg(long, value_name = "fifo|codel|fq_codel")]
    pub aqm: Option<String>,
    /// CoDel's target sojourn time (default 5ms).
    #[arg(long, value_name = "TIME")]
    pub aqm_target: Option<String>,
    /// CoDel's interval (default 100ms, about a worst-case RTT).
    #[arg(long, value_name = "TIME")]
    pub aqm_interval: Option<String>,
    /// CoDel and FQ-CoDel mark ECN-capable packets instead of dropping them (default on).
    #[arg(long, value_parser = on_off, value_name = "on|off")]
    pub ecn: Option<bool>,
    /// Where the emulator runs: auto (the last CPU, the lab's packet
    /// processing steered to the others), off, or a CPU number.
    #[arg(long, value_name = "auto|off|N")]
    #[serde(default)]
    pub emulator_cpu: Option<String>,
    /// How the namespaces are joined to the router: veth (a veth pair),
    /// bridge (the router's end is a port of a Linux bridge that holds the
    /// router's address) or macvlan (two macvlan devices in bridge mode on
    /// a veth parent in the router) [default: veth].
    #[arg(long, value_name = "veth|bridge|macvlan")]
    #[serde(default)]
    pub link: Option<String>,
    /// Server data addresses (ports, 1-8), each on a link of its own from
    /// the router to the server namespace; tests spread their flows over
    /// them (`run --ports N` uses the first N) [default: 1].
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub ports: Option<u32>,
    /// A tunnel between client and server, across the router (the
    /// emulator shapes its encapsulated packets): none (default),
    /// wireguard (the kernel's, else wireguard-go), ipsec (ESP
    /// AES-GCM-256, where the kernel has ESP), ipsec-ccm (ESP AES-CCM-256,
    /// the seeds' cipher) or vxlan (no encryption).
    /// Tests then use the tunnel's inner addresses (198.19.254.1 and .2),
    /// and its MTU keeps the outer packets within --mtu.
    #[arg(long, value_name = "none|wireguard|ipsec|ipsec-ccm|vxlan")]
    #[serde(default)]
    pub tunnel: Option<String>,
    /// The hosts' NIC speed: each host sends at most this (wire rate, as
    /// --rate), or `link` for the link's own rate. Per direction as
    /// CLIENTS/SERVERS. Default: none, the hosts send as fast as the
    /// kernel copies.
    ///
    /// Why: a host's NIC serialises what it sends, so a 10 GbE host never
    /// bursts into a 10 Gbit/s path faster than the path drains; a veth
    /// has no speed, and a burst of a whole window reaches the router's
    /// queue at memory speed and overflows it (one flow at 10 Gbit/s,
    /// 1 ms: 7.9-9.3 Gbit/s without, 9.23-9.30 with the NIC at the link's
    /// rate; bench/RESULTS.md). A token bucket (tc tbf) on each host's
    /// link end is the NIC; it costs the sending host's CPU its timers.
    #[arg(long, value_name = "RATE|link")]
    #[serde(default)]
    pub nic_rate: Option<String>,
}

/// The most server ports a lab has (198.19.1-8.0/24).
pub const MAX_PORTS: u32 = 8;

fn on_off(s: &str) -> Result<bool, ModelError> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(ModelError::Form {
            input: s.into(),
            form: "on or off",
        }),
    }
}

/// Splits `X/Y` into the two directions, `X` into the same value twice.
fn per_direction<T: Clone>(
    v: &Option<String>,
    name: &'static str,
    parse: impl Fn(&str) -> Result<T, ValueError>,
) -> Result<Option<[T; 2]>, LabError> {
    let Some(v) = v else { return Ok(None) };
    let parts: Vec<&str> = v.split('/').collect();
    let one = |s: &str| {
        parse(s.trim()).map_err(|source| LabError::Value {
            name,
            value: v.clone(),
            source,
        })
    };
    match parts.as_slice() {
        [a] => {
            let a = one(a)?;
            Ok(Some([a.clone(), a]))
        }
        [a, b] => Ok(Some([one(a)?, one(b)?])),
        _ => Err(Invalid(format!(
            "--{name} {v}: give one value or two as CLIENT_TO_SERVER/SERVER_TO_CLIENT"
        ))
        .into()),
    }
}

/// A lab delay: its unit is required (`--rtt 10` read as 10 s made a lab
/// whose calibration ran for minutes; 10 ms was meant), except for 0.
fn duration(s: &str) -> Result<f64, ValueError> {
    if s.starts_with('-') {
        return Err(ValueError::Negative);
    }
    if s.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(0.0);
    }
    if s.parse::<f64>().is_ok() {
        return Err(ValueError::BareDelay(s.into()));
    }
    Ok(units::parse_duration(s)?.as_secs_f64())
}

/// A NIC's speed: a rate, or the link's own (None here, resolved by `build`).
fn nic_rate(s: &str) -> Result<Option<f64>, ValueError> {
    match s {
        "link" => Ok(None),
        _ => link_rate(s).map(Some),
    }
}

/// A link rate: its unit is required (a bare `100` would be 100 bit/s).
fn link_rate(s: &str) -> Result<f64, ValueError> {
    if s.parse::<f64>().is_ok() {
        return Err(ValueError::BareRate(s.into()));
    }
    Ok(units::parse_rate(s)?)
}

/// `0.5%`, `0.005` or `0`: a probability.
pub fn parse_loss(s: &str) -> Result<f64, ValueError> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| ValueError::NotALoss(s.into()))?;
    let p = v * scale;
    if !(0.0..1.0).contains(&p) {
        return Err(ValueError::LossRange(s.into()));
    }
    Ok(p)
}

/// A queue limit: bytes (`1M`) or time at the link rate (`100ms`).
#[derive(Clone, Debug, PartialEq)]
enum Queue {
    Bytes(u64),
    Time(f64),
}

fn parse_queue(s: &str) -> Result<Queue, ValueError> {
    if s.ends_with('s') {
        duration(s).map(Queue::Time)
    } else {
        Ok(Queue::Bytes(units::parse_size(s)?))
    }
}

impl LabOptions {
    /// These options with a study point's own lab settings over them.
    pub fn with_point(&self, p: &crate::model::lab::LabPoint) -> LabOptions {
        let mut o = self.clone();
        if p.mtu.is_some() {
            o.mtu = p.mtu;
        }
        if p.offloads.is_some() {
            o.offloads = p.offloads;
        }
        for (to, from) in [
            (&mut o.rate, &p.rate),
            (&mut o.loss, &p.loss),
            (&mut o.queue, &p.queue),
            (&mut o.cc, &p.cc),
            (&mut o.aqm, &p.aqm),
            (&mut o.link, &p.link),
            (&mut o.tunnel, &p.tunnel),
        ] {
            if from.is_some() {
                *to = from.clone();
            }
        }
        o
    }

    pub fn build(&self) -> Result<LabSpec, LabError> {
        let mut spec = LabSpec::default();
        let refuse = |why: &str| Err(LabError::Invalid(why.into()));
        if self.rtt.is_some() && self.delay.is_some() {
            return refuse("give --rtt (split evenly) or --delay (one way), not both");
        }
        let rtt = per_direction(&self.rtt, "rtt", duration)?;
        let delay = per_direction(&self.delay, "delay", duration)?;
        let jitter = per_direction(&self.jitter, "jitter", duration)?;
        let rate = per_direction(&self.rate, "rate", link_rate)?;
        let queue = per_direction(&self.queue, "queue", parse_queue)?;
        let loss = per_direction(&self.loss, "loss", parse_loss)?;
        if let Some(r) = &rtt {
            if r[0] != r[1] {
                return refuse("--rtt is a round trip: give one value, or use --delay A/B");
            }
        }
        for d in 0..2 {
            let l = &mut spec.links[d];
            l.delay_s = match (&rtt, &delay) {
                (Some(r), _) => r[d] / 2.0,
                (_, Some(x)) => x[d],
                _ => 0.0,
            };
            l.jitter_s = jitter.as_ref().map_or(0.0, |j| j[d]);
            l.rate_bps = rate.as_ref().map(|r| r[d]);
            l.loss = loss.as_ref().map_or(0.0, |p| p[d]);
            l.queue_bytes = match (queue.as_ref().map(|q| q[d].clone()), l.rate_bps) {
                (Some(Queue::Bytes(b)), _) => Some(b.max(3000)),
                (Some(Queue::Time(t)), Some(r)) => Some(((t * r / 8.0) as u64).max(3000)),
                (Some(Queue::Time(_)), None) => {
                    return refuse("--queue in time needs --rate (or give bytes, e.g. 4M)")
                }
                (None, Some(_)) => None, // the default, once both delays are known
                (None, None) => None,
            };
            if l.delay_s > 10.0 || l.jitter_s > 10.0 {
                return refuse("delays above 10 s are not a WAN");
            }
        }
        if queue.is_none() {
            let rtt = spec.rtt_s();
            for l in spec.links.iter_mut() {
                l.queue_bytes = l.rate_bps.map(|r| default_queue_bytes(r, rtt));
            }
        }
        if let Some(m) = self.mtu {
            if !(576..=65535).contains(&m) {
                return refuse(&format!("--mtu {m} must be between 576 and 65535"));
            }
            spec.mtu = m;
        }
        if let Some(o) = self.offloads {
            spec.offloads = o;
        }
        spec.per_packet = self.per_packet;
        if let Some(a) = &self.aqm {
            spec.aqm.kind = a.parse().map_err(|e: ModelError| LabError::Value {
                name: "aqm",
                value: a.clone(),
                source: ValueError::Form(e.to_string()),
            })?;
        }
        for (v, name, to) in [
            (&self.aqm_target, "aqm-target", &mut spec.aqm.target_us),
            (
                &self.aqm_interval,
                "aqm-interval",
                &mut spec.aqm.interval_us,
            ),
        ] {
            if let Some(v) = v {
                let s = duration(v).map_err(|source| LabError::Value {
                    name,
                    value: v.clone(),
                    source,
                })?;
                if !(s > 0.0 && s <= 10.0) {
                    return refuse(&format!("--{name} {v} must be above 0 and at most 10s"));
                }
                *to = (s * 1e6).round().max(1.0) as u64;
            }
        }
        if let Some(e) = self.ecn {
            spec.aqm.ecn = e;
        }
        if spec.aqm.kind != crate::model::lab::AqmKind::Fifo
            && spec.links.iter().all(|l| l.rate_bps.is_none())
        {
            return refuse("--aqm manages the queue before the bottleneck: it needs --rate");
        }
        if let Some(c) = &self.emulator_cpu {
            spec.emulator_cpu = c.parse().map_err(LabError::EmulatorCpu)?;
        }
        if let Some(l) = &self.link {
            spec.link = l.parse().map_err(|e: ModelError| LabError::Value {
                name: "link",
                value: l.clone(),
                source: ValueError::Form(e.to_string()),
            })?;
        }
        if let Some(n) = self.ports {
            if !(1..=MAX_PORTS).contains(&n) {
                return refuse(&format!(
                    "--ports {n}: a lab's server has 1 to {MAX_PORTS} ports"
                ));
            }
            spec.ports = n;
        }
        if let Some(cc) = &self.cc {
            if cc.is_empty() || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return refuse(&format!("--cc '{cc}' is not a congestion control name"));
            }
            spec.cc = cc.clone();
        }
        if let Some(nic) = per_direction(&self.nic_rate, "nic-rate", nic_rate)? {
            let mut bps = [0.0; 2];
            for d in 0..2 {
                bps[d] = match (nic[d], spec.links[d].rate_bps) {
                    (Some(r), _) => r,
                    (None, Some(r)) => r,
                    (None, None) => {
                        return refuse("--nic-rate link takes the link's rate: give --rate too")
                    }
                };
            }
            spec.nic_bps = Some(bps);
        }
        if let Some(t) = &self.tunnel {
            spec.tunnel = t.parse().map_err(|e: ModelError| LabError::Value {
                name: "tunnel",
                value: t.clone(),
                source: ValueError::Form(e.to_string()),
            })?;
            if spec.tunnel.mtu(spec.mtu) < 576 {
                return refuse(&format!(
                    "--tunnel {t} at --mtu {} leaves the tunnel an MTU of {}, below 576: raise --mtu",
                    spec.mtu,
                    spec.tunnel.mtu(spec.mtu)
                ));
            }
        }
        // A tunnel joins one client address to one server address; the
        // ports are addresses of their own beside it.
        if spec.tunnel != crate::model::tunnel::TunnelKind::None && spec.ports > 1 {
            return refuse("--tunnel carries one client-server path: use it with --ports 1");
        }
        Ok(spec)
    }
}

/// What the emulator does to direction `dir` of `spec`.
pub fn shaping(spec: &LabSpec, dir: usize) -> Shaping {
    let l = &spec.links[dir];
    Shaping {
        delay_us: (l.delay_s * 1e6).round() as u64,
        jitter_us: (l.jitter_s * 1e6).round() as u64,
        rate_bps: l.rate_bps.map(|r| r.round() as u64),
        queue_limit_bytes: l.queue_bytes,
        loss: l.loss,
        aqm: spec.aqm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(rtt: &str, rate: &str) -> LabOptions {
        LabOptions {
            rtt: Some(rtt.into()),
            rate: Some(rate.into()),
            ..Default::default()
        }
    }

    #[test]
    fn rtt_splits_evenly_and_rate_sets_a_queue() {
        let s = opts("100ms", "1gbit").build().unwrap();
        assert_eq!(s.links[0].delay_s, 0.05);
        assert_eq!(s.links[1].delay_s, 0.05);
        assert_eq!(s.rtt_s(), 0.1);
        assert_eq!(s.links[0].rate_bps, Some(1e9));
        // One BDP: 100 ms at 1 Gbit/s.
        assert_eq!(s.links[0].queue_bytes, Some(12_500_000));
        assert!(s.describe().contains("queue 11.9 MiB fifo (default: 1 BDP"));
        // 1448 of every 1538 wire bytes are TCP payload: ~941 Mbit/s.
        let g = s.goodput_bps(0).unwrap();
        assert!((g - 941.5e6).abs() < 1e6, "{g}");
        assert_eq!(shaping(&s, 0).delay_us, 50_000);
    }

    #[test]
    fn a_nic_rate_is_given_or_the_links_own() {
        let mut o = opts("1ms", "10gbit/1gbit");
        assert_eq!(o.build().unwrap().nic_bps, None);
        o.nic_rate = Some("link".into());
        let s = o.build().unwrap();
        assert_eq!(s.nic_bps, Some([10e9, 1e9]));
        assert!(
            s.describe()
                .contains("hosts' NICs 10.00 Gbit/s/1.00 Gbit/s"),
            "{}",
            s.describe()
        );
        // The slower of link and NIC bounds a direction's goodput.
        assert_eq!(
            s.goodput_bps(1),
            opts("1ms", "1gbit").build().unwrap().goodput_bps(0)
        );
        o.nic_rate = Some("25gbit/link".into());
        assert_eq!(o.build().unwrap().nic_bps, Some([25e9, 1e9]));
        o.nic_rate = Some("200mbit".into());
        let slow = o.build().unwrap();
        let g = slow.goodput_bps(0).unwrap();
        assert!((g - 200e6 * 1448.0 / 1538.0).abs() < 1.0, "{g}");
        // The link's rate needs a rate; a NIC's own does not.
        let mut no_rate = LabOptions {
            rtt: Some("1ms".into()),
            nic_rate: Some("link".into()),
            ..Default::default()
        };
        let e = no_rate.build().unwrap_err().to_string();
        assert!(e.contains("give --rate too"), "{e}");
        no_rate.nic_rate = Some("1gbit".into());
        let s = no_rate.build().unwrap();
        assert_eq!(s.nic_bps, Some([1e9, 1e9]));
        // Without a link rate the NIC is the bound.
        assert!(s
            .goodput_bps(0)
            .is_some_and(|g| (g - 1e9 * 1448.0 / 1538.0).abs() < 1.0));
        // A bare number is refused as for --rate.
        no_rate.nic_rate = Some("100".into());
        assert!(no_rate.build().is_err());
    }

    #[test]
    fn the_default_queue_is_a_bdp_of_at_least_a_mebibyte() {
        let q = |rtt: &str, rate: &str| opts(rtt, rate).build().unwrap().links[0].queue_bytes;
        assert_eq!(q("50ms", "1gbit"), Some(6_250_000));
        // 1 ms at 1 Gbit/s is 125 kB: the floor holds 16 GSO bursts.
        assert_eq!(q("1ms", "1gbit"), Some(1 << 20));
        assert_eq!(q("0", "10gbit"), Some(1 << 20));
        assert_eq!(q("200ms", "1gbit"), Some(25_000_000));
        // Each direction at its own rate, over the round trip.
        let s = LabOptions {
            delay: Some("10ms/40ms".into()),
            rate: Some("1gbit/100mbit".into()),
            ..Default::default()
        }
        .build()
        .unwrap();
        assert_eq!(s.links[0].queue_bytes, Some(6_250_000));
        assert_eq!(s.links[1].queue_bytes, Some(1 << 20));
        // No rate, no queue; a queue given is kept.
        let none = LabOptions {
            rtt: Some("50ms".into()),
            ..Default::default()
        };
        assert_eq!(none.build().unwrap().links[0].queue_bytes, None);
        let mut given = opts("50ms", "1gbit");
        given.queue = Some("100ms".into());
        let s = given.build().unwrap();
        assert_eq!(s.links[0].queue_bytes, Some(12_500_000));
        assert!(
            s.describe().contains("queue 11.9 MiB fifo,"),
            "{}",
            s.describe()
        );
    }

    #[test]
    fn per_direction_values() {
        let s = LabOptions {
            delay: Some("10ms/40ms".into()),
            rate: Some("100mbit/1gbit".into()),
            loss: Some("1%/0".into()),
            queue: Some("64K".into()),
            ..Default::default()
        }
        .build()
        .unwrap();
        assert_eq!(s.links[0].delay_s, 0.01);
        assert_eq!(s.links[1].delay_s, 0.04);
        assert_eq!(s.links[0].rate_bps, Some(1e8));
        assert_eq!(s.links[0].loss, 0.01);
        assert_eq!(s.links[1].loss, 0.0);
        assert_eq!(s.links[1].queue_bytes, Some(65536));
        assert!(s.has_loss());
        assert!(s.describe().contains("loss 1%/0%"), "{}", s.describe());
    }

    #[test]
    fn a_slow_lossy_or_asked_link_is_emulated_per_packet() {
        let spec = |rate: &str, loss: Option<&str>, per_packet: bool| {
            LabOptions {
                rtt: Some("20ms".into()),
                rate: Some(rate.into()),
                loss: loss.map(String::from),
                per_packet,
                ..Default::default()
            }
            .build()
            .unwrap()
        };
        // GSO units where a unit is short on the wire.
        let fast = spec("1gbit", None, false);
        assert!(!fast.emulates_per_packet());
        assert!(!fast.describe().contains("emulated per packet"));
        // One direction below 250 Mbit/s is enough, and the lab says so.
        for rate in ["20mbit", "10mbit/1gbit", "1gbit/100mbit"] {
            let s = spec(rate, None, false);
            assert!(s.emulates_per_packet(), "{rate}");
            assert!(s.describe().contains("emulated per packet"), "{rate}");
        }
        assert!(spec("1gbit", Some("1%"), false).emulates_per_packet());
        assert!(spec("1gbit", None, true).emulates_per_packet());
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let err = |o: LabOptions| o.build().unwrap_err().to_string();
        assert!(err(opts("-5ms", "1gbit")).contains("negative"));
        assert!(err(opts("50parsecs", "1gbit")).contains("--rtt 50parsecs"));
        assert!(err(opts("50ms", "1gbot")).contains("not a bit rate"));
        // Bare numbers: the unit is asked for, not guessed.
        assert!(err(opts("10", "1gbit")).contains("--rtt 10: give a unit: 10ms or 10s"));
        assert!(err(opts("50ms", "100")).contains("a bare number would be 100 bit/s"));
        assert_eq!(opts("0", "1gbit").build().unwrap().links[0].delay_s, 0.0);
        assert!(err(opts("50ms/20ms", "1gbit")).contains("round trip"));
        assert!(err(opts("1/2/3", "1gbit")).contains("one value or two"));
        let mut o = opts("50ms", "1gbit");
        o.loss = Some("150%".into());
        assert!(err(o).contains("below 100%"));
        let mut o = opts("50ms", "1gbit");
        o.mtu = Some(100);
        assert!(err(o).contains("--mtu 100"));
        let o = LabOptions {
            queue: Some("100ms".into()),
            ..Default::default()
        };
        assert!(err(o).contains("needs --rate"));
    }

    #[test]
    fn loss_forms() {
        assert_eq!(parse_loss("0.5%").unwrap(), 0.005);
        assert_eq!(parse_loss("0.001").unwrap(), 0.001);
        assert!(parse_loss("x").is_err());
    }
}
