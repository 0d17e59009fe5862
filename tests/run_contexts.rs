//! The relay session's contexts (`run::contexts`): names, the call's arguments, and the book's
//! decisions (claims, the limit, ends, idle expiry, lost tabs), with hostile names and random
//! sequences of events.

use proptest::prelude::*;
use relay_core::run::contexts::{ask_of, check_name, Ask, Claim, ContextSettings, Contexts, RunEnd};
use serde_json::{json, Map, Value};

const PY: &str = "pyodide@314";
const JS: &str = "quickjs@0.32";

fn settings(max: u32, idle_ms: u64) -> ContextSettings {
    ContextSettings { max_per_session: max, idle_ms }
}

fn ask(name: &str) -> Ask {
    Ask { name: name.into(), reset: false }
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// A run that ended well on `tab`, its context having served `runs_before` runs there.
fn ok_on(tab: &str, runs_before: u64) -> RunEnd<'_> {
    RunEnd { tab: Some(tab), error: None, runs_before: Some(runs_before), by_relay: false, mem_peak_mb: 12 }
}

/// A book (4 contexts, a minute idle) whose context `name` of `runtime` ran once in `tab`,
/// claimed at 0 and ended at 10 ms.
fn ran_once(runtime: &str, name: &str, tab: &str) -> (Contexts, ContextSettings) {
    let mut book = Contexts::default();
    let s = settings(4, 60_000);
    let first = book.claim(runtime, &ask(name), &s, 0).unwrap();
    book.ended(&first, &ok_on(tab, 0), 10);
    (book, s)
}

/// A run whose deps build failed on `tab`: its interpreter never had it (no `contextRuns`).
fn unbuilt_on(tab: &str) -> RunEnd<'_> {
    let error = Some(("DepsResolutionFailed", "no such package"));
    RunEnd { tab: Some(tab), error, runs_before: None, by_relay: false, mem_peak_mb: 0 }
}

/// A run that ended with error `name` on `tab` (none: it never reached one), as the relay ended it.
fn failed<'a>(tab: Option<&'a str>, name: &'a str, message: &'a str) -> RunEnd<'a> {
    RunEnd { tab, error: Some((name, message)), runs_before: None, by_relay: true, mem_peak_mb: 0 }
}

#[test]
fn names_follow_the_rule() {
    for good in ["a", "A1", "data.v2", "my_ctx-3", "0", &"x".repeat(64)] {
        assert_eq!(check_name(good), Ok(()), "{good:?}");
    }
    let bad = ["", "-a", "_a", ".a", "a b", "a/b", "a\u{0}", "café", "a\u{202e}b", "ＡＢ", &"x".repeat(65), "a\nb"];
    for name in bad {
        let why = check_name(name).expect_err(name);
        assert!(why.contains("1 to 64 characters") && why.starts_with("context:"), "{why}");
    }
}

#[test]
fn the_arguments_are_read_and_checked() {
    assert_eq!(ask_of(&args(json!({"code": "x"}))), Ok(None));
    assert_eq!(ask_of(&args(json!({"context": null, "reset": null}))), Ok(None));
    assert_eq!(ask_of(&args(json!({"context": "a"}))), Ok(Some(ask("a"))));
    assert_eq!(ask_of(&args(json!({"context": "a", "reset": true}))), Ok(Some(Ask { name: "a".into(), reset: true })));
    assert!(ask_of(&args(json!({"reset": true}))).unwrap_err().contains("only means something with `context`"));
    assert_eq!(ask_of(&args(json!({"reset": false}))), Ok(None));
    assert!(ask_of(&args(json!({"context": 3}))).unwrap_err().starts_with("context: expected a name"));
    assert!(ask_of(&args(json!({"context": "a", "reset": "yes"}))).unwrap_err().starts_with("reset: expected"));
    assert!(ask_of(&args(json!({"context": "a b"}))).is_err());
}

#[test]
fn a_context_whose_first_run_failed_before_its_interpreter_is_started_by_the_next_with_no_loss_told() {
    // A names a new context and B the same, queued behind it; A fails before the tab's
    // interpreter takes it up (its deps build, say): B starts the context, which lived nowhere.
    let mut book = Contexts::default();
    let s = settings(4, 60_000);
    let a = book.claim(JS, &ask("a"), &s, 0).unwrap();
    let b = book.claim(JS, &ask("a"), &s, 1).unwrap();
    assert!(a.fresh && !b.fresh);
    assert!(book.ended(&a, &unbuilt_on("t1"), 5).kept);
    let report = book.ended(&b, &ok_on("t1", 0), 9);
    assert_eq!(report.lost, None, "no loss to tell: {report:?}");
    assert!(report.fresh && report.kept);
    // Once a run has ended in it, a tab that no longer holds it is a loss, as before.
    let c = book.claim(JS, &ask("a"), &s, 10).unwrap();
    assert!(book.ended(&c, &ok_on("t1", 0), 11).lost.unwrap().contains("the tab no longer held it"));
    // And so it is for a run that claimed it while it lived in a tab, though an error ended it
    // meanwhile and a fresh claim made it anew (its entry lives nowhere yet).
    let d = book.claim(JS, &ask("a"), &s, 12).unwrap();
    let e = book.claim(JS, &ask("a"), &s, 13).unwrap();
    book.ended(&d, &failed(Some("t1"), "Timeout", "too slow"), 14);
    let f = book.claim(JS, &ask("a"), &s, 15).unwrap();
    assert!(f.fresh && f.lost.is_some());
    assert!(book.ended(&e, &ok_on("t1", 0), 16).lost.is_some(), "e's context died with d");
}

#[test]
fn a_page_that_attached_anew_keeps_its_contexts_though_a_run_s_end_comes_under_its_old_id() {
    let (mut book, s) = ran_once(JS, "a", "t1");
    book.moved("t1", "t2");
    // A run sent before the page attached anew as t2, its end heard under t1.
    let late = book.claim(JS, &ask("a"), &s, 20).unwrap();
    assert!(book.ended(&late, &ok_on("t1", 1), 30).lost.is_none());
    book.tabs_now(&["t2".to_owned()]);
    let again = book.claim(JS, &ask("a"), &s, 40).unwrap();
    assert!(!again.fresh && again.lost.is_none(), "{again:?}");
    assert_eq!(book.view(&s, 50)["contexts"][0]["tab"], json!("t2"));
}

#[test]
fn a_context_is_fresh_once_then_continued_and_listed() {
    let mut book = Contexts::default();
    let s = settings(4, 60_000);
    let first = book.claim(PY, &ask("a"), &s, 1_000).unwrap();
    assert!(first.fresh && first.lost.is_none());
    let report = book.ended(&first, &ok_on("tab-1", 0), 1_500);
    assert!(report.fresh && report.kept && report.lost.is_none() && report.note().is_none());
    let second = book.claim(PY, &ask("a"), &s, 2_000).unwrap();
    assert!(!second.fresh);
    let report = book.ended(&second, &ok_on("tab-1", 1), 2_100);
    assert!(!report.fresh && report.kept);
    // The same name in the other runtime is another context.
    assert!(book.claim(JS, &ask("a"), &s, 2_200).unwrap().fresh);
    let view = book.view(&s, 3_000);
    let listed = view["contexts"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let a = listed.iter().find(|c| c["runtime"] == PY).unwrap();
    assert_eq!((a["ageMs"].as_u64(), a["idleMs"].as_u64(), a["runs"].as_u64()), (Some(2_000), Some(900), Some(2)));
    assert_eq!((a["tab"].as_str(), a["memPeakMb"].as_u64()), (Some("tab-1"), Some(12)));
    assert_eq!(view["maxPerSession"], 4);
}

#[test]
fn past_the_limit_a_new_context_is_refused_with_a_way_out() {
    let mut book = Contexts::default();
    let s = settings(2, 60_000);
    for name in ["a", "b"] {
        let claim = book.claim(PY, &ask(name), &s, 0).unwrap();
        book.ended(&claim, &ok_on("t", 0), 10);
    }
    let why = book.claim(PY, &ask("c"), &s, 20).unwrap_err();
    for part in
        ["\"c\"", "may hold 2", "contexts.maxPerSession", "a (pyodide@314), b (pyodide@314)", "reset: true", "60 s"]
    {
        assert!(why.contains(part), "{part} in {why}");
    }
    // A live one is still had, and starting one afresh needs no room.
    assert!(!book.claim(PY, &ask("a"), &s, 30).unwrap().fresh);
    let reset = book.claim(PY, &Ask { name: "b".into(), reset: true }, &s, 30).unwrap();
    assert!(reset.fresh && reset.reset);
    assert_eq!(book.len(), 2);
}

#[test]
fn an_error_ends_the_context_and_the_next_run_is_told_once() {
    let (mut book, s) = ran_once(JS, "t", "t1");
    let looping = book.claim(JS, &ask("t"), &s, 20).unwrap();
    let end = failed(Some("t1"), "Timeout", "the run exceeded 1500 ms");
    let report = book.ended(&looping, &end, 1_600);
    assert!(!report.kept);
    assert!(report.note().unwrap().contains("next run in it starts afresh"));
    assert!(book.is_empty());
    let next = book.claim(JS, &ask("t"), &s, 2_000).unwrap();
    assert!(next.fresh);
    assert!(next.lost.as_deref().unwrap().contains("ended with Timeout: the run exceeded 1500 ms"));
    let report = book.ended(&next, &ok_on("t1", 0), 2_100);
    assert!(report.note().unwrap().contains("context \"t\" was lost (a run in it ended with Timeout"));
    let after = book.claim(JS, &ask("t"), &s, 2_200).unwrap();
    assert_eq!((after.fresh, after.lost), (false, None));
}

#[test]
fn an_error_before_the_interpreter_took_the_run_keeps_the_context() {
    let (mut book, s) = ran_once(PY, "df", "t1");
    // Its deps build failed in the tab: the exit says no context runs (the interpreter never had it).
    let unbuilt = book.claim(PY, &ask("df"), &s, 20).unwrap();
    let report = book.ended(&unbuilt, &unbuilt_on("t1"), 30);
    assert!(report.kept && report.note().is_none(), "{report:?}");
    let next = book.claim(PY, &ask("df"), &s, 40).unwrap();
    assert_eq!((next.fresh, next.lost.clone()), (false, None), "the loaded data is still there");
    // The same error once the interpreter ran it (the tab says how many runs it had served) ends it.
    let ran = RunEnd { runs_before: Some(1), error: Some(("RuntimeCrashed", "out of memory")), ..unbuilt_on("t1") };
    assert!(!book.ended(&next, &ran, 50).kept);
    assert!(book.claim(PY, &ask("df"), &s, 60).unwrap().fresh);
}

#[test]
fn idle_contexts_expire_but_not_while_a_run_of_theirs_waits() {
    let mut book = Contexts::default();
    let s = settings(4, 1_000);
    let idle = book.claim(PY, &ask("idle"), &s, 0).unwrap();
    book.ended(&idle, &ok_on("t", 0), 100);
    let busy = book.claim(PY, &ask("busy"), &s, 100).unwrap();
    book.ended(&busy, &ok_on("t", 0), 200);
    let waiting = book.claim(PY, &ask("busy"), &s, 300).unwrap();
    book.expire(s.idle_ms, 5_000);
    assert_eq!(book.len(), 1, "the idle one went; the one with a run in line stayed");
    let back = book.claim(PY, &ask("idle"), &s, 5_000).unwrap();
    assert!(back.fresh);
    assert!(back.lost.unwrap().contains("idle for 4 s, and contexts end after 1 s unused"));
    assert!(!book.ended(&waiting, &ok_on("t", 1), 5_100).fresh);
}

#[test]
fn a_context_goes_with_its_tab() {
    let (mut book, s) = ran_once(PY, "a", "tab-old");
    book.tabs_now(&["tab-old".into(), "tab-new".into()]);
    assert_eq!(book.len(), 1);
    book.tabs_now(&["tab-new".into()]);
    assert!(book.is_empty());
    let next = book.claim(PY, &ask("a"), &s, 20).unwrap();
    assert!(next.fresh && next.lost.unwrap().contains("tab tab-old went away"));
}

#[test]
fn a_tab_that_no_longer_holds_the_context_is_believed() {
    let (mut book, s) = ran_once(PY, "a", "t1");
    // The next run went to another tab, which started the interpreter: the agent hears it.
    let moved = book.claim(PY, &ask("a"), &s, 20).unwrap();
    assert!(!moved.fresh);
    let report = book.ended(&moved, &ok_on("t2", 0), 30);
    assert!(report.fresh);
    assert!(report.lost.unwrap().contains("it lived in tab t1, and the calls now go to tab t2"));
    // The same tab, reloaded under the same id or its sandbox replaced.
    let again = book.claim(PY, &ask("a"), &s, 40).unwrap();
    let report = book.ended(&again, &ok_on("t2", 0), 50);
    assert!(report.lost.unwrap().contains("no longer held it"));
}

#[test]
fn a_run_that_never_reached_a_tab_leaves_the_context_as_it_was() {
    let mut book = Contexts::default();
    let s = settings(1, 60_000);
    let never = failed(None, "Cancelled", "in line");
    let claim = book.claim(PY, &ask("a"), &s, 0).unwrap();
    assert!(book.ended(&claim, &never, 10).kept);
    assert!(book.is_empty(), "a context that never ran holds no place");
    let claim = book.claim(PY, &ask("a"), &s, 20).unwrap();
    book.ended(&claim, &ok_on("t", 0), 30);
    let claim = book.claim(PY, &ask("a"), &s, 40).unwrap();
    book.ended(&claim, &never, 50);
    assert!(!book.claim(PY, &ask("a"), &s, 60).unwrap().fresh, "it ran before: it is still there");
}

fn settled(claim: &Claim, book: &mut Contexts, event: u8, now: u64) {
    let end = match event % 4 {
        0 => ok_on("t1", 1),
        1 => ok_on("t1", 0),
        2 => failed(Some("t1"), "Timeout", "slow"),
        _ => failed(None, "Cancelled", "in line"),
    };
    book.ended(claim, &end, now);
}

proptest! {
    /// Over random calls, resets, ends, expiries and lost tabs: a claim is refused only when as
    /// many contexts as the limit are live; the book holds more only while runs are in flight
    /// (a run admitted into a context that is killed before it ends); a reason for a loss is
    /// told once; and a claim told of a loss starts afresh.
    #[test]
    fn the_book_holds_over_random_sequences(ops in proptest::collection::vec((0u8..6, 0u8..3, 0u8..4), 1..80)) {
        let mut book = Contexts::default();
        let s = settings(2, 5_000);
        let mut now = 0;
        let mut in_flight: Vec<Claim> = Vec::new();
        for (op, name, event) in ops {
            now += 700;
            let name = ["a", "b", "c"][name as usize];
            match op {
                0 | 1 => {
                    let live = book.len();
                    let asked = Ask { name: name.into(), reset: op == 1 };
                    match book.claim(PY, &asked, &s, now) {
                        Ok(claim) => {
                            prop_assert!(claim.fresh || claim.lost.is_none());
                            if claim.lost.is_some() {
                                let again = book.claim(PY, &ask(name), &s, now).unwrap();
                                prop_assert_eq!((again.fresh, again.lost.clone()), (false, None));
                                in_flight.push(again);
                            }
                            in_flight.push(claim);
                        }
                        Err(why) => prop_assert!(live >= 2, "refused with {} live: {}", live, why),
                    }
                }
                2 | 3 if !in_flight.is_empty() => {
                    let claim = in_flight.remove(usize::from(event) % in_flight.len());
                    settled(&claim, &mut book, event, now);
                }
                4 => book.tabs_now(&[]),
                _ => {
                    book.view(&s, now);
                }
            }
            prop_assert!(book.len() <= 2 + in_flight.len(), "{} live, {} in flight", book.len(), in_flight.len());
            if in_flight.is_empty() {
                prop_assert!(book.len() <= 2, "{} live with nothing in flight", book.len());
            }
            // Kept as JSON and taken back (a relay session whose DO slept): the same book, which
            // the rest of the sequence then runs on.
            let back: Contexts = serde_json::from_str(&serde_json::to_string(&book).unwrap()).unwrap();
            prop_assert_eq!(&back, &book);
            book = back;
        }
    }
}
