//! The values an option takes, as a user writes them: sizes, durations,
//! counts and rates with units (`"128K"`, `"500ms"`, `"10k"`), CPU lists,
//! switches, iteration ranges and confidence targets; each parses the same
//! from a flag and from a study file.

use serde::{Deserialize, Serialize};

use super::super::error::{Invalid, ModelError};
use crate::units;

/// A byte size written as a number or a string with a unit (`"128K"`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Size(pub u64);

/// A duration written as seconds or a string with a unit (`"500ms"`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Secs(pub f64);

/// A count or rate written as a number or with a decimal suffix (`"10k"`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Count(pub f64);

/// udp-stream's default datagram: fits a 1500-byte MTU with IPv4 or IPv6
/// headers (iperf3 -u picks about the same).
pub const UDP_MESSAGE: usize = 1400;
/// udp-rr's default request and response: the smallest round number that
/// holds linerate's 32-byte header.
pub const UDP_RR: u64 = 64;

/// A rate: a count per second (`"10k"`, `100000`), or a bit rate with its
/// unit (`"500mbit"`, `"1gbit"`; udp-stream).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    PerSecond(f64),
    Bits(f64),
}

/// memcache's operation mix `GETS:SETS` (`"9:1"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GetSet(pub u32, pub u32);

impl GetSet {
    pub fn parse(s: &str) -> Result<GetSet, ModelError> {
        let bad = || ModelError::Form {
            input: s.into(),
            form: "GETS:SETS (example: 9:1 = 90% gets, 10% sets)",
        };
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let g = a.trim().parse().map_err(|_| bad())?;
        let w = b.trim().parse().map_err(|_| bad())?;
        if g == 0 && w == 0 {
            return Err(Invalid(format!("'{s}' asks for no operation (example: 9:1)")).into());
        }
        Ok(GetSet(g, w))
    }
}

impl Serialize for GetSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}:{}", self.0, self.1))
    }
}

impl<'de> Deserialize<'de> for GetSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(d, |_| Err("a get-set mix is text: \"9:1\""), GetSet::parse)
    }
}

/// A CPU list written as `"0-1"` or `[0, 1]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cpus(pub Vec<usize>);

/// On or off: `on`/`off` on the command line, `true`/`false` (or the
/// words) in a study file.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Switch(pub bool);

/// `N` or `MIN..MAX` iterations (netperf -i); stored as that text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iterations(pub usize, pub usize);

/// `LEVEL,WIDTH` (netperf -I), e.g. `99,5` = 99% CI within +/-2.5%.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target(pub f64, pub f64);

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

/// A value written as a number (`num`) or as text (`text`), each with its
/// own complaint, which becomes the deserializer's message.
fn de<'de, D: serde::Deserializer<'de>, T, N, E>(
    d: D,
    num: impl FnOnce(f64) -> Result<T, N>,
    text: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, D::Error>
where
    N: std::fmt::Display,
    E: std::fmt::Display,
{
    use serde::de::Error;
    match NumOrText::deserialize(d)? {
        NumOrText::Int(i) => num(i as f64).map_err(D::Error::custom),
        NumOrText::Float(f) => num(f).map_err(D::Error::custom),
        NumOrText::Text(s) => text(&s).map_err(D::Error::custom),
        NumOrText::Bool(_) => Err(D::Error::custom("a number or a string, not true/false")),
    }
}

impl Size {
    pub fn parse(s: &str) -> Result<Size, ModelError> {
        Ok(Size(units::parse_size(s)?))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |f| {
                if f >= 0.0 && f.fract() == 0.0 {
                    Ok(Size(f as u64))
                } else {
                    Err("a size must be a whole number of bytes or a string such as \"128K\"")
                }
            },
            Size::parse,
        )
    }
}

impl Secs {
    pub fn parse(s: &str) -> Result<Secs, ModelError> {
        Ok(Secs(units::parse_duration(s)?.as_secs_f64()))
    }
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |f| {
                if f.is_finite() && f >= 0.0 {
                    Ok(Secs(f))
                } else {
                    Err("a duration must be 0 or more")
                }
            },
            Secs::parse,
        )
    }
}

/// `-d`: a window in seconds, or `auto` (it ends once the figure is
/// stationary and known well enough, model::auto).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Length {
    Secs(f64),
    Auto,
}

impl Length {
    pub fn parse(s: &str) -> Result<Length, ModelError> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Length::Auto);
        }
        Ok(Length::Secs(Secs::parse(s)?.0))
    }
}

impl Serialize for Length {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Length::Secs(v) => s.serialize_f64(*v),
            Length::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Length {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |f| {
                if f.is_finite() && f >= 0.0 {
                    Ok(Length::Secs(f))
                } else {
                    Err("a duration must be 0 or more (or \"auto\")")
                }
            },
            Length::parse,
        )
    }
}

/// The longest `--rx-poll` a test may ask for: past it a receiver that
/// polls is a spinning one (`--spin`).
pub const RX_POLL_MAX_US: u32 = 1000;

/// `--rx-poll`: how long a lone receiving thread polls an empty socket
/// before it sleeps: `auto`, `off`, or a duration with its unit (`20us`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RxPoll {
    Auto,
    Off,
    Us(u32),
}

impl RxPoll {
    pub fn parse(s: &str) -> Result<RxPoll, ModelError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(RxPoll::Auto);
        }
        if t.eq_ignore_ascii_case("off") {
            return Ok(RxPoll::Off);
        }
        let form = || ModelError::Form {
            input: s.into(),
            form: "auto, off or a duration with its unit (20us)",
        };
        if t.is_empty() || t.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
            return Err(form());
        }
        let us = units::parse_duration(t).map_err(|_| form())?.as_secs_f64() * 1e6;
        if !(1.0..=f64::from(RX_POLL_MAX_US)).contains(&us.round()) {
            return Err(Invalid(format!(
                "--rx-poll {t}: 1us to {RX_POLL_MAX_US}us (longer is --spin)"
            ))
            .into());
        }
        Ok(RxPoll::Us(us.round() as u32))
    }

    /// As the spec records it: None auto, Some(0) off, Some(µs).
    pub fn us(self) -> Option<u32> {
        match self {
            RxPoll::Auto => None,
            RxPoll::Off => Some(0),
            RxPoll::Us(n) => Some(n),
        }
    }

    /// The spec's value as this option writes it.
    pub fn from_us(v: Option<u32>) -> RxPoll {
        match v {
            None => RxPoll::Auto,
            Some(0) => RxPoll::Off,
            Some(n) => RxPoll::Us(n),
        }
    }
}

impl std::fmt::Display for RxPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RxPoll::Auto => f.write_str("auto"),
            RxPoll::Off => f.write_str("off"),
            RxPoll::Us(n) => write!(f, "{n}us"),
        }
    }
}

impl Serialize for RxPoll {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RxPoll {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |_| Err("--rx-poll is auto, off or a duration with its unit, as a string (\"20us\")"),
            RxPoll::parse,
        )
    }
}

/// A percentage written `2` or `2%`.
pub fn parse_pct(s: &str) -> Result<f64, ModelError> {
    s.trim()
        .trim_end_matches('%')
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| ModelError::Form {
            input: s.into(),
            form: "a percentage (2 or 2%)",
        })
}

impl Count {
    pub fn parse(s: &str) -> Result<Count, ModelError> {
        Ok(Count(units::parse_count(s)?))
    }
}

impl Rate {
    pub fn parse(s: &str) -> Result<Rate, ModelError> {
        let t = s.trim().to_ascii_lowercase();
        if t.ends_with("bit") || t.ends_with("bps") || t.ends_with("bit/s") {
            Ok(Rate::Bits(units::parse_rate(&t)?))
        } else {
            units::parse_count(&t)
                .map(Rate::PerSecond)
                .map_err(ModelError::Rate)
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::PerSecond(v) => s.serialize_f64(*v),
            Rate::Bits(v) => s.serialize_str(&format!("{v}bit")),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |f| {
                if f.is_finite() && f > 0.0 {
                    Ok(Rate::PerSecond(f))
                } else {
                    Err("a rate must be a positive number")
                }
            },
            Rate::parse,
        )
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |f| {
                if f.is_finite() && f > 0.0 {
                    Ok(Count(f))
                } else {
                    Err("a rate must be a positive number")
                }
            },
            Count::parse,
        )
    }
}

impl Cpus {
    pub fn parse(s: &str) -> Result<Cpus, ModelError> {
        Ok(Cpus(units::parse_cpu_list(s)?))
    }
}

impl<'de> Deserialize<'de> for Cpus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<usize>),
            Text(String),
        }
        match Form::deserialize(d)? {
            Form::List(v) if !v.is_empty() => Ok(Cpus(v)),
            Form::List(_) => Err(serde::de::Error::custom("an empty CPU list")),
            Form::Text(s) => Cpus::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl Switch {
    pub fn parse(s: &str) -> Result<Switch, ModelError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" => Ok(Switch(true)),
            "off" | "false" | "no" => Ok(Switch(false)),
            _ => Err(ModelError::Form {
                input: s.into(),
                form: "on or off",
            }),
        }
    }
}

impl<'de> Deserialize<'de> for Switch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrText::deserialize(d)? {
            NumOrText::Bool(b) => Ok(Switch(b)),
            NumOrText::Text(s) => Switch::parse(&s).map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom("true/false or \"on\"/\"off\"")),
        }
    }
}

impl Iterations {
    pub fn parse(s: &str) -> Result<Iterations, ModelError> {
        let bad = || ModelError::Form {
            input: s.into(),
            form: "an iteration count (examples: 3, 3..10)",
        };
        let (a, b) = match s.split_once("..") {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let n = s.trim().parse().map_err(|_| bad())?;
                (n, n)
            }
        };
        if a == 0 || b < a || b > 100 {
            return Err(Invalid(format!("--iterations '{s}': need 1 <= MIN <= MAX <= 100")).into());
        }
        Ok(Iterations(a, b))
    }
}

impl std::fmt::Display for Iterations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == self.1 {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{}..{}", self.0, self.1)
        }
    }
}

impl Serialize for Iterations {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Iterations {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(d, |f| Iterations::parse(&f.to_string()), Iterations::parse)
    }
}

impl Target {
    pub fn parse(s: &str) -> Result<Target, ModelError> {
        let bad = || ModelError::Form {
            input: s.into(),
            form: "LEVEL,WIDTH (example: 99,5 = 99% CI no wider than 5% of the mean)",
        };
        let (a, b) = s.split_once(',').ok_or_else(bad)?;
        let level: f64 = a.trim().parse().map_err(|_| bad())?;
        let width: f64 = b.trim().parse().map_err(|_| bad())?;
        if !(50.0..100.0).contains(&level) || !(0.0..=100.0).contains(&width) || width == 0.0 {
            return Err(Invalid(format!(
                "--confidence '{s}': level must be 50..100 and width 0..100"
            ))
            .into());
        }
        Ok(Target(level, width))
    }
}

impl Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{},{}", self.0, self.1))
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de(
            d,
            |_| Err("a confidence target is text: \"LEVEL,WIDTH\""),
            Target::parse,
        )
    }
}
