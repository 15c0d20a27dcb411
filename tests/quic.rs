//! QUIC (quinn-proto) on the engine's UDP flows, with a real local agent:
//! bulk transfer both ways, its TLS over TCP twin, the counts of both ends
//! and of QUIC itself, through the lab's emulator (root), and what QUIC
//! refuses in one line.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

/// Tests that measure take turns: two bulk transfers on two cores would
/// measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn quic<'a>(r: &'a serde_json::Value, end: &str) -> &'a serde_json::Value {
    &r["iterations"][0]["flows"][end][0]["quic"]
}

/// One flow each way: the bytes the receiver read are the bytes the
/// sender wrote, less what was still in flight at the window's edges;
/// QUIC's own counters say it sent packets and how many it lost.
#[test]
fn quic_stream_moves_data_both_ways_and_counts_it_at_both_ends() {
    let _turn = alone();
    for dir in ["tx", "rx"] {
        let (text, r) = run_json_text(
            &format!("quic-{dir}.json"),
            &[
                "stream",
                "--transport",
                "quic",
                "--direction",
                dir,
                "-d",
                "1.5",
                "--warmup",
                "0.5",
            ],
            LIMIT,
        );
        assert_eq!(r["spec"]["workload"], "quic-stream", "{}", r["spec"]);
        let s = &r["summary"];
        let bps = f(&s["throughput_bps"]);
        // Loopback moves gigabits; a starved host still moves 50 Mbit/s.
        assert!(bps > 50e6, "{dir}: {bps}");
        let (sender, receiver) = if dir == "tx" {
            ("client", "agent")
        } else {
            ("agent", "client")
        };
        let it = &r["iterations"][0];
        let sent = u(&it["counters"][sender]["bytes_tx"]);
        let got = u(&it["counters"][receiver]["bytes_rx"]);
        assert!(got > 0 && sent > 0, "{dir}: sent {sent} got {got}");
        // Each end counts over its own window: they differ by what the
        // connection held at the edges (its 64 MiB window at most).
        let gap = sent.abs_diff(got);
        assert!(
            gap < (80 << 20),
            "{dir}: sender {sent} vs receiver {got} bytes in the window"
        );
        let q = quic(&r, sender);
        assert_eq!(q["implementation"], "quinn-proto 0.11");
        assert_eq!(q["congestion_control"], "cubic");
        let packets = u(&q["packets_sent"]);
        assert!(packets > 1000, "{dir}: {q}");
        assert!(u(&q["packets_lost"]) < packets, "{q}");
        // A datagram may carry several packets (the handshake's are
        // coalesced); one that met a full socket is sent later.
        let datagrams = u(&q["datagrams_tx"]);
        assert!(datagrams <= packets + 8 && datagrams * 2 > packets, "{q}");
        assert!(u(&q["send_calls"]) > 0 && u(&q["send_calls"]) <= u(&q["datagrams_tx"]));
        let tls = &it["flows"]["client"][0]["tls"];
        assert_eq!(tls["protocol"], "TLSv1.3 (QUIC)", "{tls}");
        // Its twin ran right after it: TLS over TCP with the same settings.
        let b = &r["baseline"];
        assert!(f(&b["throughput_bps"]) > 50e6, "{dir}: baseline {b}");
        assert!(text.contains("quic cost    QUIC costs"), "{text}");
        assert!(text.contains("of TLS over TCP"), "{text}");
        assert!(
            text.contains("quic client  quinn-proto 0.11, cubic"),
            "{text}"
        );
    }
}

/// Several flows, one QUIC connection each, over another congestion
/// control: every flow carries data, and the result says which ran.
#[test]
fn each_flow_is_a_connection_and_the_congestion_control_is_quinns() {
    let _turn = alone();
    let r = run_json(
        "quic-flows.json",
        "quic-stream --flows 3 --cc bbr -d 1 --warmup 0.5 --no-baseline",
        LIMIT,
    );
    let flows = r["iterations"][0]["flows"]["agent"].as_array().unwrap();
    assert_eq!(flows.len(), 3, "{flows:?}");
    for fl in flows {
        assert!(u(&fl["bytes_rx"]) > 0, "{fl}");
        assert_eq!(fl["congestion_control"], "bbr");
    }
    assert_eq!(quic(&r, "client")["congestion_control"], "bbr");
    assert!(r["baseline"].is_null());
}

/// rr over QUIC: a stream per request, several at once on one
/// connection. Every answered request is a transaction at both ends,
/// each carried its whole response, and the latency is the stream's; the
/// twin is rr over TLS with the same sizes, and the cost line is per
/// transaction.
#[test]
fn quic_rr_answers_each_request_on_its_own_stream() {
    let _turn = alone();
    let (text, r) = run_json_text(
        "quic-rr.json",
        &[
            "rr",
            "--transport",
            "quic",
            "--request",
            "200",
            "--response",
            "1000",
            "--outstanding",
            "4",
            "-d",
            "1.5",
            "--warmup",
            "0.5",
        ],
        LIMIT,
    );
    assert_eq!(r["spec"]["workload"], "quic-rr", "{}", r["spec"]);
    let it = &r["iterations"][0];
    let (client, agent) = (&it["counters"]["client"], &it["counters"]["agent"]);
    let tx = u(&client["transactions"]);
    assert!(tx > 200, "{client}");
    // The agent counts a transaction when its response is out, the
    // client when it is in: they differ by what was under way at the
    // window's edges, a few requests per stream slot, and by what the
    // edges' own skew between the two ends carries (a whole run saw 108
    // of 63,248 at 42k/s: 2.6 ms), so 1% of the count on top.
    let answered = u(&agent["transactions"]);
    assert!(
        tx.abs_diff(answered) <= 64 + tx / 100,
        "client {tx} agent {answered}"
    );
    // Every transaction the client counted carried its 1000-byte response
    // (bytes of a response still under way at the edges aside).
    let got = u(&client["bytes_rx"]);
    assert!(
        got >= tx * 1000 && got <= (tx + 64) * 1000,
        "{got} bytes for {tx} transactions"
    );
    let sent = u(&client["bytes_tx"]);
    assert!(sent >= tx * 200 - 64 * 200, "{sent} request bytes for {tx}");
    let s = &r["summary"];
    assert!(f(&s["transactions_per_s"]) > 100.0, "{s}");
    assert!(f(&s["latency_us"]["p50"]) > 0.0, "{s}");
    let q = quic(&r, "client");
    assert!(u(&q["packets_sent"]) > 100, "{q}");
    let b = &r["baseline"];
    assert!(f(&b["transactions_per_s"]) > 100.0, "{b}");
    assert!(
        text.contains("QUIC costs") && text.contains("per transaction of TLS over TCP"),
        "{text}"
    );
    assert!(text.contains("4 at once per connection"), "{text}");
}

/// rr over QUIC as an open loop: the offered rate is what ran (each
/// flow's requests due on its own schedule), and the latency is also
/// taken from each request's due time.
#[test]
fn quic_rr_open_loop_runs_at_the_offered_rate() {
    let _turn = alone();
    let r = run_json(
        "quic-rr-rate.json",
        "rr --transport quic --rate 2000 --flows 2 --outstanding 4 -d 1.5 --warmup 0.5 --no-baseline",
        LIMIT,
    );
    assert_eq!(r["spec"]["workload"], "quic-rr", "{}", r["spec"]);
    let s = &r["summary"];
    let rate = f(&s["transactions_per_s"]);
    assert!(
        (rate / 2000.0 - 1.0).abs() < 0.05,
        "{rate}/s for 2000/s offered"
    );
    let corrected = f(&s["latency_corrected_us"]["p50"]);
    let latency = f(&s["latency_us"]["p50"]);
    assert!(
        corrected >= latency && latency > 0.0,
        "{corrected} vs {latency}"
    );
}

/// A response larger than any one buffer goes whole (20 MiB, cut from a
/// 1 MiB piece), and a large request too: put and get over QUIC.
#[test]
fn quic_rr_carries_a_put_and_a_get_whole() {
    let _turn = alone();
    for (req, resp) in [("20", "4M"), ("4M", "20")] {
        let r = run_json(
            &format!("quic-rr-{req}-{resp}.json"),
            &format!("quic-rr --request {req} --response {resp} -d 1 --warmup 0.3 --no-baseline"),
            LIMIT,
        );
        let it = &r["iterations"][0];
        let c = &it["counters"]["client"];
        let tx = u(&c["transactions"]);
        assert!(tx >= 2, "{req}/{resp}: {c}");
        let big = 4u64 << 20;
        let (moved, what) = if resp == "4M" {
            (u(&c["bytes_rx"]), "received")
        } else {
            (u(&c["bytes_tx"]), "sent")
        };
        // At least the transactions' whole bodies, at most one more in
        // flight at each edge of the window.
        assert!(
            moved >= (tx - 1) * big && moved <= (tx + 2) * big,
            "{req}/{resp}: {moved} bytes {what} for {tx} transactions"
        );
    }
}

/// A finite stream over QUIC (`--bytes`): each flow's one transfer on a
/// stream of its own, both ways, whole at the receiver, its duration the
/// transfer's latency, and the test over when every flow is done; with
/// `--per transaction` transfers repeat for the window, with their twin
/// (stream over TLS with the same sizes).
#[test]
fn quic_stream_finite_transfers_arrive_whole() {
    let _turn = alone();
    let big = 8u64 << 20;
    for dir in ["tx", "rx"] {
        let r = run_json(
            &format!("quic-bytes-{dir}.json"),
            &format!("quic-stream --direction {dir} --bytes 8M --flows 2 -d 60 --no-baseline"),
            LIMIT,
        );
        assert_eq!(r["summary"]["status"], "ok", "{dir}: {}", r["summary"]);
        let it = &r["iterations"][0];
        assert_eq!(u(&it["transactions"]), 2, "{dir}: {}", it["counters"]);
        let received = match dir {
            "tx" => u(&it["counters"]["agent"]["bytes_rx"]),
            _ => u(&it["counters"]["client"]["bytes_rx"]),
        };
        // Each transfer whole, and its 20-byte reply (the agent's count
        // takes the request's 8-byte header off).
        assert!(
            received >= 2 * big && received <= 2 * (big + 20),
            "{dir}: {received} bytes received for two transfers of {big}"
        );
        // Done long before the 60 s limit: the test ended with the flows.
        assert!(f(&it["duration_s"]) < 30.0, "{dir}: {}", it["duration_s"]);
        assert!(
            f(&it["latency_us"]["p50"]) > 0.0,
            "{dir}: {}",
            it["latency_us"]
        );
    }
    let r = run_json(
        "quic-bytes-per-tx.json",
        "quic-stream --direction rx --bytes 2M --per transaction -d 1 --warmup 0.3",
        LIMIT,
    );
    let tx = u(&r["iterations"][0]["transactions"]);
    assert!(tx >= 5, "{tx} transfers of 2 MiB in a second");
    let got = u(&r["iterations"][0]["counters"]["client"]["bytes_rx"]);
    assert!(
        got >= (tx - 1) * (2 << 20),
        "{got} bytes for {tx} transfers"
    );
    assert!(
        f(&r["baseline"]["transactions_per_s"]) > 0.0,
        "{}",
        r["baseline"]
    );
}

/// crr over QUIC: a new connection (handshake, one request stream,
/// close) per transaction on each flow's socket. Both ends count the same
/// connections and handshakes, every one full without resumption; the
/// flows' QUIC figures count the connections they made; the twin is crr
/// over TLS.
#[test]
fn quic_crr_makes_a_connection_per_transaction() {
    let _turn = alone();
    let (text, r) = run_json_text(
        "quic-crr.json",
        &[
            "crr",
            "--transport",
            "quic",
            "--flows",
            "2",
            "--request",
            "64",
            "--response",
            "8k",
            "-d",
            "1.5",
            "--warmup",
            "0.5",
        ],
        LIMIT,
    );
    assert_eq!(r["spec"]["workload"], "quic-crr", "{}", r["spec"]);
    let it = &r["iterations"][0];
    let (c, a) = (&it["counters"]["client"], &it["counters"]["agent"]);
    let tx = u(&c["transactions"]);
    assert!(tx > 50, "{c}");
    assert_eq!(u(&c["connections"]), tx, "{c}");
    assert_eq!(u(&c["tls_handshakes"]), tx, "{c}");
    assert_eq!(u(&c["tls_resumed"]), 0, "{c}");
    // The agent counts a connection at its handshake's end, the client at
    // its answer: they differ by the ones under way at the edges.
    let accepted = u(&a["connections"]);
    assert!(accepted.abs_diff(tx) <= 8, "client {tx} agent {accepted}");
    assert!(u(&c["bytes_rx"]) >= tx * 8192, "{c}");
    let q = quic(&r, "client");
    // Over the whole test (warm-up included) each flow made many.
    assert!(u(&q["connections"]) * 2 > tx / 2, "{q}");
    assert!(q["zero_rtt"].is_null(), "{q}");
    assert!(
        f(&r["summary"]["connections_per_s"]) > 25.0,
        "{}",
        r["summary"]
    );
    let b = &r["baseline"];
    assert!(f(&b["transactions_per_s"]) > 25.0, "{b}");
    assert!(text.contains("per transaction of TLS over TCP"), "{text}");
}

/// tls-handshake over QUIC with resumption: every handshake in the
/// window resumes its session and carries its request as 0-RTT data (the
/// client waits for its next ticket before it closes), and is faster than
/// a full one.
#[test]
fn quic_handshakes_resume_with_zero_rtt() {
    let _turn = alone();
    let mut p50 = Vec::new();
    for resume in ["off", "on"] {
        let r = run_json(
            &format!("quic-hs-{resume}.json"),
            &format!(
                "tls-handshake --transport quic --resume {resume} -d 1.5 --warmup 0.5 --no-baseline"
            ),
            LIMIT,
        );
        assert_eq!(r["spec"]["workload"], "quic-handshake", "{}", r["spec"]);
        let c = &r["iterations"][0]["counters"]["client"];
        let hs = u(&c["tls_handshakes"]);
        assert!(hs > 50, "{resume}: {c}");
        let resumed = u(&c["tls_resumed"]);
        // Written only when not zero.
        let zero = quic(&r, "client")["zero_rtt"].as_u64().unwrap_or(0);
        let agent_zero = quic(&r, "agent")["zero_rtt"].as_u64().unwrap_or(0);
        if resume == "on" {
            // A ticket lost or late costs one full handshake.
            assert!(resumed * 100 >= hs * 95, "{resumed} of {hs} resumed");
            assert!(zero >= resumed && agent_zero > 0, "{zero} / {agent_zero}");
        } else {
            assert_eq!((resumed, zero, agent_zero), (0, 0, 0), "{c}");
        }
        p50.push(f(&r["summary"]["latency_us"]["p50"]));
    }
    // 0-RTT saves the round trip the request waited for and the
    // certificate's signature: the median resumed transaction is quicker.
    assert!(
        p50[1] < p50[0],
        "p50 full {} µs, resumed {} µs",
        p50[0],
        p50[1]
    );
}

/// conn over QUIC: handshakes and closes, no request; the transaction is
/// the handshake, counted at both ends, and nothing else crosses.
#[test]
fn quic_conn_counts_handshakes_and_moves_no_payload() {
    let _turn = alone();
    let r = run_json(
        "quic-conn.json",
        "conn --transport quic --flows 2 -d 1 --warmup 0.3 --no-baseline",
        LIMIT,
    );
    assert_eq!(r["spec"]["workload"], "quic-conn", "{}", r["spec"]);
    let it = &r["iterations"][0];
    let (c, a) = (&it["counters"]["client"], &it["counters"]["agent"]);
    let tx = u(&c["transactions"]);
    assert!(tx > 50, "{c}");
    assert_eq!(u(&c["connections"]), tx, "{c}");
    assert_eq!(u(&c["tls_handshakes"]), tx, "{c}");
    // The agent counts a handshake it completed: the client's Finished
    // leaves with its close, and an agent that reads the close first
    // never completes that one.
    let accepted = u(&a["connections"]);
    assert!(accepted > 0 && accepted <= tx + 8, "client {tx}: {a}");
    assert_eq!(u(&c["bytes_tx"]) + u(&c["bytes_rx"]), 0, "{c}");
    assert!(f(&r["summary"]["latency_us"]["p50"]) > 0.0);
}

/// What QUIC cannot carry is refused before anything starts, in one line
/// that says what to do.
#[test]
fn what_quic_cannot_carry_is_refused_in_one_line() {
    let cases: &[(&str, &str)] = &[
        ("udp-rr --transport quic", "udp-rr has no QUIC twin yet"),
        (
            "crr --transport quic --rate 1000",
            "--rate (open loop) applies to",
        ),
        (
            "stream --transport quic --tls-version 1.2",
            "QUIC carries TLS 1.3 only",
        ),
        (
            "stream --transport quic --backend openssl",
            "QUIC runs on rustls",
        ),
        ("stream --transport quic --cc vegas", "cubic, bbr, newreno"),
        ("quic-stream --io threads", "--io epoll"),
        ("stream --transport sctp", "tcp, quic"),
    ];
    for (args, want) in cases {
        let o = run_str(&format!("run {args} -d 1"), LIMIT);
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(want), "{args}: {e}");
        // clap's own refusal of a value adds its usage lines.
        if !args.contains("sctp") {
            assert_eq!(e.trim().lines().count(), 1, "{args}: {e}");
        }
    }
}

/// Through an emulated WAN (root): every QUIC packet the client sent
/// crossed the emulator, which counted the same packets and the same
/// losses QUIC declared (the emulator's loss is the only loss there).
#[test]
fn through_the_lab_the_emulator_counts_quics_packets() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the lab needs root (CI runs as root)");
        return;
    }
    let _turn = alone();
    let (lab, _) = Lab::up(
        "quic",
        "--rtt 10ms --rate 100mbit --loss 0.2% --no-calibrate",
    );
    let r = run_json(
        &format!("{}-quic.json", lab.name),
        &format!(
            "stream --transport quic --lab {} -d 3 --warmup 0.5 --no-baseline",
            lab.name
        ),
        LIMIT,
    );
    let bps = f(&r["summary"]["throughput_bps"]);
    assert!(bps > 5e6 && bps < 100e6 * 1.02, "{bps}");
    let q = quic(&r, "client");
    let d0 = &r["lab"]["emulator"]["dirs"][0];
    // Every datagram that reached the emulator was released, or dropped
    // by its loss or its full queue.
    let dropped = u(&d0["dropped_loss"]) + u(&d0["dropped_queue"]) + u(&d0["dropped_aqm"]);
    let arrived = u(&d0["packets"]) + dropped;
    let sent = u(&q["datagrams_tx"]);
    // The emulator counts every packet of the test's direction: besides
    // QUIC's, control's (its TCP connection's ~30 packets over a 3.5 s
    // test, its UDP hellos) and the CONNECTION_CLOSE sent after the
    // report.
    assert!(
        arrived >= sent && arrived - sent <= 64 + sent / 100,
        "the client sent {sent} datagrams, {arrived} reached the emulator: {d0}"
    );
    assert!(
        u(&d0["dropped_loss"]) > 0,
        "0.2% of {arrived} packets: {d0}"
    );
    // QUIC declares a dropped packet lost once a later one is
    // acknowledged; one dropped at the very end may still be in doubt. A
    // spurious loss (a late acknowledgement) would count more than dropped.
    let lost = u(&q["packets_lost"]);
    assert!(
        lost <= dropped + 2 && lost + 4 >= dropped,
        "QUIC lost {lost}, the emulator dropped {dropped}: {d0}"
    );
}

/// Through a 10 ms lab, what each transport pays in round trips: a
/// request on an open connection takes one over QUIC and over TLS over
/// TCP alike; a new connection with its request takes two over QUIC (its
/// handshake, then the request) and three over TLS over TCP (TCP's, TLS's,
/// the request's); with 0-RTT the request rides the resumed handshake and
/// takes one; a connection alone takes one over QUIC and two over TLS
/// over TCP. The twin runs right after each on the same path.
#[test]
fn through_the_lab_quic_saves_round_trips_per_connection() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the lab needs root (CI runs as root)");
        return;
    }
    let _turn = alone();
    let rtt = 10e3; // µs
    let (lab, _) = Lab::up("quicrt", "--rtt 10ms --rate 100mbit --no-calibrate");
    let run = |tag: &str, args: &str| {
        let r = run_json(
            &format!("{}-{tag}.json", lab.name),
            &format!("{args} --lab {} -d 1.5 --warmup 0.5", lab.name),
            LIMIT,
        );
        let p50 = |v: &serde_json::Value| f(&v["latency_us"]["p50"]) / rtt;
        let (q, t) = (p50(&r["summary"]), p50(&r["baseline"]));
        assert!(
            u(&r["summary"]["transactions"]) >= 20 && u(&r["baseline"]["transactions"]) >= 20,
            "{tag}: {} / {}",
            r["summary"],
            r["baseline"]
        );
        (q, t, r)
    };
    let (q, t, _) = run("rr", "rr --transport quic");
    assert!((1.0..1.6).contains(&q), "quic-rr p50 {q:.2} round trips");
    assert!(
        (1.0..1.6).contains(&t),
        "rr over TLS p50 {t:.2} round trips"
    );
    let (q, t, _) = run("crr", "crr --transport quic");
    assert!((2.0..2.6).contains(&q), "quic-crr p50 {q:.2} round trips");
    assert!(
        (3.0..3.6).contains(&t),
        "crr over TLS p50 {t:.2} round trips"
    );
    let (q, t, r) = run("crr0", "crr --transport quic --resume on");
    assert!(
        (1.0..1.6).contains(&q),
        "quic-crr with 0-RTT p50 {q:.2} round trips"
    );
    // TLS over TCP resumes without early data: still three.
    assert!(t >= 3.0, "crr over TLS, resumed, p50 {t:.2} round trips");
    let c = &r["iterations"][0]["counters"]["client"];
    assert_eq!(u(&c["tls_resumed"]), u(&c["tls_handshakes"]), "{c}");
    assert!(
        u(&quic(&r, "client")["zero_rtt"]) > 0,
        "{}",
        quic(&r, "client")
    );
    // tls-handshake is crr's pattern: two round trips against three.
    let (q, t, _) = run("hs", "tls-handshake --transport quic");
    assert!(
        (2.0..2.6).contains(&q),
        "quic-handshake p50 {q:.2} round trips"
    );
    assert!(t >= 3.0, "tls-handshake p50 {t:.2} round trips");
    // A connection alone: QUIC's handshake is one round trip, TCP's and
    // TLS's two.
    let (q, t, _) = run("conn", "conn --transport quic");
    assert!((1.0..1.6).contains(&q), "quic-conn p50 {q:.2} round trips");
    assert!(t >= 2.0, "conn over TLS p50 {t:.2} round trips");
}

/// A verifier that accepts the agent's generated certificate, as quinn's
/// perf client does (`SkipServerVerification`): the test is of the perf
/// protocol and QUIC, not of the certificate.
#[derive(Debug)]
struct AnyCert(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// quinn's own endpoint (its tokio driver and quinn-udp socket layer, not
/// linerate's) as a perf client of `serve --quic-perf`: a download with an
/// upload on a bidirectional stream, and a request on a unidirectional
/// stream answered on one the server opens, each response exactly the
/// size asked. (bench/quinn_perf.sh builds quinn's `perf` tool itself,
/// for the same check by hand and for the benchmarks.)
#[test]
fn a_quinn_perf_client_is_served_by_the_agents_quic_perf_server() {
    let (mut agent, lines, addr) = quic_perf_agent();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(async move {
        let talk = async move {
            let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let mut crypto = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(std::sync::Arc::new(AnyCert(provider)))
                .with_no_client_auth();
            crypto.alpn_protocols = vec![b"perf".to_vec()];
            let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap();
            let cfg = quinn::ClientConfig::new(std::sync::Arc::new(quic));
            let ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            let conn = ep.connect_with(cfg, addr, "localhost")?.await?;
            // Download 8 MiB after uploading 1 MiB, on one bidirectional stream.
            let (mut send, mut recv) = conn.open_bi().await?;
            send.write_all(&(8u64 << 20).to_be_bytes()).await?;
            send.write_all(&vec![7u8; 1 << 20]).await?;
            send.finish()?;
            let down = recv.read_to_end(usize::MAX).await?;
            // 2 MiB asked on a unidirectional stream, sent back on another.
            let mut uni = conn.open_uni().await?;
            uni.write_all(&(2u64 << 20).to_be_bytes()).await?;
            uni.finish()?;
            let mut back = conn.accept_uni().await?;
            let down_uni = back.read_to_end(usize::MAX).await?;
            conn.close(0u32.into(), b"done");
            ep.wait_idle().await;
            Ok::<_, Box<dyn std::error::Error>>((down.len(), down_uni.len()))
        };
        // Bounded: a server that never answers fails the test, not hangs it.
        tokio::time::timeout(Duration::from_secs(30), talk)
            .await
            .map_err(|_| "no answer in 30 s")?
    });
    agent.kill().unwrap();
    agent.wait().unwrap();
    drop(lines);
    let (down, down_uni) = result.unwrap();
    assert_eq!(down, 8 << 20);
    assert_eq!(down_uni, 2 << 20);
}
