//! OAuth 2.1 rules (`relay_core::oauth`): PKCE S256, redirect URIs, registration and client
//! metadata documents, authorization requests, code and refresh-token exchanges, access tokens
//! bound to the resource, and the discovery documents.

use relay_core::oauth::records::is_metadata_url;
use relay_core::oauth::{
    authorization_server_metadata, mint, protected_resource_metadata, token_hash, verify_pkce, www_authenticate,
    AuthRequest, Client, CodeRecord, Registration, TokenKind, TokenRecord, TokenRequest,
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
    ] {
        assert!(!c.redirect_ok(bad), "{bad}");
    }
}

#[test]
fn a_registration_is_a_public_client_with_safe_redirect_uris() {
    let reg = |v: Value| serde_json::from_value::<Registration>(v).unwrap().into_client("rc_x");
    assert!(
        reg(json!({ "redirect_uris": ["https://a.example/cb", "http://127.0.0.1/cb", "com.example.app:/cb"] })).is_ok()
    );
    for (body, error) in [
        (json!({ "redirect_uris": [] }), "invalid_redirect_uri"),
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
fn a_metadata_document_must_name_its_own_url() {
    let url = "https://app.example/client.json";
    let doc = json!({ "client_id": url, "client_name": "App", "redirect_uris": ["https://app.example/cb"] });
    assert_eq!(Client::from_metadata_document(url, &doc).unwrap().client_name.as_deref(), Some("App"));
    let other = json!({ "client_id": "https://evil.example/client.json", "redirect_uris": ["https://app.example/cb"] });
    assert_eq!(Client::from_metadata_document(url, &other).unwrap_err().error, "invalid_client");
    assert!(is_metadata_url(url, false));
    assert!(!is_metadata_url("rc_123", true));
    assert!(!is_metadata_url("http://127.0.0.1:9/c.json", false), "loopback only in dev");
    assert!(is_metadata_url("http://127.0.0.1:9/c.json", true));
    assert!(!is_metadata_url("https://app.example/", false), "a document needs a path");
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
    let other = TokenRequest { client_id: Some("rc_2".into()), ..req };
    assert!(other.check_refresh(&token(TokenKind::Refresh), RESOURCE, 1).is_err());
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
