//! How the Kubernetes Python client (and so kubernetes.core and
//! operator_sdk.util) words an API server's refusal: the answer's body as
//! Python prints bytes, `DynamicApiError`'s text, discovery's
//! `ResourceNotFoundError`. Roles read these words in `failed_when`,
//! `until` and `rescue`, and a Failure condition quotes them.

use super::Error;
use enka_template::pyrepr;

/// The Python client's discovery error for a kind no group serves, as its
/// `ResourceNotFoundError` says it (its last search: by short name).
pub fn no_matches(api_version: &str, kind: &str) -> String {
    let mut text = String::from("No matches found for {'prefix': None, 'api_version': ");
    pyrepr::write_str_repr(&mut text, api_version);
    text.push_str(", 'short_names': [");
    pyrepr::write_str_repr(&mut text, kind);
    text.push_str("]}");
    text
}

/// The answer's body as kubernetes.core prints an `ApiException`'s body:
/// Python's repr of the bytes (`b'{"kind":"Status",…}\n'`). An error enka
/// made itself is written as the API server writes its `Status`.
pub fn quoted_body(err: &Error) -> String {
    let mut out = String::new();
    match err {
        Error::Api {
            answer: Some(answer),
            ..
        } => pyrepr::write_bytes_repr(&mut out, answer.body.as_bytes()),
        Error::Api {
            code,
            reason,
            message,
            answer: None,
        } => pyrepr::write_bytes_repr(&mut out, status_body(*code, reason, message).as_bytes()),
        other => out.push_str(&other.to_string()),
    }
    out
}

/// A `Status` object as the API server writes it, for an error enka made.
fn status_body(code: u16, reason: &str, message: &str) -> String {
    crate::status_text(&kube::core::Status::failure(message, reason).with_code(code))
}

/// How the Kubernetes Python client prints an API error
/// (`kubernetes.dynamic.exceptions.DynamicApiError`): the status, its
/// reason phrase, the answer's headers and its body. (Python goes on with
/// its own traceback, which has no counterpart here.)
pub fn api_error_text(err: &Error) -> String {
    let (Some(code), Some(reason)) = (err.code(), err.http_reason()) else {
        return err.to_string();
    };
    let mut text = format!("{code}\nReason: {reason}");
    if let Error::Api {
        answer: Some(answer),
        ..
    } = err
        && !answer.headers.is_empty()
    {
        text.push_str("\nHTTP response headers: HTTPHeaderDict({");
        for (index, (name, value)) in answer.headers.iter().enumerate() {
            if index > 0 {
                text.push_str(", ");
            }
            pyrepr::write_str_repr(&mut text, &canonical_header(name));
            text.push_str(": ");
            pyrepr::write_str_repr(&mut text, value);
        }
        text.push_str("})");
    }
    text.push_str("\nHTTP response body: ");
    text.push_str(&quoted_body(err));
    text
}

/// A header name as Go's HTTP server writes it (`Audit-Id`): the Python
/// client shows it so; HTTP/2 delivers it in lower case.
pub fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// The Python client's exception class for an API error, by HTTP status
/// (`kubernetes.dynamic.exceptions.api_exception`).
fn exception_class(err: &Error) -> &'static str {
    match err {
        Error::UnknownKind { .. } => "ResourceNotFoundError",
        Error::Transport(_) => "MaxRetryError",
        Error::Api { code, .. } => match code {
            400 => "BadRequestError",
            401 => "UnauthorizedError",
            403 => "ForbiddenError",
            404 => "NotFoundError",
            405 => "MethodNotAllowedError",
            409 => "ConflictError",
            410 => "GoneError",
            422 => "UnprocessibleEntityError",
            429 => "TooManyRequestsError",
            500 => "InternalServerError",
            503 => "ServiceUnavailableError",
            504 => "ServerTimeoutError",
            _ => "DynamicApiError",
        },
    }
}

/// The text of the Python client's exception for `err`, as `str()` gives it.
pub fn exception_text(err: &Error) -> String {
    match err {
        Error::UnknownKind { api_version, kind } => no_matches(api_version, kind),
        Error::Api { .. } => api_error_text(err),
        Error::Transport(_) => err.to_string(),
    }
}

/// What Ansible reports when kubernetes.core's `k8s` lookup raises the
/// Python client's exception for `err` (the lookup catches only a missing
/// object): the class and its text, which Ansible repeats.
pub fn unhandled_in_lookup(plugin: &str, err: &Error) -> String {
    let module = match err {
        Error::Transport(_) => "urllib3.exceptions",
        _ => "kubernetes.dynamic.exceptions",
    };
    let text = exception_text(err);
    format!(
        "An unhandled exception occurred while running the lookup plugin '{plugin}'. Error was a <class '{module}.{}'>, original message: {text}. {text}",
        exception_class(err)
    )
}
