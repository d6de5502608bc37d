"""A stand-in for Galaxy, so an Operator SDK scaffold's unchanged Dockerfile
(`RUN ansible-galaxy collection install -r requirements.yml`) builds where
galaxy.ansible.com is not reachable.

It answers the part of Galaxy's v3 API that `ansible-galaxy collection
install` uses (the API root, a collection's versions, one version's metadata,
the artifact), as https://galaxy.ansible.com, for a docker build run with
`--network host --add-host galaxy.ansible.com:127.0.0.1`. What it serves is
real, published content, never made up here:

- every collection of the `ansible` packages from PyPI in ANSIBLE_BUNDLES
  (10.4.0: the release whose kubernetes.core 3.2.0, cloud.common 3.0.0 and
  community.docker 3.12.1 are what operator-sdk v1.42's scaffold pins;
  11.13.0: the one the tests' virtualenv has, whose versions the bridged
  role's results were recorded with), each an installed collection with
  its MANIFEST.json and FILES.json, which is what a Galaxy artifact holds;
- collections in source form given with --source (operator_sdk.util from
  ../shared/operators), built with `ansible-galaxy collection build`.

Its TLS certificate is for galaxy.ansible.com, signed by a CA made once and
cached (`ca` prints its path); the local image base trusts that CA
(scripts/image/base.sh, ENKA_BASE_EXTRA_CA).

    python galaxy.py ca
    python galaxy.py serve --source DIR [--port 443] [--ready FILE]
"""

import argparse
import datetime
import hashlib
import http.server
import io
import json
import os
import pathlib
import ssl
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ANSIBLE_BUNDLES = ("10.4.0", "11.13.0")
HOST = "galaxy.ansible.com"
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "enka" / "galaxy-standin"


def certificate_authority():
    """The stand-in's CA (made once): its certificate's and key's paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_path, key_path = CACHE / "ca.crt", CACHE / "ca.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    CACHE.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "enka test Galaxy stand-in CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def server_certificate(workdir):
    """A certificate for galaxy.ansible.com signed by the CA, in workdir."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_cert_path, ca_key_path = certificate_authority()
    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = workdir / "server.crt", workdir / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def bundle_collections():
    """The `ansible` packages' collections, unpacked once: their roots."""
    roots = []
    for release in ANSIBLE_BUNDLES:
        root = CACHE / f"ansible-{release}"
        if not (root / ".complete").exists():
            wheels = CACHE / "wheels"
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(wheels),
                 f"ansible=={release}"],
                check=True,
            )
            wheel = next(wheels.glob(f"ansible-{release}-*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(root)
            (root / ".complete").touch()
        roots.extend(sorted(p.parent for p in (root / "ansible_collections").glob("*/*/MANIFEST.json")))
    return roots


def artifact_from_installed(collection, out):
    """A Galaxy artifact (a tar.gz with MANIFEST.json at its root) from a
    collection as the `ansible` package ships it. The package leaves out
    what a collection's artifact has beyond its content (tests, CI files,
    changelog fragments), so FILES.json lists what it kept, each file with
    the checksum its publisher recorded (ansible-galaxy checks every one)."""
    manifest = json.loads((collection / "MANIFEST.json").read_text())
    info = manifest["collection_info"]
    path = out / f"{info['namespace']}-{info['name']}-{info['version']}.tar.gz"
    if path.exists():
        return info, path
    files = json.loads((collection / "FILES.json").read_text())
    files["files"] = [f for f in files["files"] if f["name"] == "." or (collection / f["name"]).exists()]
    listing = json.dumps(files, indent=4).encode()
    with tarfile.open(f"{path}.tmp", "w:gz") as tar:
        for entry in sorted(collection.iterdir()):
            if entry.name != "FILES.json":
                tar.add(entry, arcname=entry.name)
        member = tarfile.TarInfo("FILES.json")
        member.size = len(listing)
        member.mode = 0o644
        tar.addfile(member, io.BytesIO(listing))
    os.replace(f"{path}.tmp", path)
    return info, path


def artifact_from_source(collection, out, ansible_galaxy):
    """A Galaxy artifact built from a collection in source form, into a
    directory of its own (so the one tarball there is it)."""
    built_dir = pathlib.Path(tempfile.mkdtemp(prefix="built-", dir=out))
    subprocess.run(
        [ansible_galaxy, "collection", "build", "--output-path", str(built_dir), str(collection)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (path,) = built_dir.glob("*.tar.gz")
    with tarfile.open(path) as tar:
        info = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
    return info, path


def catalogue(sources, out, ansible_galaxy):
    """{(namespace, name): {version: (info, artifact path, sha256)}}."""
    out.mkdir(parents=True, exist_ok=True)
    # Artifacts of published packages are the same on every run: made once.
    published = CACHE / "artifacts"
    published.mkdir(parents=True, exist_ok=True)
    found = [artifact_from_installed(c, published) for c in bundle_collections()]
    for source in sources:
        for galaxy_yml in sorted(pathlib.Path(source).glob("ansible_collections/*/*/galaxy.yml")):
            found.append(artifact_from_source(galaxy_yml.parent, out, ansible_galaxy))
    table = {}
    for info, path in found:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        table.setdefault((info["namespace"], info["name"]), {})[info["version"]] = (info, path, digest)
    return table


class Handler(http.server.BaseHTTPRequestHandler):
    table = {}
    base = f"https://{HOST}"

    def log_message(self, fmt, *args):
        sys.stderr.write("galaxy stand-in: " + (fmt % args) + "\n")

    def send_json(self, value, status=200):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts == ["api"]:
            return self.send_json({"available_versions": {"v3": "v3/"}})
        if parts[:1] == ["download"] and len(parts) == 2:
            return self.send_artifact(parts[1])
        if parts[:3] == ["api", "v3", "collections"] and len(parts) >= 5:
            versions = self.table.get((parts[3], parts[4]))
            if versions is None:
                return self.send_json({"errors": [{"status": "404", "detail": "Not found."}]}, 404)
            return self.send_collection(parts[3], parts[4], versions, parts[5:])
        self.send_json({"errors": [{"status": "404", "detail": "Not found."}]}, 404)

    def send_collection(self, namespace, name, versions, rest):
        href = f"/api/v3/collections/{namespace}/{name}/"
        if not rest:
            newest = max(versions, key=lambda v: [int(x) for x in v.split("-")[0].split(".")])
            return self.send_json({
                "href": href, "namespace": namespace, "name": name,
                "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z",
                "highest_version": {"href": f"{href}versions/{newest}/", "version": newest},
            })
        if rest == ["versions"]:
            return self.send_json({
                "meta": {"count": len(versions)},
                "links": {"first": None, "previous": None, "next": None, "last": None},
                "data": [{"version": v, "href": f"{href}versions/{v}/"} for v in sorted(versions)],
            })
        if len(rest) == 2 and rest[0] == "versions" and rest[1] in versions:
            info, path, digest = versions[rest[1]]
            return self.send_json({
                "href": f"{href}versions/{rest[1]}/",
                "namespace": {"name": namespace}, "collection": {"name": name}, "version": rest[1],
                "download_url": f"{self.base}/download/{path.name}",
                "artifact": {"filename": path.name, "sha256": digest, "size": path.stat().st_size},
                "metadata": {"dependencies": info.get("dependencies") or {}},
                "signatures": [],
            })
        self.send_json({"errors": [{"status": "404", "detail": "Not found."}]}, 404)

    def send_artifact(self, filename):
        for versions in self.table.values():
            for _, path, _ in versions.values():
                if path.name == filename:
                    body = path.read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/gzip")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
        self.send_json({"errors": [{"status": "404", "detail": "Not found."}]}, 404)


def serve(args):
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    Handler.table = catalogue(args.source, workdir / "artifacts", args.ansible_galaxy)
    Handler.base = args.public_url.rstrip("/")
    cert, key = server_certificate(workdir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    if args.ready:
        pathlib.Path(args.ready).write_text(f"{len(Handler.table)} collections\n")
    server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ca", help="print the stand-in CA's certificate path (made once)")
    serving = commands.add_parser("serve", help="serve Galaxy's install API as galaxy.ansible.com")
    serving.add_argument("--source", action="append", default=[], help="a directory with ansible_collections/ in source form")
    serving.add_argument("--ansible-galaxy", default="ansible-galaxy")
    serving.add_argument("--workdir", required=True)
    serving.add_argument("--port", type=int, default=443)
    serving.add_argument("--public-url", default=f"https://{HOST}", help="where clients reach it (download links)")
    serving.add_argument("--ready", help="a file written once the server listens")
    args = parser.parse_args()
    if args.command == "ca":
        print(certificate_authority()[0])
    else:
        serve(args)


if __name__ == "__main__":
    main()
