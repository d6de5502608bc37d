//! Templating inside containers where Ansible differs from a plain walk:
//! the keys set_fact and set_stats template themselves, and 2.19's markers
//! (undefined values kept where they stand, for a lookup that skips them).

use minijinja::Value;

use super::{Context, Error, Templar};

thread_local! {
    /// Set while a render keeps undefined values inside the containers it
    /// builds (2.19's markers, for a plugin that skips them).
    static KEEP_UNDEFINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub(crate) fn keeping_undefined() -> bool {
    KEEP_UNDEFINED.with(std::cell::Cell::get)
}

impl Templar {
    /// An element of a container: while undefined values are kept, one
    /// that meets an undefined variable is undefined itself (a marker in
    /// 2.19), not the end of the whole container.
    pub(crate) fn template_item(&self, item: &Value, ctx: &Context) -> Result<Value, Error> {
        match self.template_value(item, ctx) {
            Err(err) if err.is_undefined() && keeping_undefined() => Ok(Value::UNDEFINED),
            other => other,
        }
    }

    /// [`Templar::template_value`] keeping undefined values where they
    /// stand inside containers, as 2.19 keeps markers for a lookup that
    /// skips them (first_found's terms); a whole value that is undefined
    /// is still an error.
    pub fn template_value_keeping_undefined(
        &self,
        value: &Value,
        ctx: &Context,
    ) -> Result<Value, Error> {
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                KEEP_UNDEFINED.with(|keep| keep.set(self.0));
            }
        }
        let _restore = Restore(KEEP_UNDEFINED.with(|keep| keep.replace(true)));
        self.template_value(value, ctx)
    }

    /// A mapping's keys templated (its values as they are): what set_fact
    /// and set_stats do with the names they are given.
    pub fn template_keys(&self, value: &Value, ctx: &Context) -> Result<Value, Error> {
        let mut pairs = Vec::with_capacity(value.len().unwrap_or(0));
        for key in value.try_iter().into_iter().flatten() {
            let item = value.get_item(&key).unwrap_or_default();
            let key = match key.as_str() {
                Some(text) if !key.is_safe() && super::is_possibly_template(text) => {
                    self.template_str(text, ctx)?
                }
                _ => key,
            };
            pairs.push((key, item));
        }
        Ok(Value::from_pairs(pairs))
    }
}
