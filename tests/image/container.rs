//! Docker, driven as the kubelet would drive it for a Deployment's manager
//! container: the image's entrypoint with the container's `args` and `env`,
//! its securityContext (user, read-only root, capabilities, no privilege
//! escalation), its emptyDir mounts as tmpfs, its limits, and its
//! ServiceAccount's token, CA and namespace where a pod has them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

/// The Docker CLI: the one the docker.io package installs beside its
/// engine (`make image-test` sets DOCKER); a newer CLI without the buildx
/// plugin cannot use the engine's BuildKit.
pub fn docker() -> String {
    std::env::var("DOCKER").unwrap_or_else(|_| "docker".to_owned())
}

/// Runs `docker args…`, panicking with its output when it fails; returns
/// its standard output.
pub fn docker_ok(args: &[&str]) -> String {
    let out = Command::new(docker())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", docker()));
    assert!(
        out.status.success(),
        "docker {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `docker build` of `dir` as `tag` (BuildKit, as the Dockerfile needs),
/// with `extra` flags; panics with the build's output when it fails.
pub fn build(dir: &Path, tag: &str, extra: &[&str]) {
    let mut args = vec!["build", "--tag", tag];
    args.extend_from_slice(extra);
    let dir_text = dir.display().to_string();
    args.push(&dir_text);
    let out = Command::new(docker())
        .args(&args)
        .env("DOCKER_BUILDKIT", "1")
        .output()
        .unwrap_or_else(|e| panic!("docker build: {e}"));
    assert!(
        out.status.success(),
        "docker build of {tag} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `docker build` of an operator's project whose Dockerfile installs
/// collections from Galaxy: on the host's network, galaxy.ansible.com
/// being `galaxy`.
pub fn build_with_galaxy(galaxy: &crate::galaxy::Galaxy, dir: &Path, tag: &str) {
    let started = std::time::Instant::now();
    build(
        dir,
        tag,
        &[
            "--network",
            "host",
            "--add-host",
            "galaxy.ansible.com:127.0.0.1",
        ],
    );
    eprintln!(
        "image: built {tag} in {:.1} s; Galaxy stand-in so far:\n{}",
        started.elapsed().as_secs_f64(),
        galaxy.log()
    );
}

/// What a pod of a ServiceAccount finds in
/// /var/run/secrets/kubernetes.io/serviceaccount.
pub struct Identity {
    pub token: String,
    pub namespace: String,
    pub ca_pem: Vec<u8>,
}

/// A running container, removed on drop.
pub struct Container {
    pub name: String,
    grace: u64,
    secrets: PathBuf,
}

impl Container {
    /// Starts `image` as the pod spec `pod` runs its `container`, with
    /// `identity`'s credentials and `extra_args` after the container's args.
    /// The control plane is on 127.0.0.1, so the container shares the
    /// host's network, where a pod has the cluster's.
    pub fn run_as_deployment(
        image: &str,
        pod: &Json,
        container: &Json,
        identity: &Identity,
        api_port: u16,
        extra_args: &[String],
    ) -> Container {
        let name = format!(
            "enka-image-test-{}-{}",
            std::process::id(),
            identity.namespace.replace(['.', '/'], "-")
        );
        let _ = Command::new(docker()).args(["rm", "-f", &name]).output();
        let secrets = write_service_account(&name, identity);
        let mut args: Vec<String> = [
            "run",
            "--detach",
            "--name",
            &name,
            "--label",
            "enka-image-test=1",
            "--network",
            "host",
            "--hostname",
            &name,
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(security_flags(pod, container, image));
        args.extend(mount_flags(pod, container, &secrets));
        args.extend(limit_flags(container));
        for (key, value) in environment(container, identity, api_port) {
            args.extend(["--env".to_owned(), format!("{key}={value}")]);
        }
        args.push(image.to_owned());
        args.extend(strings(&container["args"]));
        args.extend(extra_args.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        docker_ok(&refs);
        let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        Container {
            name,
            grace,
            secrets,
        }
    }

    /// The container's log so far (standard output and error).
    pub fn logs(&self) -> String {
        let out = Command::new(docker())
            .args(["logs", &self.name])
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_else(|e| format!("docker logs: {e}"));
        format!("--- docker logs {} ---\n{out}", self.name)
    }

    /// Docker's state of the container (`Running`, `OOMKilled`, `ExitCode`, …).
    pub fn state(&self) -> Json {
        let out = docker_ok(&["inspect", "--format", "{{json .State}}", &self.name]);
        serde_json::from_str(out.trim()).unwrap_or(Json::Null)
    }

    /// Stops the container as the kubelet does (SIGTERM, then SIGKILL after
    /// the grace period); returns how long it took and its exit code.
    pub fn stop(&self) -> (Duration, i64) {
        let started = std::time::Instant::now();
        docker_ok(&["stop", "--time", &self.grace.to_string(), &self.name]);
        let code = self.state()["ExitCode"].as_i64().unwrap_or(-1);
        (started.elapsed(), code)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // A failed scenario's container goes with it: its log first.
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        let _ = Command::new(docker())
            .args(["rm", "--force", &self.name])
            .output();
        let _ = std::fs::remove_dir_all(&self.secrets);
    }
}

fn strings(value: &Json) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The ServiceAccount volume's files, readable by any user as the kubelet's
/// projected volume makes them.
fn write_service_account(name: &str, identity: &Identity) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("{name}-serviceaccount"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the ServiceAccount's files");
    for (file, content) in [
        ("token", identity.token.as_bytes()),
        ("namespace", identity.namespace.as_bytes()),
        ("ca.crt", identity.ca_pem.as_slice()),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, content).expect("writing a ServiceAccount file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The pod's and container's securityContext as Docker flags. A pod that
/// says runAsNonRoot without a runAsUser needs an image whose USER is a
/// non-zero number (the kubelet refuses a name it cannot check).
fn security_flags(pod: &Json, container: &Json, image: &str) -> Vec<String> {
    let pod_security = &pod["securityContext"];
    let security = &container["securityContext"];
    let mut flags = Vec::new();
    let user = security["runAsUser"]
        .as_i64()
        .or_else(|| pod_security["runAsUser"].as_i64());
    let non_root = security["runAsNonRoot"] == true || pod_security["runAsNonRoot"] == true;
    match user {
        Some(uid) => flags.extend(["--user".to_owned(), uid.to_string()]),
        None if non_root => {
            let configured =
                docker_ok(&["image", "inspect", "--format", "{{.Config.User}}", image]);
            let uid = configured.trim().split(':').next().unwrap_or_default();
            assert!(
                uid.parse::<u32>().is_ok_and(|u| u != 0),
                "runAsNonRoot needs the image's USER to be a non-zero uid; {image} has {configured:?}"
            );
        }
        None => {}
    }
    if security["readOnlyRootFilesystem"] == true {
        flags.push("--read-only".to_owned());
    }
    if security["allowPrivilegeEscalation"] == false {
        flags.extend(["--security-opt".to_owned(), "no-new-privileges".to_owned()]);
    }
    for cap in strings(&security["capabilities"]["drop"]) {
        flags.extend(["--cap-drop".to_owned(), cap]);
    }
    for cap in strings(&security["capabilities"]["add"]) {
        flags.extend(["--cap-add".to_owned(), cap]);
    }
    flags
}

/// The container's emptyDir mounts as tmpfs (writable by any user, as an
/// emptyDir is), and the ServiceAccount's files where the kubelet puts them.
fn mount_flags(pod: &Json, container: &Json, secrets: &Path) -> Vec<String> {
    let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
    let mut flags = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let volume = volumes
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("no volume for the mount {mount}"));
        assert!(
            volume.get("emptyDir").is_some(),
            "only emptyDir volumes are run by this test: {volume}"
        );
        let path = mount["mountPath"].as_str().expect("a mountPath");
        flags.extend([
            "--tmpfs".to_owned(),
            format!("{path}:rw,exec,nosuid,nodev,mode=1777,size=256m"),
        ]);
    }
    flags.extend([
        "--volume".to_owned(),
        format!(
            "{}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
            secrets.display()
        ),
    ]);
    flags
}

/// The container's resource limits as Docker's.
fn limit_flags(container: &Json) -> Vec<String> {
    let limits = &container["resources"]["limits"];
    let mut flags = Vec::new();
    if let Some(memory) = limits["memory"].as_str() {
        flags.extend([
            "--memory".to_owned(),
            quantity_bytes(memory).to_string(),
            "--memory-swap".to_owned(),
            quantity_bytes(memory).to_string(),
        ]);
    }
    if let Some(cpu) = limits["cpu"].as_str() {
        let cores = match cpu.strip_suffix('m') {
            Some(milli) => milli.parse::<f64>().expect("a CPU quantity") / 1000.0,
            None => cpu.parse::<f64>().expect("a CPU quantity"),
        };
        flags.extend(["--cpus".to_owned(), format!("{cores}")]);
    }
    flags
}

/// A memory quantity (`128Mi`, `1Gi`, `500M`, bytes) in bytes.
pub fn quantity_bytes(quantity: &str) -> u64 {
    let suffixes: [(&str, u64); 6] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("k", 1000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ];
    for (suffix, factor) in suffixes {
        if let Some(number) = quantity.strip_suffix(suffix) {
            return number.parse::<u64>().expect("a memory quantity") * factor;
        }
    }
    quantity.parse().expect("a memory quantity")
}

/// The container's env (fieldRefs resolved as the kubelet resolves them)
/// and the service variables every pod gets.
fn environment(container: &Json, identity: &Identity, api_port: u16) -> Vec<(String, String)> {
    let mut vars = vec![
        ("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), api_port.to_string()),
    ];
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().expect("an env var's name").to_owned();
        let value = match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.namespace") => identity.namespace.clone(),
            Some(other) => panic!("fieldRef {other} is not resolved by this test"),
            None => var["value"].as_str().unwrap_or_default().to_owned(),
        };
        vars.push((name, value));
    }
    vars
}
