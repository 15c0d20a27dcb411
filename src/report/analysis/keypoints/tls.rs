//! Encryption: what TLS costs against its clear twin (and a pair that
//! contradicts what encryption is), and what crypto hardware saves.

use super::shared::{cost_text, min_max, CostRatio, KeyPoint};
use crate::report::analysis::landscape::{Landscape, Row};

/// What TLS costs: points that differ only in `tls` (true vs false),
/// compared per KB (streams) or per transaction.
pub fn tls_cost(l: &Landscape) -> Vec<KeyPoint> {
    let key_of = |r: &Row| r.point.label_except("tls");
    let mut pairs: Vec<(&Row, &Row)> = Vec::new();
    for enc in l
        .rows
        .iter()
        .filter(|r| r.point.param("tls") == Some("true"))
    {
        if let Some(clear) = l
            .rows
            .iter()
            .find(|r| r.point.param("tls") == Some("false") && key_of(r) == key_of(enc))
        {
            // A point the window's edges decide compares nothing.
            if super::evidence::steady(enc) && super::evidence::steady(clear) {
                pairs.push((enc, clear));
            }
        }
    }
    let mut out = Vec::new();
    // A pair where TLS came out clearly cheaper or faster contradicts what
    // encryption is (more work per byte): it is reported as such, with
    // what may have distorted it, and left out of the cost figures.
    let (odd, pairs): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(e, c)| {
        clearly(e, c, "client_us_per_kb", |r| r < 1.0 / CONTRADICTION)
            || clearly(e, c, "throughput_bps", |r| r > CONTRADICTION)
    });
    for (e, c) in &odd {
        out.push(tls_contradiction(e, c, &key_of(e)));
    }
    for (side, kb, tx) in [
        ("client", "client_us_per_kb", "client_us_per_tx"),
        ("agent", "agent_us_per_kb", "agent_us_per_tx"),
    ] {
        // Each pair's cost per KB where it has one, else per transaction;
        // the two units never share one range (a key point each).
        let ratios: Vec<(f64, f64, f64, String, &str, usize)> = pairs
            .iter()
            .enumerate()
            .filter_map(|(i, (e, c))| {
                let (a, b, per) = match (e.mean(kb), c.mean(kb)) {
                    (Some(a), Some(b)) => (a, b, "KB"),
                    _ => (e.mean(tx)?, c.mean(tx)?, "transaction"),
                };
                (b > 0.0).then(|| (a / b, a, b, key_of(e), per, i))
            })
            .collect();
        for per in ["KB", "transaction"] {
            let ratios: Vec<&(f64, f64, f64, String, &str, usize)> =
                ratios.iter().filter(|r| r.4 == per).collect();
            if ratios.is_empty() {
                continue;
            }
            let tput: Vec<f64> = ratios
                .iter()
                .filter_map(|r| {
                    let (e, c) = pairs[r.5];
                    Some(
                        e.mean("throughput_bps")?
                            / c.mean("throughput_bps").filter(|v| *v > 0.0)?,
                    )
                })
                .collect();
            let rest = match min_max(&tput) {
                Some(t) if side == "client" => format!("; throughput under TLS is {t}x of clear"),
                _ => String::new(),
            };
            let cost: Vec<CostRatio> = ratios
                .iter()
                .map(|r| (r.0, r.1, r.2, r.3.clone()))
                .collect();
            out.push(KeyPoint {
                rule: "tls_cost",
                text: cost_text("TLS", side, per, "clear", &cost.iter().collect::<Vec<_>>(), &rest),
                advice: "Encryption is CPU per byte: check that the suite uses the CPU's AES instructions (`linerate crypto`), prefer AES-GCM where the CPU has VAES, and spread streams over cores; this kernel has no kTLS offload.".into(),
            });
        }
    }
    out
}

/// How far past equal TLS must come out (cheaper per KB, or faster) before
/// it contradicts what encryption costs: within 5% is measurement noise.
const CONTRADICTION: f64 = 1.05;

/// `test(a / b)` for metric `key` of rows `a` and `b`, only when the two
/// confidence intervals (if any) do not overlap: a difference inside the
/// noise contradicts nothing.
fn clearly(a: &Row, b: &Row, key: &str, test: impl Fn(f64) -> bool) -> bool {
    let (Some(x), Some(y)) = (a.value(key), b.value(key)) else {
        return false;
    };
    if y.mean <= 0.0 || !test(x.mean / y.mean) {
        return false;
    }
    match (x.half_width, y.half_width) {
        (Some(hx), Some(hy)) => (x.mean - y.mean).abs() > hx + hy,
        _ => true,
    }
}

/// The CPU each end's first worker ran on most, in a point's first
/// iteration.
fn main_cpus(r: &Row) -> Option<(usize, usize)> {
    let it = r.results.first()?.iterations.first()?;
    let top = |p: &[crate::model::sample::WorkerPlacement]| {
        p.first()?
            .seen
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|s| s.0)
    };
    Some((top(&it.placement.client)?, top(&it.placement.agent)?))
}

/// Highest steal (percent of the host) either end saw in a point's runs.
fn worst_steal(r: &Row) -> f64 {
    r.results
        .iter()
        .flat_map(|res| res.iterations.iter())
        .flat_map(|it| [it.cpu.client.as_ref(), it.cpu.agent.as_ref()])
        .flatten()
        .map(|w| w.steal_pct)
        .fold(0.0, f64::max)
}

/// TLS measured cheaper or faster than clear at one point: say that it
/// cannot be, and name what in the results may explain it.
fn tls_contradiction(enc: &Row, clear: &Row, at: &str) -> KeyPoint {
    let ratio = |k: &str| Some(enc.mean(k)? / clear.mean(k).filter(|v| *v > 0.0)?);
    let mut seen = Vec::new();
    if let Some(r) = ratio("client_us_per_kb").filter(|r| *r < 1.0) {
        seen.push(format!("{r:.2}x the client's CPU per KB"));
    }
    if let Some(r) = ratio("throughput_bps").filter(|r| *r > 1.0) {
        seen.push(format!("{r:.2}x the throughput"));
    }
    let mut causes = Vec::new();
    if let (Some(a), Some(b)) = (main_cpus(enc), main_cpus(clear)) {
        let shared = |(c, g): (usize, usize)| c == g;
        if shared(a) != shared(b) {
            let how = |x: (usize, usize)| {
                if shared(x) {
                    format!("shared CPU {}", x.0)
                } else {
                    format!("ran on CPUs {} and {}", x.0, x.1)
                }
            };
            causes.push(format!(
                "placement: clear's sender and receiver {}, TLS's {}",
                how(b),
                how(a)
            ));
        }
    }
    let steal = worst_steal(enc).max(worst_steal(clear));
    if steal >= 2.0 {
        causes.push(format!(
            "the hypervisor took up to {steal:.0}% of the host (steal)"
        ));
    }
    let runs = enc.results.len().min(clear.results.len());
    if runs <= 1 {
        causes.push(
            "each side ran once, minutes apart: absolute figures on a shared host drift 25-40% within half an hour"
                .into(),
        );
    }
    if causes.is_empty() {
        causes.push(
            "the receivers woke differently: TLS hands over whole 16 KiB records, while a clear receiver reads whatever has arrived and may wake more often per byte"
                .into(),
        );
    }
    KeyPoint {
        rule: "contradiction",
        text: format!(
            "At {}, TLS measured {} of clear. Encryption only adds work, so this contradicts itself: one of the two measurements is off. Likely cause{}: {}.",
            if at.is_empty() { "the test" } else { at },
            if seen.is_empty() { "better than clear".to_string() } else { seen.join(" and ") },
            if causes.len() == 1 { "" } else { "s" },
            causes.join("; ")
        ),
        advice: "Run both points interleaved and repeated (`--repeat 3 --shuffle`) with both ends pinned (`--cpus`, `--agent-cpus`) before reading a TLS cost from them.".into(),
    }
}

/// TLS with and without crypto hardware (`crypto_hw` = true / false, the
/// rest of the point the same): the CPU the hardware saves on each end, per
/// KB for bulk transfer and per transaction for connections.
pub fn crypto_hw_saving(l: &Landscape) -> Vec<KeyPoint> {
    let mut out = Vec::new();
    for (key, on, off) in l.pairs("crypto_hw", "true", "false") {
        let (per, unit) = if on.mean("client_us_per_kb").is_some() {
            ("kb", "per KB")
        } else {
            ("tx", "per transaction")
        };
        let mut parts = Vec::new();
        for side in ["client", "agent"] {
            let k = format!("{side}_us_per_{per}");
            if let (Some(a), Some(b)) = (on.mean(&k), off.mean(&k)) {
                if b > 0.0 {
                    parts.push(format!(
                        "the {side} {:.0}% ({a:.3} instead of {b:.3} µs {unit}, {:.1}x)",
                        100.0 * (1.0 - a / b),
                        b / a.max(1e-12)
                    ));
                }
            }
        }
        if parts.is_empty() {
            continue;
        }
        out.push(KeyPoint {
            rule: "crypto_hw_saving",
            text: format!(
                "Crypto hardware saves {} at {key}.",
                parts.join(" and ")
            ),
            advice: "Check that every host's TLS library uses the CPU's crypto extensions (the crypto line of the Configuration Summary; `linerate crypto`): without them, TLS costs this much more CPU.".into(),
        });
    }
    out
}

/// Where the seeds offloaded crypto to a card (seed 003's Crypto Express2
/// for RSA handshakes, CPACF on the z CPU for ciphers), linerate computes
/// every handshake, signature and record on the CPU: a report of crypto
/// points says so, so nobody reads its figures as the accelerated ones.
pub fn crypto_accelerator(l: &Landscape) -> Vec<KeyPoint> {
    let crypto: Vec<&crate::model::spec::TestSpec> = l
        .rows
        .iter()
        .map(|r| &r.point.spec)
        .filter(|s| s.tls.is_some() || crate::workload::facts(s.workload).crypto_alone)
        .collect();
    if crypto.is_empty() {
        return Vec::new();
    }
    let on = crypto.iter().any(|s| s.crypto_hw);
    let off = crypto.iter().any(|s| !s.crypto_hw);
    let instructions = match (on, off) {
        (true, true) => {
            "with the CPU's crypto instructions (AES-NI, PCLMULQDQ, SHA) and with them masked"
        }
        (true, false) => "with the CPU's crypto instructions (AES-NI, PCLMULQDQ, SHA)",
        _ => "with the CPU's crypto instructions masked (software only)",
    };
    vec![KeyPoint {
        rule: "crypto_accelerator",
        text: format!(
            "No crypto accelerator was used: every handshake, signature and record here was computed by the CPU, {instructions}. The seeds' accelerator cards (Crypto Express2/CEX2A for RSA) have no counterpart on this host; these figures are the software side of that comparison."
        ),
        advice: "With an accelerator (a QAT card, for example) measure through a TLS library built to use it; linerate loads no engine or provider.".into(),
    }]
}

#[cfg(test)]
mod accelerator_tests {
    use super::crypto_accelerator;
    use crate::model::spec::TestSpec;
    use crate::report::analysis::landscape::{Landscape, Row};

    fn land(specs: Vec<TestSpec>) -> Landscape {
        let rows = specs
            .into_iter()
            .map(|spec| Row {
                point: crate::study::sweep::Point {
                    index: 0,
                    id: "p".into(),
                    params: Vec::new(),
                    spec,
                    confidence: Default::default(),
                    groups: Vec::new(),
                },
                results: Vec::new(),
                values: Default::default(),
            })
            .collect();
        Landscape {
            rows,
            dims: Vec::new(),
            line_rate_bps: None,
            line_rate_note: None,
            line_rate_measured: false,
            threshold: 0.9,
            window_rtt: false,
            model_note: None,
        }
    }

    #[test]
    fn crypto_points_say_no_accelerator_was_used_and_clear_ones_do_not() {
        assert!(crypto_accelerator(&land(vec![TestSpec::default()])).is_empty());
        let cipher = |hw: bool| TestSpec {
            workload: crate::workload::cipher::NAME,
            crypto_hw: hw,
            ..Default::default()
        };
        let k = crypto_accelerator(&land(vec![cipher(true)]));
        assert_eq!(k.len(), 1);
        assert!(k[0].text.contains("No crypto accelerator"), "{}", k[0].text);
        assert!(!k[0].text.contains("masked"), "{}", k[0].text);
        let k = crypto_accelerator(&land(vec![cipher(true), cipher(false)]));
        assert!(k[0].text.contains("and with them masked"), "{}", k[0].text);
    }
}
