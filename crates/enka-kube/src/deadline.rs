//! A deadline for the API server's answer to every request.
//!
//! kube's client has no read timeout, and hyper pools connections: a
//! connection the API server (or a load balancer, a NAT) stopped serving
//! without closing it takes every request sent on it, watches and lists
//! included, and holds each forever. The API server sends a response's
//! headers as soon as it starts answering, watches and log streams too, so
//! a bound on the headers alone catches a dead connection without limiting
//! how long a healthy stream lasts. The request that waited is failed and
//! its connection dropped with it; a retry gets a new one.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response};

/// How long the API server may take to start answering. client-go's
/// default request timeout is unlimited; 60 s is kubectl's usual
/// `--request-timeout` in scripts and well past any healthy answer.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(60);

/// The error of a request that got no answer in time.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not start answering within {0:?}; the connection was dropped")]
pub struct NoAnswer(pub Duration);

/// The layer; see the module docs.
#[derive(Clone, Debug)]
pub struct AnswerDeadlineLayer {
    deadline: Duration,
}

impl AnswerDeadlineLayer {
    /// Fails requests not answered within `deadline`.
    pub fn new(deadline: Duration) -> Self {
        AnswerDeadlineLayer { deadline }
    }
}

impl<S> tower::Layer<S> for AnswerDeadlineLayer {
    type Service = AnswerDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AnswerDeadline {
            inner,
            deadline: self.deadline,
        }
    }
}

/// The service the layer wraps around the client's stack.
#[derive(Clone, Debug)]
pub struct AnswerDeadline<S> {
    inner: S,
    deadline: Duration,
}

impl<S, B, ResBody> tower::Service<Request<B>> for AnswerDeadline<S>
where
    S: tower::Service<Request<B>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let deadline = self.deadline;
        let response = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(deadline, response).await {
                Ok(answered) => answered.map_err(Into::into),
                Err(_) => Err(NoAnswer(deadline).into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canned::Canned;
    use tower::{Layer, Service};

    #[tokio::test(start_paused = true)]
    async fn a_request_without_an_answer_fails_at_the_deadline() {
        let layer = AnswerDeadlineLayer::new(ANSWER_DEADLINE);
        let request = || Request::new(());
        let silent = layer
            .layer(Canned::after(Duration::from_secs(3600)))
            .call(request())
            .await;
        let error = silent.expect_err("no answer in time");
        assert!(error.is::<NoAnswer>(), "{error}");
        let answered = layer
            .layer(Canned::after(Duration::from_secs(59)))
            .call(request())
            .await;
        assert!(answered.is_ok());
    }
}
