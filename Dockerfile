# enka with the Zundoko operator: a static enka binary, the Python side of
# its Ansible worker (ansible-core 2.18 and what its modules import, with no
# collections, like upstream's base image: an operator's requirements.yml
# brings those), and watches.yaml and roles/ at ansible-operator's paths
# ($HOME=/opt/ansible). Porting another operator is the usual lines on top
# of this image:
#
#   FROM <this image>
#   COPY requirements.yml ${HOME}/requirements.yml
#   RUN ansible-galaxy collection install -r ${HOME}/requirements.yml
#   COPY watches.yaml ${HOME}/watches.yaml
#   COPY roles/ ${HOME}/roles/
#
# `enka run --native-only` refuses a project that would need the worker, for
# an image without Python: FROM gcr.io/distroless/static-debian12:nonroot and
# copy /usr/local/bin/enka alone.

# The base images are build arguments, so the image builds where no registry
# is reachable (`make image-test` passes a Debian base it made from Debian's
# packages, scripts/image/base.sh). PYTHON_IMAGE is upstream's Python line.
ARG RUST_IMAGE=rust:1.95-alpine
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# Where enka's binary comes from: `build` compiles it in the Rust stage;
# `prebuilt` takes the static binary scripts/build-static.sh made outside
# Docker, placed at .image/enka in the context, for a builder that has no
# Rust image (BuildKit skips the Rust stages then).
ARG ENKA_BINARY=build
# The worker's Python packages: ansible-core 2.18, upstream's line, by
# default; crates/enka-worker/requirements-2.19.txt or -2.21.txt for the
# newer lines (2.21 needs Python 3.12 or later: a 3.13 PYTHON_IMAGE such as
# python:3.13-slim-trixie). enka follows the line the image's ansible-core
# is (--ansible-semantics auto).
ARG WORKER_REQUIREMENTS=crates/enka-worker/requirements.txt

# Dependencies are compiled in their own layer (cargo-chef), so a change to
# enka's source rebuilds only enka.
FROM ${RUST_IMAGE} AS chef
# musl-dev follows the base image's Alpine release; a pinned version would
# break the build as soon as Alpine publishes a fix.
# hadolint ignore=DL3018
RUN apk add --no-cache bash musl-dev \
 && cargo install cargo-chef --locked --version 0.1.78
WORKDIR /src

FROM chef AS plan
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=plan /src/recipe.json recipe.json
RUN cargo chef cook --release --locked --target "$(uname -m)-unknown-linux-musl" \
      --package enka --recipe-path recipe.json
COPY . .
# The commit `enka version` names: `docker build --build-arg ENKA_GIT_COMMIT=$(git rev-parse --short=12 HEAD)`.
ARG ENKA_GIT_COMMIT=unknown
# The same script `make test` runs outside Docker.
RUN ENKA_GIT_COMMIT="$ENKA_GIT_COMMIT" bash scripts/build-static.sh >/tmp/enka-path \
 && cp "$(cat /tmp/enka-path)" /enka

FROM scratch AS prebuilt
COPY .image/enka /enka

FROM ${ENKA_BINARY} AS binary

# Python with ansible-core for the worker (tasks enka has no native code
# for), non-root. The same requirements `make test` installs (scripts/ansible-venv.sh).
# tini is PID 1, as in upstream's image: it reaps what Ansible's modules
# leave orphaned and passes SIGTERM on to enka.
FROM ${PYTHON_IMAGE}
ENV HOME=/opt/ansible \
    ENKA_ANSIBLE_PYTHON=/usr/local/bin/python3 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# tini follows the base's Debian release, as musl-dev follows Alpine's.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
ARG WORKER_REQUIREMENTS
COPY ${WORKER_REQUIREMENTS} /tmp/requirements.txt
RUN pip install --no-cache-dir -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt \
 && groupadd --gid 65532 enka \
 && useradd --uid 65532 --gid 65532 --home-dir /opt/ansible --no-create-home --shell /usr/sbin/nologin enka \
 && mkdir -p /opt/ansible/.ansible \
 && chown -R 65532:65532 /opt/ansible
WORKDIR /opt/ansible
COPY --from=binary /enka /usr/local/bin/enka
# Upstream's name for the binary, so manifests and Dockerfiles written for
# ansible-operator's image (`ansible-operator run ...`) run unchanged.
RUN ln -s /usr/local/bin/enka /usr/local/bin/ansible-operator
# From here on as the user the operator runs as, as in upstream's image: an
# operator's Dockerfile on top (`RUN ansible-galaxy collection install`)
# writes to ${HOME}/.ansible, which must not be left to root.
USER 65532:65532
COPY requirements.yml ${HOME}/requirements.yml
RUN ansible-galaxy collection install -r ${HOME}/requirements.yml
COPY watches.yaml ${HOME}/watches.yaml
COPY roles/ ${HOME}/roles/
EXPOSE 8443 6789
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/enka", "run", "--watches-file=./watches.yaml"]
