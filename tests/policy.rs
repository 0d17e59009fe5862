//! Policy: the shared URL and path tables, defaults and serde shape, validation, intersection cases,
//! and property tests that intersection never widens what the tenant allows.

use proptest::prelude::*;
use relay_core::policy::{
    check_path, check_url, intersect, Access, FsOverride, FsPolicy, Limits, LimitsOverride, NetworkOverride,
    NetworkPolicy, Policy, PolicyOverride, Verdict,
};
use serde_json::{json, Value};

/// Runs a shared table (`tests/*_cases.json`, also run by miniflare-tests/policy-tables.test.mjs
/// against the wasm build): each case's policy is `basePolicy` with the case's `override_field`
/// fields replacing the base's, `judge` decides it (Ok: allowed, with what an allowed case must
/// equal; Err: the reason), and the table must have `min_cases` cases, each with a note.
fn run_table(
    json: &str,
    override_field: &str,
    min_cases: usize,
    judge: impl Fn(Value, &Value) -> Result<Option<String>, String>,
) {
    let table: Value = serde_json::from_str(json).unwrap();
    let cases = table["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let mut policy = table["basePolicy"].clone();
        for (field, value) in case.get(override_field).and_then(Value::as_object).into_iter().flatten() {
            policy[field] = value.clone();
        }
        let got = judge(policy, case);
        let ok = match (case["verdict"].as_str().unwrap(), &got) {
            ("allow", Ok(value)) => value.is_none() || value.as_deref() == Some(expected_value(case)),
            ("deny", Err(reason)) => case
                .get("reasonContains")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .all(|needle| reason.contains(needle.as_str().unwrap())),
            _ => false,
        };
        if !ok {
            failures.push(format!("got {got:?}, want {case}"));
        }
        if case["note"].as_str().is_none_or(str::is_empty) {
            failures.push(format!("no note says what this case covers: {case}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases.len() >= min_cases, "{} cases, want at least {min_cases}", cases.len());
}

/// What an allowed path case must come back as: `normalized` if given, else the path as written.
fn expected_value(case: &Value) -> &str {
    case.get("normalized").unwrap_or(&case["path"]).as_str().unwrap_or_default()
}

#[test]
fn the_shared_url_table_holds() {
    run_table(include_str!("policy_cases.json"), "network", 150, |network, case| {
        let policy: NetworkPolicy = serde_json::from_value(network).unwrap();
        match check_url(&policy, case["url"].as_str().unwrap()) {
            Verdict::Allow => Ok(None),
            Verdict::Deny { reason } => Err(reason),
        }
    });
}

#[test]
fn the_shared_path_table_holds() {
    run_table(include_str!("fs_path_cases.json"), "filesystem", 60, |filesystem, case| {
        let policy: FsPolicy = serde_json::from_value(filesystem).unwrap();
        let access = match case["access"].as_str().unwrap() {
            "read" => Access::Read,
            "write" => Access::Write,
            other => panic!("access {other:?} is neither read nor write"),
        };
        check_path(&policy, case["path"].as_str().unwrap(), access).map(Some)
    });
}

#[test]
fn a_denial_says_how_to_allow_the_host() {
    let policy = NetworkPolicy { allowed_domains: vec!["example.com".into()], ..Default::default() };
    let Verdict::Deny { reason } = check_url(&policy, "https://evil.com/x") else {
        panic!("evil.com is not listed");
    };
    assert_eq!(
        reason,
        "host \"evil.com\" is not in network.allowedDomains [\"example.com\"]. To allow it, the tenant's \
         admin can add \"evil.com\" (or a parent domain) to the tenant's defaults.policy.network.allowedDomains \
         (PATCH /admin/tenants/<tenant id>, README \"Tenants and their defaults\"); a call's own policy can only \
         narrow the tenant's, never widen it"
    );
}

#[test]
fn defaults_are_safe_with_no_domains_allowed() {
    assert_eq!(
        serde_json::to_value(Policy::default()).unwrap(),
        json!({
            "network": { "allowedDomains": [], "deniedDomains": [], "denyIpLiterals": true,
                         "blockPrivateRanges": true, "maxBodyBytes": 5242880, "maxRedirects": 5 },
            "filesystem": { "readonly": ["/"], "writable": ["/tmp", "/out"] },
            "limits": { "timeoutMs": 60000, "memMb": 256, "stdoutBytes": 1048576 }
        })
    );
    let Verdict::Deny { reason } = check_url(&Policy::default().network, "https://example.com/") else {
        panic!("the default policy must deny all network access");
    };
    assert!(reason.contains("allowedDomains is empty"), "{reason}");
}

#[test]
fn a_partial_policy_fills_in_defaults() {
    let policy: Policy =
        serde_json::from_value(json!({ "network": { "allowedDomains": ["x.org"] }, "limits": { "memMb": 64 } }))
            .unwrap();
    assert_eq!(policy.network.allowed_domains, ["x.org"]);
    assert!(policy.network.deny_ip_literals);
    assert_eq!((policy.limits.mem_mb, policy.limits.timeout_ms), (64, 60_000));
    assert_eq!(policy.filesystem.writable, ["/tmp", "/out"]);
}

#[test]
fn overrides_refuse_unknown_fields() {
    for bad in [
        json!({ "network": { "allowDomains": ["x.com"] } }),
        json!({ "limits": { "timeout": 1 } }),
        json!({ "filesystem": { "writeable": [] } }),
        json!({ "netwerk": {} }),
    ] {
        let err = serde_json::from_value::<PolicyOverride>(bad.clone()).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{bad}: {err}");
    }
    let ok: PolicyOverride = serde_json::from_value(json!({ "limits": { "timeoutMs": 5 } })).unwrap();
    assert_eq!(ok.limits.unwrap().timeout_ms, Some(5));
}

#[test]
fn validate_names_entries_that_can_never_match() {
    let with_domains = |list: &[&str]| {
        let mut policy = Policy::default();
        policy.network.denied_domains = list.iter().map(|s| s.to_string()).collect();
        policy.validate()
    };
    for bad in [
        "https://x.com",
        "x.com/path",
        "api.*.com",
        "*",
        "*.",
        "",
        "a..b",
        "*.127.0.0.1",
        "::1",
        "x.com:",
        "x.com:0",
        "x.com:65536",
        "x.com:https",
        "x.com:+443",
        "x.com:443:443",
        "[::1]:",
        "[::1]x",
        ":443",
    ] {
        let err = with_domains(&[bad]).unwrap_err();
        assert!(err.starts_with(&format!("domain pattern {bad:?}")), "{bad:?}: {err}");
    }
    let good = [
        "example.com",
        "*.example.com",
        "EXAMPLE.com.",
        "bücher.de",
        "93.184.216.34",
        "[::1]",
        "localhost",
        "x.com:443",
        "*.x.com:8443",
        "x.com.:1",
        "[::1]:65535",
        "10.0.0.1:8080",
    ];
    assert_eq!(with_domains(&good), Ok(()));
    for bad in ["tmp", "/tmp/../etc", "/a//b", "/./x", ""] {
        let mut policy = Policy::default();
        policy.filesystem.writable = vec![bad.into()];
        let err = policy.validate().unwrap_err();
        assert!(err.contains(&format!("{bad:?}")), "{bad:?}: {err}");
    }
}

// ---- intersection ---------------------------------------------------------------------------

fn tenant() -> Policy {
    let mut policy = Policy::default();
    policy.network.allowed_domains = vec!["*.github.com".into(), "example.com".into()];
    policy.network.denied_domains = vec!["evil.example.com".into()];
    policy
}

fn with_network(network: NetworkOverride) -> PolicyOverride {
    PolicyOverride { network: Some(network), ..Default::default() }
}

fn allowed_after(client: &[&str]) -> Vec<String> {
    let list = client.iter().map(|s| s.to_string()).collect();
    let client = with_network(NetworkOverride { allowed_domains: Some(list), ..Default::default() });
    intersect(&tenant(), Some(&client)).network.allowed_domains
}

#[test]
fn no_override_means_the_tenant_policy() {
    assert_eq!(intersect(&tenant(), None), tenant());
    assert_eq!(intersect(&tenant(), Some(&PolicyOverride::default())), tenant());
}

#[test]
fn a_client_can_narrow_the_allowlist_but_not_widen_it() {
    // The server allows *.github.com, the client restricts it to api.github.com.
    assert_eq!(allowed_after(&["api.github.com"]), ["api.github.com"]);
    assert_eq!(allowed_after(&["*.api.github.com", "API.example.com"]), ["*.api.github.com", "API.example.com"]);
    assert_eq!(allowed_after(&["*.example.com"]), ["*.example.com"]);
    assert!(allowed_after(&["evil.com", "github.com", "com", "*.com", "notexample.com"]).is_empty());
    assert_eq!(allowed_after(&["api.github.com", "api.github.com"]), ["api.github.com"]);
    assert!(allowed_after(&[]).is_empty(), "an empty client list turns the network off");
}

#[test]
fn a_client_cannot_open_a_port_the_tenant_did_not() {
    // The tenant's entries name no port: only the schemes' default ports.
    assert!(allowed_after(&["example.com:8443", "api.github.com:443"]).is_empty());
    let mut ported = tenant();
    ported.network.allowed_domains = vec!["example.com:8443".into()];
    let client = |list: &[&str]| {
        let allowed = Some(list.iter().map(|s| s.to_string()).collect());
        intersect(&ported, Some(&with_network(NetworkOverride { allowed_domains: allowed, ..Default::default() })))
            .network
            .allowed_domains
    };
    assert_eq!(client(&["api.example.com:8443", "example.com", "example.com:8444"]), ["api.example.com:8443"]);
}

#[test]
fn deny_always_wins() {
    // The server denies evil.com, the client cannot undo it.
    let client = with_network(NetworkOverride {
        allowed_domains: Some(vec!["evil.example.com".into()]),
        denied_domains: Some(vec!["api.github.com".into()]),
        ..Default::default()
    });
    let result = intersect(&tenant(), Some(&client)).network;
    assert_eq!(result.denied_domains, ["evil.example.com", "api.github.com"]);
    assert!(matches!(check_url(&result, "https://evil.example.com/"), Verdict::Deny { .. }));
    let widened = intersect(
        &tenant(),
        Some(&with_network(NetworkOverride {
            allowed_domains: Some(vec!["api.github.com".into()]),
            ..Default::default()
        })),
    );
    assert!(matches!(check_url(&widened.network, "https://api.github.com/"), Verdict::Allow));
    let narrowed = intersect(&tenant(), Some(&client));
    assert!(matches!(check_url(&narrowed.network, "https://api.github.com/"), Verdict::Deny { .. }));
}

#[test]
fn safety_switches_can_only_be_turned_on() {
    let mut lax = tenant();
    lax.network.deny_ip_literals = false;
    lax.network.block_private_ranges = false;
    let off = with_network(NetworkOverride {
        deny_ip_literals: Some(false),
        block_private_ranges: Some(false),
        ..Default::default()
    });
    let on = with_network(NetworkOverride {
        deny_ip_literals: Some(true),
        block_private_ranges: Some(true),
        ..Default::default()
    });
    let strict = intersect(&tenant(), Some(&off)).network;
    assert!(strict.deny_ip_literals && strict.block_private_ranges);
    let tightened = intersect(&lax, Some(&on)).network;
    assert!(tightened.deny_ip_literals && tightened.block_private_ranges);
    let unchanged = intersect(&lax, Some(&off)).network;
    assert!(!unchanged.deny_ip_literals && !unchanged.block_private_ranges);
}

#[test]
fn limits_take_the_minimum() {
    // The server allows 60 s, the client asks for 30 s (and for more memory).
    let client = PolicyOverride {
        limits: Some(LimitsOverride { timeout_ms: Some(30_000), mem_mb: Some(4096), stdout_bytes: None }),
        network: Some(NetworkOverride { max_body_bytes: Some(1), max_redirects: Some(50), ..Default::default() }),
        ..Default::default()
    };
    let result = intersect(&tenant(), Some(&client));
    assert_eq!((result.limits.timeout_ms, result.limits.mem_mb, result.limits.stdout_bytes), (30_000, 256, 1_048_576));
    assert_eq!((result.network.max_body_bytes, result.network.max_redirects), (1, 5));
}

#[test]
fn writable_paths_narrow_to_tenant_writable_ones_and_readonly_grows() {
    let client = PolicyOverride {
        filesystem: Some(FsOverride {
            writable: Some(
                ["/tmp/work", "/out/", "/", "/etc", "/tmpx", "/tmp/../etc", "tmp", "/tmp//x"]
                    .map(String::from)
                    .to_vec(),
            ),
            readonly: Some(vec!["/host".into()]),
        }),
        ..Default::default()
    };
    let fs = intersect(&tenant(), Some(&client)).filesystem;
    assert_eq!(fs.writable, ["/tmp/work", "/out/"]);
    assert_eq!(fs.readonly, ["/", "/host"]);
}

// ---- properties -----------------------------------------------------------------------------

fn domain() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "example", "xn--bcher-kva"]), 1..=3)
        .prop_map(|labels| labels.join("."))
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => domain(),
        2 => domain().prop_map(|d| format!("*.{d}")),
        1 => (domain(), port_suffix()).prop_map(|(d, port)| format!("{d}{port}")),
        1 => prop::sample::select(vec!["127.0.0.1", "10.0.0.1", "93.184.216.34", "[::1]", "localhost", "bad pattern/"]).prop_map(String::from),
    ]
}

fn patterns(max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(pattern(), 0..max)
}

fn url() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (prop::collection::vec(prop::sample::select(vec!["a", "b", "example"]), 1..=4), port_suffix())
            .prop_map(|(labels, port)| format!("https://{}{port}/", labels.join("."))),
        1 => prop::sample::select(vec![
            "http://127.0.0.1/", "http://2130706433/", "http://10.0.0.1/", "http://93.184.216.34/",
            "http://[::1]/", "http://[::ffff:10.0.0.1]/", "http://localhost/", "http://a.localhost/",
            "https://bücher.de/", "ftp://example.com/",
        ])
        .prop_map(String::from),
    ]
}

/// A port suffix: mostly none, else a default, a common or any port.
fn port_suffix() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(String::new()),
        1 => prop::sample::select(vec![":80", ":443", ":8443"]).prop_map(String::from),
        1 => (1u16..).prop_map(|port| format!(":{port}")),
    ]
}

fn fs_path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["tmp", "out", "a", "..", "."]), 0..3)
        .prop_map(|segments| format!("/{}", segments.join("/")))
}

prop_compose! {
    fn tenant_policy()(
        allowed in patterns(5), denied in patterns(3), ip in any::<bool>(), private in any::<bool>(),
        body in any::<u64>(), redirects in any::<u32>(), writable in prop::collection::vec(fs_path(), 0..3),
        timeout in any::<u64>(), mem in any::<u32>(), stdout in any::<u64>(),
    ) -> Policy {
        Policy {
            network: NetworkPolicy {
                allowed_domains: allowed, denied_domains: denied, deny_ip_literals: ip,
                block_private_ranges: private, max_body_bytes: body, max_redirects: redirects,
            },
            filesystem: FsPolicy { writable, ..Default::default() },
            limits: Limits { timeout_ms: timeout, mem_mb: mem, stdout_bytes: stdout },
            mcps: None,
        }
    }
}

/// Client entries mostly derived from the tenant's (narrower, wider, apex or wildcard), so that
/// the interesting part of narrowing is exercised, not just unrelated domains.
fn near(tenant: Vec<String>) -> BoxedStrategy<String> {
    if tenant.is_empty() {
        return pattern().boxed();
    }
    let label = prop::option::of(prop::sample::select(vec!["a", "b", "example"]));
    let derived = (prop::sample::select(tenant), label, any::<bool>()).prop_map(|(entry, label, wildcard)| {
        let base = entry.trim_start_matches("*.");
        let host = label.map_or(base.to_string(), |label| format!("{label}.{base}"));
        if wildcard {
            format!("*.{host}")
        } else {
            host
        }
    });
    prop_oneof![3 => derived, 1 => pattern()].boxed()
}

/// A tenant, a client override and URLs to try; entries and URLs near the tenant's entries.
fn scenario() -> impl Strategy<Value = (Policy, PolicyOverride, Vec<String>)> {
    tenant_policy().prop_flat_map(|tenant| {
        let allowed = tenant.network.allowed_domains.clone();
        let client = client_override(near(allowed.clone()));
        let near_url = near(allowed).prop_map(|host| format!("https://{}/", host.trim_start_matches("*.")));
        let urls = prop::collection::vec(prop_oneof![url(), near_url], 1..8);
        (Just(tenant), client, urls)
    })
}

prop_compose! {
    fn client_override(near: BoxedStrategy<String>)(
        allowed in prop::option::of(prop::collection::vec(near, 0..5)), denied in prop::option::of(patterns(3)),
        ip in prop::option::of(any::<bool>()), private in prop::option::of(any::<bool>()),
        body in prop::option::of(any::<u64>()), redirects in prop::option::of(any::<u32>()),
        writable in prop::option::of(prop::collection::vec(fs_path(), 0..4)),
        timeout in prop::option::of(any::<u64>()), mem in prop::option::of(any::<u32>()),
        stdout in prop::option::of(any::<u64>()),
    ) -> PolicyOverride {
        PolicyOverride {
            network: Some(NetworkOverride {
                allowed_domains: allowed, denied_domains: denied, deny_ip_literals: ip,
                block_private_ranges: private, max_body_bytes: body, max_redirects: redirects,
            }),
            filesystem: Some(FsOverride { readonly: None, writable }),
            limits: Some(LimitsOverride { timeout_ms: timeout, mem_mb: mem, stdout_bytes: stdout }),
            mcps: None,
        }
    }
}

fn within(path: &str, root: &str) -> bool {
    let segments = |p: &str| p.split('/').filter(|s| !s.is_empty()).map(String::from).collect::<Vec<_>>();
    let (path, root) = (segments(path), segments(root));
    path.iter().all(|s| s != ".." && s != ".") && root.iter().all(|s| s != ".." && s != ".") && path.starts_with(&root)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn intersect_never_widens((tenant, client, urls) in scenario()) {
        let result = intersect(&tenant, Some(&client));
        for url in &urls {
            if check_url(&result.network, url) == Verdict::Allow {
                prop_assert_eq!(check_url(&tenant.network, url), Verdict::Allow, "{} widened", url);
            }
        }
        let (n, t) = (&result.network, &tenant.network);
        prop_assert!(n.deny_ip_literals >= t.deny_ip_literals && n.block_private_ranges >= t.block_private_ranges);
        prop_assert!(n.max_body_bytes <= t.max_body_bytes && n.max_redirects <= t.max_redirects);
        prop_assert!(t.denied_domains.iter().all(|d| n.denied_domains.contains(d)));
        let (l, tl) = (&result.limits, &tenant.limits);
        prop_assert!(l.timeout_ms <= tl.timeout_ms && l.mem_mb <= tl.mem_mb && l.stdout_bytes <= tl.stdout_bytes);
        for path in &result.filesystem.writable {
            prop_assert!(tenant.filesystem.writable.iter().any(|root| within(path, root) || path == root), "{} widened", path);
        }
    }

    /// An entry without a port admits a host at the scheme's default port only; an entry with one
    /// at that port only, under either scheme; deniedDomains without a port deny every port.
    #[test]
    fn ports_are_admitted_only_as_named(
        host in domain(), entry_port in prop::option::of(1u16..), url_port in 1u16.., https in any::<bool>(),
        denied in any::<bool>(),
    ) {
        let entry = entry_port.map_or(host.clone(), |port| format!("{host}:{port}"));
        let scheme = if https { "https" } else { "http" };
        let url = format!("{scheme}://{host}:{url_port}/");
        let default = if https { 443 } else { 80 };
        let mut policy = NetworkPolicy { allowed_domains: vec![host.clone(), format!("{host}:{url_port}")], ..Default::default() };
        if denied {
            policy.denied_domains = vec![entry.clone()];
            let denies = entry_port.is_none_or(|port| port == url_port);
            prop_assert_eq!(check_url(&policy, &url) != Verdict::Allow, denies, "{} denied by {}", url, entry);
        } else {
            policy.allowed_domains = vec![entry.clone()];
            let admits = entry_port.map_or(url_port == default, |port| port == url_port);
            prop_assert_eq!(check_url(&policy, &url) == Verdict::Allow, admits, "{} allowed by {}", url, entry);
        }
    }

    /// Entries written before ports counted (a host alone, which now admits only the default
    /// port): a URL at another port is refused with the very entry that admits it, and
    /// listing that entry does.
    #[test]
    fn a_refused_port_names_the_entry_that_admits_it(
        host in prop_oneof![3 => domain(), 1 => Just("10.0.0.5".to_owned()), 1 => Just("[2001:db8::1]".to_owned())],
        port in prop::option::of(1u16..), https in any::<bool>(),
    ) {
        let scheme = if https { "https" } else { "http" };
        let url = format!("{scheme}://{host}{}/", port.map(|p| format!(":{p}")).unwrap_or_default());
        let mut policy = NetworkPolicy {
            allowed_domains: vec![host.clone()], deny_ip_literals: false, block_private_ranges: false, ..Default::default()
        };
        let Verdict::Deny { reason } = check_url(&policy, &url) else {
            prop_assert!(port.is_none_or(|p| p == if https { 443 } else { 80 }), "{} admitted by {}", url, host);
            return Ok(());
        };
        let named = reason.split("can add \"").nth(1).and_then(|rest| rest.split('"').next());
        let Some(named) = named else { return Err(TestCaseError::fail(format!("no entry named: {reason}"))) };
        prop_assert_eq!(named, format!("{host}:{}", port.unwrap()), "{}", reason);
        policy.allowed_domains.push(named.to_owned());
        prop_assert_eq!(check_url(&policy, &url), Verdict::Allow, "{} after adding {}", url, named);
    }

    #[test]
    fn check_url_never_panics(url in any::<String>(), policy in tenant_policy()) {
        let _ = check_url(&policy.network, &url);
        let _ = check_url(&policy.network, &format!("http://{url}/"));
    }
}

fn workspace_path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        4 => prop::sample::select(vec!["tmp", "out", "host", "mcps", "a", "..", ".", "", "%2e", "%2F", "x\\y", "é"]).prop_map(String::from),
        1 => any::<String>(),
    ];
    (prop::collection::vec(segment, 0..5), any::<bool>())
        .prop_map(|(segments, slash)| format!("/{}{}", segments.join("/"), if slash { "/" } else { "" }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Whatever a guest writes, an admitted path is clean, inside a workspace root and inside a
    /// policy entry for its access; /mcps is never written.
    #[test]
    fn an_admitted_path_is_clean_and_covered(
        path in prop_oneof![workspace_path(), any::<String>()],
        writable in prop::collection::vec(workspace_path(), 0..3),
        readonly in prop::collection::vec(workspace_path(), 0..3),
        write in any::<bool>(),
    ) {
        let fs = FsPolicy { readonly, writable };
        let access = if write { Access::Write } else { Access::Read };
        if let Ok(normalized) = check_path(&fs, &path, access) {
            let segments: Vec<&str> = normalized.split('/').skip(1).collect();
            prop_assert!(normalized.len() <= 1024 && path.trim_end_matches('/') == normalized.trim_end_matches('/'));
            prop_assert!(segments.iter().all(|s| !s.is_empty() && *s != "." && *s != ".." && s.len() <= 255));
            prop_assert!(!normalized.contains('\\') && !normalized.chars().any(char::is_control));
            prop_assert!(["tmp", "out", "host", "mcps"].contains(&segments[0]), "{} is outside the roots", normalized);
            let entries = if write { fs.writable.clone() } else { [fs.readonly.clone(), fs.writable.clone()].concat() };
            prop_assert!(entries.iter().any(|entry| within(&normalized, entry) || normalized == *entry), "{} is covered by none of {:?}", normalized, entries);
            prop_assert!(!(write && segments[0] == "mcps"), "{} written", normalized);
        }
    }
}
