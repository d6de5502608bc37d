//! The bridged role's (tests/bridged) HTTP peer, and what it registered
//! against what real ansible-playbook registered for it (`expected.json`,
//! recorded by record.py): shared by the integration test, which runs enka as a
//! process, and the image test, which runs it in the container image.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::{Value as Json, json};

/// What the server answers to any request; record.py's server answers the same.
const STATUS_BODY: &str = r#"{"status": "ok", "items": [1, 2]}"#;

/// Creates the role's Probe in `ns`: its files under `workdir`, its HTTP
/// peer at `port` (see [`serve_status`]).
pub async fn create_probe(client: &kube::Client, ns: &str, workdir: &str, port: u16) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bridged.enka.dev", "v1", "Probe"),
        "probes",
    );
    let probes: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let mut probe = DynamicObject::new("probe", &resource);
    probe.data = json!({"spec": {
        "workdir": workdir,
        "http_url": format!("http://127.0.0.1:{port}"),
        "http_port": port,
        "size": 3,
        "words": ["alpha", "beta"],
    }});
    probes
        .create(&PostParams::default(), &probe)
        .await
        .expect("creating the Probe");
}

/// A small HTTP server on 127.0.0.1 for `uri` and `wait_for`, answering
/// every request as record.py's server does.
pub fn serve_status() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the test's HTTP server");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut request = [0u8; 4096];
            match stream.read(&mut request) {
                Ok(n) if n > 0 => {}
                _ => continue, // wait_for only connects
            }
            let response = format!(
                "HTTP/1.0 200 OK\r\nServer: enka-test\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{STATUS_BODY}",
                STATUS_BODY.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    port
}

/// Keys whose values differ on every run (times, inodes, temporary paths):
/// dropped on both sides before comparing.
const VOLATILE: &[&str] = &[
    "start", "end", "delta", "atime", "ctime", "mtime", "inode", "dev", "date", "elapsed", "src",
    "version",
];

/// Puts enka's and ansible-playbook's results on the same footing.
fn normalize(value: &Json, workdir: &str, port: u16) -> Json {
    match value {
        Json::Object(map) => Json::Object(
            map.iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, v)| {
                    let v = if k == "port" && v == &json!(port) {
                        json!("<port>")
                    } else {
                        normalize(v, workdir, port)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Json::Array(items) => {
            Json::Array(items.iter().map(|v| normalize(v, workdir, port)).collect())
        }
        Json::String(text) => {
            let text = text
                .replace(workdir, "<workdir>")
                .replace(&format!("127.0.0.1:{port}"), "127.0.0.1:<port>");
            Json::String(random_tempfile_names(&text))
        }
        other => other.clone(),
    }
}

/// `tempfile`'s random part (`ansible.f55ulgzu.tmp`) as `ansible.<random>.tmp`.
fn random_tempfile_names(text: &str) -> String {
    let Some(start) = text.find("/ansible.") else {
        return text.to_owned();
    };
    let rest = &text[start + "/ansible.".len()..];
    match rest.find(".tmp") {
        Some(end)
            if rest[..end]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            format!(
                "{}/ansible.<random>.tmp{}",
                &text[..start],
                &rest[end + 4..]
            )
        }
        _ => text.to_owned(),
    }
}

/// Each step whose registered result differs from ansible-playbook's, as
/// a readable line, after both are put on the same footing; empty when
/// they agree on every step.
pub fn differences(results: &Json, workdir: &str, port: u16) -> Vec<String> {
    differences_where(results, workdir, port, |_| {})
}

/// Like [`differences`], with `adapt` applied to both sides first: for a
/// run whose machine differs from the recording's in ways no module
/// decides (the user, the file system).
pub fn differences_where(
    results: &Json,
    workdir: &str,
    port: u16,
    adapt: impl Fn(&mut Json),
) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bridged/expected.json");
    let expected: Json =
        serde_json::from_str(&std::fs::read_to_string(path).expect("tests/bridged/expected.json"))
            .expect("expected.json is JSON");
    let mut expected = normalize(&expected["results"], "<workdir>", 0);
    let mut actual = normalize(results, workdir, port);
    adapt(&mut expected);
    adapt(&mut actual);
    let mut differences = Vec::new();
    for (step, want) in expected.as_object().expect("steps by name") {
        let got = actual.get(step).cloned().unwrap_or(Json::Null);
        if got != *want {
            differences.push(format!(
                "{step}:\n  ansible-playbook: {want}\n  enka:             {got}"
            ));
        }
    }
    let (ran, recorded) = (
        actual.as_object().map_or(0, |a| a.len()),
        expected.as_object().map_or(0, |e| e.len()),
    );
    if ran != recorded {
        differences.push(format!(
            "{ran} steps registered, {recorded} recorded: {actual}"
        ));
    }
    differences
}
