//! The rules of `POST /egress`: the envelope, the headers guest code may set, every redirect
//! hop, and the metadata the route reports.

use proptest::prelude::*;
use relay_core::egress::{
    ascii_json, body_too_large, cors_safelisted, envelope_limit, guest_headers, guest_may_set, next_hop,
    parse_envelope, prepare, Fetched, Hop, Outbound, ENVELOPE_SLACK,
};
use relay_core::error::ErrorName;
use relay_core::policy::NetworkPolicy;
use serde_json::{json, Value};

fn policy(allowed: &[&str]) -> NetworkPolicy {
    NetworkPolicy { allowed_domains: allowed.iter().map(|d| d.to_string()).collect(), ..NetworkPolicy::default() }
}

fn envelope(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).unwrap()
}

fn get(url: &str) -> Outbound {
    Outbound { url: url.into(), method: "GET".into(), headers: vec![], body: None }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

// ---- the envelope ----

#[test]
fn an_envelope_parses_with_defaults() {
    let out = parse_envelope(&envelope(json!({"url": "https://api.example.com/x"})), 100).unwrap();
    assert_eq!(out, get("https://api.example.com/x"));
    let out = parse_envelope(
        &envelope(json!({"url": "https://a.example/", "method": "post", "headers": [["Content-Type", "text/plain"]], "body": "aGVsbG8="})),
        100,
    )
    .unwrap();
    assert_eq!(out.method, "POST", "method names are upper-cased");
    assert_eq!(out.headers, pairs(&[("Content-Type", "text/plain")]));
    assert_eq!(out.body.as_deref(), Some(&b"hello"[..]));
}

#[test]
fn bad_envelopes_are_validation_errors_that_say_what_is_wrong() {
    let cases = [
        (json!("x"), "expected"),
        (json!({}), "url"),
        (json!({"url": "https://a.example/", "extra": 1}), "extra"),
        (json!({"url": "https://a.example/", "method": "CONNECT"}), "CONNECT"),
        (json!({"url": "https://a.example/", "method": "TRACE"}), "TRACE"),
        (json!({"url": "https://a.example/", "headers": [["only-name"]]}), "tuple"),
        (json!({"url": "https://a.example/", "headers": [["bad name", "v"]]}), "bad name"),
        (json!({"url": "https://a.example/", "headers": [["x-a", "v\r\nx-b: 1"]]}), "CR"),
        (json!({"url": "https://a.example/", "headers": [["x-a", "\u{263a}"]]}), "Latin-1"),
        (json!({"url": "https://a.example/", "method": "POST", "body": "not base64!"}), "base64"),
        (json!({"url": "https://a.example/", "body": "aGk="}), "cannot have a body"),
        (json!({"url": "https://a.example/", "method": "HEAD", "body": "aGk="}), "cannot have a body"),
    ];
    for (value, needle) in cases {
        let refusal = parse_envelope(&envelope(value.clone()), 100).unwrap_err();
        assert_eq!(refusal.name, ErrorName::ValidationError, "{value}");
        assert!(refusal.message.contains(needle), "{value}: {}", refusal.message);
    }
    assert_eq!(parse_envelope(b"{", 100).unwrap_err().name, ErrorName::ValidationError);
}

#[test]
fn a_request_body_over_max_body_bytes_is_denied() {
    let at_cap = envelope(json!({"url": "https://a.example/", "method": "PUT", "body": "YWJj"}));
    assert!(parse_envelope(&at_cap, 3).is_ok());
    let refusal = parse_envelope(&at_cap, 2).unwrap_err();
    assert_eq!(refusal.name, ErrorName::PolicyDenied);
    assert!(refusal.message.contains("network.maxBodyBytes (2 bytes)"), "{}", refusal.message);
}

#[test]
fn the_envelope_limit_fits_the_base64_of_the_largest_body() {
    assert_eq!(envelope_limit(0), ENVELOPE_SLACK);
    assert_eq!(envelope_limit(3), 4 + ENVELOPE_SLACK);
    assert_eq!(envelope_limit(4), 8 + ENVELOPE_SLACK);
    assert_eq!(envelope_limit(u64::MAX), usize::MAX, "saturates");
}

#[test]
fn prepare_checks_the_first_url_and_says_how_to_allow_it() {
    let net = policy(&["example.com"]);
    let ok = prepare(&envelope(json!({"url": "https://api.example.com/v1"})), &net).unwrap();
    assert_eq!(ok.url, "https://api.example.com/v1");
    // A host the tenant's rules refuse says who can change them (a call's policy cannot); a
    // scheme says which ones work.
    let cases = [
        ("https://evil.test/", "defaults.policy.network.allowedDomains (PATCH /admin/tenants/"),
        ("http://127.0.0.1/", "Only the tenant's admin can change this rule (PATCH /admin/tenants/"),
        ("file:///etc/passwd", "only http and https are"),
        ("ftp://example.com/", "only http and https are"),
    ];
    for (url, how) in cases {
        let refusal = prepare(&envelope(json!({ "url": url })), &net).unwrap_err();
        assert_eq!(refusal.name, ErrorName::PolicyDenied, "{url}");
        assert!(refusal.message.contains(url), "{}", refusal.message);
        assert!(refusal.message.contains(how), "{}", refusal.message);
    }
    for url in ["/relative", "not a url", ""] {
        let refusal = prepare(&envelope(json!({ "url": url })), &net).unwrap_err();
        assert_eq!(refusal.name, ErrorName::ValidationError, "{url}: a malformed envelope, not a policy matter");
    }
    let refusal = prepare(&envelope(json!({"url": "https://evil.test/x"})), &net).unwrap_err();
    assert!(refusal.message.contains("\"evil.test\""), "names the host: {}", refusal.message);
}

// ---- headers ----

#[test]
fn guest_code_cannot_set_transport_identity_or_relay_headers() {
    for name in [
        "Host",
        "cookie",
        "Cookie2",
        "CF-Connecting-IP",
        "cf-worker",
        "X-Forwarded-For",
        "x-forwarded-host",
        "X-Real-IP",
        "x-relay-status",
        "Connection",
        "Content-Length",
        "Transfer-Encoding",
        "keep-alive",
        "TE",
        "upgrade",
        "proxy-authorization",
        "forwarded",
    ] {
        assert!(!guest_may_set(name), "{name}");
    }
    for name in ["authorization", "accept", "content-type", "user-agent", "x-api-key", "x-relayed", "cfg"] {
        assert!(guest_may_set(name), "{name}");
    }
}

#[test]
fn the_fetch_standards_forbidden_request_headers_are_never_sent() {
    // Issue 23: guest code set Origin and Referer to the relay's own origin. A browser's fetch
    // never sends what a script sets for these; the route now drops them the same way.
    for name in [
        "Origin",
        "referer",
        "Accept-Charset",
        "Accept-Encoding",
        "Access-Control-Request-Headers",
        "access-control-request-method",
        "Date",
        "DNT",
        "Expect",
        "Set-Cookie",
        "Trailer",
        "Via",
        "Sec-Fetch-Site",
        "sec-ch-ua",
        "Proxy-Anything",
    ] {
        assert!(!guest_may_set(name), "{name}");
    }
    let sent =
        [("Origin", "http://relay.test"), ("Referer", "http://relay.test/"), ("X-Api-Key", "k"), ("Accept", "*/*")];
    assert_eq!(guest_headers(pairs(&sent)), pairs(&[("X-Api-Key", "k"), ("Accept", "*/*")]));
}

#[test]
fn a_method_override_header_is_dropped_only_when_it_names_a_forbidden_method() {
    // The cases of web-platform-tests fetch/api/headers/headers-forbidden-override.any.js.
    for name in ["x-http-method-override", "X-HTTP-METHOD", "x-method-override"] {
        for value in ["TRACE", "track", "CONNECT", "\ttrack", "trace,", "GET,track ", " connect"] {
            assert_eq!(guest_headers(pairs(&[(name, value)])), vec![], "{name}: {value:?}");
        }
        for value in ["GETTRACE", "GET", "\",TRACE\","] {
            assert_eq!(guest_headers(pairs(&[(name, value)])), pairs(&[(name, value)]), "{name}: {value:?}");
        }
    }
    assert_eq!(guest_headers(pairs(&[("x-other", "TRACE")])), pairs(&[("x-other", "TRACE")]));
}

#[test]
fn headers_named_by_connection_are_dropped_too() {
    let kept = guest_headers(pairs(&[
        ("Connection", "X-Secret, keep-alive"),
        ("x-secret", "1"),
        ("X-Kept", "2"),
        ("Cookie", "a=b"),
        ("x-kept", "3"),
    ]));
    assert_eq!(kept, pairs(&[("X-Kept", "2"), ("x-kept", "3")]), "order and repeats kept");
    let parsed = parse_envelope(
        &envelope(json!({"url": "https://a.example/", "headers": [["cookie", "a"], ["accept", "*/*"]]})),
        9,
    )
    .unwrap();
    assert_eq!(parsed.headers, pairs(&[("accept", "*/*")]));
}

// ---- redirects ----

#[test]
fn only_redirect_statuses_with_a_location_are_followed() {
    let net = policy(&["example.com"]);
    let current = get("https://example.com/a");
    for status in [200, 204, 300, 304, 305, 306, 404, 500] {
        assert_eq!(next_hop(&current, status, Some("/b"), 0, &net), Hop::Done, "{status}");
    }
    for status in [301, 302, 303, 307, 308] {
        assert_eq!(next_hop(&current, status, None, 0, &net), Hop::Done, "{status} without Location");
        let Hop::Follow(next) = next_hop(&current, status, Some("/b?q=1"), 0, &net) else { panic!("{status}") };
        assert_eq!(next.url, "https://example.com/b?q=1", "resolved against the current URL");
    }
}

#[test]
fn a_redirect_to_a_denied_host_refuses_the_fetch_naming_that_hop() {
    let net = policy(&["example.com"]);
    let current = get("https://example.com/a");
    let Hop::Deny(why) = next_hop(&current, 302, Some("https://evil.test/steal"), 1, &net) else { panic!() };
    assert!(why.contains("\"evil.test\""), "{why}");
    assert!(why.contains("redirect 2 from https://example.com/a to https://evil.test/steal"), "{why}");
    assert!(why.contains("defaults.policy.network.allowedDomains"), "{why}");
    for location in ["http://169.254.169.254/latest", "file:///etc/passwd", "javascript:alert(1)", "//10.0.0.1/"] {
        assert!(matches!(next_hop(&current, 307, Some(location), 0, &net), Hop::Deny(_)), "{location}");
    }
    assert!(
        matches!(next_hop(&current, 301, Some("http://[::1"), 0, &net), Hop::Deny(why) if why.contains("not a URL"))
    );
}

#[test]
fn more_redirects_than_max_redirects_are_refused_naming_the_limit() {
    let mut net = policy(&["example.com"]);
    net.max_redirects = 2;
    let current = get("https://example.com/a");
    assert!(matches!(next_hop(&current, 302, Some("/b"), 1, &net), Hop::Follow(_)));
    let Hop::Deny(why) = next_hop(&current, 302, Some("/b"), 2, &net) else { panic!() };
    assert!(why.contains("network.maxRedirects (2)"), "{why}");
    net.max_redirects = 0;
    assert!(matches!(next_hop(&current, 302, Some("/b"), 0, &net), Hop::Deny(_)), "0 allows none");
}

#[test]
fn methods_change_on_redirect_as_browsers_change_them() {
    let net = policy(&["example.com"]);
    let with_body = |method: &str| Outbound {
        url: "https://example.com/a".into(),
        method: method.into(),
        headers: pairs(&[("Content-Type", "application/json"), ("X-Kept", "1")]),
        body: Some(b"{}".to_vec()),
    };
    let cases = [
        (301, "POST", "GET", false),
        (302, "POST", "GET", false),
        (303, "POST", "GET", false),
        (303, "PUT", "GET", false),
        (303, "DELETE", "GET", false),
        (301, "PUT", "PUT", true),
        (302, "PATCH", "PATCH", true),
        (307, "POST", "POST", true),
        (308, "POST", "POST", true),
    ];
    for (status, before, after, keeps_body) in cases {
        let Hop::Follow(next) = next_hop(&with_body(before), status, Some("/b"), 0, &net) else { panic!() };
        assert_eq!(next.method, after, "{status} {before}");
        assert_eq!(next.body.is_some(), keeps_body, "{status} {before}");
        let has_type = next.headers.iter().any(|(n, _)| n == "Content-Type");
        assert_eq!(has_type, keeps_body, "{status} {before}: body headers go with the body");
        assert!(next.headers.iter().any(|(n, _)| n == "X-Kept"));
    }
    let head = Outbound { method: "HEAD".into(), ..get("https://example.com/a") };
    let Hop::Follow(next) = next_hop(&head, 303, Some("/b"), 0, &net) else { panic!() };
    assert_eq!(next.method, "HEAD");
}

#[test]
fn only_cors_safelisted_headers_follow_a_redirect_to_another_origin() {
    // Issue 23: a custom credential header (x-api-key) went along to the other origin.
    let net = policy(&["example.com", "example.com:8443"]);
    let sent = [
        ("Authorization", "Bearer s"),
        ("X-Api-Key", "k"),
        ("X-Custom", "1"),
        ("Accept", "*/*"),
        ("Accept-Language", "en-US,en;q=0.9"),
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Range", "bytes=0-99"),
    ];
    let current = Outbound { headers: pairs(&sent), ..get("https://example.com/a") };
    let Hop::Follow(same) = next_hop(&current, 307, Some("/b"), 0, &net) else { panic!() };
    assert_eq!(same.headers, current.headers, "the same origin keeps every header");
    for other in ["https://api.example.com/b", "http://example.com/b", "https://example.com:8443/b"] {
        let Hop::Follow(next) = next_hop(&current, 307, Some(other), 0, &net) else { panic!("{other}") };
        assert_eq!(next.headers, pairs(&sent[3..]), "{other}");
    }
}

#[test]
fn cors_safelisted_headers_are_the_fetch_standards() {
    let kept = |name: &str, value: &str| !cors_safelisted(&pairs(&[(name, value)])).is_empty();
    for (name, value) in [
        ("accept", "application/json"),
        ("ACCEPT", "text/html, */*;q=0.8"),
        ("accept-language", "de-CH, en;q=0.5"),
        ("content-language", "en"),
        ("content-type", "application/x-www-form-urlencoded"),
        ("Content-Type", "multipart/form-data; boundary=x"),
        ("content-type", "TEXT/PLAIN"),
        ("range", "bytes=5-"),
        ("range", "bytes=0-0"),
    ] {
        assert!(kept(name, value), "{name}: {value}");
    }
    for (name, value) in [
        ("authorization", "Bearer s"),
        ("x-api-key", "k"),
        ("cookie", "a=b"),
        ("accept", "a(b)"),
        ("accept", "text/html{}"),
        ("accept-language", "en_US"),
        ("content-type", "application/json"),
        ("content-type", "text/plain\"x"),
        ("range", "bytes=9-1"),
        ("range", "bytes=-5"),
        ("range", "bytes=0-1,3-4"),
        ("range", "items=0-1"),
    ] {
        assert!(!kept(name, value), "{name}: {value}");
    }
    assert!(!kept("accept", &"a".repeat(129)), "a value over 128 bytes");
    let many: Vec<(String, String)> = (0..9).map(|_| ("accept".to_string(), "a".repeat(120))).collect();
    assert!(cors_safelisted(&many).is_empty(), "over 1024 bytes together, none is safelisted");
}

// ---- the answer ----

#[test]
fn the_route_reports_the_upstream_in_relay_headers() {
    let upstream = Fetched {
        status: 201,
        status_text: "Created\u{7f}".into(),
        url: "https://example.com/final".into(),
        redirects: 2,
        headers: pairs(&[
            ("content-type", "text/plain"),
            ("set-cookie", "sid=1"),
            ("Set-Cookie", "b=2"),
            ("content-encoding", "gzip"),
            ("content-length", "10"),
            ("x-note", "caf\u{e9}"),
        ]),
    };
    let headers = upstream.relay_headers();
    let get = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()).unwrap();
    assert_eq!(get("x-relay-status"), "201");
    assert_eq!(get("x-relay-status-text"), "Created?");
    assert_eq!(get("x-relay-url"), "https://example.com/final");
    assert_eq!(get("x-relay-redirects"), "2");
    let shown = get("x-relay-headers");
    assert!(shown.is_ascii(), "{shown}");
    let shown: Vec<(String, String)> = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown, pairs(&[("content-type", "text/plain"), ("x-note", "caf\u{e9}")]));
}

#[test]
fn ascii_json_escapes_every_non_ascii_character() {
    let value = json!(["\u{e9}", "\u{1f600}", "plain \"q\""]);
    let text = ascii_json(&value.to_string());
    assert!(text.is_ascii());
    assert!(text.contains("\\ud83d\\ude00"), "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
}

#[test]
fn an_oversized_body_is_refused_naming_the_url_and_the_limit() {
    let why = body_too_large("https://example.com/big", 1024);
    assert!(why
        .starts_with("the response body of https://example.com/big is larger than network.maxBodyBytes (1024 bytes)"));
}

proptest! {
    /// Whatever headers a fetch carries, a hop to another origin carries none that is not
    /// CORS-safelisted, and a hop within the origin keeps them all (bar body headers of a 303).
    #[test]
    fn a_cross_origin_hop_carries_only_safelisted_headers(
        names in prop::collection::vec(prop::sample::select(vec![
            "Authorization", "X-Api-Key", "x-token", "Accept", "Accept-Language", "Content-Type", "Range", "Private-Token",
        ]), 0..8),
        value in "[ -~]{0,40}",
        to in prop::sample::select(vec!["https://example.com/b", "https://api.example.com/b", "http://example.com/b"]),
    ) {
        let net = policy(&["example.com"]);
        let headers: Vec<(String, String)> = names.iter().map(|n| (n.to_string(), value.clone())).collect();
        let current = Outbound { headers: headers.clone(), ..get("https://example.com/a") };
        let Hop::Follow(next) = next_hop(&current, 307, Some(to), 0, &net) else { panic!("{to}") };
        if to == "https://example.com/b" {
            prop_assert_eq!(next.headers, headers);
        } else {
            let credentials = ["authorization", "x-api-key", "x-token", "private-token"];
            prop_assert!(next.headers.iter().all(|(n, _)| !credentials.contains(&n.to_ascii_lowercase().as_str())));
            prop_assert_eq!(&next.headers, &cors_safelisted(&headers));
        }
    }
}
