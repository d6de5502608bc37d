//! Templating errors, without a file location: the engine adds which task
//! and field a template belongs to, once, at its boundary.

use std::fmt;
use std::sync::Arc;

/// What one of our filters or functions knows about its error beyond the
/// text, carried as the minijinja error's source so that it survives
/// minijinja's unwinding and is read back, typed, by [`Error::from_minijinja`].
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Cause {
    /// Jinja raises it as a TemplateSyntaxError while rendering (a test
    /// name Ansible's plugin loader refuses), which Ansible's templar does
    /// not catch.
    #[error("raised as a TemplateSyntaxError while rendering")]
    RuntimeSyntax,
    /// A condition's value is undefined: the condition's text names it.
    #[error("the condition's value is undefined")]
    ConditionUndefined,
    /// `mandatory` met an undefined value without a message of its own:
    /// the template's source names the variable.
    #[error("a mandatory value is undefined")]
    MandatoryUndefined,
    /// A value used where it must be defined is not; the expression, as
    /// written.
    #[error("'{0}' is undefined")]
    UndefinedUse(String),
    /// The render would hold more than its memory budget
    /// ([`crate::budget`]); the message says what and how much.
    #[error("over the template memory budget")]
    MemoryBudget,
    /// The Python exception class Ansible's plugin raises this error as,
    /// where its callers tell classes apart (2.18's `_lookup` raises an
    /// `AnsibleLookupError` as it is and words any other).
    #[error("raised as {0}")]
    Python(&'static str),
    /// One of our errors, failing a lazily templated variable inside
    /// another template.
    #[error("{0}")]
    Nested(Box<Error>),
}

impl Cause {
    /// A minijinja error of `kind` with `message`, carrying this cause.
    pub(crate) fn error(
        self,
        kind: minijinja::ErrorKind,
        message: impl Into<String>,
    ) -> minijinja::Error {
        minijinja::Error::new(kind, message.into()).with_source(self)
    }

    /// The Python class `err` was raised as, when one of ours said.
    pub(crate) fn python_class(err: &minijinja::Error) -> Option<&'static str> {
        match Cause::of(err) {
            Some(Cause::Python(class)) => Some(class),
            _ => None,
        }
    }

    /// The first cause of ours in `err`'s chain of sources.
    fn of(err: &minijinja::Error) -> Option<&Cause> {
        let mut next = std::error::Error::source(err);
        while let Some(source) = next {
            if let Some(cause) = source.downcast_ref::<Cause>() {
                return Some(cause);
            }
            next = source.source();
        }
        None
    }
}

/// What went wrong while compiling or rendering a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The template does not parse.
    Syntax,
    /// An undefined variable or attribute was used.
    Undefined,
    /// A filter, test, lookup or operation failed on its input.
    Invalid,
    /// A loop, recursion or output limit was hit.
    Limit,
}

/// A templating error.
#[derive(Debug, Clone, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// The template source, when the error is inside one.
    template: Option<Arc<str>>,
    /// 1-based line within the template, when known.
    line: Option<usize>,
    /// Raised as a Jinja TemplateSyntaxError while rendering.
    runtime_syntax: bool,
    /// The expression whose value was undefined (`r.stdout`), when that
    /// is the error and the source shows it.
    undefined_expression: Option<String>,
    /// The kind of plugin a name was not found as.
    unknown_plugin: Option<PluginKind>,
}

/// A kind of Jinja plugin, as an error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PluginKind {
    Filter,
    Test,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(template) = &self.template {
            let shown: String = template.chars().take(200).collect();
            let ellipsis = if template.chars().count() > 200 {
                "…"
            } else {
                ""
            };
            write!(f, " (in template {shown:?}{ellipsis}")?;
            if let Some(line) = self.line.filter(|&l| l > 1) {
                write!(f, ", line {line}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl Error {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            template: None,
            line: None,
            runtime_syntax: false,
            undefined_expression: None,
            unknown_plugin: None,
        }
    }

    /// The message as Ansible's templar raises it, for a task result's
    /// `msg`: a filter's or lookup's own error bare, a syntax error as
    /// "template error while templating string", other kinds with the
    /// template they happened in.
    pub fn ansible_message(&self) -> String {
        match (self.kind, &self.template) {
            (ErrorKind::Invalid, _) => self.message.clone(),
            (ErrorKind::Syntax, Some(template)) => {
                // AnsibleError repeats the cause after the text it wraps.
                let cause = self
                    .message
                    .strip_prefix("template syntax error: ")
                    .unwrap_or(&self.message);
                format!(
                    "template error while templating string: {cause}. String: {template}. {cause}"
                )
            }
            _ => self.to_string(),
        }
    }

    /// The Python exception Jinja would have raised, class and text, for
    /// an error Ansible's templar does not catch (it fails the task with
    /// the traceback as `exception`): a division by zero.
    pub fn python_exception(&self) -> Option<(&'static str, String)> {
        if self.runtime_syntax {
            // Jinja's TemplateSyntaxError names line 0 when raised so.
            return Some(("TemplateSyntaxError", format!("{}\n  line 0", self.message)));
        }
        if self.kind != ErrorKind::Invalid {
            return None;
        }
        let operation = self.message.strip_prefix("unable to calculate ")?;
        let (rest, rhs) = operation.rsplit_once(' ')?;
        let (lhs, op) = rest.rsplit_once(' ')?;
        let is_zero = |text: &str| text.parse::<f64>().is_ok_and(|n| n == 0.0);
        let float = lhs.contains('.') || rhs.contains('.');
        let text = match op {
            "**" if is_zero(lhs) && rhs.starts_with('-') => {
                "0.0 cannot be raised to a negative power"
            }
            _ if !is_zero(rhs) => return None,
            "/" if float => "float division by zero",
            "/" => "division by zero",
            "//" if float => "float floor division by zero",
            "//" => "integer division or modulo by zero",
            "%" if float => "float modulo",
            "%" => "integer modulo by zero",
            _ => return None,
        };
        Some(("ZeroDivisionError", text.to_owned()))
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message without the template.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message in the words of `semantics`' line where they differ
    /// from 2.18's: from 2.19 a syntax error is `Syntax error in
    /// template: …`, and a name no plugin has `No filter named 'x'.`.
    pub fn message_in(&self, semantics: super::Semantics) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        const SYNTAX: &str = "template syntax error: ";
        if semantics == super::Semantics::Ansible218 || self.kind != ErrorKind::Syntax {
            return Cow::Borrowed(&self.message);
        }
        let Some(cause) = self.message.strip_prefix(SYNTAX) else {
            return Cow::Borrowed(&self.message);
        };
        let unknown = self.unknown_plugin.zip(
            cause
                .strip_prefix("Could not load \"")
                .and_then(|rest| rest.split_once('"'))
                .map(|(name, _)| name),
        );
        Cow::Owned(match unknown {
            Some((plugin, name)) => {
                let plugin = match plugin {
                    PluginKind::Filter => "filter",
                    PluginKind::Test => "test",
                };
                format!("Syntax error in template: No {plugin} named '{name}'.")
            }
            None => format!("Syntax error in template: {cause}"),
        })
    }

    /// The template the error happened in, when known.
    pub fn template(&self) -> Option<&str> {
        self.template.as_deref()
    }

    /// Whether this is an undefined-variable error.
    pub fn is_undefined(&self) -> bool {
        self.kind == ErrorKind::Undefined
    }

    /// 1-based line of the error inside its template.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// Whether the undefined value is `name` or reached through it
    /// (`ansible_env`, `ansible_env.HOME`, `hostvars[h].ansible_env`).
    pub fn is_undefined_through(&self, name: &str) -> bool {
        self.undefined_expression.as_deref().is_some_and(|expr| {
            expr.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|segment| segment == name)
        })
    }

    /// Converts a minijinja error raised while compiling or rendering
    /// `source`, naming the undefined expression when that is the cause.
    pub(crate) fn from_minijinja(err: &minijinja::Error, source: &str) -> Self {
        Self::from_render(err, source, source)
    }

    /// As [`Error::from_minijinja`], for an error raised while rendering
    /// `compiled`, the text `source` was compiled to (rewritten where
    /// minijinja needs help): its spans point into that text.
    pub(crate) fn from_render(err: &minijinja::Error, source: &str, compiled: &str) -> Self {
        use minijinja::ErrorKind as K;
        let kind = match err.kind() {
            K::SyntaxError | K::UnknownFilter | K::UnknownTest | K::UnknownFunction => {
                ErrorKind::Syntax
            }
            K::UndefinedError => ErrorKind::Undefined,
            K::OutOfFuel => ErrorKind::Limit,
            _ => ErrorKind::Invalid,
        };
        let cause = Cause::of(err);
        let kind = match cause {
            Some(Cause::MemoryBudget) => ErrorKind::Limit,
            _ => kind,
        };
        if let Some(Cause::Nested(inner)) = cause {
            // Reported where the outer template used the variable.
            let mut inner = (**inner).clone();
            inner.template = Some(Arc::from(source));
            inner.line = err.line();
            return inner;
        }
        let expression = match cause {
            Some(Cause::UndefinedUse(expression)) => Some(expression.clone()),
            _ => err.range().and_then(|r| undefined_expression(compiled, r)),
        };
        // Our own filters put the full text in the detail; minijinja's kinds
        // add a generic prefix that helps for syntax errors only.
        let detail = err.detail().map(str::to_owned);
        let message = match (kind, cause, detail) {
            (ErrorKind::Undefined, Some(Cause::ConditionUndefined), _) => {
                format!("'{}' is undefined", source.trim())
            }
            (ErrorKind::Undefined, _, detail) => match (&expression, detail) {
                (_, Some(d))
                    if d.contains("is undefined")
                        || d.contains("has no attribute")
                        || d.starts_with("No variable found")
                        || d.starts_with("No variable named") =>
                {
                    d
                }
                (Some(expr), _) if !expr.is_empty() => format!("'{expr}' is undefined"),
                (_, Some(d)) => d,
                _ => "undefined variable".to_owned(),
            },
            // As Jinja's Undefined names itself: `'name' ` or nothing.
            (_, Some(Cause::MandatoryUndefined), _) => {
                let name = expression
                    .as_ref()
                    .map(|expr| format!("'{expr}' "))
                    .unwrap_or_default();
                // Ansible's words: the name and its space, then a space.
                format!("Mandatory variable {name} not defined.")
            }
            // Ansible's plugin loader words a missing filter or test so.
            (ErrorKind::Syntax, _, _)
                if matches!(err.kind(), K::UnknownFilter | K::UnknownTest) =>
            {
                let name = err
                    .range()
                    .and_then(|r| compiled.get(r))
                    .map(|s| s.trim().to_owned())
                    .unwrap_or_default();
                format!("template syntax error: Could not load \"{name}\": '{name}'")
            }
            // An error of ours converted back and forth says so once.
            (ErrorKind::Syntax, _, Some(d)) if d.starts_with("template syntax error: ") => d,
            (ErrorKind::Syntax, _, Some(d)) => format!("template syntax error: {d}"),
            (ErrorKind::Syntax, _, None) => format!("template syntax error: {}", err.kind()),
            (_, Some(Cause::MemoryBudget), Some(d)) => d,
            (ErrorKind::Limit, _, _) => {
                "template exceeded its evaluation budget (runaway loop?)".to_owned()
            }
            (_, _, Some(d)) => d,
            (_, _, None) => err.kind().to_string(),
        };
        Error {
            kind,
            message,
            template: Some(Arc::from(source)),
            line: err.line(),
            runtime_syntax: matches!(cause, Some(Cause::RuntimeSyntax)),
            undefined_expression: (kind == ErrorKind::Undefined)
                .then_some(expression)
                .flatten(),
            unknown_plugin: match err.kind() {
                K::UnknownFilter => Some(PluginKind::Filter),
                K::UnknownTest => Some(PluginKind::Test),
                _ => None,
            },
        }
    }

    /// The error for a variable chain that loops.
    pub(crate) fn recursion(source: &str) -> Self {
        Error {
            kind: ErrorKind::Limit,
            message: "recursive loop detected in template: a variable refers back to itself"
                .to_owned(),
            template: Some(Arc::from(source)),
            line: None,
            runtime_syntax: false,
            undefined_expression: None,
            unknown_plugin: None,
        }
    }

    /// Attaches the template source when the error has none yet.
    /// An undefined-path error (`'r.stdout' is undefined`) in Ansible's
    /// words, looked up in the variables it happened with.
    pub(crate) fn explained(mut self, ctx: &super::Context) -> Self {
        if self.kind != ErrorKind::Undefined {
            return self;
        }
        if self.message == "undefined variable" {
            // An undefined value deep in a container the template built
            // (`{{ [{'k': x}] }}`): Ansible names the variable, or the
            // attribute a filter did not find (`map(attribute='name')`).
            let named = self
                .template
                .as_deref()
                .and_then(|t| first_undefined(t, ctx))
                .map(|name| {
                    ctx.undefined_cause(&name)
                        .unwrap_or_else(|| format!("'{name}' is undefined"))
                });
            if let Some(message) = named.or_else(|| ctx.last_undefined_read()) {
                self.message = message;
            }
            return self;
        }
        let path = self
            .message
            .strip_prefix('\'')
            .and_then(|m| m.strip_suffix("' is undefined"));
        if let Some(message) = path.and_then(|p| ctx.explain_undefined(p)) {
            self.message = message;
        } else if path.is_some_and(|p| p.contains('('))
            && let Some(message) = ctx.last_undefined_read()
        {
            // A call's result that is undefined (a lookup that handed back
            // its undefined argument): the variable behind it is named.
            self.message = message;
        }
        self
    }

    pub(crate) fn in_template(mut self, source: &str) -> Self {
        if self.template.is_none() {
            self.template = Some(Arc::from(source));
        }
        self
    }

    /// Turns this error back into a minijinja error, to fail a lazily
    /// templated variable from inside another template.
    pub(crate) fn to_minijinja(&self) -> minijinja::Error {
        let kind = match self.kind {
            ErrorKind::Undefined => minijinja::ErrorKind::UndefinedError,
            ErrorKind::Syntax => minijinja::ErrorKind::SyntaxError,
            ErrorKind::Limit | ErrorKind::Invalid => minijinja::ErrorKind::InvalidOperation,
        };
        Cause::Nested(Box::new(self.clone())).error(kind, self.message.clone())
    }
}

/// The expression that produced an undefined value: the failing span,
/// extended back over the variable path it is part of (`x.b` of `x.b.c`).
fn undefined_expression(source: &str, range: std::ops::Range<usize>) -> Option<String> {
    let mut span = source.get(range.clone())?;
    let mut head = source.get(..range.start)?;
    // A filter that met an undefined input is reported at the filter's
    // name (`int` of `nope | int`): the undefined thing is its input.
    if let Some(before_pipe) = head.trim_end().strip_suffix('|') {
        head = before_pipe.trim_end();
        span = "";
    }
    let range = head.len()..head.len() + span.len();
    let path_start = head
        .char_indices()
        .rev()
        .take_while(|&(_, c)| {
            c.is_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '\'' | '"')
        })
        .last()
        .map_or(range.start, |(i, _)| i);
    let text = format!("{}{span}", &head[path_start..]);
    let mut text = text
        .trim()
        .trim_start_matches("{{")
        .trim_end_matches("}}")
        .trim()
        .to_owned();
    // The closing bracket of a list the name stands in (`[0, nope] | max`).
    while text.ends_with(']') && text.matches(']').count() > text.matches('[').count() {
        text.pop();
    }
    // Only a name starts an expression that can be named (`]` of `[a] |
    // map(...)` cannot: the undefined value is somewhere inside).
    // Nor is a rewritten part, which the author never wrote.
    (text.starts_with(|c: char| c.is_alphabetic() || c == '_') && !text.contains("__enka_"))
        .then_some(text)
}

/// The variable `source` reads first (by where it is written) that `ctx`
/// does not define.
fn first_undefined(source: &str, ctx: &super::Context) -> Option<String> {
    let env = minijinja::Environment::new();
    let template = env.template_from_str(source).ok()?;
    template
        .undeclared_variables(false)
        .into_iter()
        .filter(|name| ctx.resolve(name).is_none_or(|v| v.is_undefined()))
        .min_by_key(|name| source.find(name.as_str()).unwrap_or(usize::MAX))
}
