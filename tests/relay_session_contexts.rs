//! A run's context as the relay session orders it to a tab (`ContextOrder.fresh`): a tab starts
//! a context afresh unless the book has the context in that very tab, whatever the run's claim
//! found when it was admitted.

#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use platform::{call_of, last_command, start, tool_call, with_tabs, Session, Stream};
use relay_core::mcp::{Era, Tool};
use relay_core::run::backchannel::parse_batch;
use relay_core::run::machine::Input;
use serde_json::{json, Value};

/// Admits and prepares run `run_id`, a `run_js` in `context` if one is named: its stream.
fn start_run(session: &Session, run_id: &str, context: Option<&str>) -> Stream {
    let mut arguments = json!({ "code": "1" });
    if let Some(context) = context {
        arguments["context"] = json!(context);
    }
    start(session, &call_of(&**session, run_id, tool_call(Tool::RunJs, arguments, Era::Modern, None)))
}

/// What the result on `stream` says of the run's context.
fn context_said(stream: &Stream) -> Value {
    let messages = stream.messages();
    let result = messages.iter().find_map(|m| m.get("result")).expect("the run's result");
    result["structuredContent"]["context"].clone()
}

/// Run `run_id` ended well on `tab`, its context (if any) having served `runs_before` runs.
fn end_run(session: &Session, tab: &str, run_id: &str, runs_before: u64) {
    let usage = json!({ "wallMs": 5, "contextRuns": runs_before });
    let exit = json!({ "runId": run_id, "seq": 0, "type": "exit", "exitCode": 0, "usage": usage });
    session.feed(Input::Heard { tab: Some(tab.into()), events: parse_batch(exit.to_string().as_bytes()).unwrap() });
}

fn order(command: &Value) -> (&str, bool) {
    (command["runId"].as_str().unwrap(), command["context"]["fresh"].as_bool().unwrap())
}

#[test]
fn a_context_run_claimed_while_its_context_lived_in_a_tab_that_then_went_starts_it_afresh_elsewhere() {
    // tab_1 ran `a` first and still holds that interpreter; tab_2 attached, ran `a` afresh
    // (the calls go to the newest tab) and holds it now. r_3 is claimed while `a` lives in
    // tab_2, waits behind r_long there, and tab_2 goes: r_3 goes to tab_1, whose `a` is the
    // old one. Ordered not fresh (as its claim found it), tab_1 ran it on that stale state.
    let session = with_tabs(&["tab_1"]);
    start_run(&session, "r_1", Some("a"));
    assert_eq!(order(&last_command(&session, "tab_1")), ("r_1", true));
    end_run(&session, "tab_1", "r_1", 0);
    session.platform.tabs.attach("tab_2");
    session.feed(Input::TabAttached { tab: "tab_2".into() });
    start_run(&session, "r_2", Some("a"));
    assert_eq!(order(&last_command(&session, "tab_2")), ("r_2", true), "tab_2 never held it");
    end_run(&session, "tab_2", "r_2", 0);
    start_run(&session, "r_3", Some("a"));
    assert_eq!(order(&last_command(&session, "tab_2")), ("r_3", false), "tab_2 holds it");
    end_run(&session, "tab_2", "r_3", 1);

    start_run(&session, "r_long", None);
    let r_4 = start_run(&session, "r_4", Some("a"));
    session.feed(Input::TabGone { tab: "tab_2".into() });
    let mut sent = last_command(&session, "tab_1");
    if sent["runId"] == json!("r_long") {
        end_run(&session, "tab_1", "r_long", 0);
        sent = last_command(&session, "tab_1");
    }
    assert_eq!(order(&sent), ("r_4", true), "{sent}");
    end_run(&session, "tab_1", "r_4", 0);
    let said = context_said(&r_4);
    assert_eq!(said["fresh"], json!(true), "{said}");
    assert!(said["lost"].as_str().is_some_and(|why| why.contains("tab_2")), "why it was lost: {said}");
}

#[test]
fn a_page_that_attaches_anew_keeps_its_contexts_under_its_new_tab_id() {
    // tab_1's command stream broke and its page attached again as tab_2, naming tab_1: its
    // sandbox, and `a` in it, stayed, so `a` goes on there, not afresh.
    let session = with_tabs(&["tab_1"]);
    start_run(&session, "r_1", Some("a"));
    end_run(&session, "tab_1", "r_1", 0);
    session.platform.tabs.attach("tab_2");
    session.tab_came_back("tab_1", "tab_2");
    session.feed(Input::TabAttached { tab: "tab_2".into() });
    session.feed(Input::TabGone { tab: "tab_1".into() });
    start_run(&session, "r_2", Some("a"));
    assert_eq!(order(&last_command(&session, "tab_2")), ("r_2", false));
    end_run(&session, "tab_2", "r_2", 1);
    let contexts = session.contexts_view(&Default::default());
    assert_eq!(contexts["contexts"][0]["tab"], json!("tab_2"), "{contexts}");
    assert_eq!(contexts["contexts"][0]["runs"], json!(2), "{contexts}");
    // Another page naming a tab id it never was moves nothing of anyone's.
    session.tab_came_back("tab_9", "tab_3");
    assert_eq!(session.contexts_view(&Default::default())["contexts"][0]["tab"], json!("tab_2"));
}
