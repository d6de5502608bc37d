//! Counts and times every request of a `kube::Client` by method and
//! response code, as client-go does for `rest_client_requests_total` and
//! `rest_client_request_duration_seconds`: a layer in the client's service
//! stack, so watches, leases and module calls all count.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use http::{Request, Response};

/// Called once per finished request with its method, status code
/// (`<error>` when no response came, as client-go labels it) and the time
/// from sending it to the response's headers (a connection's set-up
/// included; a watch's or log stream's body is not).
pub type RecordRequest = Arc<dyn Fn(&str, &str, Duration) + Send + Sync>;

/// The layer; see the module docs.
#[derive(Clone)]
pub struct CountRequestsLayer {
    record: RecordRequest,
}

impl CountRequestsLayer {
    /// Records into `record`.
    pub fn new(record: RecordRequest) -> Self {
        CountRequestsLayer { record }
    }
}

impl<S> tower::Layer<S> for CountRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountRequests {
            inner,
            record: self.record.clone(),
        }
    }
}

/// The service the layer wraps around the client's stack.
#[derive(Clone)]
pub struct CountRequests<S> {
    inner: S,
    record: RecordRequest,
}

impl<S, B, ResBody> tower::Service<Request<B>> for CountRequests<S>
where
    S: tower::Service<Request<B>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().as_str().to_owned();
        let record = self.record.clone();
        let sent = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let elapsed = sent.elapsed();
            match &result {
                Ok(response) => record(&method, response.status().as_str(), elapsed),
                Err(_) => record(&method, "<error>", elapsed),
            }
            result
        })
    }
}

/// A client for `config` whose requests all pass through `record`, each
/// failed when the API server does not start answering within
/// [`super::deadline::ANSWER_DEADLINE`] (counted as `<error>`).
pub fn client(config: kube::Config, record: RecordRequest) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&super::deadline::AnswerDeadlineLayer::new(
            super::deadline::ANSWER_DEADLINE,
        ))
        .with_layer(&CountRequestsLayer::new(record))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canned::Canned;
    use std::sync::Mutex;
    use tower::{Layer, Service};

    #[tokio::test]
    async fn each_request_is_recorded_with_method_and_code() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let layer = CountRequestsLayer::new(Arc::new(
            move |method: &str, code: &str, _elapsed: Duration| {
                sink.lock().unwrap().push(format!("{method} {code}"));
            },
        ));
        let request = || Request::builder().method("PATCH").body(()).unwrap();
        let _ = layer.layer(Canned::answering(409)).call(request()).await;
        let _ = layer.layer(Canned::answering(0)).call(request()).await;
        assert_eq!(*seen.lock().unwrap(), vec!["PATCH 409", "PATCH <error>"]);
    }
}
