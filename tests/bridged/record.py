#!/usr/bin/env python3
"""Records what real ansible-playbook (ansible-core 2.18) registers for the
bridged role's steps, as the expected data of tests/integration/bridged.rs.

    python3 tests/bridged/record.py   # uses scripts/ansible-venv.sh's Python

It runs the same role on localhost with the variables enka's run gives it,
against a local HTTP server that answers as the test's server does, and
writes tests/bridged/expected.json with the run's directory and port
replaced by <workdir> and <port> (the test does the same to enka's results).
"""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# What the test's HTTP server answers to GET /status (tests/integration/bridged.rs).
STATUS_BODY = b'{"status": "ok", "items": [1, 2]}'


class Handler(http.server.BaseHTTPRequestHandler):
    def version_string(self):
        return "enka-test"

    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(STATUS_BODY)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(STATUS_BODY)

    def log_message(self, *args):
        pass


def _port_fields(value, port):
    """A `port` field holding the server's port becomes "<port>"."""
    if isinstance(value, dict):
        return {k: ("<port>" if k == "port" and v == port else _port_fields(v, port)) for k, v in value.items()}
    if isinstance(value, list):
        return [_port_fields(v, port) for v in value]
    return value


def main():
    python = subprocess.check_output(["bash", os.path.join(ROOT, "scripts/ansible-venv.sh")], text=True).strip()
    playbook_bin = os.path.join(os.path.dirname(python), "ansible-playbook")
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "results.json")
        playbook = os.path.join(work, "record.yml")
        with open(playbook, "w") as handle:
            handle.write(
                "- hosts: localhost\n"
                "  gather_facts: false\n"
                "  roles: [bridged]\n"
                "  post_tasks:\n"
                "    - copy: {content: '{{ results | to_json }}', dest: '%s'}\n" % out
            )
        extra = {
            "workdir": work,
            "http_url": "http://127.0.0.1:%d" % port,
            "http_port": port,
            "size": 3,
            "words": ["alpha", "beta"],
            "ansible_operator_meta": {"name": "probe", "namespace": "default"},
            "enka_recording": True,
            # enka runs modules with the worker's own interpreter; no discovery.
            "ansible_python_interpreter": python,
        }
        env = dict(os.environ, ANSIBLE_ROLES_PATH=os.path.join(HERE, "roles"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
        subprocess.run([playbook_bin, "-c", "local", "-i", "localhost,", playbook, "-e", json.dumps(extra),
                        "--vault-password-file", os.path.join(HERE, "vault-password.txt")],
                       check=True, env=env, cwd=HERE, stdout=sys.stderr)
        with open(out) as handle:
            text = handle.read()
    text = text.replace(work, "<workdir>").replace("127.0.0.1:%d" % port, "127.0.0.1:<port>")
    results = _port_fields(json.loads(text), port)
    with open(os.path.join(HERE, "expected.json"), "w") as handle:
        json.dump({"recorded_with": "ansible-core " + subprocess.check_output(
            [python, "-c", "import ansible.release; print(ansible.release.__version__)"], text=True).strip(),
            "results": results}, handle, indent=2, sort_keys=True)
        handle.write("\n")
    print("wrote tests/bridged/expected.json")


if __name__ == "__main__":
    main()
