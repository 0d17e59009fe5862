//! OAuth 2.1 rules (`relay_core::oauth`): PKCE S256, redirect URIs, registration and client
//! metadata documents (which URLs are fetched, and one answer to every failed fetch),
//! authorization requests, code and refresh-token exchanges, access tokens bound to the
//! resource, the consent page's facts, and the discovery documents.

use proptest::prelude::*;
use relay_core::oauth::consent::{display_name, CLIENT_NAME_MAX_CHARS};
use relay_core::oauth::document::{client_from_fetch, document_url, names_document, refused};
use relay_core::oauth::redirect::{check_registrable, Destination};
use relay_core::oauth::{
    authorization_server_metadata, mint, protected_resource_metadata, token_hash, verify_pkce, www_authenticate,
    AuthRequest, Client, CodeRecord, ConsentView, Registration, TokenKind, TokenRecord, TokenRequest,
};
use serde_json::{json, Value};

const RESOURCE: &str = "https://relay.example/mcp";
// RFC 7636 appendix B.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn client() -> Client {
    Client {
        client_id: "rc_1".into(),
        client_name: None,
        redirect_uris: vec!["https://app.example/cb".into(), "http://127.0.0.1:8000/callback".into()],
    }
}

fn request() -> AuthRequest {
    AuthRequest {
        response_type: "code".into(),
        client_id: "rc_1".into(),
        redirect_uri: "https://app.example/cb".into(),
        code_challenge: Some(CHALLENGE.into()),
        code_challenge_method: Some("S256".into()),
        state: Some("st".into()),
        resource: Some(RESOURCE.into()),
        scope: None,
    }
}

#[test]
fn pkce_is_s256_of_a_well_formed_verifier() {
    assert!(verify_pkce(VERIFIER, CHALLENGE).is_ok());
    assert_eq!(verify_pkce(&VERIFIER.replace('d', "e"), CHALLENGE).unwrap_err().error, "invalid_grant");
    assert!(verify_pkce("short", CHALLENGE).unwrap_err().description.contains("43 to 128"));
    assert!(verify_pkce(&format!("{VERIFIER}!"), CHALLENGE).is_err(), "not an unreserved character");
    assert!(verify_pkce(CHALLENGE, CHALLENGE).is_err(), "plain (verifier = challenge) does not pass");
}

#[test]
fn redirect_uris_match_exactly_or_on_any_loopback_port() {
    let c = client();
    assert!(c.redirect_ok("https://app.example/cb"));
    assert!(c.redirect_ok("http://127.0.0.1:51234/callback"), "RFC 8252: loopback, any port");
    for bad in [
        "https://app.example/cb/",
        "https://app.example/cb?x=1",
        "https://evil.example/cb",
        "http://127.0.0.1:8000/other",
        "http://localhost:8000/callback",
        "not a url",
        // RFC 8252 lets only the port vary on loopback: no fragment, no userinfo, nothing the
        // parser would rewrite.
        "http://127.0.0.1:5555/callback#frag",
        "http://127.0.0.1:5555/callback#",
        "http://evil.example@127.0.0.1:5555/callback",
        "http://user:pass@127.0.0.1:5555/callback",
        "http://:x@127.0.0.1:5555/callback",
        "http://127.0.0.1:5555/callback?x=1",
        "http://127.0.0.1:5555/x/../callback",
        "http://127.0.0.1:5555/call\tback",
        "http://127.0.0.1:5555/call\nback",
        "https://127.0.0.1:5555/callback",
    ] {
        assert!(!c.redirect_ok(bad), "{bad}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_loopback_redirect_varies_only_in_its_port(port in 1u16.., user in "[a-z.]{1,12}", frag in "[a-z]{0,6}") {
        let c = client();
        let good = format!("http://127.0.0.1:{port}/callback");
        prop_assert!(c.redirect_ok(&good));
        let bad = [
            format!("http://{user}@127.0.0.1:{port}/callback"),
            format!("http://127.0.0.1:{port}/callback#{frag}"),
            format!("http://127.0.0.1:{port}/callback/{user}"),
        ];
        prop_assert!(!bad.iter().any(|uri| c.redirect_ok(uri)), "{:?}", bad);
    }

    #[test]
    fn a_registered_client_is_stored_in_at_most_6_kib(
        uris in prop::collection::vec("https://[a-z]{1,20}\\.example/[a-z0-9/_~-]{0,470}|[a-z]{1,9}\\.app:[\"\\\\]{1,490}", 1..=5),
        name in prop_oneof![any::<String>(), "[\"\\\\\u{10000}-\u{10FFFF}]{100,300}"],
    ) {
        let reg = json!({ "redirect_uris": uris, "client_name": name });
        let client = serde_json::from_value::<Registration>(reg).unwrap().into_client(&mint("rc_", &[7; 32]));
        prop_assert!(serde_json::to_vec(&client.unwrap()).unwrap().len() <= 6 * 1024);
    }
}

#[test]
fn a_registration_is_a_public_client_with_safe_redirect_uris() {
    let reg = |v: Value| serde_json::from_value::<Registration>(v).unwrap().into_client("rc_x");
    assert!(
        reg(json!({ "redirect_uris": ["https://a.example/cb", "http://127.0.0.1/cb", "com.example.app:/cb"] })).is_ok()
    );
    let uris =
        ["cursor://anysphere.cursor-mcp/oauth/callback", "http://[::1]:33418/", "http://localhost:3000/callback"];
    assert!(reg(json!({ "redirect_uris": uris })).is_ok(), "an app's own scheme, loopback by name and address");
    for (body, error) in [
        (json!({ "redirect_uris": [] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": vec!["https://a.example/cb"; 6] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": [format!("https://a.example/{}", "c".repeat(500))] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": ["http://a.example/cb"] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": ["javascript:alert(1)"] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": ["https://a.example/cb#frag"] }), "invalid_redirect_uri"),
        (
            json!({ "redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "client_secret_post" }),
            "invalid_client_metadata",
        ),
        (json!({ "redirect_uris": ["https://a.example/cb"], "grant_types": ["implicit"] }), "invalid_client_metadata"),
        (json!({ "redirect_uris": ["https://a.example/cb"], "response_types": ["token"] }), "invalid_client_metadata"),
    ] {
        assert_eq!(reg(body.clone()).unwrap_err().error, error, "{body}");
    }
}

#[test]
fn a_redirect_uri_is_https_loopback_http_or_an_apps_own_scheme_written_as_it_parses() {
    for bad in [
        "ws://a.example/cb",
        "wss://a.example/cb",
        "ftp://a.example/cb",
        "vbscript:msgbox(1)",
        "about:blank",
        "blob:https://a.example/0b5f",
        "data:text/html,x",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "view-source:https://a.example/",
        "http://a.example/cb",
        "http://127.0.0.2/cb",
        "https://a.example/cb#frag",
        "https://u:p@a.example/cb",
        "http://evil.example@127.0.0.1:5555/cb",
        "http://127.0.0.1:5555/cb#x",
        "https://A.example/cb",
        "https://a.example/x/../cb",
        "https://a.example\t/cb",
        "https://a.example",
        " https://a.example/cb",
        "cb",
    ] {
        assert!(check_registrable(bad).is_err(), "{bad}");
    }
    let why = check_registrable("https://a.example/x/../cb").unwrap_err();
    assert!(why.contains("\"https://a.example/cb\""), "it says how to write it: {why}");
}

#[test]
fn a_metadata_document_must_name_its_own_url() {
    let url = "https://app.example/client.json";
    let doc = json!({ "client_id": url, "client_name": "App", "redirect_uris": ["https://app.example/cb"] });
    assert_eq!(Client::from_metadata_document(url, &doc).unwrap().client_name.as_deref(), Some("App"));
    let other = json!({ "client_id": "https://evil.example/client.json", "redirect_uris": ["https://app.example/cb"] });
    assert_eq!(Client::from_metadata_document(url, &other).unwrap_err().error, "invalid_client");
}

#[test]
fn a_metadata_document_is_fetched_only_from_a_public_https_name_and_loopback_only_in_dev() {
    assert!(names_document("https://app.example/client.json") && names_document("HTTP://10.0.0.1/x"));
    assert!(!names_document("rc_123") && !names_document("urn:x:y"));
    for (url, prod, dev) in [
        ("https://app.example/client.json", true, true),
        ("https://app.example:8443/c.json?v=1", true, true),
        ("http://127.0.0.1:9/c.json", false, true),
        ("http://localhost:9/c.json", false, true),
        ("http://[::1]:9/c.json", false, true),
        ("https://127.0.0.1:9/c.json", false, true),
        ("http://app.example/client.json", false, false),
        ("https://app.example/", false, false),
        ("https://app.example", false, false),
        ("https://u:p@app.example/c.json", false, false),
        ("https://app.example/c.json#f", false, false),
        ("https://app.example/a/../c.json", false, false),
        ("https://APP.example/c.json", false, false),
        ("https://app.example\t/c.json", false, false),
        ("https://app.example/c.json\n", false, false),
        ("https://169.254.169.254/latest/meta-data", false, false),
        ("http://169.254.169.254/latest/meta-data", false, false),
        ("https://10.0.0.1/c.json", false, false),
        ("https://[::ffff:7f00:1]/c.json", false, false),
        ("https://[fd00::1]/c.json", false, false),
        ("https://0x7f.1/c.json", false, false),
        ("https://2130706433/c.json", false, false),
        ("https://127.0.0.2/c.json", false, false),
        ("https://localhost/c.json", false, true),
        ("https://relay.localhost/c.json", false, false),
        ("https://metadata/computeMetadata", false, false),
        ("https://app..example/c.json", false, false),
        ("ftp://app.example/c.json", false, false),
    ] {
        assert_eq!(document_url(url, false).is_ok(), prod, "{url} in production");
        assert_eq!(document_url(url, true).is_ok(), dev, "{url} in dev");
    }
    let why = document_url("https://169.254.169.254/x", false).unwrap_err();
    assert_eq!(why.error, "invalid_client");
    assert!(why.description.contains("169.254.169.254"), "{}", why.description);
}

/// A refused metadata-document URL is this server's own rule, which no tenant's admin sets:
/// its refusal names the host and the rule, and carries none of the egress policy's advice.
#[test]
fn a_refused_document_host_is_explained_in_the_authorization_servers_words() {
    for (url, host, what) in [
        ("https://169.254.169.254/x", "169.254.169.254", "IP address literal"),
        ("https://[fd00::1]/c.json", "[fd00::1]", "IP address literal"),
        ("https://127.0.0.2/c.json", "127.0.0.2", "IP address literal"),
        ("https://localhost/c.json", "\"localhost\"", "no public domain name"),
        ("https://relay.localhost/c.json", "\"relay.localhost\"", "no public domain name"),
        ("https://metadata/computeMetadata", "\"metadata\"", "no public domain name"),
        ("https://app..example/c.json", "\"app..example\"", "no public domain name"),
    ] {
        let why = document_url(url, false).unwrap_err().description;
        assert!(why.contains(&format!("{host} is")) && why.contains(what), "{url}: {why}");
        assert!(why.contains("only from public domain names"), "{url}: {why}");
        for tenant_advice in ["tenant", "admin", "PATCH", "allowedDomains", "denyIpLiterals", "blockPrivateRanges"] {
            assert!(!why.contains(tenant_advice), "{url}: {tenant_advice:?} in {why}");
        }
    }
}

#[test]
fn a_fetched_document_describes_its_client_and_every_failure_reads_the_same() {
    let url = "https://app.example/client.json";
    let good =
        json!({ "client_id": url, "client_name": "App", "redirect_uris": ["https://app.example/cb"] }).to_string();
    assert_eq!(client_from_fetch(url, Ok(good.as_bytes())).unwrap().client_name.as_deref(), Some("App"));
    let failures: [Result<&[u8], String>; 6] = [
        Err("redirected (HTTP 302)".into()),
        Err("no answer within 5000 ms".into()),
        Err("HTTP 404".into()),
        Ok(b"<html>not json</html>"),
        Ok(br#"{"client_id": "https://evil.example/c.json", "redirect_uris": ["https://app.example/cb"]}"#),
        Ok(br#"{"client_id": "https://app.example/client.json", "redirect_uris": ["ws://app.example/cb"]}"#),
    ];
    for fetched in failures {
        let (error, why) = client_from_fetch(url, fetched).unwrap_err();
        assert_eq!(error, refused(), "one answer; the log has {why}");
        assert!(!why.is_empty());
    }
}

const DOCUMENT: &str = "https://app.example/client.json";

/// A metadata document as a target might serve it: naming itself or another, with redirect
/// URIs good, bad or missing.
fn document() -> impl Strategy<Value = Vec<u8>> {
    let uri =
        prop_oneof!["https://app\\.example/[a-z]{0,5}", "(ws|ftp|http|about|blob):[a-z/.#@]{0,20}", any::<String>()];
    (any::<bool>(), prop::collection::vec(uri, 0..7), any::<Option<String>>()).prop_map(|(own, uris, name)| {
        let id = if own { DOCUMENT } else { "https://evil.example/client.json" };
        json!({ "client_id": id, "redirect_uris": uris, "client_name": name }).to_string().into_bytes()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn whatever_a_target_answers_the_asker_learns_nothing_of_it(
        body in prop_oneof![any::<Vec<u8>>(), document()],
        why in any::<String>(),
        answered in any::<bool>(),
    ) {
        let fetched = if answered { Ok(body.as_slice()) } else { Err(why) };
        if let Err((error, _)) = client_from_fetch(DOCUMENT, fetched) {
            prop_assert_eq!(error, refused());
        }
    }

    #[test]
    fn a_client_name_is_shown_without_hidden_or_reordering_characters(raw in any::<String>(), hidden in prop::sample::select(vec!['\u{202E}', '\u{2066}', '\u{200B}', '\u{FEFF}', '\u{0}', '\u{1B}', '\n', '\u{E0041}'])) {
        let name = display_name(&format!("{hidden}{raw}{hidden}x"));
        let shown = name.clone().unwrap_or_default();
        prop_assert!(shown.chars().count() <= CLIENT_NAME_MAX_CHARS);
        let reorders = |c: char| ('\u{202A}'..='\u{202E}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c);
        let bad = shown.chars().any(|c| c.is_control() || c == hidden || reorders(c));
        prop_assert!(!bad, "{:?}", shown);
        prop_assert!(!shown.contains("  ") && shown.trim() == shown);
        prop_assert_eq!(name.as_deref().and_then(display_name), name, "cleaning again changes nothing");
    }
}

#[test]
fn a_client_name_is_cleaned_and_cut() {
    assert_eq!(display_name("Claude\u{202E}edualC\u{202C} Desktop").as_deref(), Some("ClaudeedualC Desktop"));
    assert_eq!(display_name("  a\u{200B}b \n\t c  ").as_deref(), Some("ab c"));
    assert_eq!(
        display_name("<img src=x onerror=alert(1)>").as_deref(),
        Some("<img src=x onerror=alert(1)>"),
        "text, shown as text"
    );
    assert_eq!(display_name(&"é".repeat(500)).unwrap().chars().count(), CLIENT_NAME_MAX_CHARS);
    assert_eq!(display_name("\u{200B}\u{FEFF} \u{0}"), None);
}

#[test]
fn the_consent_page_is_told_the_clients_name_its_source_and_where_the_code_goes() {
    let registered = Client { client_name: Some("My\u{202E} App".into()), ..client() };
    let view = ConsentView::new(&registered, &request()).unwrap();
    assert_eq!(
        serde_json::to_value(&view).unwrap(),
        json!({
            "clientId": "rc_1", "clientName": "My App", "nameSource": { "kind": "registered" },
            "redirectUri": "https://app.example/cb", "redirect": { "kind": "web", "host": "app.example" },
        })
    );
    let url = "https://app.example:8443/client.json";
    let document =
        Client { client_id: url.into(), client_name: None, redirect_uris: vec!["com.example.app:/cb".into()] };
    let asked = AuthRequest { client_id: url.into(), redirect_uri: "com.example.app:/cb".into(), ..request() };
    let view = ConsentView::new(&document, &asked).unwrap();
    assert_eq!(view.client_name, None);
    assert_eq!(
        serde_json::to_value(&view.name_source).unwrap(),
        json!({ "kind": "document", "host": "app.example:8443" })
    );
    assert_eq!(view.redirect, Destination::App { scheme: "com.example.app".into() });
    assert_eq!(
        Destination::of("http://127.0.0.1/cb"),
        Some(Destination::Loopback { host: "127.0.0.1".into(), port: 80 })
    );
    assert_eq!(
        Destination::of("https://xn--80ak6aa92e.com/cb"),
        Some(Destination::Web { host: "xn--80ak6aa92e.com".into() })
    );
    assert_eq!(
        Destination::of("https://аррӏе.com/cb"),
        Destination::of("https://xn--80ak6aa92e.com/cb"),
        "a look-alike shows as punycode"
    );
}

#[test]
fn an_authorization_request_is_checked_redirect_first() {
    assert!(request().check(&client(), RESOURCE).is_ok());
    let unknown =
        AuthRequest { redirect_uri: "https://evil.example/cb".into(), response_type: "token".into(), ..request() };
    let (send, error) = unknown.check(&client(), RESOURCE).unwrap_err();
    assert!(!send, "an error about an unknown redirect URI is never sent to it");
    assert_eq!(error.error, "invalid_request");
    let cases = [
        (AuthRequest { response_type: "token".into(), ..request() }, "unsupported_response_type"),
        (AuthRequest { code_challenge: None, ..request() }, "invalid_request"),
        (AuthRequest { code_challenge_method: Some("plain".into()), ..request() }, "invalid_request"),
        (AuthRequest { resource: Some("https://other.example/mcp".into()), ..request() }, "invalid_target"),
        (AuthRequest { scope: Some("mcp admin".into()), ..request() }, "invalid_scope"),
    ];
    for (req, expected) in cases {
        let (send, error) = req.check(&client(), RESOURCE).unwrap_err();
        assert!(send);
        assert_eq!(error.error, expected);
    }
    let back = request().redirect(&[("code", "c&1")]);
    assert_eq!(back, "https://app.example/cb?code=c%261&state=st");
}

fn code() -> CodeRecord {
    CodeRecord {
        grant_id: "g".into(),
        client_id: "rc_1".into(),
        redirect_uri: "https://app.example/cb".into(),
        code_challenge: CHALLENGE.into(),
        resource: RESOURCE.into(),
        exp: 1_000,
        used: false,
    }
}

fn code_request() -> TokenRequest {
    TokenRequest {
        grant_type: "authorization_code".into(),
        code: Some("c".into()),
        redirect_uri: Some("https://app.example/cb".into()),
        client_id: Some("rc_1".into()),
        code_verifier: Some(VERIFIER.into()),
        refresh_token: None,
        resource: Some(RESOURCE.into()),
    }
}

#[test]
fn a_code_is_exchanged_once_by_its_client_with_its_verifier_before_it_expires() {
    assert!(code_request().check_code(&code(), RESOURCE, 999).is_ok());
    let cases = [
        (CodeRecord { used: true, ..code() }, code_request(), 999, "used already"),
        (code(), code_request(), 1_000, "expired"),
        (code(), TokenRequest { client_id: Some("rc_2".into()), ..code_request() }, 999, "another client_id"),
        (
            code(),
            TokenRequest { redirect_uri: Some("https://app.example/other".into()), ..code_request() },
            999,
            "redirect_uri",
        ),
        (code(), TokenRequest { code_verifier: None, ..code_request() }, 999, "code_verifier"),
    ];
    for (record, req, now, why) in cases {
        let error = req.check_code(&record, RESOURCE, now).unwrap_err();
        assert_eq!(error.error, "invalid_grant");
        assert!(error.description.contains(why), "{why}: {}", error.description);
    }
    let other = TokenRequest { resource: Some("https://other.example/mcp".into()), ..code_request() };
    assert_eq!(other.check_code(&code(), RESOURCE, 999).unwrap_err().error, "invalid_target");
}

fn token(kind: TokenKind) -> TokenRecord {
    TokenRecord {
        kind,
        grant_id: "g".into(),
        client_id: "rc_1".into(),
        resource: RESOURCE.into(),
        exp: 1_000,
        rotated: false,
    }
}

#[test]
fn a_refresh_token_is_used_once_by_its_client() {
    let req = TokenRequest { grant_type: "refresh_token".into(), client_id: Some("rc_1".into()), ..Default::default() };
    assert!(req.check_refresh(&token(TokenKind::Refresh), RESOURCE, 999).is_ok());
    assert!(req
        .check_refresh(&TokenRecord { rotated: true, ..token(TokenKind::Refresh) }, RESOURCE, 1)
        .unwrap_err()
        .description
        .contains("revoked"));
    assert!(req.check_refresh(&token(TokenKind::Refresh), RESOURCE, 1_000).is_err(), "expired");
    assert!(req.check_refresh(&token(TokenKind::Access), RESOURCE, 1).is_err(), "an access token does not refresh");
    let other = TokenRequest { client_id: Some("rc_2".into()), ..req.clone() };
    assert!(other.check_refresh(&token(TokenKind::Refresh), RESOURCE, 1).is_err());
    let anonymous = TokenRequest { client_id: None, ..req };
    let error = anonymous.check_refresh(&token(TokenKind::Refresh), RESOURCE, 1).unwrap_err();
    assert_eq!((error.error, error.description.contains("client_id is required")), ("invalid_request", true));
}

#[test]
fn an_access_token_works_only_for_its_resource_until_it_expires() {
    assert!(token(TokenKind::Access).check_access(RESOURCE, 999).is_ok());
    assert!(token(TokenKind::Access).check_access(RESOURCE, 1_000).unwrap_err().contains("expired"));
    assert!(token(TokenKind::Access)
        .check_access("https://other.example/mcp", 1)
        .unwrap_err()
        .contains("not this resource"));
    assert!(token(TokenKind::Refresh).check_access(RESOURCE, 1).unwrap_err().contains("refresh token"));
}

#[test]
fn discovery_documents_and_the_challenge_name_each_other() {
    let origin = "https://relay.example";
    let resource = protected_resource_metadata(origin);
    assert_eq!(resource["resource"], RESOURCE);
    assert_eq!(resource["authorization_servers"], json!([origin]));
    let server = authorization_server_metadata(origin);
    assert_eq!(server["issuer"], origin);
    assert_eq!(server["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(server["token_endpoint_auth_methods_supported"], json!(["none"]));
    assert_eq!(
        www_authenticate(origin, Some("invalid_token")),
        "Bearer realm=\"relay-edge\", resource_metadata=\"https://relay.example/.well-known/oauth-protected-resource/mcp\", error=\"invalid_token\""
    );
}

#[test]
fn secrets_are_random_and_stored_only_as_hashes() {
    let a = mint("rat_", &[1; 32]);
    assert!(a.starts_with("rat_") && a.len() > 40);
    assert_ne!(a, mint("rat_", &[2; 32]));
    let hash = token_hash(&a);
    assert_eq!(hash.len(), 64);
    assert!(!hash.contains(&a[4..]));
}
