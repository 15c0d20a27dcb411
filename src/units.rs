//! Parsing and printing of the quantities users type: sizes (`128K`, `20M`),
//! durations (`10`, `500ms`), counts (`10k`) and CPU lists (`0,2-3`).
//!
//! Sizes use binary multiples (K = 1024), as netperf and iperf3 do for
//! message and buffer sizes; rates printed in bits use decimal multiples
//! (Gbit/s = 1e9), as every network tool does.

use std::time::Duration;

/// A quantity typed wrong, by which quantity and how: every one is the
/// user's input (a flag, a study key), so the floors above report it as a
/// usage error. `units` is a leaf beside `error`: it cannot name
/// `crate::error::Error`, so the floors that wrap it map it there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnitsError {
    #[error("'{0}' is not a size (examples: 64, 128K, 20M, 1G)")]
    NotASize(String),
    #[error("unknown size unit '{unit}' in '{input}' (use K, M or G, binary multiples)")]
    SizeUnit { unit: String, input: String },
    #[error("size '{0}' is out of range")]
    SizeRange(String),
    #[error("'{0}' is not a duration (examples: 10, 2.5s, 500ms, 1m)")]
    NotADuration(String),
    #[error("unknown duration unit '{unit}' in '{input}' (use ms, s, m or h)")]
    DurationUnit { unit: String, input: String },
    #[error("duration '{0}' is out of range (0 to 24 h)")]
    DurationRange(String),
    #[error("'{0}' is not a number (examples: 500, 10k, 1.5M)")]
    NotACount(String),
    #[error("'{0}' must be a positive number")]
    CountNotPositive(String),
    #[error("'{0}' is not a bit rate (examples: 941mbit, 10gbit)")]
    NotARate(String),
    #[error("bit rate '{0}' must be positive")]
    RateNotPositive(String),
    #[error("'{0}' is not a CPU list (examples: 0, 0,2, 0-3)")]
    NotACpuList(String),
    #[error("'{0}' names no CPU")]
    NoCpu(String),
}

use UnitsError::*;

/// Parses a byte size such as `64`, `128K`, `128KiB`, `20M`, `1G`.
pub fn parse_size(s: &str) -> Result<u64, UnitsError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(NotASize(s.into()));
    }
    let value: f64 = num.parse().map_err(|_| NotASize(s.into()))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(SizeUnit {
                unit: other.into(),
                input: s.into(),
            })
        }
    };
    let bytes = value * mult;
    if !bytes.is_finite() || !(0.0..=1e15).contains(&bytes) {
        return Err(SizeRange(s.into()));
    }
    Ok(bytes.round() as u64)
}

/// Parses a duration: a plain number is seconds; `ms`, `s`, `m` suffixes.
pub fn parse_duration(s: &str) -> Result<Duration, UnitsError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| NotADuration(s.into()))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(DurationUnit {
                unit: other.into(),
                input: s.into(),
            })
        }
    };
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return Err(DurationRange(s.into()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a count or rate with optional decimal suffix: `500`, `10k`, `1.5M`.
pub fn parse_count(s: &str) -> Result<f64, UnitsError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| NotACount(s.into()))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(CountNotPositive(s.into()));
    }
    Ok(v * mult)
}

/// Parses a bit rate: `10gbit`, `941mbit`, `1.5G`, `1e9` (decimal multiples,
/// as `tc` writes them), in bits per second.
pub fn parse_rate(s: &str) -> Result<f64, UnitsError> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("/s").unwrap_or(&t);
    let t = t
        .strip_suffix("bps")
        .or_else(|| t.strip_suffix("bit"))
        .unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| NotARate(s.into()))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(RateNotPositive(s.into()));
    }
    Ok(v * mult)
}

/// Parses a CPU list such as `0`, `0,2`, `0-3,6`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, UnitsError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || NotACpuList(s.into());
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if b < a || b - a > 4096 {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| bad())?);
        }
    }
    if out.is_empty() {
        return Err(NoCpu(s.into()));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Formats bits per second with a decimal unit, e.g. `41.23 Gbit/s`.
pub fn fmt_bps(bps: f64) -> String {
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{v:.2} {u}")
}

/// A byte count as a command-line size: `128K`, `20M`, `1000`.
pub fn fmt_size_arg(b: u64) -> String {
    for (unit, m) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{unit}", b / m);
        }
    }
    b.to_string()
}

/// Formats a byte count with the largest binary unit it reaches, e.g.
/// `128 KiB`, `20 MiB`, `6.47 GiB`, `1000 B`: exact multiples without
/// decimals, others with three significant digits, so a count in a unit
/// never runs past 1023 (there was `6779648 KiB`). Every size in the
/// human output goes through here.
pub fn fmt_bytes(b: u64) -> String {
    const K: u64 = 1024;
    let units = [
        ("TiB", K * K * K * K),
        ("GiB", K * K * K),
        ("MiB", K * K),
        ("KiB", K),
    ];
    for (k, &(unit, m)) in units.iter().enumerate() {
        if b >= m {
            if b.is_multiple_of(m) {
                return format!("{} {unit}", b / m);
            }
            let v = b as f64 / m as f64;
            if v >= 1023.5 && k > 0 {
                // Would print as 1024 of this unit: one of the next.
                return format!("1.00 {}", units[k - 1].0);
            }
            return if v < 10.0 {
                format!("{v:.2} {unit}")
            } else if v < 100.0 {
                format!("{v:.1} {unit}")
            } else {
                format!("{v:.0} {unit}")
            };
        }
    }
    format!("{b} B")
}

/// Formats a length of time given in seconds: `2.00 s`, `186.5 ms`,
/// `950 µs` (a finite transfer of 0.01 s printed as `0.01 s` hid its
/// time).
pub fn fmt_secs(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        fmt_us(s * 1e6)
    }
}

/// A count with its noun, singular or plural: `1 flow`, `2 flows`.
pub fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Formats a rate of events per second compactly, e.g. `58.3k/s`.
pub fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M/s", r / 1e6)
    } else if r >= 1e4 {
        format!("{:.1}k/s", r / 1e3)
    } else {
        format!("{r:.0}/s")
    }
}

/// Formats a latency given in microseconds.
pub fn fmt_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.1} µs")
    }
}

/// Formats a CPU list compactly (`0-3,6`).
pub fn fmt_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// A span of a schedule or a look back: a duration (`parse_duration`) or
/// whole days up to a year (`7d`).
pub fn parse_span(s: &str) -> Result<Duration, UnitsError> {
    match s.trim().strip_suffix('d') {
        Some(n) => match n.parse::<f64>() {
            Ok(d) if d.is_finite() && (0.0..=365.0).contains(&d) => {
                Ok(Duration::from_secs_f64(d * 86_400.0))
            }
            Ok(_) => Err(DurationRange(s.into())),
            Err(_) => Err(NotADuration(s.into())),
        },
        None => parse_duration(s),
    }
}

/// A share given in percent ("10%" or "10"), 0 to `max_pct`, as a
/// fraction (0.1).
pub fn parse_share_pct(s: &str, max_pct: f64) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage (e.g. 10%)"))?;
    if !(0.0..=max_pct).contains(&v) {
        return Err(format!("{s}: give 0% to {max_pct}%"));
    }
    Ok(v / 100.0)
}

/// Now as an RFC 3339 UTC time.
pub fn rfc3339_now() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// A time as RFC 3339 UTC (whole seconds), without a date crate.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// An RFC 3339 UTC time as `rfc3339` writes it ("2026-11-29T14:00:00Z") as
/// seconds since the epoch; None for another form.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days-from-civil (Howard Hinnant's algorithm), the inverse of `rfc3339`'s.
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_parses_what_it_writes() {
        for secs in [0u64, 951_782_400, 1_795_960_800, 4_102_444_799] {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(secs), "{}", rfc3339(t));
        }
        assert_eq!(parse_rfc3339("2026-11-29T14:00:00Z"), Some(1_795_960_800));
        for bad in [
            "",
            "2026-11-29",
            "2026-13-01T00:00:00Z",
            "2026-11-29 14:00:00Z",
            "x026-11-29T14:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn time_format() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("128K").unwrap(), 131072);
        assert_eq!(parse_size("128KiB").unwrap(), 131072);
        assert_eq!(parse_size("20M").unwrap(), 20 * 1024 * 1024);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert!(parse_size("12Q")
            .unwrap_err()
            .to_string()
            .contains("unknown size unit"));
        assert!(parse_size("").is_err());
        assert!(parse_size("-5").is_err());
        assert!(parse_size("K").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10gbit").unwrap(), 10e9);
        assert_eq!(parse_rate("941mbit").unwrap(), 941e6);
        assert_eq!(parse_rate("1.5G").unwrap(), 1.5e9);
        assert_eq!(parse_rate("100mbps").unwrap(), 100e6);
        assert_eq!(parse_rate("1e9").unwrap(), 1e9);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2.5s").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("30h").is_err());
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("ten").is_err());
    }

    #[test]
    fn counts_and_cpus() {
        assert_eq!(parse_count("10k").unwrap(), 10_000.0);
        assert!(parse_count("0").is_err());
        assert_eq!(parse_cpu_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert_eq!(parse_cpu_list("1,1").unwrap(), vec![1]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert_eq!(fmt_cpu_list(&[0, 1, 2, 5]), "0-2,5");
    }

    #[test]
    fn messages_name_the_input() {
        let said = |r: Result<f64, UnitsError>| r.unwrap_err().to_string();
        assert_eq!(
            said(parse_size("x").map(|b| b as f64)),
            "'x' is not a size (examples: 64, 128K, 20M, 1G)"
        );
        assert_eq!(
            said(parse_duration("5d").map(|d| d.as_secs_f64())),
            "unknown duration unit 'd' in '5d' (use ms, s, m or h)"
        );
        assert_eq!(said(parse_count("-1")), "'-1' must be a positive number");
        assert_eq!(said(parse_rate("0")), "bit rate '0' must be positive");
        assert_eq!(
            said(parse_cpu_list(",").map(|c| c.len() as f64)),
            "',' names no CPU"
        );
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_bps(41.234e9), "41.23 Gbit/s");
        assert_eq!(fmt_bytes(131072), "128 KiB");
        assert_eq!(fmt_bytes(200), "200 B");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(1536), "1.50 KiB");
        assert_eq!(fmt_bytes(20 << 20), "20 MiB");
        assert_eq!(fmt_bytes(20_971_540), "20.0 MiB");
        // The case from issue 30: a multiple of 1 KiB above 1 MiB.
        assert_eq!(fmt_bytes(6_779_648 * 1024), "6.47 GiB");
        assert_eq!(fmt_bytes(300 << 20 | 1), "300 MiB");
        assert_eq!(fmt_bytes(3 << 40), "3 TiB");
        // No count in a unit ever reaches 1024 below TiB.
        for b in [
            1023u64,
            1024 * 1023 + 1,
            (1 << 30) - 1,
            (1 << 40) - 1,
            123_456_789,
        ] {
            let s = fmt_bytes(b);
            let n: f64 = s.split(' ').next().unwrap().parse().unwrap();
            assert!(n < 1024.0 || s.ends_with("TiB"), "{b}: {s}");
        }
        assert_eq!(fmt_rate(58_300.0), "58.3k/s");
        assert_eq!(plural(1u32, "flow", "flows"), "1 flow");
        assert_eq!(plural(0u32, "flow", "flows"), "0 flows");
        assert_eq!(fmt_secs(2.0), "2.00 s");
        assert_eq!(fmt_secs(0.18652), "186.52 ms");
        assert_eq!(fmt_secs(0.00095), "950.0 µs");
        assert_eq!(fmt_secs(600.0), "600 s");
    }
}
