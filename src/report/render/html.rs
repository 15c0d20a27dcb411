//! report.html: one self-contained page (inline CSS and SVG, no scripts, no
//! network), so it can be mailed, archived or opened years later as is.

use std::fmt::Write;

use crate::report::analysis::landscape::Table;
use crate::report::render::document::Report;

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{margin-bottom:.1em}.sub{color:#666;margin-top:0}
h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
table.kv td{text-align:left}
figure{margin:1em 0}figcaption{font-weight:600;margin-bottom:.3em}
figure.plot svg{width:100%;max-width:1000px;height:auto;display:block}
.wide{overflow-x:auto;max-width:100%}
@media print{.wide{overflow-x:visible}table{font-size:.75em}figure.plot{break-inside:avoid}}
code{background:#f5f5f5;padding:0 .25em}td code{overflow-wrap:anywhere}
li{margin:.4em 0}.advice{color:#555}
";

fn table(o: &mut String, t: &Table, class: &str) {
    let _ = writeln!(o, "<h3>{}</h3>", esc(&t.title));
    // A table wider than the column (a sweep with many metrics) scrolls
    // inside its own box instead of running off the page.
    let _ = write!(
        o,
        "<div class=\"wide\"><table class=\"{class}\"><thead><tr>"
    );
    for h in &t.headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    let _ = writeln!(o, "</tr></thead><tbody>");
    for r in &t.rows {
        let _ = write!(o, "<tr>");
        for c in r {
            let _ = write!(o, "<td>{}</td>", esc(c));
        }
        let _ = writeln!(o, "</tr>");
    }
    let _ = writeln!(o, "</tbody></table></div>");
}

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style></head><body>",
        esc(&r.title)
    );
    let _ = writeln!(
        o,
        "<h1>{}</h1>\n<p class=\"sub\">{}</p>",
        esc(&r.title),
        esc(&r.subtitle)
    );

    let _ = writeln!(
        o,
        "<section id=\"landscape\"><h2>Performance Landscape</h2>"
    );
    if let Some(n) = &r.line_rate_note {
        let _ = writeln!(o, "<p>Line rate: {}.</p>", esc(n));
    }
    for t in &r.tables {
        table(&mut o, t, "landscape");
    }
    for f in &r.figures {
        let _ = writeln!(
            o,
            "<figure class=\"plot\"><figcaption>{}</figcaption>\n{}\n</figure>",
            esc(&f.title),
            f.svg
        );
    }
    for m in &r.missing_figures {
        let _ = writeln!(o, "<p>Not drawn: {}</p>", esc(m));
    }
    let _ = writeln!(
        o,
        "<p>Values are means over every iteration of every run; ± is the half-width of the 95% confidence interval (shown with two or more samples); error bars in the plots show the same interval.</p></section>"
    );

    let _ = writeln!(
        o,
        "<section id=\"configuration\"><h2>Configuration Summary</h2>"
    );
    for t in &r.config {
        table(&mut o, t, "kv");
    }
    let _ = writeln!(o, "</section>");

    let _ = writeln!(
        o,
        "<section id=\"description\"><h2>Benchmark Description</h2>"
    );
    for para in r.description.split("\n\n") {
        let _ = writeln!(o, "<p>{}</p>", esc(para.trim()));
    }
    let _ = writeln!(o, "<table class=\"kv\"><tbody>");
    for (k, v) in &r.details {
        let _ = writeln!(o, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(v));
    }
    let _ = writeln!(o, "</tbody></table>\n<h3>What ran, point by point</h3>\n<table class=\"kv\"><thead><tr><th>point</th><th>command</th></tr></thead><tbody>");
    for (p, c) in &r.commands {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td><code>{}</code></td></tr>",
            esc(p),
            esc(c)
        );
    }
    let _ = writeln!(o, "</tbody></table></section>");

    let _ = writeln!(
        o,
        "<section id=\"key-points\"><h2>Key Points and Best Practices</h2><ul>"
    );
    if r.key_points.is_empty() {
        let _ = writeln!(
            o,
            "<li>No rule found anything to remark on in these numbers.</li>"
        );
    }
    for k in &r.key_points {
        // A rule with several key points may give its advice once.
        let advice = if k.advice.is_empty() {
            String::new()
        } else {
            format!("<br><span class=\"advice\">{}</span>", esc(&k.advice))
        };
        let _ = writeln!(
            o,
            "<li data-rule=\"{}\">{}{advice}</li>",
            esc(k.rule),
            esc(&k.text),
        );
    }
    let _ = writeln!(o, "</ul></section>\n</body></html>");
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        assert_eq!(super::esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
