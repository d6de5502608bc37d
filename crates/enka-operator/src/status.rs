//! `manageStatus`: the Running, Successful and Failure conditions, with
//! upstream's reasons, messages, `ansibleResult` and update rules.

use serde_json::{Map, Value as Json, json};

use enka_engine::{RunOutcome, Stats};

/// `ansibleResult` of a condition.
pub fn ansible_result(stats: &Stats, completion: &str) -> Json {
    json!({
        "ok": stats.ok,
        "changed": stats.changed,
        "skipped": stats.skipped,
        "failures": stats.failed,
        "completion": completion,
    })
}

fn conditions_mut(status: &mut Json) -> &mut Vec<Json> {
    if !status.is_object() {
        *status = Json::Object(Map::new());
    }
    let conditions = status
        .as_object_mut()
        .map(|m| {
            m.entry("conditions")
                .or_insert_with(|| Json::Array(Vec::new()))
        })
        .expect("status is an object");
    if !conditions.is_array() {
        *conditions = Json::Array(Vec::new());
    }
    conditions.as_array_mut().expect("conditions is an array")
}

fn field<'a>(condition: &'a Json, name: &str) -> &'a str {
    condition
        .get(name)
        .and_then(Json::as_str)
        .unwrap_or_default()
}

/// Upstream's `SetCondition`: a condition of the same type, other than
/// `Failure`, with the same status and reason is left alone; an unchanged
/// status keeps its `lastTransitionTime`; otherwise the old one is removed
/// and the new one appended.
pub fn set_condition(status: &mut Json, mut condition: Json, now: &str) {
    let conditions = conditions_mut(status);
    let kind = field(&condition, "type").to_owned();
    if let Some(index) = conditions.iter().position(|c| field(c, "type") == kind) {
        let existing = &conditions[index];
        let same_status = field(existing, "status") == field(&condition, "status");
        if kind != "Failure"
            && same_status
            && field(existing, "reason") == field(&condition, "reason")
        {
            return;
        }
        if same_status {
            condition["lastTransitionTime"] = existing
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or_else(|| Json::String(now.to_owned()));
        }
        conditions.remove(index);
    }
    if condition.get("lastTransitionTime").is_none() {
        condition["lastTransitionTime"] = Json::String(now.to_owned());
    }
    conditions.push(condition);
}

/// Flips the status of an existing condition, keeping its reason, message
/// and `lastTransitionTime` (as upstream's copy-and-modify does).
fn flip(status: &mut Json, kind: &str, to: &str, now: &str) {
    let existing = conditions_mut(status)
        .iter()
        .find(|c| field(c, "type") == kind)
        .cloned();
    if let Some(mut condition) = existing {
        condition["status"] = Json::String(to.to_owned());
        set_condition(status, condition, now);
    }
}

/// Whether `status` says a run is in flight (`Running` True / Running).
/// Seen before a run starts, the object is older than the last run's end:
/// the watch has not delivered that run's final status write yet.
pub fn shows_run_in_flight(status: &Json) -> bool {
    status["conditions"].as_array().is_some_and(|conditions| {
        conditions.iter().any(|c| {
            field(c, "type") == "Running"
                && field(c, "status") == "True"
                && field(c, "reason") == "Running"
        })
    })
}

/// Before a run: `Successful` (if present) becomes False, `Running` becomes
/// True / Running / "Running reconciliation".
pub fn mark_running(status: &mut Json, now: &str) {
    flip(status, "Successful", "False", now);
    set_condition(
        status,
        json!({"type": "Running", "status": "True", "reason": "Running", "message": "Running reconciliation"}),
        now,
    );
}

/// After a run, as upstream's `markDone`.
pub fn mark_done(status: &mut Json, outcome: &RunOutcome, now: &str, completion: &str) {
    let result = ansible_result(&outcome.stats, completion);
    match outcome.reconcile_failure() {
        None => {
            set_condition(
                status,
                json!({"type": "Running", "status": "True", "reason": "Successful", "message": "Awaiting next reconciliation", "ansibleResult": result}),
                now,
            );
            set_condition(
                status,
                json!({"type": "Successful", "status": "True", "reason": "Successful", "message": "Last reconciliation succeeded"}),
                now,
            );
            set_condition(
                status,
                json!({"type": "Failure", "status": "False", "reason": "", "message": ""}),
                now,
            );
        }
        Some(message) => {
            flip(status, "Running", "False", now);
            set_condition(
                status,
                json!({"type": "Failure", "status": "True", "reason": "Failed", "message": message, "ansibleResult": result}),
                now,
            );
            set_condition(
                status,
                json!({"type": "Successful", "status": "False", "reason": "", "message": ""}),
                now,
            );
        }
    }
}

/// After an error outside the run (bad annotation, broken role):
/// `Running` and `Successful` become False, `Failure` True with `message`.
pub fn mark_error(status: &mut Json, message: &str, now: &str) {
    flip(status, "Running", "False", now);
    flip(status, "Successful", "False", now);
    set_condition(
        status,
        json!({"type": "Failure", "status": "True", "reason": "Failed", "message": message}),
        now,
    );
}

/// A role edit on disk that does not load: `Failure` becomes True with the
/// reason, whatever the last run of the previous version did.
pub fn mark_broken(status: &mut Json, message: &str, now: &str) {
    set_condition(
        status,
        json!({"type": "Failure", "status": "True", "reason": "Failed", "message": message}),
        now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(status: &Json, kind: &str) -> Json {
        status["conditions"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == kind))
            .unwrap_or_else(|| panic!("no {kind} condition in {status}"))
            .clone()
    }

    fn types(status: &Json) -> Vec<(String, String)> {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (field(c, "type").to_owned(), field(c, "status").to_owned()))
            .collect()
    }

    fn outcome(failed: bool) -> RunOutcome {
        RunOutcome {
            hosts: Vec::new(),
            status: if failed {
                enka_engine::RunStatus::Failed(enka_engine::Failure {
                    task: "t".into(),
                    location: enka_project::role::Location::file(std::path::Path::new("x")),
                    message: "boom".into(),
                    result: minijinja::Value::UNDEFINED,
                    action: std::sync::Arc::from(""),
                    aborts_run: false,
                    marked_failed: false,
                    parser_error: false,
                })
            } else {
                enka_engine::RunStatus::Successful
            },
            stats: Stats {
                ok: 3,
                changed: 1,
                failed: u32::from(failed),
                ..Stats::default()
            },
            failed_task_messages: if failed {
                vec!["boom".into()]
            } else {
                Vec::new()
            },
            requeue_after: None,
            elapsed: std::time::Duration::ZERO,
            api_time: std::time::Duration::ZERO,
            metrics: Vec::new(),
            facts: Default::default(),
            module_timings: Vec::new(),
            task_timings: Vec::new(),
            dependents: Vec::new(),
        }
    }

    #[test]
    fn a_successful_run() {
        let mut status = json!({});
        mark_running(&mut status, "t1");
        assert_eq!(types(&status), [("Running".into(), "True".into())]);
        mark_done(&mut status, &outcome(false), "t2", "c");
        assert_eq!(
            types(&status),
            [
                ("Running".into(), "True".into()),
                ("Successful".into(), "True".into()),
                ("Failure".into(), "False".into())
            ]
        );
        let running = &status["conditions"][0];
        assert_eq!(running["reason"], "Successful");
        assert_eq!(running["message"], "Awaiting next reconciliation");
        assert_eq!(
            running["ansibleResult"],
            json!({"ok": 3, "changed": 1, "skipped": 0, "failures": 0, "completion": "c"})
        );
        assert_eq!(running["lastTransitionTime"], "t1", "status stayed True");
    }

    #[test]
    fn a_failed_run_then_recovery() {
        let mut status = json!({});
        mark_running(&mut status, "t1");
        mark_done(&mut status, &outcome(true), "t2", "c");
        let failure = condition(&status, "Failure");
        assert_eq!(
            (
                failure["status"].as_str(),
                failure["reason"].as_str(),
                failure["message"].as_str()
            ),
            // Upstream's message is the failed result's `msg` alone; the
            // task's name and place go to the Event.
            (Some("True"), Some("Failed"), Some("boom"))
        );
        let running = condition(&status, "Running");
        assert_eq!(running["status"], "False");
        mark_running(&mut status, "t3");
        mark_done(&mut status, &outcome(false), "t4", "c");
        let failure = condition(&status, "Failure");
        assert_eq!(failure["status"], "False");
    }

    #[test]
    fn every_failed_result_is_a_line_of_the_failure_a_rescued_one_too() {
        let mut rescued = outcome(false);
        rescued.failed_task_messages = vec!["caught".into()];
        let mut status = json!({});
        mark_done(&mut status, &rescued, "t1", "c");
        let failure = condition(&status, "Failure");
        assert_eq!(failure["status"], "True");
        assert_eq!(failure["message"], "caught");
        assert_eq!(failure["ansibleResult"]["failures"], 0, "the recap's count");

        let mut two = outcome(true);
        two.failed_task_messages.push("then this".into());
        mark_done(&mut status, &two, "t2", "c");
        assert_eq!(condition(&status, "Failure")["message"], "boom\nthen this");
    }

    #[test]
    fn unchanged_conditions_stay_in_place() {
        let mut status = json!({"conditions": [{"type": "A", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "t0"}]});
        set_condition(
            &mut status,
            json!({"type": "A", "status": "True", "reason": "R", "message": "new"}),
            "t1",
        );
        assert_eq!(
            status["conditions"][0]["message"], "m",
            "same status and reason: no-op"
        );
        set_condition(
            &mut status,
            json!({"type": "A", "status": "True", "reason": "Other"}),
            "t1",
        );
        assert_eq!(
            status["conditions"][0]["lastTransitionTime"], "t0",
            "status unchanged keeps the time"
        );
    }
}
