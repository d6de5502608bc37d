//! `config/`: the kustomized manifests apply to a real API server, and the
//! ServiceAccount's RBAC is enough for the Zundoko operator and no more.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use kube::config::KubeConfigOptions;
use kube_env::KubeEnv;

use crate::enka::Enka;
use crate::support::{kubeconfig_for_token, kubectl, service_account_token};
use crate::zundoko::{await_kiyoshi, create_hikawa, install_zundoko_crds};

const NAMESPACE: &str = "zundoko-ansible-operator-system";
const SERVICE_ACCOUNT: &str = "zundoko-ansible-operator-controller-manager";

#[tokio::test]
async fn config_default_applies_and_its_rbac_runs_the_operator_and_no_more() {
    let env = KubeEnv::shared().await;
    let client = env.client().unwrap();
    install_zundoko_crds(&client).await;

    // A server dry run cannot create the namespace the other objects need.
    kubectl(env, &["create", "namespace", NAMESPACE]);
    kubectl(env, &["apply", "-k", "config/default", "--dry-run=server"]);
    kubectl(env, &["apply", "-k", "config/default"]);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let manager = deployments
        .get("zundoko-ansible-operator-controller-manager")
        .await
        .unwrap();
    let pod = manager.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
    let container = &pod.containers[0];
    // The scaffold's metrics patch: HTTPS behind RBAC, with the roles it needs.
    let args = container.args.clone().unwrap_or_default();
    for flag in [
        "--metrics-bind-address=:8443",
        "--metrics-secure",
        "--metrics-require-rbac",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
    }
    kubectl(
        env,
        &[
            "get",
            "clusterrole",
            "zundoko-ansible-operator-metrics-auth-role",
        ],
    );
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(
        security.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_owned()])
    );
    let pod_security = pod.security_context.clone().unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        pod_security.seccomp_profile.map(|p| p.type_),
        Some("RuntimeDefault".to_owned())
    );
    assert!(container.liveness_probe.is_some() && container.readiness_probe.is_some());

    // A token of the deployed ServiceAccount, used from outside the cluster.
    let token = service_account_token(&client, NAMESPACE, SERVICE_ACCOUNT).await;
    let kubeconfig = kubeconfig_for_token(env, &token, None);
    let sa_kubeconfig =
        std::env::temp_dir().join(format!("enka-sa-{}.kubeconfig", std::process::id()));
    std::fs::write(&sa_kubeconfig, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();

    // The ServiceAccount cannot do what it was not granted.
    let sa_client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(sa_client.clone(), "kube-system");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("the ServiceAccount could list Secrets: {other:?}"),
    }
    let deployments_as_sa: Api<Deployment> = Api::namespaced(sa_client.clone(), NAMESPACE);
    assert!(
        deployments_as_sa
            .list(&ListParams::default())
            .await
            .is_err()
    );

    // With only that token, enka sings a Hikawa to Kiyoshi.
    let ns = env.namespace("rbac").await.unwrap();
    let enka = Enka::start(
        env,
        "watches.yaml",
        &ns,
        &[
            ("KUBECONFIG", sa_kubeconfig.to_str().unwrap()),
            ("ENKA_RANDOM_SEED", "3"),
        ],
    );
    let hikawas = create_hikawa(&client, &ns, 10).await;
    await_kiyoshi(
        &hikawas,
        "Kiyoshi with the ServiceAccount's token",
        Duration::from_secs(120),
    )
    .await;
    let log = enka.log();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "{log}"
    );
    drop(enka);
    let _ = std::fs::remove_file(&sa_kubeconfig);
    env.delete_namespace(&ns).await.unwrap();
    env.delete_namespace(NAMESPACE).await.unwrap();
}
