//! landscape.csv: one row per point, the parameters then each metric's
//! mean, confidence half-width and sample count, for spreadsheets and
//! scripts (the figures the report's tables show, unrounded).

use crate::error::{Error, Result};
use crate::report::analysis::landscape::Landscape;

pub fn landscape(l: &Landscape) -> Result<String> {
    let metrics = l.present();
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = vec!["point".into()];
    header.extend(l.dims.iter().cloned());
    header.push("runs".into());
    for m in &metrics {
        header.push(m.key.to_string());
        header.push(format!("{}_ci", m.key));
        header.push(format!("{}_n", m.key));
    }
    if l.line_rate_bps.is_some() {
        header.push("line_rate_bps".into());
        header.push("throughput_of_line_rate".into());
    }
    w.write_record(&header).map_err(failed)?;
    for r in &l.rows {
        let mut rec: Vec<String> = vec![r.point.id.clone()];
        rec.extend(
            l.dims
                .iter()
                .map(|d| r.point.param(d).unwrap_or("").to_string()),
        );
        rec.push(r.results.len().to_string());
        for m in &metrics {
            match r.value(m.key) {
                Some(e) => {
                    rec.push(format!("{}", e.mean));
                    rec.push(e.half_width.map(|h| h.to_string()).unwrap_or_default());
                    rec.push(e.n.to_string());
                }
                None => rec.extend([String::new(), String::new(), String::new()]),
            }
        }
        if let Some(rate) = l.line_rate_bps {
            rec.push(rate.to_string());
            rec.push(
                r.mean("throughput_bps")
                    .map(|v| (v / rate).to_string())
                    .unwrap_or_default(),
            );
        }
        w.write_record(&rec).map_err(failed)?;
    }
    let bytes = w.into_inner().map_err(failed)?;
    String::from_utf8(bytes).map_err(failed)
}

fn failed(e: impl std::fmt::Display) -> Error {
    Error::Failed(e.to_string())
}
