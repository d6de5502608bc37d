use super::rewrite;

#[test]
fn conditions_loops_and_operands_are_wrapped() {
    assert_eq!(
        rewrite("{% if d.x %}a{% endif %}"),
        "{% if __enka_strict(d.x, 'd.x') %}a{% endif %}"
    );
    assert_eq!(rewrite("{{ a == 1 }}"), "{{ __enka_strict(a, 'a') == 1 }}");
    assert_eq!(
        rewrite("{{ 'y' if a.b else 'n' }}"),
        "{{ 'y' if __enka_strict(a.b, 'a.b') else 'n' }}"
    );
    assert_eq!(
        rewrite("{% for x in l %}{{ x }}{% endfor %}"),
        "{% for x in __enka_iterable(l, 'l') %}{{ x }}{% endfor %}"
    );
}

#[test]
fn what_only_passes_a_value_is_left_alone() {
    for source in [
        "{{ a.b.c | default(1) }}",
        "{{ a is defined }}",
        "{{ x }}",
        "plain text",
        "{{ [a, b] }}",
        "{{ dict(a=x) }}",
    ] {
        assert_eq!(rewrite(source), source);
    }
}

#[test]
fn nested_uses_open_outside_in_and_close_inside_out() {
    assert_eq!(
        rewrite("{% if a and b.c %}x{% endif %}"),
        "{% if __enka_strict(__enka_strict(a, 'a') and b.c, 'a and b.c') %}x{% endif %}"
    );
    // An operand in brackets is wrapped with them.
    assert_eq!(
        rewrite("{% if (a or b).c %}x{% endif %}"),
        "{% if __enka_strict((__enka_strict(a, 'a') or b).c, '(a or b).c') %}x{% endif %}"
    );
    assert_eq!(
        rewrite("{{ (x) == y }}"),
        "{{ (__enka_strict(x, 'x')) == __enka_strict(y, 'y') }}"
    );
}

#[test]
fn orderings_and_membership_become_python_comparisons() {
    assert_eq!(rewrite("{{ 1 < 2 }}"), "{{ __enka_compare(1 , '<', 2) }}");
    assert_eq!(
        rewrite("{{ n>=2 }}"),
        "{{ __enka_compare(__enka_strict(n, 'n'), '>=',2) }}"
    );
    assert_eq!(
        rewrite("{{ 'a' not in s }}"),
        "{{ __enka_compare('a' , 'not in', __enka_strict(s, 's')) }}"
    );
    assert_eq!(
        rewrite("{{ not ('a' in s) }}"),
        "{{ not (__enka_compare('a' , 'in', __enka_strict(s, 's'))) }}"
    );
    assert_eq!(
        rewrite("{{ (1) < (2) }}"),
        "{{ __enka_compare((1) , '<', (2)) }}"
    );
    // Chained comparisons keep minijinja's.
    assert_eq!(rewrite("{{ 1 < 2 < 3 }}"), "{{ 1 < 2 < 3 }}");
}
#[test]
fn a_negated_operand_is_wrapped_with_its_sign() {
    assert_eq!(
        rewrite("{{ 0 ~ (-1.25 if 0 else x) }}"),
        "{{ 0 ~ (__enka_strict(-1.25 if 0 else x, '-1.25 if 0 else x')) }}"
    );
}

#[test]
fn a_slice_step_is_given_the_sliced_value() {
    assert_eq!(
        rewrite("{{ s[::-1] }}"),
        "{{ __enka_sliceable(s, 's')[::__enka_step(-1, (s))] }}"
    );
}
