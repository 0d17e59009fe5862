//! Compact JWS with EdDSA: round trips, key ids and sets, rotation, and every way a token
//! must be refused (alg confusion, unknown keys, tampering, malformed input).

use proptest::prelude::*;
use relay_core::capsule::jws::{b64url, b64url_decode, generate_seed, verify, JwsError, KeySet, Signer};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const SEED: [u8; 32] = [42; 32];

fn signer() -> Signer {
    Signer::from_seed(&SEED)
}

fn keys() -> KeySet {
    KeySet::from_signers(&[&signer()])
}

/// The signer's public key as `/.well-known/relay-keys.json` lists it.
fn public_jwk() -> Value {
    keys().to_jwks()["keys"][0].clone()
}

/// A token with a hand-written header, correctly signed by [`SEED`]'s key.
fn token_with_header(header: &Value, payload: &[u8]) -> String {
    token_signed_by(&SEED, header, payload)
}

fn token_signed_by(seed: &[u8; 32], header: &Value, payload: &[u8]) -> String {
    use ed25519_dalek::Signer as _;
    let input = format!("{}.{}", b64url(header.to_string().as_bytes()), b64url(payload));
    let signature = ed25519_dalek::SigningKey::from_bytes(seed).sign(input.as_bytes());
    format!("{input}.{}", b64url(&signature.to_bytes()))
}

#[test]
fn a_signed_payload_verifies_with_its_header_and_kid() {
    let token = signer().sign(b"{\"sub\":\"tab\"}", Some("JWT"));
    let verified = verify(&token, &keys()).unwrap();
    assert_eq!(verified.payload, b"{\"sub\":\"tab\"}");
    assert_eq!(verified.kid, signer().kid());
    assert_eq!(verified.header, json!({ "alg": "EdDSA", "kid": signer().kid(), "typ": "JWT" }));
    let header = b64url_decode(token.split('.').next().unwrap()).unwrap();
    assert_eq!(header, format!("{{\"alg\":\"EdDSA\",\"kid\":\"{}\",\"typ\":\"JWT\"}}", signer().kid()).as_bytes());
}

#[test]
fn without_typ_the_header_has_no_typ_and_signing_is_deterministic() {
    let token = signer().sign(b"", None);
    assert_eq!(verify(&token, &keys()).unwrap().header, json!({ "alg": "EdDSA", "kid": signer().kid() }));
    assert_eq!(token, signer().sign(b"", None));
}

#[test]
fn the_kid_is_the_first_16_hex_of_sha256_of_the_public_key() {
    let jwk = public_jwk();
    let public = b64url_decode(jwk["x"].as_str().unwrap()).unwrap();
    assert_eq!(public.len(), 32);
    let digest = hex::encode(Sha256::digest(&public));
    assert_eq!(signer().kid(), &digest[..16]);
    assert_eq!(
        jwk,
        json!({ "kty": "OKP", "crv": "Ed25519", "x": jwk["x"], "kid": signer().kid(), "alg": "EdDSA", "use": "sig" })
    );
}

#[test]
fn seeds_are_read_as_base64url_or_hex() {
    let from_b64 = Signer::from_base64url_seed(&b64url(&SEED)).unwrap();
    let hex = hex::encode(SEED);
    let from_hex = Signer::from_base64url_seed(&format!("  {}\n", hex.to_uppercase())).unwrap();
    assert_eq!(from_b64.kid(), signer().kid());
    assert_eq!(from_hex.kid(), signer().kid());
}

#[test]
fn bad_seeds_say_what_is_expected() {
    let short = Signer::from_base64url_seed("abc").unwrap_err();
    assert!(short.to_string().contains("3 characters; expected 43 base64url or 64 hex"), "{short}");
    let not_b64 = Signer::from_base64url_seed(&"!".repeat(43)).unwrap_err();
    assert!(not_b64.to_string().contains("not base64url"), "{not_b64}");
    // A sign before a digit pair (which `u8::from_str_radix` alone would take) is not hex.
    for seed in ["+f".repeat(32), "-0".repeat(32), format!("0x{}", "0".repeat(62))] {
        let not_hex = Signer::from_base64url_seed(&seed).unwrap_err();
        assert!(not_hex.to_string().contains("not hex"), "{seed}: {not_hex}");
    }
    let padded = Signer::from_base64url_seed(&format!("{}=", b64url(&SEED))).unwrap_err();
    assert!(matches!(padded, JwsError::BadSeed(_)));
}

#[test]
fn debug_output_never_shows_the_secret() {
    let shown = format!("{:?}", signer());
    assert_eq!(shown, format!("Signer {{ kid: {:?}, .. }}", signer().kid()));
}

#[test]
fn generated_seeds_are_fresh() {
    let (a, b) = (generate_seed(), generate_seed());
    assert_ne!(a, b);
    assert_ne!(a, [0; 32]);
}

#[test]
fn a_key_set_round_trips_through_jwks_and_keeps_rotated_keys() {
    let old = Signer::from_seed(&[1; 32]);
    let new = Signer::from_seed(&[2; 32]);
    let jwks = KeySet::from_signers(&[&new, &old]).to_jwks();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2);
    let set = KeySet::from_jwks(&jwks).unwrap();
    for signer in [&old, &new] {
        let verified = verify(&signer.sign(b"x", None), &set).unwrap();
        assert_eq!(verified.kid, signer.kid());
    }
    let only_old = KeySet::from_signers(&[&old]);
    let err = verify(&new.sign(b"x", None), &only_old).unwrap_err();
    assert_eq!(err, JwsError::UnknownKid(new.kid().to_string()));
    assert!(err.to_string().contains(new.kid()));
}

#[test]
fn a_jwk_without_kid_gets_the_derived_one() {
    let mut jwk = public_jwk();
    jwk.as_object_mut().unwrap().remove("kid");
    let set = KeySet::from_jwks(&json!({ "keys": [jwk] })).unwrap();
    assert!(verify(&signer().sign(b"x", None), &set).is_ok());
}

#[test]
fn unusable_jwks_are_refused_naming_the_key_and_field() {
    let good = public_jwk();
    let with = |field: &str, value: Value| {
        let mut jwk = good.clone();
        jwk[field] = value;
        KeySet::from_jwks(&json!({ "keys": [good.clone(), jwk] })).unwrap_err().to_string()
    };
    assert!(with("kty", json!("RSA")).contains("key 1: kty must be \"OKP\""));
    assert!(with("crv", json!("X25519")).contains("crv must be \"Ed25519\""));
    assert!(with("alg", json!("HS256")).contains("alg must be \"EdDSA\""));
    assert!(with("use", json!("enc")).contains("use must be \"sig\""));
    assert!(with("x", json!("AAAA")).contains("not 32 bytes"));
    // The identity point: a small-order key under which forged signatures could verify.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert!(with("x", json!(b64url(&identity))).contains("weak"));
    let err = KeySet::from_jwks(&json!({ "nokeys": [] })).unwrap_err();
    assert!(err.to_string().contains("no \"keys\" array"));
}

#[test]
fn only_eddsa_is_accepted() {
    let kid = signer().kid().to_string();
    let cases = [
        (json!({ "alg": "none", "kid": kid }), JwsError::UnsupportedAlg("none".into())),
        (json!({ "alg": "HS256", "kid": kid }), JwsError::UnsupportedAlg("HS256".into())),
        (json!({ "alg": "RS256", "kid": kid }), JwsError::UnsupportedAlg("RS256".into())),
        (json!({ "alg": "eddsa", "kid": kid }), JwsError::UnsupportedAlg("eddsa".into())),
        (json!({ "alg": ["EdDSA"], "kid": kid }), JwsError::UnsupportedAlg("[\"EdDSA\"]".into())),
        (json!({ "kid": kid }), JwsError::MissingAlg),
    ];
    for (header, expected) in cases {
        // Correctly signed by the right key: only the alg is wrong.
        let token = token_with_header(&header, b"{}");
        assert_eq!(verify(&token, &keys()).unwrap_err(), expected, "{header}");
    }
    // The classic "alg":"none" token: empty signature.
    let none = format!("{}.{}.", b64url(json!({ "alg": "none", "kid": kid }).to_string().as_bytes()), b64url(b"{}"));
    let err = verify(&none, &keys()).unwrap_err();
    assert_eq!(err.to_string(), "token alg \"none\" is not accepted; only \"EdDSA\" is");
}

#[test]
fn crit_and_missing_kid_are_refused() {
    let kid = signer().kid().to_string();
    let crit = token_with_header(&json!({ "alg": "EdDSA", "kid": kid, "crit": ["exp"] }), b"");
    assert_eq!(verify(&crit, &keys()).unwrap_err(), JwsError::CritUnsupported);
    let no_kid = token_with_header(&json!({ "alg": "EdDSA" }), b"");
    assert_eq!(verify(&no_kid, &keys()).unwrap_err(), JwsError::MissingKid);
    let numeric_kid = token_with_header(&json!({ "alg": "EdDSA", "kid": 7 }), b"");
    assert_eq!(verify(&numeric_kid, &keys()).unwrap_err(), JwsError::MissingKid);
}

#[test]
fn tampering_with_any_part_breaks_the_signature() {
    let token = signer().sign(b"{\"admin\":false}", Some("JWT"));
    let parts: Vec<&str> = token.split('.').collect();
    let forged_payload = format!("{}.{}.{}", parts[0], b64url(b"{\"admin\":true}"), parts[2]);
    assert_eq!(verify(&forged_payload, &keys()).unwrap_err(), JwsError::BadSignature);
    let other_typ = b64url(json!({ "alg": "EdDSA", "kid": signer().kid(), "typ": "other" }).to_string().as_bytes());
    let forged_header = format!("{other_typ}.{}.{}", parts[1], parts[2]);
    assert_eq!(verify(&forged_header, &keys()).unwrap_err(), JwsError::BadSignature);
    let mut signature = b64url_decode(parts[2]).unwrap();
    signature[0] ^= 1;
    let forged_sig = format!("{}.{}.{}", parts[0], parts[1], b64url(&signature));
    assert_eq!(verify(&forged_sig, &keys()).unwrap_err(), JwsError::BadSignature);
}

#[test]
fn a_token_claiming_another_known_kid_does_not_verify() {
    let victim = Signer::from_seed(&[3; 32]);
    let attacker = Signer::from_seed(&[4; 32]);
    let set = KeySet::from_signers(&[&victim, &attacker]);
    // The attacker signs with their own key but names the victim's kid.
    let token = token_signed_by(&[4; 32], &json!({ "alg": "EdDSA", "kid": victim.kid() }), b"x");
    assert_eq!(verify(&token, &set).unwrap_err(), JwsError::BadSignature);
    let honest = token_signed_by(&[4; 32], &json!({ "alg": "EdDSA", "kid": attacker.kid() }), b"x");
    assert!(verify(&honest, &set).is_ok());
}

#[test]
fn a_malleated_signature_is_refused() {
    // s + L (the group order) verifies under lax Ed25519 checks; verify_strict must refuse it.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let token = signer().sign(b"x", None);
    let (input, sig) = token.rsplit_once('.').unwrap();
    let mut signature = b64url_decode(sig).unwrap();
    let mut carry = 0u16;
    for (byte, l) in signature[32..].iter_mut().zip(L) {
        let sum = u16::from(*byte) + u16::from(l) + carry;
        *byte = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(verify(&format!("{input}.{}", b64url(&signature)), &keys()).unwrap_err(), JwsError::BadSignature);
}

#[test]
fn malformed_tokens_say_what_is_wrong() {
    let good = signer().sign(b"x", None);
    let parts: Vec<&str> = good.split('.').collect();
    let cases: Vec<(String, JwsError)> = vec![
        (String::new(), JwsError::PartCount(1)),
        ("justonepart".into(), JwsError::PartCount(1)),
        (format!("{}.{}", parts[0], parts[1]), JwsError::PartCount(2)),
        (format!("{good}.extra"), JwsError::PartCount(4)),
        (format!("!!!.{}.{}", parts[1], parts[2]), JwsError::BadBase64("header")),
        (format!("{}=.{}.{}", parts[0], parts[1], parts[2]), JwsError::BadBase64("header")),
        (format!("{}.{}.{}", parts[0], "a+b/", parts[2]), JwsError::BadBase64("payload")),
        (format!("{}.{}.%%", parts[0], parts[1]), JwsError::BadBase64("signature")),
        (format!("{}.{}.{}", parts[0], parts[1], b64url(&[0; 63])), JwsError::SignatureLength(63)),
    ];
    for (token, expected) in cases {
        assert_eq!(verify(&token, &keys()).unwrap_err(), expected, "{token:?}");
    }
    let not_json = format!("{}.{}.{}", b64url(b"not json"), parts[1], parts[2]);
    assert!(matches!(verify(&not_json, &keys()), Err(JwsError::BadHeader(_))));
    let array = format!("{}.{}.{}", b64url(b"[1,2]"), parts[1], parts[2]);
    assert!(verify(&array, &keys()).unwrap_err().to_string().contains("not a JSON object"));
    assert_eq!(
        JwsError::PartCount(2).to_string(),
        "token has 2 dot-separated parts; a compact JWS has 3 (header.payload.signature)"
    );
}

#[test]
fn base64url_is_strict() {
    assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
    assert_eq!(b64url_decode("-_8"), Some(vec![0xfb, 0xff]));
    assert_eq!(b64url_decode("+/8"), None, "standard alphabet");
    assert_eq!(b64url_decode("AA=="), None, "padding");
    assert_eq!(b64url_decode("AB"), None, "non-zero trailing bits");
}

proptest! {
    #[test]
    fn arbitrary_strings_never_panic_or_verify(token in any::<String>()) {
        prop_assert!(verify(&token, &keys()).is_err());
    }

    #[test]
    fn arbitrary_three_part_tokens_never_verify(
        header in prop::collection::vec(any::<u8>(), 0..64),
        payload in prop::collection::vec(any::<u8>(), 0..64),
        signature in prop::collection::vec(any::<u8>(), 0..80),
    ) {
        let token = format!("{}.{}.{}", b64url(&header), b64url(&payload), b64url(&signature));
        prop_assert!(verify(&token, &keys()).is_err());
    }

    #[test]
    fn any_payload_round_trips(payload in prop::collection::vec(any::<u8>(), 0..256)) {
        let verified = verify(&signer().sign(&payload, None), &keys()).unwrap();
        prop_assert_eq!(verified.payload, payload);
    }
}
