//! A TCP proxy whose traffic can be stalled: connections stay open and are
//! still accepted, but no byte goes through, as with an API server (or a
//! network path to it) that stopped answering without closing anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Proxy {
    pub port: u16,
    stalled: Arc<AtomicBool>,
    /// Connections born before this epoch are severed.
    epoch: Arc<AtomicU64>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Forwards 127.0.0.1:<port> to `target`.
    pub async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        let port = listener.local_addr().expect("its address").port();
        let stalled = Arc::new(AtomicBool::new(false));
        let epoch = Arc::new(AtomicU64::new(0));
        let flag = stalled.clone();
        let epochs = epoch.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let gate = Gate {
                    stalled: flag.clone(),
                    epoch: epochs.clone(),
                    born: epochs.load(Ordering::SeqCst),
                };
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pipe(client_read, server_write, gate.clone()),
                        pipe(server_read, client_write, gate),
                    );
                });
            }
        });
        Proxy {
            port,
            stalled,
            epoch,
            accepting,
        }
    }

    /// Stops (or resumes) every byte in both directions.
    pub fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
    }

    /// Every connection open now stays open and silent for good, as when a
    /// load balancer or NAT loses them; later connections work.
    pub fn sever(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether one connection's bytes may pass.
#[derive(Clone)]
struct Gate {
    stalled: Arc<AtomicBool>,
    epoch: Arc<AtomicU64>,
    born: u64,
}

impl Gate {
    fn closed(&self) -> bool {
        self.stalled.load(Ordering::SeqCst) || self.born < self.epoch.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    gate: Gate,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while gate.closed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
