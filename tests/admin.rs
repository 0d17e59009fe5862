//! What an admin may set on a tenant (`relay_core::auth::admin`): creation and JSON merge
//! patches of its name and defaults, validated alike, with hostile names and out-of-bounds
//! numbers refused by name.

use proptest::prelude::*;
use relay_core::auth::admin::{check_name, from_admin_json, new_tenant, MAX_NAME_CHARS, MAX_OUT_FILE_BYTES};
use relay_core::auth::{Tenant, TenantDefaults};
use relay_core::oauth::consent::display_name;
use relay_core::policy::{check_url, Policy, Verdict, MAX_TIMEOUT_MS};
use serde_json::json;

fn tenant() -> Tenant {
    Tenant { id: "t_1".into(), name: "acme".into(), defaults: TenantDefaults::default() }
}

fn patched(patch: serde_json::Value) -> Result<Tenant, String> {
    tenant().patched(patch.to_string().as_bytes())
}

// ---- PATCH ----

#[test]
fn a_patch_allows_a_host_and_leaves_every_other_default_alone() {
    let got =
        patched(json!({ "defaults": { "policy": { "network": { "allowedDomains": ["example.com"] } } } })).unwrap();
    assert_eq!(got.defaults.policy.network.allowed_domains, vec!["example.com".to_string()]);
    let mut expected = TenantDefaults::default();
    expected.policy.network.allowed_domains = vec!["example.com".into()];
    assert_eq!(got.defaults, expected, "nothing else moved");
    assert_eq!((got.id.as_str(), got.name.as_str()), ("t_1", "acme"));
    assert_eq!(check_url(&got.defaults.policy.network, "https://api.example.com/"), Verdict::Allow);
}

#[test]
fn a_patch_merges_objects_replaces_arrays_and_null_restores_a_default() {
    let first = patched(json!({ "defaults": { "queue": { "attachWaitMs": 300 }, "outFileMaxBytes": 64 } })).unwrap();
    assert_eq!(first.defaults.queue.attach_wait_ms, 300);
    assert_eq!(first.defaults.queue.max_queued, 100, "a sibling kept");
    let second = first
        .patched(
            json!({ "name": "acme two", "defaults": { "outFileMaxBytes": null, "queue": { "maxQueued": 5 } } })
                .to_string()
                .as_bytes(),
        )
        .unwrap();
    assert_eq!(second.name, "acme two");
    assert_eq!(second.defaults.out_file_max_bytes, TenantDefaults::default().out_file_max_bytes, "null: the default");
    assert_eq!((second.defaults.queue.attach_wait_ms, second.defaults.queue.max_queued), (300, 5));
    let denied = json!({ "defaults": { "policy": { "network": { "deniedDomains": ["a.com", "b.com"] } } } });
    let third = second.patched(denied.to_string().as_bytes()).unwrap();
    let replaced = json!({ "defaults": { "policy": { "network": { "deniedDomains": ["c.com"] } } } });
    let fourth = third.patched(replaced.to_string().as_bytes()).unwrap();
    assert_eq!(fourth.defaults.policy.network.denied_domains, vec!["c.com".to_string()], "arrays replace");
}

#[test]
fn a_patch_refuses_what_it_cannot_change_and_what_is_not_a_setting() {
    let cases = [
        (json!({ "id": "t_2" }), "\"id\" cannot be patched"),
        (json!({ "key": "rk_x" }), "\"key\" cannot be patched"),
        (json!({ "name": null }), "name cannot be removed"),
        (json!([]), "must be an object"),
        (
            json!({ "defaults": { "policy": { "network": { "allowedDomain": ["x.com"] } } } }),
            "defaults.policy.network.allowedDomain is not a tenant setting",
        ),
        (json!({ "defaults": { "outFileMaxByte": 1 } }), "defaults.outFileMaxByte is not"),
        (json!({ "defaults": { "policy": { "network": { "allowedDomains": ["https://x.com"] } } } }), "domain pattern"),
        (json!({ "defaults": { "packages": { "pypiIndex": "https://pypi.org/" } } }), "packages.pypiIndex"),
        (json!({ "defaults": { "policy": { "limits": { "timeoutMs": "10" } } } }), "tenant:"),
    ];
    for (patch, expected) in cases {
        let why = patched(patch.clone()).unwrap_err();
        assert!(why.contains(expected), "{patch}: {why}");
    }
    assert!(tenant().patched(b"{").unwrap_err().contains("not JSON"));
}

// ---- bounds, on creation and patch alike ----

#[test]
fn numbers_out_of_bounds_are_refused_naming_the_field_and_its_range() {
    let cases = [
        (
            json!({ "outFileMaxBytes": 1u64 << 63 }),
            "defaults.outFileMaxBytes is 9223372036854775808; it must be between 1 and 104857600",
        ),
        (json!({ "outFileMaxBytes": 0 }), "defaults.outFileMaxBytes"),
        (
            json!({ "policy": { "limits": { "timeoutMs": 1_000_000_000_000u64 } } }),
            "defaults.policy.limits.timeoutMs is 1000000000000; it must be between 1 and 3600000",
        ),
        (json!({ "policy": { "limits": { "timeoutMs": 0 } } }), "limits.timeoutMs"),
        (json!({ "policy": { "limits": { "memMb": 100_000 } } }), "limits.memMb"),
        (json!({ "policy": { "limits": { "stdoutBytes": u64::MAX } } }), "limits.stdoutBytes"),
        (json!({ "policy": { "network": { "maxBodyBytes": u64::MAX } } }), "network.maxBodyBytes"),
        (json!({ "policy": { "network": { "maxRedirects": 1000 } } }), "network.maxRedirects"),
        (json!({ "queue": { "maxQueued": 0 } }), "queue.maxQueued"),
        (json!({ "queue": { "maxWaitMs": u64::MAX } }), "queue.maxWaitMs"),
        (json!({ "queue": { "attachWaitMs": 86_400_000 } }), "queue.attachWaitMs"),
        (json!({ "workspace": { "maxBytes": 1 } }), "workspace.maxBytes is 1; it must be between 65536"),
        (json!({ "workspace": { "maxBytes": u64::MAX } }), "workspace.maxBytes"),
        (json!({ "workspace": { "maxbytes": 5 } }), "maxbytes"),
    ];
    for (defaults, expected) in cases {
        let created = from_admin_json(json!({ "id": "t_1", "name": "acme", "defaults": defaults })).unwrap_err();
        assert!(created.contains(expected), "{defaults}: {created}");
        let patch = patched(json!({ "defaults": defaults })).unwrap_err();
        assert_eq!(patch, created, "a patch is validated as creation is");
    }
    let at_the_edge = json!({ "outFileMaxBytes": MAX_OUT_FILE_BYTES, "policy": { "limits": { "timeoutMs": MAX_TIMEOUT_MS } },
        "workspace": { "maxBytes": relay_core::workspace::MAX_MAX_BYTES } });
    assert!(from_admin_json(json!({ "id": "t", "name": "n", "defaults": at_the_edge })).is_ok());
}

#[test]
fn a_capsule_policy_keeps_to_the_same_limits() {
    let mut policy = Policy::default();
    assert_eq!(policy.validate(), Ok(()));
    policy.limits.timeout_ms = MAX_TIMEOUT_MS + 1;
    assert!(policy.validate().unwrap_err().contains("limits.timeoutMs"));
}

#[test]
fn every_invisible_character_the_consent_page_strips_is_refused_in_a_name() {
    for c in ['\u{AD}', '\u{34F}', '\u{180E}', '\u{FE00}', '\u{FE0F}', '\u{E0001}', '\u{E007F}', '\u{206A}', '\u{206F}']
    {
        let why = check_name(&format!("acme{c}corp")).unwrap_err();
        assert!(why.contains(&format!("U+{:04X}", u32::from(c))), "{why}");
    }
}

#[test]
fn hostile_names_are_refused() {
    let long = "n".repeat(MAX_NAME_CHARS + 1);
    for name in
        ["", "   ", "a\0b", "a\r\nb", "a\u{1b}[31mred", "evil\u{202E}gnp.exe", "a\u{200B}b", "\u{FEFF}bom", &long]
    {
        let why = check_name(name).unwrap_err();
        assert!(why.starts_with("name "), "{name:?}: {why}");
        let created = from_admin_json(json!({ "id": "t", "name": name })).unwrap_err();
        assert_eq!(created, why, "{name:?}");
    }
    for name in ["acme", "Acme Corp — research", "東京チーム", "n".repeat(MAX_NAME_CHARS).as_str(), "emoji 🚀"]
    {
        assert_eq!(check_name(name), Ok(()), "{name:?}");
    }
}

/// Characters around the invisible ones: controls, format characters, fillers, selectors, tags.
const SUSPECTS: &[std::ops::RangeInclusive<char>] = &[
    '\u{0}'..='\u{9F}',
    '\u{AD}'..='\u{AD}',
    '\u{34F}'..='\u{34F}',
    '\u{600}'..='\u{61C}',
    '\u{115F}'..='\u{1160}',
    '\u{17B4}'..='\u{17B5}',
    '\u{180B}'..='\u{180F}',
    '\u{2000}'..='\u{206F}',
    '\u{3164}'..='\u{3164}',
    '\u{FE00}'..='\u{FE0F}',
    '\u{FEFF}'..='\u{FEFF}',
    '\u{FFA0}'..='\u{FFA0}',
    '\u{FFF0}'..='\u{FFFD}',
    '\u{E0000}'..='\u{E01EF}',
];

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the name, it is accepted only if every character is printable and visible.
    #[test]
    fn a_name_is_accepted_only_without_control_or_invisible_characters(name in "\\PC{0,8}[\\x00-\\x1f\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]?\\PC{0,8}") {
        let sneaky = name.chars().any(|c| c.is_control() || ('\u{202A}'..='\u{202E}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c));
        if sneaky {
            prop_assert!(check_name(&name).is_err());
        }
    }

    /// One list of hidden characters: a tenant's name is refused exactly when it holds one the
    /// consent page strips from a client's name (`text::is_hidden`, which both use).
    #[test]
    fn a_name_is_refused_exactly_when_the_consent_page_would_strip_a_character(
        middle in prop::collection::vec(prop_oneof![any::<char>(), prop::char::ranges(SUSPECTS.into())], 0..8)
    ) {
        let name = format!("a{}z", middle.into_iter().collect::<String>());
        let stripped = |c: char| display_name(&format!("a{c}b")).as_deref() == Some("ab");
        prop_assert_eq!(check_name(&name).is_err(), name.chars().any(stripped), "{:?}", name);
    }

    /// A limit is accepted exactly when it is within its bounds, by creation and patch alike.
    #[test]
    fn a_timeout_is_accepted_exactly_within_bounds(timeout in any::<u64>()) {
        let patch = json!({ "defaults": { "policy": { "limits": { "timeoutMs": timeout } } } });
        let ok = (1..=MAX_TIMEOUT_MS).contains(&timeout);
        prop_assert_eq!(patched(patch).is_ok(), ok);
    }
}

// ---- POST ----

#[test]
fn a_new_tenant_gets_a_fresh_id_unless_it_names_one_and_may_bring_its_key() {
    let (created, key) = new_tenant(br#"{"name": "acme"}"#, "t_fresh".into()).unwrap();
    assert_eq!((created.id.as_str(), key), ("t_fresh", None));
    let body = br#"{"name": "dev", "id": "dev", "key": "rk_k", "defaults": {"queue": {"attachWaitMs": 1}}}"#;
    let (seeded, key) = new_tenant(body, "t_fresh".into()).unwrap();
    assert_eq!((seeded.id.as_str(), key.as_deref()), ("dev", Some("rk_k")));
    assert_eq!(seeded.defaults.queue.attach_wait_ms, 1);
    for (body, expected) in [
        (&br#"{"name": "x", "id": "a/b"}"#[..], "tenant id"),
        (br#"{"name": "x", "key": 1}"#, "key must be a string"),
        (br#"{"nme": "x"}"#, "missing field `name`"),
        (br#"{"name": "x", "extra": 1}"#, "extra is not a tenant setting"),
        (br#"[]"#, "expected an object"),
    ] {
        let why = new_tenant(body, "t".into()).unwrap_err();
        assert!(why.contains(expected), "{}: {why}", String::from_utf8_lossy(body));
    }
}
