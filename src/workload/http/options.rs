//! http's options and spec section: which server (`--http-url`, or one
//! this run starts) and which HTTP (`--http-version`). The request and the
//! object are the common `--request` and `--response` sizes, the
//! connections `--flows`, the requests in flight on each `--outstanding`
//! (HTTP/2 streams), so a sweep over them reads as it does for rr.

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::model::error::Invalid;
use crate::model::kind::{KindFacts, Section};
use crate::model::options::{KindOptions, OwnSection, TestOptions};

/// The spec's section (`spec.own`) that holds `HttpSpec`.
pub const SECTION: &str = "http";
/// The iteration's and summary's section that holds `HttpFigures`.
pub const FIGURES: &str = "http_figures";

// Its flags and study keys join `TestOptions` (`model::options::own`).
inventory::submit!(OwnSection::of::<HttpOptions>());

/// Which HTTP the client speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum HttpVersion {
    /// HTTP/1.1: one request at a time on a connection (no pipelining, as
    /// browsers and wrk).
    #[value(name = "1.1")]
    #[serde(rename = "1.1")]
    H1,
    /// HTTP/2: `--outstanding` streams at once on each connection (h2load's
    /// -m); over TLS by ALPN, in clear with prior knowledge (h2c).
    #[default]
    #[value(name = "2")]
    #[serde(rename = "2")]
    H2,
}

impl HttpVersion {
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::H1 => "HTTP/1.1",
            HttpVersion::H2 => "HTTP/2",
        }
    }

    /// The ALPN name TLS offers for it.
    pub fn alpn(self) -> &'static [u8] {
        match self {
            HttpVersion::H1 => b"http/1.1",
            HttpVersion::H2 => b"h2",
        }
    }
}

/// What each request does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HttpMethod {
    /// GET the URL.
    #[default]
    Get,
    /// POST a body of `--request` bytes to it.
    Post,
}

/// The spec's `http` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpSpec {
    /// What every request asks for; None: the server this run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub version: HttpVersion,
    #[serde(default)]
    pub method: HttpMethod,
    /// The client's threads: `--workers` when given, else one (h2load's
    /// default). A load generator on the server's host takes the server's
    /// CPU: on 2 cores one thread drove nginx 5-10% harder than two
    /// (bench/http.sh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
}

impl HttpSpec {
    /// A spec's http section.
    pub fn of(spec: &crate::model::spec::TestSpec) -> Result<HttpSpec, String> {
        spec.own.need(SECTION, "http needs its section")
    }

    pub fn validate(&self) -> Result<(), Invalid> {
        if let Some(u) = &self.url {
            let parsed: hyper::Uri = u
                .parse()
                .map_err(|e| format!("--http-url {u}: not a URL ({e})"))?;
            if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
                return Err(format!(
                    "--http-url {u}: an http:// or https:// URL with a host (http://HOST:PORT/PATH)"
                )
                .into());
            }
        }
        Ok(())
    }

    /// Whether its URL asks for TLS.
    pub fn https(&self) -> bool {
        self.url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
    }
}

/// Flattened into `TestOptions` (keys and flags as written here).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[command(next_help_heading = "HTTP (http)")]
pub struct HttpOptions {
    /// http: the URL every request asks for (http:// or https://, any HTTP/1.1 or HTTP/2 server: nginx, a CDN's edge) [default: a server this run starts on loopback, or in a lab's server namespace, answering each request with --response bytes].
    #[arg(long, value_name = "URL")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_url: Option<String>,
    /// http: 1.1 (one request at a time per connection) or 2 (--outstanding streams per connection) [default: 2].
    #[arg(long, value_enum, value_name = "VERSION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_version: Option<HttpVersion>,
    /// http: GET the URL, or POST --request bytes to it [default: get].
    #[arg(long, value_enum, value_name = "METHOD")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_method: Option<HttpMethod>,
}

impl KindOptions for HttpOptions {
    const KEY: &'static str = SECTION;
    type Spec = HttpSpec;

    fn spec(&self, all: &TestOptions, facts: &KindFacts) -> Result<Option<HttpSpec>, Invalid> {
        if facts.section != Section::Own(SECTION) {
            if *self != HttpOptions::default() {
                return Err("--http-url, --http-version and --http-method apply to http".into());
            }
            return Ok(None);
        }
        let s = HttpSpec {
            url: self.http_url.clone(),
            version: self.http_version.unwrap_or_default(),
            method: self.http_method.unwrap_or_default(),
            threads: all.run.workers,
        };
        s.validate()?;
        if s.method == HttpMethod::Get && all.exchange.request.is_some() {
            return Err("--request is a POST's body: add --http-method post".into());
        }
        if s.url.is_some() && all.exchange.response.is_some() {
            return Err(
                "--response sizes the object of the server this run starts; with --http-url the server's object is what it is"
                    .into(),
            );
        }
        Ok(Some(s))
    }

    fn flags(s: &HttpSpec) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(u) = &s.url {
            a.push(format!("--http-url {u}"));
        }
        if s.version != HttpVersion::default() {
            a.push("--http-version 1.1".into());
        }
        if s.method == HttpMethod::Post {
            a.push("--http-method post".into());
        }
        a
    }
}

/// What a run reports beyond the common figures (`summary.http_figures`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpFigures {
    /// What the connections speak: "HTTP/2", "HTTP/1.1".
    pub protocol: String,
    /// The server's `Server` header, when it sends one ("nginx/1.22.1").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The URL asked.
    pub url: String,
    /// Connections, and requests in flight on each.
    pub connections: u32,
    pub streams: u32,
    /// Responses in the window with a status other than 2xx (counted, not
    /// in the rate), and requests that failed (a reset stream, a closed
    /// connection).
    pub non_2xx: u64,
    pub failed: u64,
    /// Response body bytes and request body bytes in the window.
    pub bytes_down: u64,
    pub bytes_up: u64,
    /// Connections opened again after the server closed one (its
    /// keep-alive limit, a GOAWAY), over the whole run.
    #[serde(default)]
    pub reopened: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::options::read_toml as read;

    #[test]
    fn its_keys_and_flags_reach_it_and_other_kinds_refuse_them() {
        let o = read("flows = 4\nhttp_version = \"1.1\"\nhttp_url = \"http://127.0.0.1:8080/x\"\n")
            .unwrap();
        let h: HttpOptions = o.own.get();
        assert_eq!(h.http_version, Some(HttpVersion::H1));
        let facts = |s| KindFacts {
            section: s,
            ..KindFacts::NONE
        };
        let spec = o.build(&facts(Section::Own(SECTION))).unwrap();
        let s = HttpSpec::of(&spec).unwrap();
        assert_eq!(s.url.as_deref(), Some("http://127.0.0.1:8080/x"));
        assert_eq!(
            HttpOptions::flags(&s),
            ["--http-url http://127.0.0.1:8080/x", "--http-version 1.1"]
        );
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["http"]["version"], "1.1");
        let e = o.build(&facts(Section::None)).unwrap_err().to_string();
        assert!(e.contains("apply to http"), "{e}");
        for k in ["http_url", "http_version", "http_method"] {
            assert!(crate::model::options::is_axis(k), "{k}");
        }
    }

    #[test]
    fn a_url_must_be_http_or_https_with_a_host() {
        for bad in ["ftp://x/", "127.0.0.1:80", "http://"] {
            let s = HttpSpec {
                url: Some(bad.into()),
                ..Default::default()
            };
            assert!(s.validate().is_err(), "{bad}");
        }
        let s = HttpSpec {
            url: Some("https://[::1]:8443/obj".into()),
            ..Default::default()
        };
        s.validate().unwrap();
        assert!(s.https());
    }
}
