//! report.md: the same content as the HTML report, for pasting into an
//! issue or a wiki. Plots are linked from `plots/` (Markdown cannot inline SVG).

use std::fmt::Write;

use crate::report::analysis::landscape::Table;
use crate::report::render::document::Report;

/// Escapes the characters that would break a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(o: &mut String, t: &Table) {
    let _ = writeln!(o, "### {}\n", t.title);
    let _ = writeln!(
        o,
        "| {} |",
        t.headers
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        o,
        "|{}",
        t.headers
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { " --- |" } else { " ---: |" })
            .collect::<String>()
    );
    for r in &t.rows {
        let _ = writeln!(
            o,
            "| {} |",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    let _ = writeln!(o);
}

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}\n\n_{}_\n", r.title, r.subtitle);
    let _ = writeln!(o, "## Performance Landscape\n");
    if let Some(n) = &r.line_rate_note {
        let _ = writeln!(o, "Line rate: {n}.\n");
    }
    for t in &r.tables {
        table(&mut o, t);
    }
    for f in &r.figures {
        let _ = writeln!(o, "![{}](plots/{})\n", f.title, f.file);
    }
    for m in &r.missing_figures {
        let _ = writeln!(o, "Not drawn: {m}\n");
    }
    let _ = writeln!(
        o,
        "Values are means over every iteration of every run; ± is the half-width of the 95% confidence interval.\n"
    );
    let _ = writeln!(o, "## Configuration Summary\n");
    for t in &r.config {
        table(&mut o, t);
    }
    let _ = writeln!(o, "## Benchmark Description\n\n{}\n", r.description);
    for (k, v) in &r.details {
        let _ = writeln!(o, "- **{k}**: {}", cell(v));
    }
    let _ = writeln!(o, "\nWhat ran, point by point:\n");
    let _ = writeln!(o, "| point | command |\n| --- | --- |");
    for (p, c) in &r.commands {
        let _ = writeln!(o, "| {} | `{}` |", cell(p), cell(c));
    }
    let _ = writeln!(o, "\n## Key Points and Best Practices\n");
    if r.key_points.is_empty() {
        let _ = writeln!(o, "- No rule found anything to remark on in these numbers.");
    }
    for k in &r.key_points {
        if k.advice.is_empty() {
            let _ = writeln!(o, "- {}", k.text);
        } else {
            let _ = writeln!(o, "- {}\n  _{}_", k.text, k.advice);
        }
    }
    o
}
