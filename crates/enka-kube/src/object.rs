//! Objects of watched kinds, decoded one at a time so that one object no
//! decoder can read fails only itself.
//!
//! kube-rs decodes a whole list, or a watch event, with serde_json, whose
//! recursion limit refuses anything nested deeper than 128 levels. With
//! `DynamicObject` one such custom resource fails the list, and the watcher
//! retries the same list forever: the kind stops. A [`WatchedObject`] reads
//! its metadata always (serde_json skips unknown fields without a depth
//! limit) and the rest when it can; the reconcile of an object whose rest
//! could not be read reports that, on that object alone.
//!
//! kube's own `DeserializeGuard` does not help here: it buffers the object
//! into a `serde_value::Value` first, and that buffering meets the same
//! limit before the guard can catch anything.

use std::borrow::Cow;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, ObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;
use serde_json::value::RawValue;

/// An object of a watched kind: its type and metadata, and its other fields
/// when they could be decoded.
#[derive(Clone, Debug)]
pub struct WatchedObject {
    /// `apiVersion` and `kind`; list items of built-in kinds have none.
    pub types: Option<TypeMeta>,
    /// The object's metadata.
    pub metadata: ObjectMeta,
    /// Every other field (`spec`, `status`, …) as one compact JSON object's
    /// text, or why they could not be read. Kept as text: a watch cache holds
    /// every object for as long as it exists, and a decoded `Value` tree
    /// takes about six times the bytes of its text (5 KiB against 0.8 for a
    /// Memcached with its status); a reconcile decodes its one object again
    /// in microseconds.
    pub data: Result<Box<RawValue>, Undecodable>,
    /// A hash of `managedFields` without their times: which managers own
    /// which fields. Upstream's dependent predicate compares everything but
    /// `status`, `resourceVersion` and those times, so a controller's first
    /// status write (a new manager entry) reconciles the owner there; this
    /// is what enka compares in place of the entries it leaves out.
    pub managed_fields_digest: u64,
}

/// Why the fields of an object besides its metadata could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Undecodable {
    /// Nested deeper than the decoder allows.
    #[error(
        "the object is nested more than {MAX_NESTING} levels deep, which enka cannot read; flatten it, or bound its nesting in the CustomResourceDefinition's schema"
    )]
    TooDeep,
    /// Anything else the decoder refused.
    #[error("the object could not be decoded: {0}")]
    Invalid(String),
}

/// serde_json's recursion limit: objects, arrays and the object itself.
pub const MAX_NESTING: usize = 128;

/// The fields of one JSON object, each kept as raw text: reading them scans
/// the text without a depth limit and builds nothing nested.
struct RawFields(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for RawFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RawFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawFields, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(6));
                while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                    fields.push(entry);
                }
                Ok(RawFields(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl<'de> Deserialize<'de> for WatchedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = RawFields::deserialize(deserializer)?;
        Self::from_fields(fields).map_err(serde::de::Error::custom)
    }
}

impl WatchedObject {
    /// Decodes one object from its JSON text. Fails only when even its
    /// metadata cannot be read (which the API server never sends).
    pub fn from_json_text(text: &str) -> Result<Self, serde_json::Error> {
        Self::from_fields(serde_json::from_str(text)?)
    }

    /// `managedFields` are left out: they nest as deep as the object (a
    /// deep object would have unreadable metadata), they are often half of
    /// an object's size, and no role reads them. Left out, not emptied,
    /// which a status update would take as "clear them".
    fn from_fields(RawFields(fields): RawFields) -> Result<Self, serde_json::Error> {
        let mut api_version = None;
        let mut kind = None;
        let mut metadata = ObjectMeta::default();
        let mut managed_fields_digest = 0;
        let mut data = String::from("{");
        let mut undecodable = None;
        for (key, raw) in fields {
            match key.as_str() {
                "apiVersion" => api_version = Some(serde_json::from_str::<String>(raw.get())?),
                "kind" => kind = Some(serde_json::from_str::<String>(raw.get())?),
                "metadata" => {
                    (metadata, managed_fields_digest) = metadata_without_managed_fields(raw.get())?
                }
                _ if undecodable.is_some() => {}
                // Decoded once to learn whether it can be, then kept as text.
                _ => match serde_json::from_str::<Json>(raw.get()) {
                    Ok(_) => {
                        if data.len() > 1 {
                            data.push(',');
                        }
                        data.push_str(&serde_json::to_string(&key)?);
                        data.push(':');
                        data.push_str(raw.get());
                    }
                    Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
                        undecodable = Some(Undecodable::TooDeep);
                    }
                    Err(e) => undecodable = Some(Undecodable::Invalid(format!("{key}: {e}"))),
                },
            }
        }
        data.push('}');
        let types = match (api_version, kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        Ok(Self {
            types,
            metadata,
            managed_fields_digest,
            data: match undecodable {
                Some(reason) => Err(reason),
                None => Ok(RawValue::from_string(data)?),
            },
        })
    }

    /// The whole object as JSON, as roles see it, or why its fields could
    /// not be read.
    pub fn to_json(&self) -> Result<Json, &Undecodable> {
        let data = self.data.as_ref()?;
        let mut json = self.head_json();
        // The text was written from decoded values, so it decodes again.
        let fields: serde_json::Map<String, Json> =
            serde_json::from_str(data.get()).unwrap_or_default();
        if let Some(object) = json.as_object_mut() {
            object.extend(fields);
        }
        Ok(json)
    }

    /// What a dependent watch compares to tell a change the owner must see:
    /// everything but `status`, `resourceVersion`, managedFields' times and
    /// the type (a list's items of a built-in kind have none),
    /// as operator-lib's DependentPredicate compares (an object too deep to
    /// decode by its metadata alone, whose `generation` follows its spec).
    pub fn dependent_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut value = self.to_json().unwrap_or_else(|_| self.head_json());
        // `retain`, not `remove`: with serde_json's preserve_order a removal
        // moves the last key into the gap, and the text would depend on
        // which keys were there.
        if let Some(map) = value.as_object_mut() {
            // Items of a list of a built-in kind carry no apiVersion or kind
            // and a write's answer does; the watch is of one kind anyway.
            map.retain(|key, _| !matches!(key.as_str(), "status" | "apiVersion" | "kind"));
        }
        if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.retain(|key, _| key != "resourceVersion");
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        value.to_string().hash(&mut hasher);
        self.managed_fields_digest.hash(&mut hasher);
        hasher.finish()
    }

    /// `apiVersion`, `kind` and `metadata` alone, as JSON: enough to name
    /// the object in an Event or an owner reference.
    pub fn head_json(&self) -> Json {
        let mut json = serde_json::Map::new();
        if let Some(types) = &self.types {
            json.insert("apiVersion".into(), Json::String(types.api_version.clone()));
            json.insert("kind".into(), Json::String(types.kind.clone()));
        }
        json.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).unwrap_or_default(),
        );
        Json::Object(json)
    }
}

/// An object's metadata without its `managedFields`, and their digest (see
/// [`WatchedObject::managed_fields_digest`]).
fn metadata_without_managed_fields(text: &str) -> Result<(ObjectMeta, u64), serde_json::Error> {
    let RawFields(fields) = serde_json::from_str(text)?;
    let mut kept = String::with_capacity(text.len());
    let mut digest = 0;
    kept.push('{');
    for (key, raw) in &fields {
        if key == "managedFields" {
            digest = managed_fields_digest(raw.get())?;
            continue;
        }
        if kept.len() > 1 {
            kept.push(',');
        }
        kept.push_str(&serde_json::to_string(key)?);
        kept.push(':');
        kept.push_str(raw.get());
    }
    kept.push('}');
    Ok((serde_json::from_str(&kept)?, digest))
}

/// Hashes each entry's fields but `time`, as raw text: `fieldsV1` is
/// scanned, not built.
fn managed_fields_digest(text: &str) -> Result<u64, serde_json::Error> {
    use std::hash::{Hash, Hasher};
    let entries: Vec<RawFields> = serde_json::from_str(text)?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for RawFields(fields) in &entries {
        for (key, raw) in fields.iter().filter(|(key, _)| key != "time") {
            key.hash(&mut hasher);
            raw.get().hash(&mut hasher);
        }
        0xffu8.hash(&mut hasher);
    }
    Ok(hasher.finish())
}

impl From<DynamicObject> for WatchedObject {
    fn from(mut object: DynamicObject) -> Self {
        let managed_fields_digest = object
            .metadata
            .managed_fields
            .take()
            .and_then(|fields| serde_json::to_string(&fields).ok())
            .and_then(|text| managed_fields_digest(&text).ok())
            .unwrap_or(0);
        let data = serde_json::value::to_raw_value(&object.data)
            .map_err(|e| Undecodable::Invalid(e.to_string()));
        Self {
            types: object.types,
            metadata: object.metadata,
            data,
            managed_fields_digest,
        }
    }
}

/// The API resource of a watched kind, shared. kube-runtime copies an
/// object's dynamic type into every `ObjectRef` it makes (the watch cache's
/// keys, the scheduler's queue, each reconcile request); an `ApiResource` is
/// five `String`s, and its copies came to about a kibibyte per object with
/// thousands of objects. A copy of this is one reference count.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WatchedKind(Arc<ApiResource>);

impl From<ApiResource> for WatchedKind {
    fn from(resource: ApiResource) -> Self {
        WatchedKind(Arc::new(resource))
    }
}

impl std::ops::Deref for WatchedKind {
    type Target = ApiResource;

    fn deref(&self) -> &ApiResource {
        &self.0
    }
}

impl kube::Resource for WatchedObject {
    type DynamicType = WatchedKind;
    type Scope = DynamicResourceScope;

    fn group(dt: &WatchedKind) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &WatchedKind) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &WatchedKind) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &WatchedKind) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &WatchedKind) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    fn object_text(spec: &str) -> String {
        format!(
            r#"{{"apiVersion":"x.dev/v1","kind":"Deep","metadata":{{"name":"deep","namespace":"ns","generation":3}},"spec":{spec}}}"#
        )
    }

    #[test]
    fn an_object_within_the_limit_reads_whole() {
        let object = WatchedObject::from_json_text(&object_text(&nested(100))).expect("decodes");
        let json = object.to_json().expect("its fields");
        assert_eq!(json["kind"], json!("Deep"));
        assert_eq!(json["metadata"]["name"], json!("deep"));
        assert!(json["spec"].is_array());
    }

    #[test]
    fn a_too_deep_object_keeps_its_metadata_and_says_why() {
        let object = WatchedObject::from_json_text(&object_text(&nested(10_000))).expect("decodes");
        assert_eq!(object.metadata.name.as_deref(), Some("deep"));
        assert_eq!(object.metadata.generation, Some(3));
        assert_eq!(object.data.as_ref().err(), Some(&Undecodable::TooDeep));
        assert!(object.to_json().is_err());
        assert_eq!(object.head_json()["metadata"]["namespace"], json!("ns"));
    }

    /// The API server's managedFields nest a few levels deeper than the
    /// object itself; they must not make its metadata unreadable.
    #[test]
    fn deep_managed_fields_are_skipped() {
        let fields = format!("{}{{}}{}", "{\"f:x\":".repeat(300), "}".repeat(300));
        let text = format!(
            r#"{{"apiVersion":"x.dev/v1","kind":"Deep","metadata":{{"name":"deep","managedFields":[{{"manager":"m","fieldsV1":{fields}}}],"labels":{{"a":"b"}}}},"spec":{}}}"#,
            nested(120)
        );
        let object = WatchedObject::from_json_text(&text).expect("decodes");
        assert_eq!(object.metadata.name.as_deref(), Some("deep"));
        assert_eq!(object.metadata.labels.as_ref().map(|l| l.len()), Some(1));
        assert!(object.metadata.managed_fields.is_none());
        assert!(object.to_json().is_ok());
    }

    /// The list of a kind: one deep item fails itself, not the list.
    #[test]
    fn one_deep_item_does_not_fail_its_list() {
        let list = format!(
            r#"{{"metadata":{{"resourceVersion":"9"}},"items":[{},{}]}}"#,
            object_text(&nested(500)),
            object_text("{}"),
        );
        let list: kube::core::ObjectList<WatchedObject> =
            serde_json::from_str(&list).expect("the list decodes");
        assert_eq!(list.items.len(), 2);
        assert!(list.items[0].data.is_err());
        assert!(list.items[1].data.is_ok());
    }

    /// A watch event, decoded as kube-rs decodes each line of a watch.
    #[test]
    fn a_deep_watch_event_decodes() {
        let line = format!(
            r#"{{"type":"MODIFIED","object":{}}}"#,
            object_text(&nested(500))
        );
        let event: kube::core::WatchEvent<WatchedObject> =
            serde_json::from_str(&line).expect("the event decodes");
        match event {
            kube::core::WatchEvent::Modified(object) => {
                assert_eq!(object.data.as_ref().err(), Some(&Undecodable::TooDeep))
            }
            other => panic!("{other:?}"),
        }
    }
}
