//! Behaviour of the templar on the cases the seed and the census depend on.
//! The broad conformance corpus against real ansible-core lives under
//! `tests/conformance/`.

use std::sync::Arc;

use minijinja::Value;
use serde_json::json;

use super::*;

fn ctx_with(templar: &Arc<Templar>, vars: serde_json::Value) -> Context {
    let mut list = Vec::new();
    if let serde_json::Value::Object(map) = vars {
        for (k, v) in map {
            list.push((k, Var::templated(convert::from_json(&v))));
        }
    }
    Context::new(
        templar.clone(),
        Arc::new(VarList(list)),
        Arc::from(Vec::new()),
    )
}

fn render(src: &str, vars: serde_json::Value) -> Result<Value, Error> {
    let mut builder = TemplarBuilder::new(Options {
        seed: Some(7),
        fuel: Some(2_000_000),
        ..Options::default()
    });
    builder.add_template(src)?;
    let templar = builder.build();
    let ctx = ctx_with(&templar, vars);
    templar.template_str(src, &ctx)
}

fn ok(src: &str, vars: serde_json::Value) -> String {
    let value = render(src, vars).unwrap_or_else(|e| panic!("{src}: {e}"));
    format!("{}:{}", pyrepr::type_name(&value), pyrepr::repr(&value))
}

fn cond(expr: &str, vars: serde_json::Value) -> Result<bool, Error> {
    let mut builder = TemplarBuilder::new(Options::default());
    builder.add_condition(expr)?;
    let templar = builder.build();
    let ctx = ctx_with(&templar, vars);
    templar.evaluate(&Value::from(expr), &ctx)
}

#[test]
fn non_native_typing() {
    let vars = json!({"n": 3, "s": "abc", "l": [1, 2, 3], "b": true, "none": null, "t": "True", "ls": "[1, 2]"});
    assert_eq!(ok("{{ n }}", vars.clone()), "int:3");
    assert_eq!(ok("{{ l | length }}", vars.clone()), "str:'3'");
    assert_eq!(ok("{{ n + 1 }}", vars.clone()), "str:'4'");
    assert_eq!(ok("{{ b }}", vars.clone()), "bool:True");
    assert_eq!(ok("{{ not b }}", vars.clone()), "bool:False");
    assert_eq!(ok("{{ l }}", vars.clone()), "list:[1, 2, 3]");
    assert_eq!(ok("{{ s }}", vars.clone()), "str:'abc'");
    assert_eq!(ok("x{{ n }}", vars.clone()), "str:'x3'");
    assert_eq!(ok("{{ none }}", vars.clone()), "NoneType:None");
    assert_eq!(ok("{{ t }}", vars.clone()), "bool:True");
    assert_eq!(ok("{{ ls }}", vars.clone()), "list:[1, 2]");
    assert_eq!(ok("{{ l | to_json }}", vars.clone()), "str:'[1, 2, 3]'");
    assert_eq!(ok("{{ l | string }}", vars.clone()), "str:'[1, 2, 3]'");
    assert_eq!(ok("{{ {'a': n} }}", vars.clone()), "dict:{'a': 3}");
    assert_eq!(ok("{{ 1.5 }}", vars.clone()), "str:'1.5'");
    assert_eq!(ok("plain", vars.clone()), "str:'plain'");
    assert_eq!(ok("{{ n }}\n", vars), "str:'3\\n'");
}

#[test]
fn the_seeds_expressions() {
    let vars = json!({
        "num_zundokos": "3",
        "zundoko_list": {"resources": [
            {"metadata": {"name": "h-0002"}, "spec": {"say": "Zun"}},
            {"metadata": {"name": "h-0001"}, "spec": {"say": "Doko"}},
            {"metadata": {"name": "h-0003"}, "spec": {"say": "Zun"}}
        ]},
        "_zundokokiyoshi_kaitoy_github_com_hikawa": {"metadata": {"name": "h"}, "spec": {}},
        "say_kiyoshi": false
    });
    assert_eq!(
        ok("{{ zundoko_list.resources | length }}", vars.clone()),
        "str:'3'"
    );
    assert_eq!(
        ok("h-zundoko-{{ num_zundokos.zfill(4) }}", vars.clone()),
        "str:'h-zundoko-0003'"
    );
    assert_eq!(
        ok("{{ (num_zundokos | int) + 1 }}", vars.clone()),
        "str:'4'"
    );
    assert_eq!(
        ok(
            r#"{{ zundoko_list.resources | sort(attribute="metadata.name") | map(attribute="spec") | map(attribute="say") | join(" ") }}"#,
            vars.clone()
        ),
        "str:'Doko Zun Zun'"
    );
    let say = ok(r#"{{ ["Zun", "Doko"] | random }}"#, vars.clone());
    assert!(say == "str:'Zun'" || say == "str:'Doko'", "{say}");
    assert!(cond("_zundokokiyoshi_kaitoy_github_com_hikawa.status.kiyoshied is not defined or not _zundokokiyoshi_kaitoy_github_com_hikawa.status.kiyoshied", vars.clone()).unwrap());
    assert!(
        !cond(
            "(zundoko_list.resources | length ) < (num_zundokos | int)",
            vars.clone()
        )
        .unwrap()
    );
    assert!(
        cond(
            "(zundoko_list.resources | length | string) == num_zundokos and not say_kiyoshi",
            vars.clone()
        )
        .unwrap()
    );
    assert!(
        !cond(
            "say_kiyoshi and not _zundokokiyoshi_kaitoy_github_com_hikawa.status.kiyoshied",
            vars
        )
        .unwrap()
    );
}

#[test]
fn undefined_values_chain_but_fail_when_used() {
    let vars = json!({"x": {"a": 1}});
    assert_eq!(ok("{{ x.b.c is defined }}", vars.clone()), "bool:False");
    assert_eq!(ok("{{ y is undefined }}", vars.clone()), "bool:True");
    assert_eq!(ok("{{ y | default('d') }}", vars.clone()), "str:'d'");
    assert_eq!(ok("{{ x.b | default(5) }}", vars.clone()), "str:'5'");
    let err = render("{{ y }}", vars.clone()).unwrap_err();
    assert!(err.is_undefined(), "{err}");
    assert!(err.message().contains("'y' is undefined"), "{err}");
    // As Jinja's Undefined says it: the first attribute missing.
    let err = render("{{ x.b.c }}", vars.clone()).unwrap_err();
    assert!(
        err.message().contains("'dict object' has no attribute 'b'"),
        "{err}"
    );
    let err = render("{{ nope.b }}", vars.clone()).unwrap_err();
    assert!(err.message().contains("'nope' is undefined"), "{err}");
    // A filter on an undefined input names the input, not the filter.
    for source in ["{{ y | int }}", "{{ y | int + 1 }}", "{{ (y | int) + 1 }}"] {
        let err = render(source, vars.clone()).unwrap_err();
        assert!(
            err.message().contains("'y' is undefined"),
            "{source}: {err}"
        );
    }
    assert!(
        render("{{ y | length }}", vars.clone())
            .unwrap_err()
            .is_undefined()
    );
    let err = cond("y", vars.clone()).unwrap_err();
    assert!(err.is_undefined(), "{err}");
    let err = cond("x.nope.deeper", vars).unwrap_err();
    assert!(err.is_undefined(), "{err}");
}

#[test]
fn variables_are_templated_lazily() {
    let vars = json!({"a": "{{ b }}-x", "b": "{{ c | upper }}", "c": "v", "loop1": "{{ loop2 }}", "loop2": "{{ loop1 }}", "bad": "{{ nope }}"});
    assert_eq!(ok("{{ a }}", vars.clone()), "str:'V-x'");
    assert_eq!(ok("{{ bad is defined }}", vars.clone()), "bool:False");
    let err = render("{{ loop1 }}", vars).unwrap_err();
    assert!(err.message().contains("recursive"), "{err}");
}

#[test]
fn ordering_a_string_against_a_number_fails_as_in_python() {
    let err = cond("size > 3", json!({"size": "three"})).unwrap_err();
    assert!(
        err.message()
            .contains("'>' not supported between instances of 'str' and 'int'"),
        "{err}"
    );
    assert!(cond("size | int > 3", json!({"size": "4"})).unwrap());
    assert!(cond("'b' > 'a'", json!({})).unwrap());
}

#[test]
fn conditions_follow_ansible() {
    assert!(cond("1 == 1", json!({})).unwrap());
    assert!(!cond("[]", json!({})).unwrap());
    assert!(cond("'x'", json!({})).unwrap());
    assert!(cond("{{ true }}", json!({})).unwrap());
    assert!(!cond("{{ '' }}", json!({})).unwrap());
    assert!(cond("flag", json!({"flag": "{{ 1 == 1 }}"})).unwrap());
    let templar = TemplarBuilder::new(Options::default()).build();
    assert!(
        templar
            .evaluate(&Value::from(()), &ctx_with(&templar, json!({})))
            .unwrap()
    );
}

#[test]
fn syntax_errors_are_reported_at_compile_time() {
    let mut builder = TemplarBuilder::new(Options::default());
    let err = builder.add_template("{{ foo( }}").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Syntax, "{err}");
    let err = builder.add_condition("a ==").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Syntax, "{err}");
    let err = builder.add_template("{{ x | no_such_filter }}");
    // Unknown filters are detected when the template runs, as in Jinja.
    assert!(err.is_ok());
}

#[test]
fn backslashes_in_string_literals_are_doubled_like_ansible() {
    assert_eq!(ok(r"{{ 'a\nb' }}", json!({})), r"str:'a\\nb'");
    assert_eq!(
        ok(r"{{ 'a.b' | regex_replace('\.', '-') }}", json!({})),
        "str:'a-b'"
    );
    assert_eq!(
        escape_backslashes(r#"x\y {{ "a\b" }} z\w"#),
        r#"x\y {{ "a\\b" }} z\w"#
    );
}

#[test]
fn runaway_templates_are_bounded() {
    let err = render(
        "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
        json!({}),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit, "{err}");
    let err = render("{{ 'x' * 20000000 }}", json!({})).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit, "{err}");
}

#[test]
fn filters_used_by_real_roles() {
    let vars = json!({"d": {"b": 1, "a": {"x": 1}}, "l": [3, 1, 2, 3], "s": " Hi There "});
    assert_eq!(
        ok(
            "{{ d | combine({'a': {'y': 2}}, recursive=True) }}",
            vars.clone()
        ),
        "dict:{'b': 1, 'a': {'x': 1, 'y': 2}}"
    );
    assert_eq!(
        ok(
            "{{ d | dict2items | map(attribute='key') | list }}",
            vars.clone()
        ),
        "list:['b', 'a']"
    );
    assert_eq!(ok("{{ l | unique }}", vars.clone()), "list:[3, 1, 2]");
    assert_eq!(ok("{{ l | max }}", vars.clone()), "str:'3'");
    assert_eq!(ok("{{ s | trim | lower }}", vars.clone()), "str:'hi there'");
    assert_eq!(ok("{{ 'abc' | b64encode }}", vars.clone()), "str:'YWJj'");
    assert_eq!(ok("{{ 'YWJj' | b64decode }}", vars.clone()), "str:'abc'");
    assert_eq!(ok("{{ '1' | bool }}", vars.clone()), "bool:True");
    assert_eq!(ok("{{ '42.7' | int }}", vars.clone()), "str:'42'");
    assert_eq!(
        ok("{{ (true) | ternary('y', 'n') }}", vars.clone()),
        "str:'y'"
    );
    assert_eq!(
        ok("{{ 'a: 1' | from_yaml }}", vars.clone()),
        "dict:{'a': 1}"
    );
    assert_eq!(
        ok("{{ d | to_json }}", vars.clone()),
        r#"str:'{"b": 1, "a": {"x": 1}}'"#
    );
    assert_eq!(
        ok("{{ d | to_nice_yaml(indent=2) }}", vars.clone()),
        "str:'a:\\n  x: 1\\nb: 1\\n'"
    );
    assert_eq!(
        ok("{{ 'x' | sha1 }}", vars.clone()),
        "str:'11f6ad8ec52a2984abaafd7c3b516503785c2072'"
    );
    assert_eq!(
        ok("{{ '/a/b/c.txt' | basename }}", vars.clone()),
        "str:'c.txt'"
    );
    assert_eq!(
        ok("{{ 'k8s' | regex_search('[0-9]') }}", vars.clone()),
        "str:'8'"
    );
    assert_eq!(
        ok("{{ 'a1b2' | regex_findall('[0-9]') }}", vars),
        "list:['1', '2']"
    );
}

/// Templates nested or chained far beyond any real role end in an error or
/// a result, never a stack overflow (issue 15: 5 000 chained filters
/// aborted the process in minijinja's code generator).
#[test]
fn deep_templates_do_not_overflow_the_stack() {
    let deep = [
        format!("{{{{ x{} }}}}", " | lower".repeat(5_000)),
        format!(
            "{}x{}",
            "{% if true %}".repeat(1_200),
            "{% endif %}".repeat(1_200)
        ),
        format!("{{{{ {}1{} }}}}", "(".repeat(5_000), ")".repeat(5_000)),
        format!("{{{{ {}1{} }}}}", "[".repeat(5_000), "]".repeat(5_000)),
        format!(
            "{}x{}",
            "{% for a in [1] %}".repeat(1_200),
            "{% endfor %}".repeat(1_200)
        ),
    ];
    for source in deep {
        // Compiled at load, as a role's templates are, and rendered as a
        // template string that was not (a templated custom resource's), and
        // judged as a condition.
        let _ = render(&source, json!({"x": "A"}));
        let templar = TemplarBuilder::new(Options::default()).build();
        let ctx = ctx_with(&templar, json!({"x": "A"}));
        let _ = templar.template_str(&source, &ctx);
        let _ = templar.evaluate(&Value::from(source.as_str()), &ctx);
    }
    let err = render(
        &format!("{{{{ x{} }}}}", " | lower".repeat(501)),
        json!({"x": "A"}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("more than 500 filters"), "{err}");
    assert_eq!(
        ok(
            &format!("{{{{ x{} }}}}", " | lower".repeat(500)),
            json!({"x": "A"})
        ),
        "str:'a'"
    );
    assert_eq!(ok("{{ ('|' * 600) | length }}", json!({})), "str:'600'");
}

/// A lookup's terms are templated before the plugin runs, except unsafe
/// ones (a custom resource's string naming `{{ … }}` stays text), and what
/// the lookup returns makes the render's result unsafe.
#[test]
fn lookup_terms_are_templated_unless_unsafe() {
    let templar = TemplarBuilder::new(Options::default()).build();
    let vars = VarList(vec![
        ("x".to_owned(), Var::plain(Value::from("templated"))),
        (
            "from_cr".to_owned(),
            Var::unsafe_data(&Value::from("{{ x }}")),
        ),
    ]);
    let ctx = Context::new(templar.clone(), Arc::new(vars), Arc::from(Vec::new()));
    let safe = templar
        .template_str("{{ lookup('list', '{{ x }}') }}", &ctx)
        .unwrap();
    assert_eq!(safe.as_str(), Some("templated"));
    assert!(safe.is_safe(), "a lookup's result is unsafe");
    let kept = templar
        .template_str("{{ lookup('list', from_cr) }}", &ctx)
        .unwrap();
    assert_eq!(kept.as_str(), Some("{{ x }}"));
    let allowed = templar
        .template_str("{{ lookup('list', '{{ x }}', allow_unsafe=True) }}", &ctx)
        .unwrap();
    assert!(!allowed.is_safe(), "allow_unsafe keeps the result safe");
    let err = templar
        .template_str("{{ lookup('list', '{{ nope }}', errors='ignore') }}", &ctx)
        .unwrap_err();
    assert!(err.is_undefined(), "{err}");
}

/// 2.18's inspection of conditionals: the type name of a result that is
/// not a boolean (the names Python's `__class__.__name__` gives).
#[test]
fn judged_conditions_name_a_result_that_is_not_boolean() {
    let judge = |condition: Value| {
        let mut builder = TemplarBuilder::new(Options::default());
        if let Some(expr) = condition.as_str() {
            builder.add_condition(expr).unwrap();
        }
        let templar = builder.build();
        let ctx = ctx_with(&templar, json!({"l": [1], "s": "x"}));
        let judgement = templar.judge(&condition, &ctx).unwrap();
        (judgement.holds, judgement.not_boolean)
    };
    assert_eq!(judge(Value::from("1 + 1")), (true, Some("int".to_owned())));
    assert_eq!(judge(Value::from("l")), (true, Some("list".to_owned())));
    assert_eq!(judge(Value::from("s")), (true, Some("str".to_owned())));
    assert_eq!(judge(Value::from("0")), (false, Some("int".to_owned())));
    assert_eq!(judge(Value::from(1)), (true, Some("int".to_owned())));
    assert_eq!(judge(Value::from("l | length > 0")), (true, None));
    assert_eq!(judge(Value::from(true)), (true, None));
    assert_eq!(judge(Value::from(())), (true, None));
}

/// Python refuses a call that repeats a keyword argument when Jinja
/// compiles it; keyword-looking text elsewhere is left alone.
#[test]
fn a_repeated_keyword_argument_does_not_compile() {
    let repeated = render(
        "{{ lookup('vars', 'v', default='', default='x') }}",
        json!({}),
    );
    let err = repeated.expect_err("a repeated keyword argument");
    assert!(
        err.message().contains("keyword argument repeated: default"),
        "{err}"
    );
    assert_eq!(ok("{{ dict(a=1, b=2) | length }}", json!({})), "str:'2'");
    assert_eq!(
        ok("{{ [1] | map('int', base=10) | list }}", json!({})),
        "list:[1]"
    );
    assert_eq!(ok("{{ 'x=1' if 1 == 1 else 'y' }}", json!({})), "str:'x=1'");
    assert_eq!(ok("{% set v = 1 %}{{ v >= 1 }}", json!({})), "bool:True");
    assert_eq!(ok("{{ dict(é=1, a=2) | length }}", json!({})), "str:'2'");
    // A multi-byte character before a name is not cut in half.
    assert!(render("{{ d(→a=1) }}", json!({})).is_err());
}

#[test]
fn an_inline_if_keeps_text_from_the_branch_it_takes() {
    let source = "{{ 'True' if flag else 'False' | string }}";
    assert_eq!(
        render(source, json!({"flag": false})).unwrap(),
        Value::from("False")
    );
    assert_eq!(
        render(source, json!({"flag": true})).unwrap(),
        Value::from(true)
    );
    let nested = "{{ 1 if a else ('x' | string if b else '[1]') }}";
    assert_eq!(
        render(nested, json!({"a": false, "b": true})).unwrap(),
        Value::from("x")
    );
    let list = render(nested, json!({"a": false, "b": false})).unwrap();
    assert_eq!(list.len(), Some(1));
    // Branches that agree need no second look at the test.
    assert_eq!(
        keeps_text("{{ a | string if c else b | to_json }}"),
        KeepsText::Always
    );
}

#[test]
fn string_filters_keep_text_only_when_they_make_the_whole_value() {
    assert_eq!(keeps_text("{{ x | string }}"), KeepsText::Always);
    assert_eq!(
        keeps_text("{{ (x | to_json(indent=2)) }}"),
        KeepsText::Always
    );
    assert_eq!(
        keeps_text("{{ x | ansible.builtin.to_yaml }}"),
        KeepsText::Always
    );
    // The filter's text is an operand, an item or a test subject.
    assert_eq!(keeps_text("{{ x | string == '1' }}"), KeepsText::Never);
    assert_eq!(keeps_text("{{ (x | string) in l }}"), KeepsText::Never);
    assert_eq!(keeps_text("{{ [x | string] }}"), KeepsText::Never);
    assert_eq!(keeps_text("{{ a ~ b | string }}"), KeepsText::Never);
    assert_eq!(keeps_text("{{ x | string is string }}"), KeepsText::Never);
    assert_eq!(keeps_text("{{ not x | string }}"), KeepsText::Never);
    assert_eq!(
        keeps_text("{{ l | difference([x | string]) }}"),
        KeepsText::Never
    );
    // A `|` inside a string literal is no filter.
    assert_eq!(keeps_text("{{ 'a | string' }}"), KeepsText::Never);
}

#[test]
fn an_undefined_value_knows_the_path_it_was_reached_through() {
    let direct = render("{{ ansible_env.HOME }}", json!({})).unwrap_err();
    assert!(direct.is_undefined(), "{direct}");
    assert!(direct.is_undefined_through("ansible_env"), "{direct:?}");
    assert!(!direct.is_undefined_through("ansible"), "{direct:?}");
    let other = render("{{ home }}", json!({})).unwrap_err();
    assert!(!other.is_undefined_through("ansible_env"), "{other:?}");
}

#[test]
fn mandatory_names_the_undefined_variable_or_says_its_own_message() {
    let named = render("{{ nope | mandatory }}", json!({})).unwrap_err();
    assert_eq!(named.message(), "Mandatory variable 'nope'  not defined.");
    let own = render("{{ nope | mandatory('set nope') }}", json!({})).unwrap_err();
    assert_eq!(own.message(), "set nope");
    // The same through a lazily templated variable.
    let nested = render("{{ x }}", json!({"x": "{{ nope | mandatory }}"})).unwrap_err();
    assert_eq!(nested.message(), "Mandatory variable 'nope'  not defined.");
}

#[test]
fn a_plugin_name_refused_at_run_time_is_a_template_syntax_error() {
    let src = "{{ [{'a': 1}] | selectattr('a', 'x.y') | list }}";
    let err = render(src, json!({})).unwrap_err();
    let (class, text) = err.python_exception().expect("an uncaught exception");
    assert_eq!(class, "TemplateSyntaxError");
    assert!(text.starts_with("Could not load \"x.y\""), "{text}");
    let nested = render("{{ y }}", json!({"y": src})).unwrap_err();
    assert!(nested.python_exception().is_some(), "{nested:?}");
}

#[test]
fn a_lazy_variables_typed_error_survives_printing_inside_text() {
    let src = "{{ [{'a': 1}] | selectattr('a', 'x.y') | list }}";
    let nested = render("a {{ y }} b", json!({"y": src})).unwrap_err();
    assert!(nested.python_exception().is_some(), "{nested:?}");
    let named = render("a {{ x }} b", json!({"x": "{{ nope | mandatory }}"})).unwrap_err();
    assert_eq!(named.message(), "Mandatory variable 'nope'  not defined.");
}

#[test]
fn an_undefined_operand_names_the_path_it_was_reached_through() {
    let err = render("{{ ansible_env.HOME + '/x' }}", json!({})).unwrap_err();
    assert!(err.is_undefined(), "{err:?}");
    assert!(err.is_undefined_through("ansible_env"), "{err:?}");
}

#[test]
fn a_template_that_would_build_past_its_memory_budget_fails_with_the_line() {
    let budgeted = |src: &str| {
        let mut builder = TemplarBuilder::new(Options {
            memory_budget: Some(4 * 1024 * 1024),
            ..Options::default()
        });
        builder.add_template(src).expect("compiles");
        let templar = builder.build();
        let ctx = ctx_with(&templar, json!({"s": "abc"}));
        templar.template_str(src, &ctx)
    };
    for src in [
        "{{ ('x' * 10**8) ~ ('y' * 10**8) }}",
        "line one\n{{ 'x' * 3000000 + 'y' * 3000000 }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
        "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
        "{{ [s] * 10**7 }}",
        "{% set big = 'x' * 100000 %}{{ ([big] * 100) | join(',') }}",
        "{% set big = 'x' * 100000 %}{{ ([big] * 100) | to_json }}",
        "{{ ('x' * 1000000) | b64encode | b64encode | b64encode | b64encode | b64encode }}",
    ] {
        let err = budgeted(src).expect_err(src);
        assert_eq!(err.kind(), ErrorKind::Limit, "{src}: {err}");
        assert!(err.to_string().contains("memory budget"), "{src}: {err}");
    }
    let err = budgeted("line one\n{{ 'x' * 3000000 + 'y' * 3000000 }}").unwrap_err();
    assert_eq!(err.line(), Some(2), "{err}");
    // Below the budget, the same operators build what minijinja builds.
    assert_eq!(ok("{{ 'ab' * 2 ~ (1 + 2) }}", json!({})), "str:'abab3'");
    assert_eq!(ok("{{ [1] * 2 + [3] }}", json!({})), "list:[1, 1, 3]");
    assert_eq!(
        ok("{{ (1 + 2 * 3) ~ 'x' ~ 2 ** 3 }}", json!({})),
        "str:'7x8'"
    );
}

/// An operand of `~`, `+` or `*` that is undefined fails the template, as
/// Python's operators fail on Ansible's undefined (found by the template
/// fuzzer once those operators became filters that ask the memory budget).
#[test]
fn an_undefined_operand_of_a_growing_operator_fails() {
    for src in [
        "{{ (e ~ nope) }}{{ '1.0' }}",
        "{{ ('0x1F' ~ d[-1]) }}",
        "{{ 'a' + nope }}",
        "{{ nope * 2 }}",
    ] {
        let err = render(src, json!({"e": "x", "d": {"a": 1}})).expect_err(src);
        assert_eq!(err.kind(), ErrorKind::Undefined, "{src}: {err}");
    }
}

#[test]
fn unicode_whitespace_inside_blocks_is_a_space() {
    assert_eq!(
        ok("{{\u{a0}1 + 1\u{3000}}}", json!({})),
        ok("{{ 1 + 1 }}", json!({}))
    );
    assert_eq!(
        ok(
            "{%\u{a0}if x\u{a0}%}'\u{a0}'{% endif %}",
            json!({"x": true})
        ),
        r#"str:"'\xa0'""#
    );
    assert_eq!(ok("{{ '\u{a0}' }}", json!({})), r"str:'\xa0'");
    assert_eq!(
        source::unicode_spaces("a\u{a0}{{\u{a0}'\u{a0}'\u{2003}}}"),
        "a\u{a0}{{  '\u{a0}'   }}"
    );
}
