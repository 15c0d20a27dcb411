use super::*;
use crate::model::chart::{Curve, HLine, Series};

/// A small XML well-formedness check: tags nest and balance, attribute
/// values are quoted and free of `<`, text holds no raw `<`, and every
/// `&` starts a known entity.
fn check_xml(s: &str) {
    assert!(
        s.starts_with("<svg"),
        "does not start with <svg: {:?}",
        s.chars().take(40).collect::<String>()
    );
    assert!(s.trim_end().ends_with("</svg>"), "does not end with </svg>");
    for (i, _) in s.match_indices('&') {
        let rest = &s[i..];
        let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
            .iter()
            .any(|e| rest.starts_with(e))
            || (rest.starts_with("&#") && rest[2..].find(';').is_some_and(|n| n > 0 && n < 8));
        assert!(
            ok,
            "raw & at byte {i}: {:?}",
            rest.chars().take(20).collect::<String>()
        );
    }
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        assert!(!text.contains('>'), "raw > in text: {text:?}");
        let tag_start = &rest[open + 1..];
        // Find the end of the tag, skipping quoted attribute values.
        let mut in_quote = false;
        let mut end = None;
        for (j, c) in tag_start.char_indices() {
            match c {
                '"' => in_quote = !in_quote,
                '<' => panic!("< inside a tag: {:?}", &tag_start[..j]),
                '>' if !in_quote => {
                    end = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let end = end.expect("unterminated tag");
        let tag = &tag_start[..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().expect("empty tag");
            stack.push(name);
        }
        rest = &tag_start[end + 1..];
    }
    assert!(rest.trim().is_empty(), "text after the root element");
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
}

fn series(name: &str, points: &[(f64, f64, Option<f64>)]) -> Series {
    Series {
        name: name.to_string(),
        points: points.to_vec(),
    }
}

fn chart(series: Vec<Series>) -> Chart {
    Chart {
        title: "Throughput by message size".to_string(),
        x_label: "message size (bytes)".to_string(),
        y_label: "Gbit/s".to_string(),
        log_x: false,
        log_y: false,
        x_categories: None,
        zoom_y: false,
        series,
        hlines: Vec::new(),
        curves: Vec::new(),
    }
}

/// The text content of every `<text>` element, as plotters writes it.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

#[test]
fn two_series_with_error_bars_and_hline() {
    let mut c = chart(vec![
        series(
            "tcp_stream",
            &[
                (1.0, 2.0, Some(0.2)),
                (2.0, 5.0, Some(0.4)),
                (3.0, 8.5, None),
            ],
        ),
        series(
            "udp_stream",
            &[
                (1.0, 1.0, None),
                (2.0, 3.0, Some(0.1)),
                (3.0, 4.0, Some(1.0)),
            ],
        ),
    ]);
    c.hlines.push(HLine {
        label: "line rate".to_string(),
        y: 10.0,
    });
    c.hlines.push(HLine {
        label: "90% of line rate".to_string(),
        y: 9.0,
    });
    let s = svg(&c).expect("renders");
    check_xml(&s);
    assert!(s.starts_with("<svg"));
    assert!(!s.contains("<?xml"));
    assert!(s.contains("width=\"760\"") && s.contains("height=\"420\""));
    assert!(!s.contains("<script") && !s.contains("href"));
    let t = texts(&s);
    for want in [
        "tcp_stream",
        "udp_stream",
        "line rate",
        "90% of line rate",
        "Throughput by message size",
        "message size (bytes)",
        "Gbit/s",
    ] {
        assert!(
            t.iter().any(|x| x == want),
            "missing text {want:?} in {t:?}"
        );
    }
    assert!(s.contains("font-family=\"sans-serif\""));
    assert!(s.matches("<circle").count() >= 6, "one marker per point");
    assert!(s.contains("<polyline") || s.contains("<path"));
    // y axis reaches past the hline: ticks up to 10 are labelled.
    assert!(t.iter().any(|x| x == "10"), "{t:?}");
}

#[test]
fn log_x_powers_of_two() {
    let pts: Vec<_> = (0..7)
        .map(|i| {
            let x = f64::from(1u32 << i);
            (x, 1.0 + x.ln(), Some(0.1))
        })
        .collect();
    let mut c = chart(vec![series("rr", &pts)]);
    c.log_x = true;
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let t = texts(&s);
    // A log axis from just under 1 to just over 64 is labelled at powers of ten.
    assert!(t.iter().any(|x| x == "1"), "{t:?}");
    assert!(t.iter().any(|x| x == "10"), "{t:?}");
    assert!(s.matches("<circle").count() >= 7);

    // Both axes log, with a zero and a negative value that must be skipped.
    let mut c = chart(vec![series(
        "rr",
        &[
            (0.0, 1.0, None),
            (1.0, -1.0, None),
            (2.0, 300.0, Some(500.0)),
            (4.0, 250.0, None),
        ],
    )]);
    c.log_x = true;
    c.log_y = true;
    let s = svg(&c).expect("renders");
    check_xml(&s);
}

#[test]
fn narrow_log_range_still_has_ticks() {
    // Plotters' own log ticks start at a power of ten, so none of these
    // ranges would get a single label.
    let mut c = chart(vec![series(
        "a",
        &[(200.0, 210.0, None), (300.0, 290.0, None)],
    )]);
    c.log_x = true;
    c.log_y = true;
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let t = texts(&s);
    assert!(t.iter().filter(|x| *x == "200").count() == 2, "{t:?}");
    assert!(t.iter().filter(|x| *x == "300").count() == 2, "{t:?}");

    // No one-digit value inside: the range is stretched to 300..400.
    let mut c = chart(vec![series(
        "a",
        &[(310.0, 320.0, None), (330.0, 340.0, None)],
    )]);
    c.log_x = true;
    c.log_y = true;
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let t = texts(&s);
    assert!(t.iter().filter(|x| *x == "300").count() == 2, "{t:?}");
    assert!(t.iter().filter(|x| *x == "400").count() == 2, "{t:?}");

    // Below the first power of ten, and no power of ten labelled twice.
    let mut c = chart(vec![series("a", &[(1.0, 0.4, None), (2.0, 9.0, None)])]);
    c.log_y = true;
    let s = svg(&c).expect("renders");
    let t = texts(&s);
    assert!(t.iter().any(|x| x == "0.5"), "{t:?}");
    assert_eq!(t.iter().filter(|x| *x == "1").count(), 2, "x and y: {t:?}");

    // Many decades: only powers of ten are labelled, and not too many.
    let mut c = chart(vec![series("a", &[(1e-3, 1e-6, None), (1e9, 1e12, None)])]);
    c.log_x = true;
    c.log_y = true;
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let labels: Vec<_> = texts(&s).into_iter().filter(|x| x.contains('e')).collect();
    assert!(labels.iter().any(|x| x == "1e9"), "{labels:?}");
    assert!(labels.len() <= 2 * LOG_TICKS, "{labels:?}");
    assert!(!labels
        .iter()
        .any(|x| x.starts_with('2') || x.starts_with('5')));
}

#[test]
fn categorical_axis_shows_names() {
    let names = ["tcp_stream", "tcp_rr", "tcp_crr", "udp_stream", "udp_rr"];
    let mut c = chart(vec![
        series(
            "baseline",
            &[
                (0.0, 9.0, Some(0.5)),
                (1.0, 4.0, None),
                (2.0, 1.0, None),
                (3.0, 7.0, None),
                (4.0, 3.0, None),
            ],
        ),
        series(
            "tuned",
            &[(0.0, 9.5, None), (4.0, 3.5, None), (7.0, 1.0, None)],
        ),
    ]);
    c.x_categories = Some(names.iter().map(|s| s.to_string()).collect());
    c.log_x = true; // ignored on a categorical axis
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let t = texts(&s);
    for n in names {
        assert!(t.iter().any(|x| x == n), "missing category {n:?} in {t:?}");
    }
    // No numeric x tick labels leak through between categories.
    assert!(!t.iter().any(|x| x == "0.5" || x == "-0.5"), "{t:?}");

    // The AWM set's names (17 characters), and seven short ones: every
    // one is named.
    for names in [
        vec![
            "RR 200/1000",
            "RR 200/32k",
            "CRR 64/8k",
            "stream put 20M/20",
            "stream get 20/20M",
        ],
        vec!["a", "b", "c", "d", "e", "f", "g"],
    ] {
        let pts: Vec<_> = (0..names.len()).map(|i| (i as f64, 1.0, None)).collect();
        let mut c = chart(vec![series("s", &pts)]);
        c.x_categories = Some(names.iter().map(|s| s.to_string()).collect());
        let t = texts(&svg(&c).expect("renders"));
        for n in &names {
            assert!(t.iter().any(|x| x == n), "missing category {n:?} in {t:?}");
        }
    }

    // One category only.
    let mut c = chart(vec![series("only", &[(0.0, 1.0, None)])]);
    c.x_categories = Some(vec!["one".to_string()]);
    let s = svg(&c).expect("renders");
    check_xml(&s);
    assert!(texts(&s).iter().any(|x| x == "one"));

    // Many categories: labels thinned, still renders.
    let mut c = chart(vec![series(
        "many",
        &(0..500)
            .map(|i| (f64::from(i), 1.0, None))
            .collect::<Vec<_>>(),
    )]);
    c.x_categories = Some((0..500).map(|i| format!("c{i}")).collect());
    check_xml(&svg(&c).expect("renders"));

    // Long names: only as many as fit are shown, at evenly spaced
    // categories, and each shown label is a whole category name.
    let names: Vec<String> = (0..30).map(|i| format!("tcp_rr_parallel_{i:02}")).collect();
    let mut c = chart(vec![series(
        "long",
        &(0..30)
            .map(|i| (f64::from(i), 1.0, None))
            .collect::<Vec<_>>(),
    )]);
    c.x_categories = Some(names.clone());
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let shown: Vec<String> = texts(&s)
        .into_iter()
        .filter(|t| t.starts_with("tcp_rr_parallel_"))
        .collect();
    assert!(
        shown.len() >= 2 && shown.len() <= category_labels_that_fit(&names),
        "{shown:?}"
    );
    assert!(shown.iter().all(|t| names.contains(t)));
    assert_eq!(shown[0], "tcp_rr_parallel_00");
}

/// Rectangles filled with `colour`, as (x, width) in pixels.
fn bars(svg: &str, colour: &str) -> Vec<(f64, f64)> {
    let fill = format!("fill=\"{colour}\"");
    let attr = |tag: &str, name: &str| -> f64 {
        let at = tag.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
        tag[at..].split('"').next().unwrap().parse().unwrap()
    };
    svg.split("<rect")
        .skip(1)
        .map(|r| r.split('>').next().unwrap())
        .filter(|r| r.contains(&fill))
        .map(|r| (attr(r, "x"), attr(r, "width")))
        .collect()
}

#[test]
fn categories_are_grouped_bars_with_their_error_bars_and_models() {
    let mut c = chart(vec![
        series("clear", &[(0.0, 9.0, Some(1.0)), (1.0, 4.0, None)]),
        series("TLS", &[(0.0, 6.0, None), (1.0, 2.0, None)]),
    ]);
    c.x_categories = Some(vec!["stream".into(), "rr".into()]);
    c.curves = vec![Curve {
        label: "model".into(),
        series: 1,
        points: vec![(0.0, 7.0), (1.0, 3.0)],
    }];
    let s = svg(&c).expect("renders");
    check_xml(&s);
    // No line joins the categories and no point markers are drawn.
    assert!(!s.contains("<circle"), "{s}");
    let blue = bars(&s, "#1F77B4");
    let orange = bars(&s, "#FF7F0E");
    // Two bars and a legend key per series.
    assert_eq!(blue.len(), 3, "{blue:?}");
    assert_eq!(orange.len(), 3, "{orange:?}");
    // Within each category the first series' bar is left of the
    // second's and they do not overlap; categories do not mix.
    for k in 0..2 {
        let (b, o) = (blue[k], orange[k]);
        assert!(b.0 + b.1 <= o.0, "{b:?} {o:?}");
        assert!(b.1 > 20.0, "bars are wide enough to see: {b:?}");
    }
    assert!(orange[0].0 + orange[0].1 < blue[1].0);
    // The error bar and each model mark are paths of their own.
    assert!(s.matches("<polyline").count() >= 2 + 3, "{s}");
    assert!(texts(&s).iter().any(|t| t == "model"));

    // A log y axis still draws bars (from the axis' bottom).
    c.log_y = true;
    let s = svg(&c).expect("renders");
    check_xml(&s);
    assert_eq!(bars(&s, "#1F77B4").len(), 3);
}

#[test]
fn empty_chart_is_err() {
    assert!(svg(&chart(vec![])).is_err());
    assert!(svg(&chart(vec![series("a", &[])])).is_err());
    let mut c = chart(vec![series(
        "nan",
        &[(f64::NAN, 1.0, None), (1.0, f64::INFINITY, None)],
    )]);
    c.hlines.push(HLine {
        label: "line rate".to_string(),
        y: 10.0,
    });
    assert!(svg(&c).is_err(), "hlines alone are not a chart");
    let mut c = chart(vec![series("neg", &[(1.0, 0.0, None), (2.0, -3.0, None)])]);
    c.log_y = true;
    assert!(svg(&c).is_err());
    let mut c = chart(vec![series("a", &[(0.0, 1.0, None)])]);
    c.x_categories = Some(Vec::new());
    assert!(svg(&c).is_err());
    // Values whose padded range overflows.
    assert!(svg(&chart(vec![series("big", &[(1.0, f64::MAX, None)])])).is_err());
}

#[test]
fn names_are_xml_escaped() {
    let mut c = chart(vec![
        series("a & b <c> \"d\" 'e'", &[(1.0, 1.0, None), (2.0, 2.0, None)]),
        series("ctl\u{1}\nname", &[(1.0, 2.0, None)]),
    ]);
    c.title = "R&D <test>".to_string();
    c.x_categories = None;
    c.hlines.push(HLine {
        label: "<line & rate>".to_string(),
        y: 3.0,
    });
    let s = svg(&c).expect("renders");
    check_xml(&s);
    assert!(s.contains("a &amp; b &lt;c&gt;"));
    assert!(s.contains("&lt;line &amp; rate&gt;"));
    assert!(s.contains("R&amp;D &lt;test&gt;"));
    assert!(!s.contains('\u{1}'));

    let mut c = chart(vec![series("s", &[(0.0, 1.0, None), (1.0, 1.0, None)])]);
    c.x_categories = Some(vec!["<a&b>".to_string(), "x\"y".to_string()]);
    let s = svg(&c).expect("renders");
    check_xml(&s);
    assert!(s.contains("&lt;a&amp;b&gt;"));
}

#[test]
fn single_point_and_single_x_render() {
    let s = svg(&chart(vec![series("one", &[(5.0, 3.0, Some(1.0))])])).expect("renders");
    check_xml(&s);
    assert!(s.contains("<circle"));

    let s = svg(&chart(vec![
        series("a", &[(5.0, 3.0, None)]),
        series("b", &[(5.0, 4.0, None)]),
    ]))
    .expect("renders");
    check_xml(&s);

    let mut c = chart(vec![series("log", &[(64.0, 7.0, Some(10.0))])]);
    c.log_x = true;
    c.log_y = true;
    check_xml(&svg(&c).expect("renders"));

    // All zero.
    check_xml(&svg(&chart(vec![series("zero", &[(0.0, 0.0, None)])])).expect("renders"));
    // Negative values on a linear axis.
    check_xml(
        &svg(&chart(vec![series(
            "neg",
            &[(1.0, -5.0, Some(1.0)), (2.0, -1.0, None)],
        )]))
        .expect("renders"),
    );
}

#[test]
fn odd_inputs_do_not_panic() {
    let odd = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        5e-324,
        1e-300,
        1e300,
        -1e300,
        f64::MAX,
        f64::MIN,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1000.000000000001,
    ];
    let hws = [
        None,
        Some(f64::NAN),
        Some(-1.0),
        Some(0.0),
        Some(1e308),
        Some(0.5),
    ];
    for (i, &a) in odd.iter().enumerate() {
        for &b in &odd {
            for (log_x, log_y) in [(false, false), (true, false), (false, true), (true, true)] {
                let hw = hws[i % hws.len()];
                let mut c = chart(vec![
                    series("a", &[(a, b, hw), (1000.0, a, None)]),
                    series("b", &[(b, a, hw)]),
                ]);
                c.log_x = log_x;
                c.log_y = log_y;
                c.hlines.push(HLine {
                    label: "h".to_string(),
                    y: b,
                });
                if let Ok(s) = svg(&c) {
                    check_xml(&s);
                }
            }
        }
    }
}

#[test]
fn model_curves_are_dashed_in_their_series_colour() {
    let mut c = chart(vec![
        series("rcvbuf=64K", &[(50.0, 40.0, None), (100.0, 77.0, None)]),
        series("rcvbuf=2M", &[(50.0, 1.6, None), (100.0, 2.9, None)]),
    ]);
    c.log_y = true;
    c.curves.push(Curve {
        label: "model W=2 MiB".into(),
        series: 1,
        points: vec![(50.0, 1.5), (75.0, f64::NAN), (100.0, 2.8), (120.0, -1.0)],
    });
    c.curves.push(Curve {
        label: String::new(),
        series: 0,
        points: vec![(50.0, 39.0), (100.0, 76.0)],
    });
    let s = svg(&c).expect("renders");
    check_xml(&s);
    let t = texts(&s);
    assert!(t.iter().any(|x| x == "model W=2 MiB"), "{t:?}");
    // Dashes are short path segments in the series' colour.
    let orange = "stroke=\"#FF7F0E\"";
    assert!(s.matches(orange).count() > 4, "{s}");
    // A curve alone is no chart.
    let mut c = chart(vec![]);
    c.curves.push(Curve {
        label: "model".into(),
        series: 0,
        points: vec![(1.0, 1.0)],
    });
    assert!(svg(&c).is_err());
}

#[test]
fn tick_format() {
    assert_eq!(fmt_tick(0.0), "0");
    assert_eq!(fmt_tick(10.0), "10");
    assert_eq!(fmt_tick(0.25), "0.25");
    assert_eq!(fmt_tick(0.30000000000000004), "0.3");
    assert_eq!(fmt_tick(123.456), "123.46");
    assert_eq!(fmt_tick(-2.5), "-2.5");
    assert_eq!(fmt_tick(2_500_000.0), "2.5e6");
    assert_eq!(fmt_tick(0.0001), "1e-4");
}

/// The landscape's window/RTT charts draw: a model's legend names its
/// window, and five unlabelled model curves still make a chart.
#[test]
fn landscape_model_curves_draw() {
    use crate::report::analysis::landscape::testing::{land, plot, point};
    let mut rows = Vec::new();
    for w in ["64K", "2M"] {
        for rtt in [0, 50, 100, 200] {
            rows.push(point(rtt, w, 0.95));
        }
    }
    let drawn = svg(&land(rows).chart(&plot(Some("rcvbuf")))).unwrap();
    assert!(drawn.contains("model W=64 KiB"));
    let rows = ["48K", "64K", "128K", "256K", "512K"]
        .iter()
        .flat_map(|w| [50, 100].map(|r| point(r, w, 1.0)))
        .collect();
    svg(&land(rows).chart(&plot(Some("rcvbuf")))).unwrap();
}
