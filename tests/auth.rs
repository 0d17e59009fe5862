//! Who is calling: API keys (shape, hash, minting), tenant records, relay session names, the
//! bearer header, and attach tokens (EdDSA JWTs, five minutes, one relay session).

use std::collections::BTreeMap;

use proptest::prelude::*;
use relay_core::auth::{
    bearer, check_key_shape, key_hash, mint_api_key, run_token_refusal, run_token_ttl_s, session_name_ok,
    socket_bearer, ApiKeyError, AttachClaims, QueueSettings, RunClaims, Tenant, TenantDefaults, TokenError,
    ATTACH_TOKEN_TTL_S, LEASE_PROTOCOL, MAX_ATTACH_S, OUT_FILE_MAX_BYTES, RESULTS_PROTOCOL,
};
use relay_core::capsule::jws::{b64url, b64url_decode, KeySet, Signer};
use relay_core::capsule::{build_capsule, verify_manifest, CapsuleError, CapsuleSpec, Deps, Language};
use relay_core::policy::Policy;
use serde_json::{json, Value};

// ---- API keys ----

#[test]
fn key_hash_is_lowercase_sha256_hex() {
    assert_eq!(key_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(key_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    let key = mint_api_key(&[7; 32]);
    assert_eq!(key_hash(&key), key_hash(&key), "stable");
    assert_ne!(key_hash(&key), key_hash(&mint_api_key(&[8; 32])));
    assert!(!key_hash(&key).contains(&key[3..]), "the hash never shows the key");
}

#[test]
fn the_kv_key_of_a_tenant_is_its_key_hash() {
    let key = mint_api_key(&[1; 32]);
    assert_eq!(relay_core::keys::tenant_by_key(&key), format!("tenant:{}", key_hash(&key)));
    assert!(!relay_core::keys::tenant_by_key(&key).contains(&key));
    assert_eq!(relay_core::keys::tenant_by_id("t_1"), "tenant-id:t_1");
    assert_ne!(
        relay_core::keys::tenant_by_id(&key_hash(&key)),
        relay_core::keys::tenant_by_key(&key),
        "the two key spaces never meet"
    );
}

#[test]
fn minted_keys_have_the_documented_shape() {
    let key = mint_api_key(&[0; 32]);
    assert_eq!(key, format!("rk_{}", "A".repeat(43)));
    let key = mint_api_key(&[0xff; 32]);
    assert_eq!(key.len(), 46);
    assert!(key.starts_with("rk_"));
    assert_eq!(b64url_decode(&key[3..]).unwrap(), [0xff; 32]);
    assert_eq!(check_key_shape(&key), Ok(()));
}

#[test]
fn badly_shaped_keys_are_malformed() {
    let body = "A".repeat(43);
    let cases = [
        String::new(),
        "rk_".into(),
        body.clone(),
        format!("sk_{body}"),
        format!("RK_{body}"),
        format!("rk-{body}"),
        format!("rk_{}", "A".repeat(42)),
        format!("rk_{}", "A".repeat(44)),
        format!("rk_{}=", "A".repeat(42)),
        format!("rk_{}+", "A".repeat(42)),
        format!("rk_{}/", "A".repeat(42)),
        format!("rk_{}.", "A".repeat(42)),
        format!("rk_{} ", "A".repeat(42)),
        format!(" rk_{body}"),
        format!("rk_{body}\n"),
        format!("rk_{}é", "A".repeat(41)), // 43 bytes, not 43 URL-safe characters
        format!("rk_{}\0", "A".repeat(42)),
        format!("Bearer rk_{body}"),
    ];
    for key in cases {
        assert_eq!(check_key_shape(&key), Err(ApiKeyError::Malformed), "{key:?}");
    }
}

#[test]
fn key_errors_say_what_to_send() {
    assert!(ApiKeyError::Missing.to_string().contains("Authorization: Bearer"));
    assert!(ApiKeyError::Malformed.to_string().contains("rk_"));
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_minted_key_has_a_good_shape_and_its_own_hash(a in any::<[u8; 32]>(), b in any::<[u8; 32]>()) {
        let (ka, kb) = (mint_api_key(&a), mint_api_key(&b));
        prop_assert_eq!(check_key_shape(&ka), Ok(()));
        prop_assert_eq!(ka.len(), 46);
        prop_assert_eq!(ka == kb, a == b);
        prop_assert_eq!(key_hash(&ka) == key_hash(&kb), a == b);
        prop_assert_eq!(mint_api_key(&a), ka, "deterministic in its randomness");
    }

    #[test]
    fn only_rk_and_43_url_safe_characters_pass(key in any::<String>()) {
        let ok = key.strip_prefix("rk_").is_some_and(|body| {
            body.chars().count() == 43 && body.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
        prop_assert_eq!(check_key_shape(&key).is_ok(), ok);
    }

    #[test]
    fn near_miss_keys_are_judged_right(body in "[A-Za-z0-9_+/=. -]{41,45}") {
        let key = format!("rk_{body}");
        let ok = body.len() == 43 && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        prop_assert_eq!(check_key_shape(&key).is_ok(), ok);
    }
}

// ---- tenants ----

fn tenant(origins: &[&str]) -> Tenant {
    Tenant {
        id: "t_1".into(),
        name: "Acme".into(),
        defaults: TenantDefaults {
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            ..Default::default()
        },
    }
}

#[test]
fn a_tenant_record_reads_with_defaults_and_round_trips() {
    let t: Tenant = serde_json::from_value(json!({"id": "t_1", "name": "Acme"})).unwrap();
    assert_eq!(t.defaults, TenantDefaults::default());
    assert_eq!(t.defaults.queue, QueueSettings { max_queued: 100, max_wait_ms: 300_000, attach_wait_ms: 5_000 });
    assert_eq!(t.defaults.policy, Policy::default());
    let t: Tenant = serde_json::from_value(json!({
        "id": "t_2", "name": "B",
        "defaults": {"queue": {"maxQueued": 3}, "allowedOrigins": ["https://b.example"]}
    }))
    .unwrap();
    assert_eq!(t.defaults.queue.max_queued, 3);
    assert_eq!(t.defaults.queue.max_wait_ms, 300_000, "unset settings keep their defaults");
    let back: Tenant = serde_json::from_value(serde_json::to_value(&t).unwrap()).unwrap();
    assert_eq!(back, t);
    let stored = serde_json::to_value(&t).unwrap();
    assert!(stored["defaults"].get("allowedOrigins").is_some(), "camelCase on the wire: {stored}");
}

#[test]
fn origins_match_case_insensitively_ignoring_a_trailing_slash() {
    let t = tenant(&["https://app.example.com", "http://localhost:5173", "https://b.example/"]);
    for ok in [
        "https://app.example.com",
        "HTTPS://APP.EXAMPLE.COM",
        "https://app.example.com/",
        "http://localhost:5173",
        "https://b.example",
        "https://b.example/",
    ] {
        assert!(t.origin_allowed(ok), "{ok}");
    }
    for refused in [
        "http://app.example.com",
        "https://app.example.com:8443",
        "https://app.example.com.evil.net",
        "https://evil-app.example.com",
        "https://example.com",
        "http://localhost:5174",
        "http://localhost",
        "null",
        "",
        "/",
        "https://app.example.com/path",
        " https://app.example.com",
    ] {
        assert!(!t.origin_allowed(refused), "{refused:?}");
    }
    assert!(!tenant(&[]).origin_allowed("https://app.example.com"), "no origins configured, none allowed");
}

// ---- relay session names ----

#[test]
fn session_names_are_short_and_url_safe() {
    for ok in ["default", "a", "A-b_9", &"x".repeat(64)] {
        assert!(session_name_ok(ok), "{ok}");
    }
    for bad in ["", &"x".repeat(65), "a/b", "../default", "a b", "a.b", "é", "tenant/other", "%2e%2e", "a\0", "a\n"] {
        assert!(!session_name_ok(bad), "{bad:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_session_name_is_1_to_64_url_safe_characters(name in prop_oneof![any::<String>(), "[A-Za-z0-9_-]{0,70}", "[A-Za-z0-9_/.é -]{0,66}"]) {
        let ok = (1..=64).contains(&name.chars().count())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        prop_assert_eq!(session_name_ok(&name), ok);
    }
}

// ---- the results socket's token, from its offered subprotocols ----

#[test]
fn socket_bearer_takes_the_token_offered_beside_the_socket_s_protocol() {
    assert_eq!(socket_bearer(Some("relay-results, bearer.a.b.c"), RESULTS_PROTOCOL), Some("a.b.c"));
    assert_eq!(socket_bearer(Some("bearer.tok,relay-results"), RESULTS_PROTOCOL), Some("tok"));
    assert_eq!(socket_bearer(Some("relay-lease, bearer.tok"), LEASE_PROTOCOL), Some("tok"));
    assert_eq!(socket_bearer(Some("relay-lease, bearer.tok"), RESULTS_PROTOCOL), None, "each socket its own");
}

#[test]
fn socket_bearer_needs_both_the_protocol_and_a_token() {
    for offered in [
        None,
        Some(""),
        Some("relay-results"),
        Some("bearer.tok"),
        Some("relay-results, bearer."),
        Some("chat, Bearer tok"),
    ] {
        assert_eq!(socket_bearer(offered, RESULTS_PROTOCOL), None, "{offered:?}");
    }
}

// ---- bearer ----

#[test]
fn bearer_takes_the_token_of_a_bearer_header() {
    assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
    assert_eq!(bearer(Some("bearer abc")), Some("abc"));
    assert_eq!(bearer(Some("BEARER abc")), Some("abc"));
    assert_eq!(bearer(Some("BeArEr abc")), Some("abc"));
    assert_eq!(bearer(Some("Bearer   abc")), Some("abc"));
    assert_eq!(bearer(Some("  Bearer abc  ")), Some("abc"));
    assert_eq!(bearer(Some("Bearer rk_x-y_z")), Some("rk_x-y_z"));
}

#[test]
fn bearer_refuses_anything_else() {
    for header in [
        "",
        "   ",
        "Bearer",
        "Bearer ",
        "Bearer     ",
        "Bearerabc",
        "Basic YWxhZGRpbjpvcGVuc2VzYW1l",
        "Token abc",
        "Bearer: abc",
        "abc",
        "Bearer\tabc",
        "Bearers abc",
        "Digest Bearer abc",
    ] {
        assert_eq!(bearer(Some(header)), None, "{header:?}");
    }
    assert_eq!(bearer(None), None);
}

// ---- attach tokens ----

const NOW: u64 = 1_800_000_000;

fn signer() -> Signer {
    Signer::from_seed(&[42; 32])
}

fn keys() -> KeySet {
    KeySet::from_signers(&[&signer()])
}

fn claims() -> AttachClaims {
    AttachClaims::new("t_1", "default", NOW, "j_1".into())
}

/// A token over any JSON payload, signed by the real key with the given `typ`.
fn token_over(payload: &Value, typ: Option<&str>) -> String {
    signer().sign(payload.to_string().as_bytes(), typ)
}

fn invalid(token: &str, now: u64) -> String {
    match AttachClaims::verify(token, &keys(), now) {
        Err(TokenError::Invalid(why)) => why,
        other => panic!("{token}: expected Invalid, got {other:?}"),
    }
}

#[test]
fn new_claims_last_five_minutes() {
    let c = claims();
    assert_eq!(ATTACH_TOKEN_TTL_S, 300);
    assert_eq!(
        (c.iss.as_str(), c.sub.as_str(), c.sid.as_str(), c.jti.as_str()),
        ("relay-edge", "t_1", "default", "j_1")
    );
    assert_eq!((c.iat, c.exp), (NOW, NOW + 300));
}

#[test]
fn a_signed_token_verifies_to_its_claims() {
    let token = claims().sign(&signer());
    assert_eq!(token.split('.').count(), 3);
    assert_eq!(AttachClaims::verify(&token, &keys(), NOW), Ok(claims()));
    assert_eq!(AttachClaims::verify_for(&token, &keys(), "default", NOW), Ok(claims()));
    let header: Value = serde_json::from_slice(&b64url_decode(token.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!(header, json!({"alg": "EdDSA", "kid": signer().kid(), "typ": "JWT"}));
}

#[test]
fn a_token_expires_exactly_at_exp() {
    let token = claims().sign(&signer());
    assert!(AttachClaims::verify(&token, &keys(), NOW + 299).is_ok());
    assert_eq!(AttachClaims::verify(&token, &keys(), NOW + 300), Err(TokenError::Expired));
    assert_eq!(AttachClaims::verify(&token, &keys(), u64::MAX), Err(TokenError::Expired));
    assert_eq!(AttachClaims::verify_for(&token, &keys(), "default", NOW + 300), Err(TokenError::Expired));
    assert!(TokenError::Expired.to_string().contains("POST /session"));
}

#[test]
fn a_token_is_for_its_relay_session_only() {
    let token = claims().sign(&signer());
    for other in ["other", "Default", "default ", "", "t_1/default", "default/../default"] {
        assert_eq!(AttachClaims::verify_for(&token, &keys(), other, NOW), Err(TokenError::WrongSession), "{other:?}");
    }
}

#[test]
fn the_tenant_comes_from_the_token() {
    // Two tenants may both have a session named `default`; the token says whose it is.
    let token = AttachClaims::new("t_2", "default", NOW, "j".into()).sign(&signer());
    assert_eq!(AttachClaims::verify_for(&token, &keys(), "default", NOW).unwrap().sub, "t_2");
}

#[test]
fn another_issuer_is_refused() {
    let mut other = serde_json::to_value(claims()).unwrap();
    other["iss"] = json!("relay-edge-staging");
    let why = invalid(&token_over(&other, Some("JWT")), NOW);
    assert!(why.contains("issuer"), "{why}");
}

#[test]
fn claims_missing_or_mistyped_are_refused() {
    let full = serde_json::to_value(claims()).unwrap();
    for field in ["iss", "sub", "sid", "iat", "exp", "jti"] {
        let mut partial = full.clone();
        partial.as_object_mut().unwrap().remove(field);
        invalid(&token_over(&partial, Some("JWT")), NOW);
    }
    let mut stringly = full.clone();
    stringly["exp"] = json!((NOW + 300).to_string());
    invalid(&token_over(&stringly, Some("JWT")), NOW);
    let mut negative = full;
    negative["exp"] = json!(-1);
    invalid(&token_over(&negative, Some("JWT")), NOW);
    invalid(&token_over(&json!("not claims"), Some("JWT")), NOW);
}

#[test]
fn a_token_signed_by_another_key_is_refused() {
    let stranger = Signer::from_seed(&[7; 32]);
    let token = claims().sign(&stranger);
    let why = invalid(&token, NOW);
    assert!(why.contains(stranger.kid()), "unknown kid: {why}");
    // The trusted kid on a stranger's signature.
    let parts: Vec<&str> = token.split('.').collect();
    let header = json!({"alg": "EdDSA", "kid": signer().kid(), "typ": "JWT"}).to_string();
    let forged = format!("{}.{}.{}", b64url(header.as_bytes()), parts[1], parts[2]);
    assert!(invalid(&forged, NOW).contains("does not verify"));
}

#[test]
fn a_token_from_before_a_key_rotation_still_verifies() {
    let (old, new) = (Signer::from_seed(&[1; 32]), Signer::from_seed(&[2; 32]));
    let token = claims().sign(&old);
    assert_eq!(AttachClaims::verify(&token, &KeySet::from_signers(&[&new, &old]), NOW), Ok(claims()));
    assert!(AttachClaims::verify(&token, &KeySet::from_signers(&[&new]), NOW).is_err());
}

#[test]
fn a_tampered_token_is_refused() {
    let token = claims().sign(&signer());
    let parts: Vec<&str> = token.split('.').collect();
    let mut longer = serde_json::to_value(claims()).unwrap();
    longer["exp"] = json!(NOW + 1_000_000);
    let mut elsewhere = serde_json::to_value(claims()).unwrap();
    elsewhere["sid"] = json!("admin");
    elsewhere["sub"] = json!("t_other");
    for payload in [longer, elsewhere] {
        let tampered = format!("{}.{}.{}", parts[0], b64url(payload.to_string().as_bytes()), parts[2]);
        assert!(invalid(&tampered, NOW).contains("does not verify"));
    }
    // One flipped signature bit.
    let mut signature = b64url_decode(parts[2]).unwrap();
    signature[10] ^= 1;
    invalid(&format!("{}.{}.{}", parts[0], parts[1], b64url(&signature)), NOW);
}

#[test]
fn unsigned_and_malformed_tokens_are_refused() {
    let payload = b64url(serde_json::to_string(&claims()).unwrap().as_bytes());
    let none = b64url(json!({"alg": "none", "kid": signer().kid(), "typ": "JWT"}).to_string().as_bytes());
    let hs = b64url(json!({"alg": "HS256", "kid": signer().kid(), "typ": "JWT"}).to_string().as_bytes());
    for token in [
        String::new(),
        "x".into(),
        "a.b".into(),
        "a.b.c.d".into(),
        format!("{none}.{payload}."),
        format!("{hs}.{payload}.{}", b64url(&[0; 32])),
        format!("{}.{payload}", claims().sign(&signer()).split('.').next().unwrap()),
        format!("{} ", claims().sign(&signer())),
    ] {
        invalid(&token, NOW);
    }
}

#[test]
fn a_jws_of_another_type_is_not_an_attach_token() {
    // Valid claims, the right key, but signed as something else: a capsule signature, or no typ.
    let payload = serde_json::to_value(claims()).unwrap();
    for typ in [Some("relay-capsule+jws"), None, Some("jwt"), Some("at+jwt")] {
        let why = invalid(&token_over(&payload, typ), NOW);
        assert!(why.contains("typ"), "{typ:?}: {why}");
    }
}

fn capsule_spec() -> CapsuleSpec {
    CapsuleSpec {
        language: Language::Js,
        code: "console.log(1)".into(),
        entry_argv: vec![],
        env: BTreeMap::new(),
        stdin: None,
        cwd: "/".into(),
        policy: Policy::default(),
        deps: Deps::None,
    }
}

#[test]
fn a_capsule_signature_is_not_an_attach_token() {
    let capsule = build_capsule(capsule_spec(), &signer()).unwrap();
    let sig = capsule.manifest.sig.as_deref().unwrap();
    invalid(sig, NOW);
    assert!(AttachClaims::verify_for(sig, &keys(), "default", NOW).is_err());
}

#[test]
fn an_attach_token_is_not_a_capsule_signature() {
    let capsule = build_capsule(capsule_spec(), &signer()).unwrap();
    let mut document: Value = serde_json::from_slice(&capsule.manifest_json).unwrap();
    document["sig"] = json!(claims().sign(&signer()));
    let forged = serde_json::to_vec(&document).unwrap();
    assert!(matches!(verify_manifest(&forged, &keys()), Err(CapsuleError::WrongSigType(Some(t))) if t == "JWT"));
    // The genuine capsule still verifies with the same keys.
    assert!(verify_manifest(&capsule.manifest_json, &keys()).is_ok());
}

#[test]
fn token_errors_explain_themselves() {
    assert!(TokenError::Invalid("x".into()).to_string().starts_with("invalid attach token: x"));
    assert!(TokenError::WrongSession.to_string().contains("another relay session"));
}

#[test]
fn a_capsule_files_token_reads_capsules_and_nothing_else() {
    let claims = AttachClaims::new("t_a", "default", NOW, "cap_r_1".into());
    let files = claims.sign_for_capsule_files(&signer());
    assert_eq!(AttachClaims::verify_capsule_files(&files, &keys(), NOW).unwrap(), claims);
    assert!(matches!(AttachClaims::verify(&files, &keys(), NOW), Err(TokenError::Invalid(_))));
    assert!(matches!(AttachClaims::verify_for(&files, &keys(), "default", NOW), Err(TokenError::Invalid(_))));
    let attach = claims.sign(&signer());
    assert_eq!(
        AttachClaims::verify_capsule_files(&attach, &keys(), NOW).unwrap(),
        claims,
        "a tab's own token reads too"
    );
    assert_eq!(AttachClaims::verify_capsule_files(&files, &keys(), claims.exp), Err(TokenError::Expired));
}

#[test]
fn refreshes_keep_the_key_proof_and_end_after_the_maximum() {
    let first = AttachClaims::new("t_a", "default", NOW, "att_1".into());
    let later = NOW + 4 * 60;
    let second = first.refreshed(later, "att_2".into()).unwrap();
    assert_eq!((second.sub.as_str(), second.sid.as_str(), second.auth), ("t_a", "default", NOW));
    assert_eq!((second.iat, second.exp), (later, later + ATTACH_TOKEN_TTL_S));
    assert!(first.refreshed(NOW + MAX_ATTACH_S - 1, "att_3".into()).is_ok());
    assert_eq!(second.refreshed(NOW + MAX_ATTACH_S, "att_4".into()), Err(TokenError::Expired));
}

mod forwarded_caller {
    use relay_core::auth::{Tenant, TenantDefaults};
    use relay_core::protocol::Caller;

    fn caller(name: &str, session: &str) -> Caller {
        let tenant = Tenant { id: "t_1".into(), name: name.into(), defaults: TenantDefaults::default() };
        Caller { tenant, session: session.into(), origin: "https://relay.example".into() }
    }

    #[test]
    fn a_caller_round_trips_through_one_ascii_header_value_whatever_the_tenant_name() {
        for name in ["plain", "Café ☕", "line\nbreak", "\"quotes\" and \\"] {
            let encoded = caller(name, "default").encode();
            assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{encoded}");
            assert_eq!(Caller::decode(&encoded).unwrap(), caller(name, "default"));
        }
    }

    #[test]
    fn a_damaged_or_foreign_header_is_refused() {
        assert!(Caller::decode("not base64!").unwrap_err().contains("base64url"));
        let not_a_caller = relay_core::capsule::jws::b64url(br#"{"tenant":1}"#);
        assert!(Caller::decode(&not_a_caller).is_err());
        let extra = relay_core::capsule::jws::b64url(
            br#"{"tenant":{"id":"t","name":"n"},"session":"s","origin":"o","admin":true}"#,
        );
        assert!(Caller::decode(&extra).unwrap_err().contains("unknown field"));
    }

    #[test]
    fn the_page_url_names_the_relay_session_unless_it_is_the_default() {
        assert_eq!(caller("n", "default").page_url(), "https://relay.example/");
        assert_eq!(caller("n", "work").page_url(), "https://relay.example/#session=work");
        let message = caller("Acme", "work").no_executor_message();
        assert!(message.contains("relay session 'work' of tenant 'Acme'"));
        assert!(message.contains("open https://relay.example/#session=work"));
    }

    /// The Origin check of `/mcp` compares with the origin URLs are made on: behind a proxy the
    /// page at `PUBLIC_URL` may call `/mcp`, the proxy's upstream origin no longer counts, and
    /// in dev a forged Host still proves nothing.
    #[test]
    fn the_own_page_is_the_public_origin_and_in_dev_loopback_too() {
        use relay_core::protocol::own_page_origin;
        const PUBLIC: Option<&str> = Some("https://relay.example.com/");
        let internal = "http://internal:8080";
        // (origin, PUBLIC_URL, request origin, dev) -> own page?
        for (origin, configured, request, dev, own) in [
            ("https://relay.example.com", PUBLIC, internal, false, true),
            ("https://relay.example.com/", PUBLIC, internal, false, true),
            ("https://relay.example.com", PUBLIC, internal, true, true),
            (internal, PUBLIC, internal, false, false),
            ("https://relay.example.com.evil.net", PUBLIC, internal, false, false),
            ("http://relay.example.com", PUBLIC, internal, false, false),
            ("https://relay.example.com:8443", PUBLIC, internal, false, false),
            ("null", PUBLIC, internal, false, false),
            ("https://relay.example.com", None, "https://relay.example.com", false, true),
            ("https://other.example", None, "https://relay.example.com", false, false),
            // Dev: the request's own origin is what DNS rebinding forges.
            ("https://evil.example", None, "https://evil.example", true, false),
            ("https://evil.example", PUBLIC, "https://evil.example", true, false),
            ("http://127.0.0.1:8787", None, "http://127.0.0.1:8787", true, true),
            ("http://localhost:3000", PUBLIC, internal, true, true),
            ("http://[::1]:3000", None, internal, true, true),
            ("http://127.0.0.1:8787", None, "http://127.0.0.1:8787", false, true),
            ("http://localhost:3000", None, "http://127.0.0.1:8787", false, false),
        ] {
            assert_eq!(
                own_page_origin(origin, configured, request, dev),
                Ok(own),
                "{origin} {configured:?} {request} dev={dev}"
            );
        }
        let why = own_page_origin("https://relay.example.com", Some("relay.example.com"), internal, false).unwrap_err();
        assert!(why.contains("PUBLIC_URL"), "{why}");
    }
}

// ---- run tokens ----

fn run_claims() -> RunClaims {
    RunClaims::new("t_1", "default", "r_0123456789abcdef", &"c".repeat(64), NOW, 90)
}

#[test]
fn a_run_token_verifies_to_its_claims_and_has_its_own_typ() {
    let claims = run_claims();
    assert_eq!(
        (claims.iss.as_str(), claims.sub.as_str(), claims.sid.as_str(), claims.run.as_str()),
        ("relay-edge", "t_1", "default", "r_0123456789abcdef")
    );
    assert_eq!((claims.iat, claims.exp), (NOW, NOW + 90));
    let token = claims.sign(&signer());
    assert_eq!(RunClaims::verify(&token, &keys(), NOW), Ok(claims));
    let header: Value = serde_json::from_slice(&b64url_decode(token.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!(header["typ"], "relay-run+jwt");
}

#[test]
fn a_run_token_expires_exactly_at_exp() {
    let token = run_claims().sign(&signer());
    assert!(RunClaims::verify(&token, &keys(), NOW + 89).is_ok());
    assert_eq!(RunClaims::verify(&token, &keys(), NOW + 90), Err(TokenError::Expired));
    assert!(run_token_refusal(&TokenError::Expired).contains("run token expired"));
}

#[test]
fn run_tokens_and_attach_tokens_never_pass_as_each_other() {
    let run = run_claims().sign(&signer());
    let attach = claims().sign(&signer());
    let files = claims().sign_for_capsule_files(&signer());
    for other in [&attach, &files] {
        let Err(TokenError::Invalid(why)) = RunClaims::verify(other, &keys(), NOW) else {
            panic!("an attach or capsule-files token passed as a run token");
        };
        assert!(why.contains("typ"), "{why}");
        assert!(run_token_refusal(&TokenError::Invalid(why)).starts_with("invalid run token"));
    }
    assert!(matches!(AttachClaims::verify(&run, &keys(), NOW), Err(TokenError::Invalid(_))));
    assert!(matches!(AttachClaims::verify_capsule_files(&run, &keys(), NOW), Err(TokenError::Invalid(_))));
    // The same claims under the attach typ do not pass either: the typ is what is checked.
    let relabelled = token_over(&serde_json::to_value(run_claims()).unwrap(), Some("JWT"));
    assert!(matches!(RunClaims::verify(&relabelled, &keys(), NOW), Err(TokenError::Invalid(_))));
}

#[test]
fn a_run_token_of_another_key_or_tampered_is_invalid() {
    let stranger = Signer::from_seed(&[7; 32]);
    let token = run_claims().sign(&stranger);
    assert!(matches!(RunClaims::verify(&token, &keys(), NOW), Err(TokenError::Invalid(why)) if why.contains("kid")));
    let token = run_claims().sign(&signer());
    let parts: Vec<&str> = token.split('.').collect();
    let mut widened = run_claims();
    widened.cap = "d".repeat(64);
    let forged = format!("{}.{}.{}", parts[0], b64url(&serde_json::to_vec(&widened).unwrap()), parts[2]);
    assert!(
        matches!(RunClaims::verify(&forged, &keys(), NOW), Err(TokenError::Invalid(why)) if why.contains("signature"))
    );
    let wrong_issuer = token_over(
        &json!({"iss": "other", "sub": "t", "sid": "s", "run": "r", "cap": "c", "iat": NOW, "exp": NOW + 9}),
        Some("relay-run+jwt"),
    );
    assert!(
        matches!(RunClaims::verify(&wrong_issuer, &keys(), NOW), Err(TokenError::Invalid(why)) if why.contains("issuer"))
    );
    let missing_cap = token_over(
        &json!({"iss": "relay-edge", "sub": "t", "sid": "s", "run": "r", "iat": NOW, "exp": NOW + 9}),
        Some("relay-run+jwt"),
    );
    assert!(
        matches!(RunClaims::verify(&missing_cap, &keys(), NOW), Err(TokenError::Invalid(why)) if why.contains("cap"))
    );
}

#[test]
fn a_run_token_lasts_its_timeout_plus_a_grace() {
    assert_eq!(run_token_ttl_s(60_000), 180);
    assert_eq!(run_token_ttl_s(1), 121, "rounded up");
}

#[test]
fn tenants_publish_files_of_up_to_10_mib_by_default() {
    assert_eq!(OUT_FILE_MAX_BYTES, 10 * 1024 * 1024);
    assert_eq!(TenantDefaults::default().out_file_max_bytes, OUT_FILE_MAX_BYTES);
    let t: Tenant =
        serde_json::from_value(json!({"id": "t", "name": "n", "defaults": {"outFileMaxBytes": 5}})).unwrap();
    assert_eq!(t.defaults.out_file_max_bytes, 5);
    let t: Tenant = serde_json::from_value(json!({"id": "t", "name": "n", "defaults": {}})).unwrap();
    assert_eq!(t.defaults.out_file_max_bytes, OUT_FILE_MAX_BYTES);
}

#[test]
fn a_cached_tenant_is_used_for_ten_seconds_then_read_again() {
    use relay_core::auth::cache::{TenantCache, TENANT_CACHE_MAX, TENANT_CACHE_MS};
    let tenant = Tenant { id: "t_1".into(), name: "one".into(), defaults: Default::default() };
    let mut cache = TenantCache::default();
    let key = relay_core::keys::tenant_by_key("rk_some_key_0000000000000000000000000000000000");
    assert!(cache.get(&key, 0).is_none());
    cache.put(&key, tenant.clone(), 1_000);
    assert_eq!(cache.get(&key, 1_000 + TENANT_CACHE_MS - 1), Some(tenant.clone()));
    assert!(cache.get(&key, 1_000 + TENANT_CACHE_MS).is_none(), "a changed record is seen after the TTL");
    assert!(!key.contains("rk_some_key"), "cached under the key's hash, never the key");
    for i in 0..TENANT_CACHE_MAX {
        cache.put(&format!("tenant-id:{i}"), tenant.clone(), 2_000);
    }
    assert!(cache.get("tenant-id:0", 2_000).is_none(), "full: started over");
}

#[test]
fn a_forgotten_tenant_is_gone_from_the_cache_at_once_and_no_other() {
    use relay_core::auth::cache::TenantCache;
    let tenant = Tenant { id: "t_1".into(), name: "one".into(), defaults: Default::default() };
    let mut cache = TenantCache::default();
    cache.put("tenant-id:t_1", tenant.clone(), 1_000);
    cache.put("tenant-id:t_10", tenant.clone(), 1_000);
    cache.forget("tenant-id:t_1");
    assert!(cache.get("tenant-id:t_1", 1_001).is_none(), "a deleted tenant is not served from the cache");
    assert_eq!(cache.get("tenant-id:t_10", 1_001), Some(tenant));
}
