//! A stand-in for the client's service stack in unit tests of its layers:
//! answers every request with one status code after one delay.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response};

/// Answers with `code` after `delay`; code 0 is a connection error.
#[derive(Clone)]
pub struct Canned {
    pub code: u16,
    pub delay: Duration,
}

impl Canned {
    /// Answers 200 after `delay`.
    pub fn after(delay: Duration) -> Self {
        Canned { code: 200, delay }
    }

    /// Answers `code` at once.
    pub fn answering(code: u16) -> Self {
        Canned {
            code,
            delay: Duration::ZERO,
        }
    }
}

impl tower::Service<Request<()>> for Canned {
    type Response = Response<()>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, Result<Response<()>, std::io::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        let Canned { code, delay } = self.clone();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            if code == 0 {
                return Err(std::io::Error::other("refused"));
            }
            let mut response = Response::new(());
            *response.status_mut() =
                http::StatusCode::from_u16(code).map_err(std::io::Error::other)?;
            Ok(response)
        })
    }
}
