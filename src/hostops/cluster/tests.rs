use super::ssh::{remote_dir, serve_prefix, sh_quote};
use super::*;

fn host(bin: &str) -> Host {
    let f = HostsFile::parse(&format!(
        "[[host]]\nname = \"a\"\naddress = \"198.18.1.1\"\nremote_binary = \"{bin}\"\n"
    ))
    .unwrap();
    f.hosts(Path::new("/")).unwrap().remove(0)
}

#[test]
fn quoting_survives_a_shell() {
    for s in ["plain", "with space", "it's", "$HOME `x`", "", "a'b'c"] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", sh_quote(s)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), s);
    }
    // Nested: what ssh hands the remote shell.
    let script = format!("printf %s {}", sh_quote("it's $x"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("sh -c {}", sh_quote(&script)))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "it's $x");
}

#[test]
fn remote_paths_are_checked_and_never_looked_up_in_path() {
    assert_eq!(
        remote_binary(&host(".cache/linerate/linerate")).unwrap(),
        "./.cache/linerate/linerate"
    );
    assert_eq!(remote_binary(&host("~/bin/lr")).unwrap(), "./bin/lr");
    assert_eq!(remote_binary(&host("linerate")).unwrap(), "./linerate");
    assert_eq!(
        remote_binary(&host("/opt/lr/linerate")).unwrap(),
        "/opt/lr/linerate"
    );
    for bad in ["a b", "x;rm", "dir/", "", "$HOME/x"] {
        let e = remote_binary(&host(bad)).unwrap_err().to_string();
        assert!(e.contains("host a"), "{e}");
    }
    assert_eq!(
        remote_dir("./.cache/linerate/linerate"),
        "./.cache/linerate"
    );
    assert_eq!(remote_dir("/linerate"), "/");
    assert_eq!(remote_dir("linerate"), ".");
}

#[test]
fn scp_gets_the_port_as_capital_p_and_ipv6_in_brackets() {
    let l = Login::new(
        "a",
        "root@fd00::1",
        &[
            "-p".into(),
            "2222".into(),
            "-F".into(),
            "cfg".into(),
            "-p22".into(),
        ],
    )
    .unwrap();
    assert_eq!(l.scp_options(), vec!["-P", "2222", "-F", "cfg", "-P22"]);
    assert_eq!(l.scp_dest(), "root@[fd00::1]");
    assert_eq!(Login::new("a", "server", &[]).unwrap().scp_dest(), "server");
    assert!(Login::new("a", "-oProxyCommand=x", &[]).is_err());
}

#[test]
fn the_stop_check_matches_only_the_agent_up_started() {
    let prefix = serve_prefix(
        "./.cache/linerate/linerate",
        "198.18.1.1:7470".parse().unwrap(),
    );
    let check = |cmdline: &str| {
        let script = format!(
            "c={}; case \"$c\" in {}*) echo ours;; *) echo other;; esac",
            sh_quote(cmdline),
            sh_quote(&prefix)
        );
        let o = Command::new("sh").arg("-c").arg(script).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(
        check("./.cache/linerate/linerate serve --listen 198.18.1.1:7470 --token-stdin "),
        "ours"
    );
    assert_eq!(
        check("./.cache/linerate/linerate serve --listen 198.18.1.1:74701 "),
        "other"
    );
    assert_eq!(check("sleep 100 "), "other");
    assert_eq!(check(""), "other");
}

#[test]
fn state_files_are_private_and_tokens_come_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
            &hosts,
            "[[host]]\nname = \"a\"\naddress = \"198.18.1.1\"\n[[host]]\nname = \"b\"\naddress = \"198.18.1.2\"\ntoken_file = \"b.token\"\n",
        )
        .unwrap();
    std::fs::write(dir.path().join("b.token"), "bee\n").unwrap();
    TEST_STATE_HOME.with(|d| *d.borrow_mut() = Some(dir.path().join("state")));
    let cl = load(&hosts).unwrap();
    let (a, b) = (&cl.hosts[0], &cl.hosts[1]);
    assert!(token_for(&hosts, a).is_none());
    let e = agent_token(&hosts, a, None).unwrap_err().to_string();
    assert!(e.contains("host a") && e.contains("cluster up"), "{e}");
    assert_eq!(agent_token(&hosts, a, Some("fall")).unwrap(), "fall");
    assert_eq!(agent_token(&hosts, b, Some("fall")).unwrap(), "bee");
    let mut st = load_state(&hosts).unwrap();
    st.agents.insert(
        "a".into(),
        Started {
            address: a.address,
            port: a.port,
            ssh: a.ssh.clone(),
            ssh_options: vec![],
            remote_binary: "./x".into(),
            pid: 1,
            token: "tok".into(),
            software: software(),
            started_at: String::new(),
        },
    );
    save_state(&hosts, &st).unwrap();
    let p = state_path(&hosts).unwrap();
    assert!(p.starts_with(dir.path().join("state/linerate/clusters")));
    let name = p.file_stem().unwrap().to_str().unwrap();
    assert_eq!(name.len(), 16);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&p), 0o600);
    assert_eq!(mode(p.parent().unwrap()), 0o700);
    assert_eq!(agent_token(&hosts, a, Some("fall")).unwrap(), "tok");
    assert_eq!(load_state(&hosts).unwrap(), st);
    // Moved to another port: the recorded token is not for it.
    let mut moved = a.clone();
    moved.port += 1;
    assert!(token_for(&hosts, &moved).is_none());
    st.agents.clear();
    save_state(&hosts, &st).unwrap();
    assert!(!p.exists());
}

#[test]
fn offsets_read_in_a_fitting_unit() {
    assert_eq!(offset_text(1_234_000, 21_000), "+1.234 ms ± 0.021 ms");
    assert_eq!(offset_text(-5_000, 1_000), "-0.005 ms ± 0.001 ms");
    assert_eq!(offset_text(-400, 12_000), "+0.000 ms ± 0.012 ms");
    assert_eq!(
        offset_text(86_400_000_000_000, 50_000),
        "+86400.000 s ± 0.050 ms"
    );
}
