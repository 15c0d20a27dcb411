//! What a study's report may draw: every plot's y and every table column
//! must be a metric of `metrics`. Checked here, not in `study`, so the study
//! floor never imports the report (the report reads studies, not back);
//! the command line checks a study before it runs it or reports on it.

use super::metrics;
use crate::error::{Error, Result};
use crate::study::file::Study;

/// Fails, naming the file and line, on the first name that is not a metric
/// (a usage error: the study file is wrong).
pub fn study(s: &Study) -> Result<()> {
    for p in &s.plots {
        if metrics::find(&p.y).is_none() {
            return Err(Error::Usage(format!(
                "{}:{}: plot y `{}` is not a metric; metrics: {}",
                s.origin,
                p.line,
                p.y,
                metrics::names()
            )));
        }
    }
    for t in &s.tables {
        if let Some(c) = t.columns.iter().find(|c| metrics::find(c).is_none()) {
            return Err(Error::Usage(format!(
                "{}:{}: table column `{c}` is not a metric; metrics: {}",
                s.origin,
                t.line,
                metrics::names()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Study {
        let text = format!(
            "title = \"t\"\ndescription = \"d\"\n[test]\nduration = 1\n[sweep]\nflows = [1, 2]\n{extra}"
        );
        Study::parse(&text, "t.toml", "t").unwrap()
    }

    #[test]
    fn names_that_are_not_metrics_are_refused_with_their_line() {
        let good = parse("[[plot]]\nx = \"flows\"\ny = \"throughput_bps\"\n[[table]]\ncolumns = [\"client_us_per_kb\"]\n");
        study(&good).unwrap();
        let e = study(&parse("[[plot]]\nx = \"flows\"\ny = \"speed\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t.toml:7:") && e.contains("plot y `speed` is not a metric"),
            "{e}"
        );
        let e = study(&parse(
            "\n[[table]]\ncolumns = [\"throughput_bps\", \"zoom\"]\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("t.toml:8:") && e.contains("table column `zoom`"),
            "{e}"
        );
    }

    #[test]
    fn every_builtin_study_draws_only_metrics() {
        for name in crate::study::builtin::names() {
            let s = crate::study::builtin::get(name).unwrap().unwrap();
            study(&s).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
