//! The live progress line (indicatif, on stderr; hidden when stderr is not a
//! terminal) and the `--json-stream` interval lines on stdout.

use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

use crate::controller::driver::Live;
use crate::model::result::TestInterval;
use crate::units::{fmt_bps, fmt_rate};

pub struct Progress {
    bar: Option<ProgressBar>,
    json_stream: bool,
    show_tx: bool,
}

impl Progress {
    pub fn new(
        label: &str,
        expected_s: f64,
        quiet: bool,
        json_stream: bool,
        show_tx: bool,
    ) -> Self {
        let bar = (!quiet).then(|| {
            let b = ProgressBar::new((expected_s * 10.0).max(1.0) as u64);
            b.set_style(
                ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b.set_prefix(label.to_string());
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Progress {
            bar,
            json_stream,
            show_tx,
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Live for Progress {
    fn interval(&mut self, i: &TestInterval) {
        if let Some(b) = &self.bar {
            b.set_position((i.end_s * 10.0) as u64);
            let mut msg = format!("{:.0}s {}", i.end_s, fmt_bps(i.throughput_bps));
            if self.show_tx {
                msg.push_str(&format!(" {}", fmt_rate(i.transactions_per_s)));
            }
            if let Some(c) = &i.cpu.client {
                msg.push_str(&format!(" cpu {:.0}%", c.host_util_pct));
            }
            b.set_message(msg);
        }
        if self.json_stream {
            let mut v = serde_json::to_value(i).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("type".into(), "interval".into());
            }
            println!("{v}");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
