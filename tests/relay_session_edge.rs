//! A run at the edge executor in the relay session (`relay_session::edge`), on the test
//! platform: a `tab-or-edge` tenant's run with no tab is started at the edge; its job carries
//! the capsule with every layer inline and the workspace as the run starts (its root recorded
//! for the audit); its events end it as a tab's would, with `executor: edge` in its answer and
//! audit record; a never-built packaged run fails DepsResolutionFailed; Python stays on tabs.

#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use std::rc::Rc;

use base64::Engine;
use platform::{edge_job, run, session, signer, tool_call, Session, Stream};
use relay_core::auth::QueueSettings;
use relay_core::error::ErrorName;
use relay_core::mcp::{Era, Tool};
use relay_core::protocol::Caller;
use relay_core::relay_session::runs::{executor_of, prepare, Answer, Call, FileCall, Work};
use relay_core::relay_session::{RelaySession, Sql, Store};
use relay_core::run::backchannel::parse_batch;
use relay_core::run::contexts::{Ask, ContextSettings};
use relay_core::run::executor::{EdgeBudget, Executor};
use relay_core::run::machine::Input;
use relay_core::upstream::seal::SealingKey;
use serde_json::{json, Value};

const BUDGET: EdgeBudget = EdgeBudget { cpu_ms_per_day: 60_000, runs_per_minute: 10 };

fn edge_caller() -> Caller {
    let mut caller = platform::caller();
    caller.tenant.defaults.executor = Executor::TabOrEdge;
    caller.tenant.defaults.edge = Some(BUDGET);
    caller
}

fn edge_session() -> Session {
    let session = session();
    session.configure(&QueueSettings::default(), Some(BUDGET));
    session
}

/// Admits and prepares `arguments` as run `run` of `tool` by the edge tenant: its stream.
fn start(session: &Session, run_id: &str, tool: Tool, arguments: Value) -> (Call, Stream) {
    let tool_call = tool_call(tool, arguments, Era::Modern, None);
    let caller = edge_caller();
    let Work::Run(job) = Work::of(session, &caller, &tool_call, || Ok::<_, ()>(signer())).unwrap().unwrap() else {
        panic!("a run")
    };
    let call = Call { tool_call, caller, run: run_id.into(), job: Rc::new(job) };
    let stream = Stream::default();
    session.admit_call(&call, Box::new(Answer::streamed(call.clone(), stream.clone()))).expect("admitted");
    run(prepare(session, &call.caller, &call.run, &call.job));
    (call, stream)
}

#[test]
fn a_run_with_no_tab_goes_to_the_edge_with_its_capsule_and_workspace_and_ends_by_its_events() {
    let session = edge_session();
    let write = tool_call(Tool::Write, json!({ "path": "/tmp/a.txt", "content": "hello" }), Era::Modern, None);
    let Work::File(op) = Work::of(&session, &edge_caller(), &write, || Ok::<_, ()>(signer())).unwrap().unwrap() else {
        panic!("a file tool")
    };
    let file = FileCall { tool_call: write, caller: edge_caller(), run: "w_1".into(), op };
    run(session.answer_file(&file, &SealingKey::of(&signer()))).expect("written");
    let (_, stream) = start(&session, "r_1", Tool::RunJs, json!({ "code": "console.log(1)" }));
    assert_eq!(*session.platform.edge.borrow(), ["start r_1"]);

    let job = edge_job(&session, "r_1").expect("a job");
    let inline = &job["announced"]["inline"];
    let manifest: Value = serde_json::from_str(inline["manifest"].as_str().unwrap()).unwrap();
    for layer in manifest["fsLayers"].as_array().unwrap() {
        assert!(inline["layers"][layer["path"].as_str().unwrap()].is_string(), "every layer inline: {layer}");
    }
    let a = base64::engine::general_purpose::STANDARD.decode(job["workspace"]["/tmp/a.txt"].as_str().unwrap()).unwrap();
    assert_eq!(a, b"hello");
    let index =
        base64::engine::general_purpose::STANDARD.decode(job["workspace"]["/mcps/index.json"].as_str().unwrap());
    let index: Value = serde_json::from_slice(&index.unwrap()).expect("the /mcps tree, as a tab has it");
    assert!(index["usage"].as_str().is_some_and(|usage| usage.contains("mcps.call")), "{index}");
    let before: Vec<Value> =
        session.platform.sql.rows("SELECT workspace_before FROM runs WHERE run_id = 'r_1'", &[]).unwrap();
    assert!(before[0]["workspace_before"].is_string(), "the run's root before it is recorded");

    // A tab that had the run before it went to the edge writes nothing for it.
    let cap = job["announced"]["hash"].as_str().unwrap();
    let changes = json!({ "changes": [{ "path": "/tmp/t", "removed": true }] }).to_string();
    let stale = run(session.commit_run(&edge_caller(), ("r_1", Some("tab_0")), cap, changes.as_bytes())).unwrap_err();
    assert!(stale.message.contains("went to the edge executor after tab tab_0 took it"), "{}", stale.message);

    let lines = [
        json!({ "runId": "r_1", "seq": 0, "type": "stdout", "data": "1\n" }),
        json!({ "runId": "r_1", "seq": 1, "type": "exit", "exitCode": 0, "usage": { "wallMs": 9 } }),
    ];
    let batch: Vec<String> = lines.iter().map(Value::to_string).collect();
    session.edge_events(batch.join("\n").as_bytes()).expect("applied");
    let answer = stream.messages().into_iter().find(|m| m.get("result").is_some()).expect("answered");
    assert_eq!(answer["result"]["structuredContent"]["executor"], "edge");
    assert_eq!(answer["result"]["structuredContent"]["stdout"], "1\n");
    let audit = session.store().audit_records(10).unwrap();
    assert_eq!(audit.last().unwrap().executor.as_deref(), Some("edge"));
}

#[test]
fn a_packaged_run_never_built_gets_its_build_at_the_edge_within_the_caps_one_at_a_time() {
    use relay_core::packages::edge_build::EDGE_BUILD_CAPS;
    let session = edge_session();
    let args = json!({ "code": "import _ from 'lodash'", "npm": { "dependencies": { "lodash": "^4.17.0" } } });
    let (_, _stream) = start(&session, "r_2", Tool::RunJs, args.clone());
    let job = edge_job(&session, "r_2").expect("a build job");
    // The tab's own build command (with its run token for /registry, presign and finalize).
    assert_eq!(job["build"]["runId"], "r_2");
    assert_eq!(job["build"]["build"]["dependencies"]["lodash"], "^4.17.0");
    assert!(job["build"]["runToken"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(job["caps"], serde_json::to_value(EDGE_BUILD_CAPS).unwrap());
    assert_eq!(job["caps"]["treeFiles"], 2_000);
    // Asked again (as the durable layer does once the build finalized, or a retry), the same
    // run still holds the one build; another run of the relay session does not get it.
    edge_job(&session, "r_2").expect("the same run keeps its build");
    let (_, stream) = start(&session, "r_3", Tool::RunJs, args);
    let (name, message) = edge_job(&session, "r_3").unwrap_err();
    assert_eq!(name.as_str(), "DepsResolutionFailed");
    assert!(message.contains("one at a time") && message.contains("a browser tab can build it"), "{message}");
    session.edge_build_over("r_3"); // not the one building: changes nothing
    assert!(edge_job(&session, "r_3").unwrap_err().1.contains("one at a time"), "r_2 still builds");
    session.edge_build_over("r_2");
    edge_job(&session, "r_3").expect("with r_2's build over, r_3 builds");
    session.edge_unstarted("r_3", (name, message));
    let answer = stream.messages().into_iter().find(|m| m.get("result").is_some()).expect("answered");
    assert_eq!(answer["result"]["structuredContent"]["error"]["name"], "DepsResolutionFailed");
}

#[test]
fn python_with_packages_and_runs_in_a_context_stay_on_tabs_and_a_call_cannot_send_them_to_the_edge() {
    let caller = edge_caller();
    // Python runs at the edge as JavaScript does (the tenant is tab-or-edge)...
    let py = tool_call(Tool::RunPy, json!({ "code": "print(1)" }), Era::Modern, None);
    assert_eq!(executor_of(&py, &caller), Ok(Executor::TabOrEdge));
    let py_at_edge = tool_call(Tool::RunPy, json!({ "code": "print(1)", "executor": "edge" }), Era::Modern, None);
    assert_eq!(executor_of(&py_at_edge, &caller), Ok(Executor::Edge));
    let no_packages = json!({ "code": "print(1)", "pip": { "requirements": [] } });
    assert_eq!(executor_of(&tool_call(Tool::RunPy, no_packages, Era::Modern, None), &caller), Ok(Executor::TabOrEdge));
    // ...but not with pip packages: a compiled module is wasm compiled as it loads.
    let packaged = json!({ "code": "import attrs", "pip": { "requirements": ["attrs"] } });
    assert_eq!(executor_of(&tool_call(Tool::RunPy, packaged.clone(), Era::Modern, None), &caller), Ok(Executor::Tab));
    let mut to_edge = packaged;
    to_edge["executor"] = json!("edge");
    let refusal = executor_of(&tool_call(Tool::RunPy, to_edge, Era::Modern, None), &caller).unwrap_err();
    assert!(refusal.contains("Python with pip packages needs a browser tab") && refusal.contains(".so"), "{refusal}");
    let wheel = json!({ "code": "1", "pip": { "wheelUrls": ["https://example.com/a-1.0-py3-none-any.whl"] } });
    assert_eq!(executor_of(&tool_call(Tool::RunPy, wheel, Era::Modern, None), &caller), Ok(Executor::Tab));
    let js = tool_call(Tool::RunJs, json!({ "code": "1", "executor": "tab" }), Era::Modern, None);
    assert_eq!(executor_of(&js, &caller), Ok(Executor::Tab));
    // A context lives in a tab: a run in one goes there, and may not ask for the edge.
    let in_context = tool_call(Tool::RunJs, json!({ "code": "1", "context": "nb" }), Era::Modern, None);
    assert_eq!(executor_of(&in_context, &caller), Ok(Executor::Tab));
    let context_at_edge =
        tool_call(Tool::RunJs, json!({ "code": "1", "context": "nb", "executor": "edge" }), Era::Modern, None);
    assert!(executor_of(&context_at_edge, &caller).unwrap_err().contains("a context lives in a browser tab"));
}

#[test]
fn a_workspace_past_the_edge_bound_refuses_the_edge_run_saying_what_to_do() {
    use relay_core::run::executor::EDGE_WORKSPACE_MAX_BYTES;
    let session = edge_session();
    let half = "x".repeat(EDGE_WORKSPACE_MAX_BYTES as usize / 2);
    for (i, path) in ["/tmp/a", "/tmp/b", "/tmp/c"].iter().enumerate() {
        let write = tool_call(Tool::Write, json!({ "path": path, "content": half }), Era::Modern, None);
        let Work::File(op) = Work::of(&session, &edge_caller(), &write, || Ok::<_, ()>(signer())).unwrap().unwrap()
        else {
            panic!("a file tool")
        };
        let file = FileCall { tool_call: write, caller: edge_caller(), run: format!("w_{i}"), op };
        run(session.answer_file(&file, &SealingKey::of(&signer()))).expect("written");
        let (_, stream) = start(&session, &format!("r_{i}"), Tool::RunJs, json!({ "code": "1" }));
        let job = edge_job(&session, &format!("r_{i}"));
        if i < 2 {
            // Up to the bound (two halves make it exactly): the run gets its workspace.
            assert!(job.is_ok(), "{i}: {:?}", job.err());
            session.edge_failed(&format!("r_{i}"), (ErrorName::Cancelled, "done".into()));
            continue;
        }
        let Err((name, message)) = job else { panic!("a workspace past the bound went to the edge") };
        assert_eq!(name, ErrorName::EdgeBudgetExceeded);
        assert!(message.contains("16 MiB") && message.contains("delete files"), "{message}");
        assert!(message.contains("the `write` tool (mode \"overwrite\""), "with no tab, a way out: {message}");
        assert!(message.contains("executor \"tab\""), "{message}");
        session.edge_unstarted("r_2", (name, message));
        let answer = stream.messages().into_iter().find(|m| m.get("result").is_some()).expect("answered");
        assert_eq!(answer["result"]["structuredContent"]["error"]["name"], "EdgeBudgetExceeded");
    }
}

#[test]
fn an_edge_run_that_ends_is_told_to_the_attached_tabs_and_kept_for_tabs_attaching_later() {
    let session = edge_session();
    let (_, _stream) = start(&session, "r_5", Tool::RunJs, json!({ "code": "console.log(1)" }));
    session.platform.tabs.attach("tab_1"); // attached while the run is at the edge
    let lines = [
        json!({ "runId": "r_5", "seq": 0, "type": "stdout", "data": "é".repeat(20_000) }),
        json!({ "runId": "r_5", "seq": 1, "type": "exit", "exitCode": 2, "usage": { "wallMs": 9 } }),
    ];
    let batch: Vec<String> = lines.iter().map(Value::to_string).collect();
    session.edge_events(batch.join("\n").as_bytes()).expect("applied");
    assert!(session.platform.tabs.commands("tab_1").contains(&"ran".to_owned()));

    let frames = session.edge_run_frames();
    assert_eq!(frames.len(), 1);
    let frame = String::from_utf8(frames[0].clone()).unwrap();
    assert!(frame.starts_with("event: ran\n"), "{frame}");
    let data: Value = serde_json::from_str(frame.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    assert_eq!(
        (&data["runId"], &data["tool"], &data["language"], &data["executor"]),
        (&json!("r_5"), &json!("run_js"), &json!("js"), &json!("edge"))
    );
    assert_eq!((&data["exitCode"], &data["wallMs"]), (&json!(2), &json!(9)));
    assert_eq!(
        data["stdout"].as_str().unwrap().chars().count(),
        relay_core::protocol::RAN_OUTPUT_CHARS,
        "the start of the output, by characters"
    );
}

#[test]
fn a_new_instance_taking_two_tabs_back_keeps_the_contexts_of_both() {
    let session = edge_session();
    for tab in ["tab_1", "tab_2"] {
        session.platform.tabs.attach(tab);
        session.feed(Input::TabAttached { tab: tab.into() });
    }
    start(&session, "r_1", Tool::RunJs, json!({ "code": "var x = 1", "context": "nb" }));
    let exit =
        json!({ "runId": "r_1", "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 3, "contextRuns": 0 } });
    let events = parse_batch(exit.to_string().as_bytes()).unwrap();
    session.feed(Input::Heard { tab: Some("tab_2".into()), events });
    let settings = ContextSettings::default();
    let live = |s: &Session| s.contexts_view(&settings)["contexts"].clone();
    assert_eq!(live(&session)[0]["tab"], json!("tab_2"), "{}", live(&session));
    session.keep_memory();

    let next = next_instance(&session);
    for tab in ["tab_1", "tab_2"] {
        next.platform.tabs.attach(tab);
    }
    next.take_tabs_back(vec!["tab_1".into(), "tab_2".into()]);
    assert_eq!(live(&next), live(&session), "the context in the newer tab is still live");
    let gone = next_instance(&session);
    gone.platform.tabs.attach("tab_1");
    gone.take_tabs_back(vec!["tab_1".into()]);
    assert_eq!(live(&gone), json!([]), "its tab did not come back: lost");
}

/// A new instance over `session`'s storage (its DO slept and was evicted): a fresh SQLite
/// holding the row `session` kept, opened as the DO's constructor opens it.
fn next_instance(session: &Session) -> Session {
    let kept: Vec<Value> = session.platform.sql.rows("SELECT doc FROM kept", &[]).unwrap();
    let sql = support::Sqlite::new();
    Store::new(&sql).migrate().unwrap();
    for row in kept {
        sql.exec("INSERT INTO kept (id, doc) VALUES (1, ?)", &[row["doc"].as_str().unwrap().into()]).unwrap();
    }
    let next = Rc::new(RelaySession::new(platform::TestPlatform::over(sql)));
    next.open().expect("opened");
    next
}

#[test]
fn what_an_instance_keeps_is_in_the_next_one_over_its_storage() {
    let session = edge_session();
    let (_, stream) = start(&session, "r_1", Tool::RunJs, json!({ "code": "console.log(1)" }));
    let exit = json!({ "runId": "r_1", "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 3 } });
    session.edge_events(exit.to_string().as_bytes()).expect("applied");
    assert!(stream.messages().iter().any(|m| m.get("result").is_some()), "the run ended");
    let contexts = ContextSettings::default();
    session.claim_context("quickjs@1", &Ask { name: "nb".into(), reset: false }, &contexts).expect("claimed");
    session.caches.saw_client(&json!({ "name": "inspector", "version": "1.0" }), 5);
    assert!(next_instance(&session).edge_run_frames().is_empty(), "nothing is saved before the relay session is idle");

    session.keep_memory();
    let next = next_instance(&session);
    assert!(next.configured(), "the machine can take its tabs back before any request");
    assert_eq!(next.edge_run_frames().len(), 1);
    assert_eq!(next.edge_run_frames(), session.edge_run_frames());
    assert_eq!(next.contexts_view(&contexts), session.contexts_view(&contexts));
    assert_eq!(
        next.contexts_view(&contexts)["contexts"].as_array().map(Vec::len),
        Some(1),
        "{}",
        next.contexts_view(&contexts)
    );
    assert_eq!(next.caches.clients(), session.caches.clients());
    assert_ne!(session.edge_meter(), Default::default(), "the edge run's start was counted");
    assert_eq!(next.edge_meter(), session.edge_meter(), "a new instance does not start its minute over");
    assert!(!platform::session().configured(), "a relay session that never kept anything starts unconfigured");
}
