//! The HTML report in a real browser: headless Chromium (Debian package
//! `chromium`, installed by scripts/test.sh) loads a report written by a real
//! study run and dumps the DOM it rendered. The page must have its four
//! sections, its plots must hold drawn elements, and the browser must log no
//! console message (the page has no scripts, so any is an error).

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> PathBuf {
    for p in [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!("no Chromium found: install the Debian package `chromium` (scripts/test.sh does)");
}

/// Runs headless Chromium on `url` with `mode` (e.g. `--dump-dom`), in its
/// own process group so a hang is cleaned up completely. Returns (stdout, stderr).
fn headless(url: &str, mode: &str, profile: &Path) -> (String, String) {
    let child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.display()),
            mode,
            url,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(90);
    let watchdog = std::thread::spawn(move || {
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY: probing the process group this test started.
            if unsafe { libc::kill(-pid, 0) } != 0 {
                return false;
            }
        }
        // SAFETY: kill the process group this test started.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        true
    });
    let out = child.wait_with_output().unwrap();
    // Chromium's helpers may outlive the main process briefly: end them.
    // SAFETY: the process group this test started.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let hung = watchdog.join().unwrap();
    assert!(!hung, "chromium hung");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_report_renders_in_chromium() {
    let out = tmp("browser");
    let _ = std::fs::remove_dir_all(&out);
    let study = tmp("browser.toml");
    std::fs::write(
        &study,
        r#"
title = "Browser check"
description = "Two stream points and an rr case: tables, two plots & key points."
[test]
duration = "0.3s"
warmup = "0.1s"
interval = "0.1s"
[sweep]
flows = [1, 2]
[[case]]
label = "stream"
workload = "stream"
[[case]]
label = "rr <1/1>"
workload = "rr"
[model]
line_rate = "best"
[[plot]]
x = "flows"
y = "throughput_bps"
models = ["line_rate"]
[[plot]]
x = "flows"
y = "client_cpu_pct"
[[plot]]
x = "case"
y = "transactions_per_s"
"#,
    )
    .unwrap();
    let o = run(
        &[
            "study",
            "run",
            study.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let url = format!("file://{}", dir.join("report.html").display());
    let profile = tmp("chromium-profile");
    let (dom, log) = headless(&url, "--dump-dom", &profile);
    for id in ["landscape", "configuration", "description", "key-points"] {
        assert!(
            dom.contains(&format!("<section id=\"{id}\">")),
            "section {id} missing from the rendered DOM"
        );
    }
    for h in [
        "Performance Landscape",
        "Configuration Summary",
        "Benchmark Description",
        "Key Points and Best Practices",
    ] {
        assert!(dom.contains(h), "{h}");
    }
    // Every plot is an inline SVG with drawn marks and lines.
    let svgs: Vec<&str> = dom
        .split("<svg")
        .skip(1)
        .map(|s| s.split("</svg>").next().unwrap())
        .collect();
    assert_eq!(svgs.len(), 3, "three plots");
    // Along cases (a categorical axis) the series are bars, one colour per
    // flows value, and only the rr case has transactions.
    let bars = svgs[2];
    for colour in ["#1F77B4", "#FF7F0E"] {
        let filled = format!("fill=\"{colour}\"");
        assert!(
            bars.split("<rect")
                .skip(1)
                .any(|r| r.split('>').next().unwrap().contains(&filled)),
            "bar of {colour} missing"
        );
    }
    assert!(!bars.contains("<circle"), "markers on a bar chart");
    assert!(
        bars.contains("flows=1") && bars.contains("flows=2"),
        "legend"
    );
    assert!(
        !bars.contains(">stream<") && !bars.contains("\nstream\n"),
        "the stream case has no transactions"
    );
    for s in &svgs[..2] {
        assert!(s.matches("<circle").count() >= 2, "markers drawn");
        assert!(
            s.contains("<polyline") || s.contains("<path"),
            "lines drawn"
        );
        assert!(s.contains("<text"), "labels drawn");
    }
    // The series name with markup characters arrives as text, not markup.
    assert!(dom.contains("rr &lt;1/1&gt;"), "escaped case label");
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    // And it paints: a screenshot of the page is written.
    let shot = tmp("report.png");
    let _ = std::fs::remove_file(&shot);
    headless(&url, &format!("--screenshot={}", shot.display()), &profile);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.len() > 20_000,
        "a blank page would be tiny: {} bytes",
        png.len()
    );
}
