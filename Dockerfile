# syntax=docker/dockerfile:1
#
# enka with the Zundoko operator: a static enka binary plus watches.yaml and
# roles/ at ansible-operator's paths ($HOME=/opt/ansible). Porting another
# operator is two lines on top of this image:
#
#   FROM <this image>
#   COPY watches.yaml ${HOME}/watches.yaml
#   COPY roles/ ${HOME}/roles/

ARG RUST_VERSION=1.95

# Dependencies are compiled in their own layer (cargo-chef), so a change to
# enka's source rebuilds only enka.
FROM rust:${RUST_VERSION}-alpine AS chef
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
# The same script `make test` runs outside Docker.
RUN cp "$(bash scripts/build-static.sh)" /enka

# Static binary, no shell, no package manager, non-root.
FROM gcr.io/distroless/static-debian12:nonroot
ENV HOME=/opt/ansible
WORKDIR /opt/ansible
COPY --from=build /enka /usr/local/bin/enka
COPY watches.yaml ${HOME}/watches.yaml
COPY roles/ ${HOME}/roles/
USER 65532:65532
EXPOSE 8080 6789
ENTRYPOINT ["/usr/local/bin/enka", "run", "--watches-file=./watches.yaml"]
