//! Upstream's camelCase → snake_case conversion of spec keys
//! (`paramconv.ToSnake`), quirks included, since roles read the results.

/// Upstream's special words, in the fixed order enka uses. Upstream walks a
/// Go map, so its order is random; the documented vectors agree under
/// every order.
const SPECIAL_WORDS: &[&str] = &["HTTP", "URL", "IP"];

/// `([a-zA-Z])(\d+)([a-zA-Z](\d+))` → `$1 $2 $3`, leftmost, non-overlapping.
fn add_word_boundaries_to_numbers(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 4);
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > i + 1 && j < b.len() && b[j].is_ascii_alphabetic() {
                let mut k = j + 1;
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                if k > j + 1 {
                    out.push_str(&s[copied..=i]);
                    out.push(' ');
                    out.push_str(&s[i + 1..j]);
                    out.push(' ');
                    out.push_str(&s[j..k]);
                    copied = k;
                    i = k;
                    continue;
                }
            }
        }
        i += 1;
    }
    out.push_str(&s[copied..]);
    out
}

/// Isolates the first occurrence of each special word with `_`, treating a
/// following `s` as its plural (`IPs` → `_IPS_`).
fn preprocess_word_mapping(value: &str) -> String {
    let mut value = value.to_owned();
    for word in SPECIAL_WORDS {
        let Some(idx) = value.find(word) else {
            continue;
        };
        let end = idx + word.len();
        let b = value.as_bytes();
        value = if end == value.len() {
            format!("{}_{}", &value[..idx], &value[idx..])
        } else if b[end] == b's' {
            if end == value.len() - 1 {
                format!("{}_{}S", &value[..idx], &value[idx..end])
            } else if idx == 0 {
                format!("{}S_{}", &value[..end], &value[end + 1..])
            } else {
                format!(
                    "{}_{}S_{}",
                    &value[..idx],
                    &value[idx..end],
                    &value[end + 1..]
                )
            }
        } else if idx == 0 {
            format!("{}_{}", &value[..end], &value[end..])
        } else {
            format!("{}_{}_{}", &value[..idx], &value[idx..end], &value[end..])
        };
    }
    value
}

/// `paramconv.ToSnake` as released in v1.42.3. Upstream panics on an empty
/// key; enka keeps it.
pub fn to_snake(key: &str) -> String {
    let s = add_word_boundaries_to_numbers(key);
    let s = s.trim_matches(' ');
    let Some(first) = s.chars().next() else {
        return key.to_owned();
    };
    let prefix = if first.is_ascii_uppercase() { "_" } else { "" };
    let s = preprocess_word_mapping(s);
    let bytes = s.as_bytes();
    let mut bits: Vec<String> = Vec::new();
    let mut n = String::new();
    let mut i_real: i64 = -1;
    for (i, v) in s.char_indices() {
        i_real += 1;
        let next_case_changed = bytes.get(i + 1).is_some_and(|&next| {
            (v.is_ascii_uppercase() && next.is_ascii_lowercase())
                || (v.is_ascii_lowercase() && next.is_ascii_uppercase())
        });
        if i_real > 0 && !n.ends_with('_') && next_case_changed {
            if v.is_ascii_uppercase() {
                bits.push(n.to_lowercase());
                n = v.to_string();
                i_real = 0;
            } else {
                n.push(v);
                bits.push(n.to_lowercase());
                n.clear();
                i_real = -1;
            }
        } else if matches!(v, ' ' | '_' | '-') {
            bits.push(n.to_lowercase());
            n.clear();
            i_real = -1;
        } else {
            n.push(v);
        }
    }
    bits.push(n.to_lowercase());
    let joined = bits.join("_");
    if matches!(bits[0].as_str(), "http" | "url" | "ip") {
        joined
    } else {
        format!("{prefix}{joined}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's own vectors (`paramconv_test.go`) and the reference's
    /// extra ones.
    #[test]
    fn upstream_vectors() {
        for (input, want) in [
            ("var", "var"),
            ("888", "888"),
            ("k8s_var", "k8s_var"),
            ("_k8s_var", "_k8s_var"),
            ("k8s var", "k8s_var"),
            ("ThisShouldHaveUnderscores", "_this_should_have_underscores"),
            ("sizeK8sBuckets", "size_k8s_buckets"),
            ("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars"),
            ("egressIPs", "egress_ips"),
            ("egressIPsEgress", "egress_ips_egress"),
            ("egressIPsegress", "egress_ips_egress"),
            ("IPsegress", "_ips_egress"),
            ("egressIP", "egress_ip"),
            ("egressIPEgress", "egress_ip_egress"),
            ("egressIPegress", "egress_ip_egress"),
            ("URLegressIPEgressHTTP", "url_egress_ip_egress_http"),
            ("URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https"),
            ("replicaCount", "replica_count"),
            ("JSONData", "_json_data"),
            ("jsonData", "json_data"),
            ("apiVersion", "api_version"),
            ("a1b2", "a_1_b2"),
            ("db2_init", "db2_init"),
            ("abc11def", "abc11def"),
            ("s3Bucket", "s3_bucket"),
            ("x509Cert", "x509_cert"),
            ("v1beta1", "v1beta1"),
            ("podIP", "pod_ip"),
            ("hostIPC", "host_ip_c"),
            ("ZIPCode", "_z_ip_code"),
            ("HTTPProxy", "http_proxy"),
            ("httpsProxy", "https_proxy"),
            ("enableHTTP2", "enable_http_2"),
            ("myHTTPSServer", "my_http_s_server"),
            ("IPv6Enabled", "ip_v6_enabled"),
            ("HTTP", "__http"),
            ("MyKey", "_my_key"),
            ("ABC", "_abc"),
            ("customapps-storage", "customapps_storage"),
            (
                "node-role.kubernetes.io/worker",
                "node_role.kubernetes.io/worker",
            ),
            ("kubernetes.io/hostname", "kubernetes.io/hostname"),
            ("numZundokos", "num_zundokos"),
            ("sayKiyoshi", "say_kiyoshi"),
            ("intervalMillis", "interval_millis"),
            ("managedbyNS", "managedby_ns"),
        ] {
            assert_eq!(to_snake(input), want, "{input}");
        }
    }

    #[test]
    fn empty_key_does_not_panic() {
        assert_eq!(to_snake(""), "");
        assert_eq!(to_snake("   "), "   ");
    }
}
