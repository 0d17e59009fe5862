//! `run_js` / `run_py` arguments turned into a capsule spec: every refusal a ValidationError
//! naming the argument, dependencies read apart for a build, and a client's policy
//! override that can only narrow the tenant's.

use std::collections::BTreeMap;

use proptest::prelude::*;
use relay_core::capsule::{CapsuleSpec, Deps, Language};
use relay_core::error::ErrorName;
use relay_core::packages::DepsRequest;
use relay_core::policy::Policy;
use relay_core::run::args::{capsule_spec, deps_request, language_of};
use serde_json::{json, Value};

fn tenant_policy() -> Policy {
    let mut policy = Policy::default();
    policy.network.allowed_domains = vec!["example.com".into(), "*.api.test".into()];
    policy.network.denied_domains = vec!["secret.example.com".into()];
    policy
}

fn spec(language: &str, arguments: Value) -> CapsuleSpec {
    capsule_spec(language, &arguments, &tenant_policy()).unwrap_or_else(|e| panic!("{arguments}: {e:?}"))
}

/// The message of a refusal, which must be a ValidationError.
fn refusal(language: &str, arguments: Value) -> String {
    let err = capsule_spec(language, &arguments, &tenant_policy()).expect_err(&arguments.to_string());
    assert_eq!(err.name, ErrorName::ValidationError, "{arguments}: {}", err.message);
    err.message
}

#[test]
fn language_of_knows_tool_names_and_short_names_only() {
    assert_eq!(language_of("run_js"), Some(Language::Js));
    assert_eq!(language_of("js"), Some(Language::Js));
    assert_eq!(language_of("run_py"), Some(Language::Py));
    assert_eq!(language_of("py"), Some(Language::Py));
    for other in ["", "JS", "Run_js", "run_ts", "python", "javascript", " js", "js ", "run_js\0", "read"] {
        assert_eq!(language_of(other), None, "{other:?}");
    }
}

#[test]
fn an_unknown_language_is_refused() {
    let message = refusal("ruby", json!({"code": "puts 1"}));
    assert!(message.starts_with("language:"), "{message}");
}

#[test]
fn minimal_arguments_give_the_defaults_and_the_tenant_policy() {
    for (language, expected) in [("run_js", Language::Js), ("js", Language::Js), ("run_py", Language::Py)] {
        let got = spec(language, json!({"code": "print(1)"}));
        assert_eq!(
            got,
            CapsuleSpec {
                language: expected,
                code: "print(1)".into(),
                entry_argv: vec![],
                env: BTreeMap::new(),
                stdin: None,
                cwd: "/".into(),
                policy: tenant_policy(),
                deps: Deps::None,
            }
        );
    }
}

#[test]
fn every_argument_is_carried_into_the_spec() {
    let got = spec(
        "run_py",
        json!({
            "code": "import sys; print(sys.argv)",
            "stdin": "line 1\nline 2\n",
            "args": ["--verbose", "x y", ""],
            "env": {"MODE": "test", "EMPTY": ""},
            "cwd": "/tmp/work",
        }),
    );
    assert_eq!(got.code, "import sys; print(sys.argv)");
    assert_eq!(got.stdin.as_deref(), Some("line 1\nline 2\n"));
    assert_eq!(got.entry_argv, ["--verbose", "x y", ""]);
    assert_eq!(got.env, BTreeMap::from([("MODE".into(), "test".into()), ("EMPTY".into(), "".into())]));
    assert_eq!(got.cwd, "/tmp/work");
}

#[test]
fn code_is_kept_byte_for_byte() {
    let code = "  \n\tconsole.log('héllo 🌍')\r\n  ";
    assert_eq!(spec("js", json!({ "code": code })).code, code);
}

#[test]
fn empty_stdin_is_no_stdin() {
    assert_eq!(spec("js", json!({"code": "1", "stdin": ""})).stdin, None);
    assert_eq!(spec("js", json!({"code": "1", "stdin": null})).stdin, None);
    assert_eq!(spec("js", json!({"code": "1", "stdin": " "})).stdin.as_deref(), Some(" "));
}

#[test]
fn empty_or_missing_code_is_refused_naming_code() {
    for args in
        [json!({"code": ""}), json!({"code": "   \n\t "}), json!({}), json!({"code": null}), json!({"stdin": "x"})]
    {
        let message = refusal("js", args.clone());
        assert!(message.contains("code"), "{args}: {message}");
    }
}

#[test]
fn arguments_that_are_not_an_object_are_refused() {
    for args in [json!(null), json!("print(1)"), json!(["print(1)"]), json!(1)] {
        refusal("py", args);
    }
}

#[test]
fn wrong_types_are_refused_naming_the_argument() {
    let cases = [
        ("code", json!({"code": 5})),
        ("code", json!({"code": ["a"]})),
        ("stdin", json!({"code": "1", "stdin": 5})),
        ("args", json!({"code": "1", "args": "--flag"})),
        ("args", json!({"code": "1", "args": [1, 2]})),
        ("env", json!({"code": "1", "env": ["A=1"]})),
        ("env", json!({"code": "1", "env": {"A": 1}})),
        ("cwd", json!({"code": "1", "cwd": 5})),
        ("policy", json!({"code": "1", "policy": "strict"})),
        ("policy", json!({"code": "1", "policy": {"limits": {"timeoutMs": "10s"}}})),
        ("policy", json!({"code": "1", "policy": {"limits": {"timeoutMs": -1}}})),
        ("policy", json!({"code": "1", "policy": {"network": {"denyIpLiterals": "yes"}}})),
    ];
    for (field, args) in cases {
        let message = refusal("js", args.clone());
        assert!(message.starts_with(&format!("{field}:")), "{args}: {message}");
    }
}

#[test]
fn unknown_fields_in_the_policy_override_are_refused_naming_them() {
    let cases = [
        ("netwrk", json!({"netwrk": {}})),
        ("allowedDomain", json!({"network": {"allowedDomain": ["evil.com"]}})),
        ("timeout_ms", json!({"limits": {"timeout_ms": 1}})),
        ("writeable", json!({"filesystem": {"writeable": ["/"]}})),
    ];
    for (field, policy) in cases {
        let message = refusal("py", json!({"code": "1", "policy": policy}));
        assert!(message.contains(&format!("`{field}`")) && message.contains("policy"), "{field}: {message}");
    }
}

fn deps(language: &str, arguments: Value) -> Result<Option<DepsRequest>, String> {
    deps_request(language, &arguments).map_err(|e| {
        assert_eq!(e.name, ErrorName::ValidationError, "{arguments}: {}", e.message);
        e.message
    })
}

#[test]
fn listed_dependencies_leave_the_spec_alone_and_are_read_apart() {
    let args = json!({"code": "1", "npm": {"dependencies": {"lodash": "^4.17.21"}}});
    assert_eq!(spec("js", args.clone()).deps, Deps::None, "the build, not the call, fills the deps layer");
    let dependencies = BTreeMap::from([("lodash".to_string(), "^4.17.21".to_string())]);
    assert_eq!(deps("js", args), Ok(Some(DepsRequest::Npm { dependencies, subpaths: Default::default() })));
    let args = json!({"code": "1", "pip": {"requirements": ["six==1.16.0"], "wheelUrls": ["https://example.com/x-1.0-py3-none-any.whl"]}});
    let expected = DepsRequest::Pip {
        requirements: vec!["six==1.16.0".into()],
        wheel_urls: vec!["https://example.com/x-1.0-py3-none-any.whl".into()],
    };
    assert_eq!(deps("py", args), Ok(Some(expected)));
}

#[test]
fn empty_dependencies_are_no_dependencies() {
    for (language, section) in [
        ("js", json!({"npm": {}})),
        ("js", json!({"npm": null})),
        ("js", json!({"npm": {"dependencies": {}}})),
        ("js", json!({"npm": {"dependencies": null}})),
        ("js", json!({"pip": null})),
        ("py", json!({"pip": {}})),
        ("py", json!({"pip": {"requirements": [], "wheelUrls": []}})),
        ("py", json!({"pip": {"requirements": null}})),
        ("py", json!({"npm": null})),
    ] {
        let mut args = section.clone();
        args["code"] = json!("1");
        assert_eq!(deps(language, args), Ok(None), "{language} {section}");
    }
}

#[test]
fn dependency_sections_of_the_wrong_shape_are_refused() {
    // `npm: ["lodash"]` must not pass as "no dependencies", nor npm packages on run_py.
    for (language, field, args) in [
        ("js", "npm", json!({"code": "1", "npm": ["lodash"]})),
        ("js", "npm", json!({"code": "1", "npm": "lodash"})),
        ("js", "npm.dependencies", json!({"code": "1", "npm": {"dependencies": ["lodash"]}})),
        ("js", "npm.dependencies", json!({"code": "1", "npm": {"dependencies": "lodash"}})),
        ("js", "pip", json!({"code": "1", "pip": {"requirements": ["six"]}})),
        ("py", "npm", json!({"code": "1", "npm": {"dependencies": {"lodash": "4"}}})),
        ("py", "pip", json!({"code": "1", "pip": ["requests"]})),
        ("py", "pip.requirements", json!({"code": "1", "pip": {"requirements": "six"}})),
    ] {
        let message = deps(language, args.clone()).expect_err(&args.to_string());
        assert!(message.starts_with(&format!("{field}:")), "{args}: {message}");
    }
}

#[test]
fn cwd_must_be_absolute_without_dot_dot() {
    for cwd in ["tmp", "", "./tmp", "../tmp", "/tmp/..", "/..", "/tmp/../../etc", "..", "C:\\tmp"] {
        let message = refusal("js", json!({"code": "1", "cwd": cwd}));
        assert!(message.starts_with("cwd:"), "{cwd:?}: {message}");
    }
    for cwd in ["/", "/tmp", "/out/sub dir", "/a..b", "/..hidden"] {
        assert_eq!(spec("js", json!({"code": "1", "cwd": cwd})).cwd, cwd);
    }
}

#[test]
fn no_override_is_the_tenant_policy() {
    assert_eq!(spec("js", json!({"code": "1", "policy": {}})).policy, tenant_policy());
    assert_eq!(spec("js", json!({"code": "1", "policy": null})).policy, tenant_policy());
}

#[test]
fn the_override_narrows_the_tenant_policy() {
    let got = spec(
        "js",
        json!({"code": "1", "policy": {
            "network": {
                "allowedDomains": ["api.example.com", "evil.com", "x.api.test"],
                "deniedDomains": ["ads.example.com"],
                "maxBodyBytes": 10,
                "maxRedirects": 0,
            },
            "filesystem": {"writable": ["/tmp/mine", "/etc"], "readonly": ["/data"]},
            "limits": {"timeoutMs": 1_000, "memMb": 64, "stdoutBytes": 100},
        }}),
    )
    .policy;
    assert_eq!(got.network.allowed_domains, ["api.example.com", "x.api.test"], "evil.com is not the tenant's");
    assert_eq!(got.network.denied_domains, ["secret.example.com", "ads.example.com"]);
    assert_eq!((got.network.max_body_bytes, got.network.max_redirects), (10, 0));
    assert_eq!(got.filesystem.writable, ["/tmp/mine"], "/etc is not writable for the tenant");
    assert_eq!(got.filesystem.readonly, ["/", "/data"]);
    assert_eq!((got.limits.timeout_ms, got.limits.mem_mb, got.limits.stdout_bytes), (1_000, 64, 100));
}

#[test]
fn the_override_never_widens_the_tenant_policy() {
    let tenant = tenant_policy();
    let got = spec(
        "py",
        json!({"code": "1", "policy": {
            "network": {
                "allowedDomains": ["*", "com", "evil.com", "*.example.com.evil.net"],
                "deniedDomains": [],
                "denyIpLiterals": false,
                "blockPrivateRanges": false,
                "maxBodyBytes": u64::MAX,
                "maxRedirects": 1000,
            },
            "filesystem": {"writable": ["/", "/tmp/../etc"], "readonly": []},
            "limits": {"timeoutMs": 10_000_000, "memMb": 100_000, "stdoutBytes": u64::MAX},
        }}),
    )
    .policy;
    assert!(got.network.allowed_domains.is_empty(), "{:?}", got.network.allowed_domains);
    assert_eq!(got.network.denied_domains, tenant.network.denied_domains);
    assert!(got.network.deny_ip_literals && got.network.block_private_ranges);
    assert_eq!(got.network.max_body_bytes, tenant.network.max_body_bytes);
    assert_eq!(got.network.max_redirects, tenant.network.max_redirects);
    assert!(got.filesystem.writable.is_empty(), "{:?}", got.filesystem.writable);
    assert_eq!(got.filesystem.readonly, tenant.filesystem.readonly);
    assert_eq!(got.limits, tenant.limits);
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Limits take the minimum; safety switches stay on; the tenant's denials all stay.
    #[test]
    fn limits_are_the_minimum_of_tenant_and_client(
        timeout in proptest::option::of(any::<u64>()),
        mem in proptest::option::of(any::<u32>()),
        out in proptest::option::of(any::<u64>()),
        body in proptest::option::of(any::<u64>()),
        redirects in proptest::option::of(any::<u32>()),
        deny_ip in proptest::option::of(any::<bool>()),
        block_private in proptest::option::of(any::<bool>()),
        denied in proptest::option::of(proptest::collection::vec("[a-z]{1,8}\\.(com|net)", 0..4)),
    ) {
        let tenant = tenant_policy();
        let args = json!({"code": "1", "policy": {
            "network": {"maxBodyBytes": body, "maxRedirects": redirects, "denyIpLiterals": deny_ip,
                        "blockPrivateRanges": block_private, "deniedDomains": denied},
            "limits": {"timeoutMs": timeout, "memMb": mem, "stdoutBytes": out},
        }});
        let got = capsule_spec("js", &args, &tenant).unwrap().policy;
        prop_assert_eq!(got.limits.timeout_ms, timeout.map_or(tenant.limits.timeout_ms, |t| t.min(tenant.limits.timeout_ms)));
        prop_assert_eq!(got.limits.mem_mb, mem.map_or(tenant.limits.mem_mb, |m| m.min(tenant.limits.mem_mb)));
        prop_assert_eq!(got.limits.stdout_bytes, out.map_or(tenant.limits.stdout_bytes, |o| o.min(tenant.limits.stdout_bytes)));
        prop_assert!(got.network.max_body_bytes <= tenant.network.max_body_bytes);
        prop_assert!(got.network.max_redirects <= tenant.network.max_redirects);
        prop_assert!(got.network.deny_ip_literals && got.network.block_private_ranges);
        for d in &tenant.network.denied_domains {
            prop_assert!(got.network.denied_domains.contains(d));
        }
        for d in denied.iter().flatten() {
            prop_assert!(got.network.denied_domains.contains(d));
        }
    }
}
