//! The recorder's bookkeeping. Whether each line's answer is right is the
//! conformance corpus's business (recorded from ansible-core 2.18 and 2.19);
//! the migration report's own findings are put to real ansible-core by
//! `tests/migration`.

use std::sync::Arc;

use minijinja::Value;
use serde_json::json;

use super::*;
use crate::{Options, TemplarBuilder, Var, VarList};

fn templar(semantics: Semantics) -> (Arc<Templar>, Arc<Recorder>) {
    let recorder = Recorder::new();
    let templar = TemplarBuilder::new(Options {
        seed: Some(7),
        semantics,
        migration: Some(recorder.clone()),
        ..Options::default()
    })
    .build();
    (templar, recorder)
}

fn context(templar: &Arc<Templar>, vars: Vec<(&str, Var)>) -> Context {
    let list = vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    Context::new(
        templar.clone(),
        Arc::new(VarList(list)),
        Arc::from(Vec::new()),
    )
    .at(Arc::new(Origin {
        file: PathBuf::from("roles/r/tasks/main.yml"),
        line: 3,
        column: 3,
        task: "count".to_owned(),
        exact: false,
    }))
}

fn items() -> Var {
    Var::templated(Value::from(vec!["a", "b", "c"]))
}

#[test]
fn a_length_is_text_under_2_18_and_a_number_under_2_19() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(&templar, vec![("items", items())]);
    let value = templar.template_str("{{ items | length }}", &ctx).unwrap();
    assert_eq!(
        value.as_str(),
        Some("3"),
        "the run keeps its own line's value"
    );
    let found = recorder.divergences();
    assert_eq!(found.len(), 1);
    let d = &found[0];
    assert_eq!(d.kind, Kind::Template);
    assert_eq!(d.under_218.describe(), "str '3'");
    assert_eq!(d.under_219.describe(), "int 3");
    assert_eq!(d.vars.get("items"), Some(&json!(["a", "b", "c"])));
    assert!(d.vars_complete);
    assert_eq!(d.origin.as_ref().map(|o| o.line), Some(3));
    assert!(advice(d).contains("| string"), "{}", advice(d));
}

#[test]
fn the_same_place_is_counted_not_repeated() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(&templar, vec![("items", items())]);
    for _ in 0..3 {
        templar.template_str("{{ items | length }}", &ctx).unwrap();
    }
    let found = recorder.divergences();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].count, 3);
}

#[test]
fn what_both_lines_agree_on_is_not_recorded() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(&templar, vec![("items", items())]);
    templar.template_str("{{ items }}", &ctx).unwrap();
    templar
        .template_str("n={{ items | length }}", &ctx)
        .unwrap();
    assert!(
        templar
            .evaluate(&Value::from("items | length > 2"), &ctx)
            .unwrap()
    );
    assert!(templar.template_str("{{ nothing }}", &ctx).is_err());
    assert!(recorder.is_empty(), "{:?}", recorder.divergences());
}

#[test]
fn a_condition_that_is_not_a_boolean_passes_2_18_and_fails_2_19() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(&templar, vec![("name", Var::templated(Value::from("x")))]);
    assert!(templar.evaluate(&Value::from("name"), &ctx).unwrap());
    let found = recorder.divergences();
    assert_eq!(found.len(), 1, "{found:?}");
    let d = &found[0];
    assert_eq!(d.kind, Kind::Condition);
    assert_eq!(d.under_218.describe(), "bool true");
    assert!(matches!(d.under_219, Outcome::Failed(_)), "{d:?}");
    assert!(advice(d).contains("not a boolean"), "{}", advice(d));
}

#[test]
fn a_condition_is_compared_whole_not_also_its_inner_template() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(&templar, vec![("items", items())]);
    let _ = templar.evaluate(&Value::from("{{ items | length }}"), &ctx);
    let found = recorder.divergences();
    assert!(found.iter().all(|d| d.kind == Kind::Condition), "{found:?}");
}

#[test]
fn a_project_on_2_19_is_compared_with_2_18_the_same_way() {
    let (templar, recorder) = templar(Semantics::Ansible219);
    let ctx = context(&templar, vec![("items", items())]);
    let value = templar.template_str("{{ items | length }}", &ctx).unwrap();
    assert_eq!(value.as_i64(), Some(3));
    let found = recorder.divergences();
    assert_eq!(found[0].under_218.describe(), "str '3'");
    assert_eq!(found[0].under_219.describe(), "int 3");
}

#[test]
fn variables_read_through_other_variables_are_kept_raw() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(
        &templar,
        vec![
            ("items", items()),
            ("count", Var::templated(Value::from("{{ items | length }}"))),
            ("spec", Var::unsafe_data(&Value::from("x"))),
        ],
    );
    templar.template_str("{{ count }}", &ctx).unwrap();
    let found = recorder.divergences();
    let d = &found[0];
    assert_eq!(d.vars.get("count"), Some(&json!("{{ items | length }}")));
    assert!(d.vars.contains_key("items"), "{:?}", d.vars);
    assert!(!d.vars.contains_key("spec"));
}

#[test]
fn untrusted_variables_are_named() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(
        &templar,
        vec![("size", Var::unsafe_data(&Value::from(vec![1, 2])))],
    );
    templar.template_str("{{ size | length }}", &ctx).unwrap();
    let found = recorder.divergences();
    assert!(found[0].unsafe_vars.contains("size"), "{found:?}");
}

#[test]
fn a_template_whose_value_does_not_repeat_is_told_apart_by_type_only() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    let ctx = context(&templar, vec![("items", items())]);
    // Text under both lines, a different value each render.
    templar
        .template_str("{{ 1000000000 | random }}-x", &ctx)
        .unwrap();
    assert!(recorder.is_empty(), "{:?}", recorder.divergences());
    // Text under 2.18, an integer under 2.19, whatever the value.
    templar
        .template_str("{{ 1000000000 | random }}", &ctx)
        .unwrap();
    let found = recorder.divergences();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(!found[0].stable);
    assert_eq!(found[0].under_218.type_name(), Some("str"));
    assert_eq!(found[0].under_219.type_name(), Some("int"));
}

#[test]
fn a_condition_placed_exactly_is_one_place_for_every_task_under_it() {
    let (templar, recorder) = templar(Semantics::Ansible218);
    for task in ["first", "second"] {
        let ctx = Context::new(
            templar.clone(),
            Arc::new(VarList(vec![(
                "name".to_owned(),
                Var::templated(Value::from("x")),
            )])),
            Arc::from(Vec::new()),
        )
        .at(Arc::new(Origin {
            file: PathBuf::from("roles/r/tasks/main.yml"),
            line: 9,
            column: 11,
            task: task.to_owned(),
            exact: true,
        }));
        assert!(templar.evaluate(&Value::from("name"), &ctx).unwrap());
    }
    let found = recorder.divergences();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].count, 2);
}
