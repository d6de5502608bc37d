# enka's entry points. Every target says what it does before doing it.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
KUBE_ENV_DIR ?= $(CURDIR)/.kube-env
# make ansible-tests fails when fewer targets pass than this (raise it as
# enka passes more; see docs/compatibility.md).
ANSIBLE_TESTS_MIN_PASS ?= 133
KUBE_ENV_BUILD := tools/kube-env/build.sh
# The control plane's binaries (kwok's simulated nodes included), the Ansible
# worker's Python and the sharder (timebertt/kubernetes-controller-sharding),
# built or installed on first use and cached by version under ~/.cache/enka.
TEST_ENV = ENKA_KUBE_BIN_DIR="$$(bash $(KUBE_ENV_BUILD))" ENKA_KWOK_DIR="$$(bash scripts/kwok.sh)" ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" ENKA_SHARDER_DIR="$$(bash scripts/sharder.sh)"

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build enka (debug).
	@echo "==> building enka"
	$(CARGO) build --workspace

.PHONY: host-packages
host-packages: ## Install the Debian packages a fresh machine lacks (musl-tools for the image's static binary, procps, binutils, python3-venv).
	@bash scripts/ensure-packages.sh procps:pgrep musl-tools:musl-gcc binutils:readelf
	@python3 -c "import venv, ensurepip" 2>/dev/null || bash scripts/ensure-packages.sh python3-venv

.PHONY: ansible-venv
ansible-venv: host-packages ## Install ansible-core 2.18 and the common collections for the Ansible worker (cached).
	@echo "==> the Ansible worker's Python: $$(bash scripts/ansible-venv.sh)"

.PHONY: kube-bin
kube-bin: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from Go modules (cached by version).
	@echo "==> building the control plane from Go modules (cached outside target/)"
	@bash $(KUBE_ENV_BUILD) >/dev/null
	@bash scripts/kwok.sh >/dev/null

NODES ?= 0

.PHONY: kube-env
kube-env: kube-bin ## Start a local real control plane in the background and print its KUBECONFIG (NODES=3: simulated nodes, so Pods run).
	@echo "==> starting a local control plane in $(KUBE_ENV_DIR)$(if $(filter-out 0,$(NODES)), with $(NODES) simulated nodes (kwok))"
	@ENKA_KUBE_BIN_DIR="$$(bash $(KUBE_ENV_BUILD))" ENKA_KWOK_DIR="$$(bash scripts/kwok.sh)" $(CARGO) run --quiet -p kube-env -- up --dir "$(KUBE_ENV_DIR)" --nodes "$(NODES)"
	@echo "    kubectl: $$(bash $(KUBE_ENV_BUILD))/kubectl"

.PHONY: kube-env-down
kube-env-down: ## Stop the control plane started by `make kube-env`.
	@echo "==> stopping the local control plane in $(KUBE_ENV_DIR)"
	@$(CARGO) run --quiet -p kube-env -- down --dir "$(KUBE_ENV_DIR)"

.PHONY: demo
demo: host-packages ## A local real control plane, enka, and the sample Hikawa sung live to "Kiyoshi!" (SEED=n, INTERVAL_MS=n, NODES=n).
	@echo "==> make demo: everything it starts is stopped at the end"
	@ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" SEED="$(SEED)" INTERVAL_MS="$(INTERVAL_MS)" NODES="$(NODES)" bash scripts/demo.sh

.PHONY: run
run: ## Run enka on ./watches.yaml against the current KUBECONFIG.
	@echo "==> enka run --watches-file watches.yaml (KUBECONFIG=$${KUBECONFIG:-~/.kube/config})"
	ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" $(CARGO) run --release -p enka -- run --watches-file watches.yaml

.PHONY: install
install: kube-bin ## Install the CRDs into the current KUBECONFIG's cluster.
	@echo "==> installing the CRDs from config/crd/bases"
	"$$(bash $(KUBE_ENV_BUILD))/kubectl" apply -f config/crd/bases

.PHONY: uninstall
uninstall: kube-bin ## Remove the CRDs (and every Hikawa, Zundoko and Kiyoshi) from the current cluster.
	@echo "==> removing the CRDs in config/crd/bases"
	"$$(bash $(KUBE_ENV_BUILD))/kubectl" delete --ignore-not-found -f config/crd/bases

IMG ?= ghcr.io/enka-operator/zundoko-ansible-operator:latest
KUBECTL = "$$(bash $(KUBE_ENV_BUILD))/kubectl"

.PHONY: deploy
deploy: kube-bin ## Deploy the operator (CRDs, RBAC, Deployment of image IMG) to the current KUBECONFIG's cluster.
	@echo "==> kubectl apply -k config/default with image $(IMG)"
	$(KUBECTL) kustomize config/default | sed "s#ghcr.io/enka-operator/zundoko-ansible-operator:latest#$(IMG)#" | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: kube-bin ## Remove what `make deploy` created, CRDs included.
	@echo "==> kubectl delete -k config/default"
	$(KUBECTL) delete --ignore-not-found -k config/default

.PHONY: docker-build
docker-build: ## Build the container image IMG (needs a Docker engine).
	@echo "==> docker build -t $(IMG) ."
	docker build -t $(IMG) .

.PHONY: image-check
image-check: host-packages ## Without Docker: hadolint the Dockerfile, build its static binary as it does, and smoke-test it.
	@echo "==> checking the image's Dockerfile and static binary"
	@bash scripts/lint-dockerfile.sh
	@bash scripts/check-static-binary.sh "$$(bash scripts/build-static.sh)"

.PHONY: image-test
image-test: host-packages kube-bin ansible-venv ## Docker Engine from Debian's packages (started, then stopped), the image built from a local Debian base without a registry, run as config/ deploys it: the seed, bridged tasks, an Operator SDK scaffold FROM it; then the seed on an image of ansible-core 2.21.
	@echo "==> image test: the image built with Docker and run as the Deployment runs it (tests/image)"
	@docker="$$(bash scripts/image/engine.sh up)"; \
	trap 'bash scripts/image/engine.sh down' EXIT; \
	ca="$$("$$(bash scripts/ansible-venv.sh)" tests/image/galaxy.py ca)"; \
	image="$$(DOCKER="$$docker" ENKA_BASE_EXTRA_CA="$$ca" bash scripts/image/build.sh)"; \
	$(TEST_ENV) DOCKER="$$docker" ENKA_IMAGE="$$image" $(CARGO) test --test image -- $(SCENARIOS); \
	if [ -z "$(SCENARIOS)" ]; then \
		echo "==> image test: the image on ansible-core 2.21 (Debian 13's Python 3.13) sings the seed with 2.21's semantics"; \
		image="$$(IMAGE=enka.local/enka:dev-2.21 ENKA_IMAGE_LINE=2.21 DOCKER="$$docker" ENKA_BASE_EXTRA_CA="$$ca" bash scripts/image/build.sh)"; \
		$(TEST_ENV) DOCKER="$$docker" ENKA_IMAGE="$$image" ENKA_IMAGE_LINE=2.21 $(CARGO) test --test image -- seed; \
	fi
	@bash scripts/check-no-leftovers

.PHONY: bench
bench: bench-engine bench-playbook bench-operators ## Every benchmark; regenerates docs/benchmarks.md and its chart.

.PHONY: bench-operators
bench-operators: kube-bin ## enka vs upstream ansible-operator on one real control plane (installs upstream from registries).
	@echo "==> cargo bench --bench operators (enka and upstream ansible-operator side by side; about 15 minutes)"
	$(TEST_ENV) ENKA_BENCH_DOCS=1 $(CARGO) bench --bench operators
	@echo "==> wrote target/bench/summary.tsv, docs/benchmarks.md and docs/benchmarks.png"

.PHONY: bench-real
bench-real: kube-bin ## Only the real operators (memcached, awx-operator, advanced-molecule on simulated nodes), enka and upstream; replaces their rows and section in docs/benchmarks.md (about 10 minutes).
	@echo "==> cargo bench --bench operators, real operators only (enka and upstream side by side)"
	$(TEST_ENV) ENKA_BENCH_DOCS=1 ENKA_BENCH_ONLY=real $(CARGO) bench --bench operators
	@echo "==> replaced the real operators' rows and section of docs/benchmarks.md"

.PHONY: bench-smoke
bench-smoke: kube-bin ## A small enka-only pass of the operators bench (debug build), so it cannot rot.
	@echo "==> bench smoke: the operators bench, enka only, small counts"
	$(TEST_ENV) ENKA_BENCH_SMOKE=1 $(CARGO) bench --profile dev --bench operators

.PHONY: fmt-check
fmt-check: ## Check formatting.
	@echo "==> cargo fmt --check"
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	$(CARGO) fmt --all --check

.PHONY: lint
lint: ## Run clippy with warnings as errors.
	@echo "==> cargo clippy -D warnings"
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@# --all-targets leaves out test targets with `test = false` (tests/image).
	$(CARGO) clippy --test image -- -D warnings

.PHONY: shape
shape: ## The code's shape: the crate graph is docs/ARCHITECTURE.md's table; files ≤ 1000 lines, functions ≤ 100 (tools/shape/known.txt: what is left to cut).
	@echo "==> shape: crate graph and lengths (tools/shape)"
	$(CARGO) run --quiet -p shape -- graph
	$(CARGO) run --quiet -p shape -- size

.PHONY: conformance
conformance: ## The corpus recorded from ansible-core 2.18, one named test per case (CASES=… picks; known failures listed with reasons in tests/conformance/main.rs).
	@echo "==> conformance corpus (tests/conformance, expected values from real ansible-core 2.18)"
	ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" $(CARGO) test --quiet --test conformance -- $(CASES)

.PHONY: ansible-tests
ansible-tests: ansible-venv ## ansible-core 2.18's own integration targets run by enka (sdist from PyPI, cached): "ansible-tests: X of Y targets pass".
	@echo "==> ansible-core's integration targets through enka playbook (report in target/ansible-tests/)"
	$(CARGO) build --quiet -p enka
	python3 tests/ansible-tests/run.py --enka target/debug/enka --python "$$(bash scripts/ansible-venv.sh)" --min-pass $(ANSIBLE_TESTS_MIN_PASS) $(TARGETS)

# The same for ansible-core 2.19's targets, in 2.19 mode with the worker on
# 2.19 (its own target: it adds some eight minutes to make test's hour).
ANSIBLE_TESTS_MIN_PASS_2_19 ?= 135

.PHONY: ansible-tests-2.19
ansible-tests-2.19: ## ansible-core 2.19's integration targets run by enka playbook in 2.19 mode, the worker on 2.19 (report in target/ansible-tests-2.19/; floor ANSIBLE_TESTS_MIN_PASS_2_19).
	@echo "==> ansible-core 2.19's integration targets through enka playbook (2.19 semantics, the worker on 2.19)"
	$(CARGO) build --quiet -p enka
	python3 tests/ansible-tests/run.py --enka target/debug/enka --python "$$(bash scripts/ansible-venv.sh 2.19)" --out "$(CURDIR)/target/ansible-tests-2.19" --min-pass $(ANSIBLE_TESTS_MIN_PASS_2_19) $(TARGETS)

.PHONY: compat
compat: kube-bin ansible-venv ## Upstream's test-operator scenarios (tests/compat) on a real control plane: "compat: X of Y scenarios pass".
	@echo "==> compat scenarios (tests/compat: our operators in the shape of upstream's molecule suites)"
	$(TEST_ENV) $(CARGO) test --quiet --test compat -- $(SCENARIOS)
	@bash scripts/check-no-leftovers

.PHONY: faults
faults: kube-bin ansible-venv ## Fault tests (tests/faults): restarts of kube-apiserver and etcd, 410 Gone, 409s, SIGKILL, leader failover.
	@echo "==> fault tests (tests/faults, real control plane restarted under load)"
	$(TEST_ENV) $(CARGO) test --quiet --test faults -- $(SCENARIOS)
	@bash scripts/check-no-leftovers

.PHONY: sharding
sharding: kube-bin ## Three enka shards of a ControllerRing with timebertt's sharder (built from its Go module): drain handshake, SIGKILL failover, no reconcile overlap.
	@echo "==> sharding (tests/sharding: enka replicas as shards of the sharder's ring, real control plane)"
	$(TEST_ENV) $(CARGO) test --quiet --test sharding
	@bash scripts/check-no-leftovers

.PHONY: catalogue
catalogue: kube-bin ansible-venv ## The bad-input catalogue (tests/catalogue): broken projects and hostile objects, each refused clearly.
	@echo "==> bad-input catalogue (tests/catalogue, real control plane)"
	$(TEST_ENV) $(CARGO) test --quiet --test catalogue -- $(CASES)
	@bash scripts/check-no-leftovers

FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 15

.PHONY: fuzz
fuzz: ## Fuzz watches.yaml parsing, role loading and templates (cargo-fuzz), FUZZ_SECONDS (300) each; TARGETS=… picks.
	@echo "==> fuzzing $(or $(TARGETS),every target) for $(FUZZ_SECONDS) s each"
	bash scripts/fuzz.sh $(FUZZ_SECONDS) $(TARGETS)

.PHONY: template-fuzz
template-fuzz: ansible-venv ## The differential template fuzzer against ansible-core for longer: SEED (random), CASES (100000), SECONDS (900); RECORD=1 adds what it finds to the corpus (make test runs seed 40, 3000 cases).
	@echo "==> differential template fuzzer: enka against ansible-core 2.18"
	ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" \
	ENKA_TEMPLATE_FUZZ_SEED="$(or $(SEED),$$RANDOM$$RANDOM)" \
	ENKA_TEMPLATE_FUZZ_CASES="$(or $(CASES),100000)" \
	ENKA_TEMPLATE_FUZZ_SECONDS="$(or $(SECONDS),900)" \
	ENKA_TEMPLATE_FUZZ_RECORD="$(RECORD)" \
	$(CARGO) test --quiet --test template_fuzz

.PHONY: play-fuzz
play-fuzz: ansible-venv ## The differential play fuzzer against ansible-playbook for longer: SEED (random), CASES (2000), SECONDS (1800); RECORD=1 records what it finds in tests/conformance/fuzzed_plays.yaml (make test runs seed 42, 40 playbooks).
	@echo "==> differential play fuzzer: enka playbook against ansible-playbook 2.18"
	ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" \
	ENKA_PLAY_FUZZ_SEED="$(or $(SEED),$$RANDOM$$RANDOM)" \
	ENKA_PLAY_FUZZ_CASES="$(or $(CASES),2000)" \
	ENKA_PLAY_FUZZ_SECONDS="$(or $(SECONDS),1800)" \
	ENKA_PLAY_FUZZ_RECORD="$(RECORD)" \
	$(CARGO) test --quiet --test play_fuzz

.PHONY: conformance-generate
conformance-generate: ## Regenerate tests/conformance/expected.json with real ansible-core 2.18 (needs PyPI).
	@echo "==> running cases.yaml through ansible-core 2.18 in a virtualenv"
	python3 tests/conformance/generate.py

# The snapshot corpus: public roles' and the playbook guide's templates and
# conditions, read from fetched snapshots (ENKA_MIRROR), recorded from each
# line and replayed in target/conformance-snapshots; never committed.
SNAPSHOTS = $(CURDIR)/target/conformance-snapshots
.PHONY: conformance-snapshots
conformance-snapshots: ansible-venv ## The snapshot corpus (tests/conformance/mined.py): 40 public roles and operators pinned in mined_sources.yaml and the playbook guide, from snapshots under ENKA_MIRROR (/work/.mirror), recorded from 2.18, 2.19 and 2.21 and replayed; known ones in mined_known.yaml.
	@echo "==> the snapshot corpus: public roles and the playbook guide, from $${ENKA_MIRROR:-/work/.mirror}"
	"$$(bash scripts/ansible-venv.sh)" tests/conformance/mined.py --out $(SNAPSHOTS)
	for line in 2.18 2.19 2.21; do python3 tests/conformance/generate.py --corpus $(SNAPSHOTS) --line $$line 2>/dev/null || exit 1; done
	ENKA_CONFORMANCE_SNAPSHOTS=$(SNAPSHOTS) ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" $(CARGO) test --quiet --test conformance -- snapshot-

.PHONY: bench-playbook
bench-playbook: ansible-venv ## enka playbook against ansible-playbook on a play of native tasks (-i localhost,), each process whole, 20 runs in turn.
	@echo "==> cargo bench --bench playbook"
	@ENKA_ANSIBLE_PYTHON="$$(bash scripts/ansible-venv.sh)" $(CARGO) bench --quiet --bench playbook

.PHONY: bench-engine
bench-engine: ## Engine overhead per reconcile of the seed role, Kubernetes answered in memory.
	@echo "==> cargo bench --bench engine"
	@$(CARGO) bench --quiet --bench engine

.PHONY: differential
differential: kube-bin ansible-venv ## enka against upstream ansible-operator on the same operators and control plane, awx-operator included; upstream's molecule tests against enka (target/differential/). PROJECT=dir: your operator instead (WATCHES, SAMPLES, CRDS).
	@echo "==> differential: upstream ansible-operator, then enka, on each operator; per-object diffs in target/differential/"
	@bash scripts/upstream-ansible-operator.sh >/dev/null
	$(TEST_ENV) ENKA_DIFFERENTIAL_FULL=1 ENKA_DIFFERENTIAL_PROJECT="$(PROJECT)" ENKA_DIFFERENTIAL_WATCHES="$(WATCHES)" \
	  ENKA_DIFFERENTIAL_SAMPLES="$(SAMPLES)" ENKA_DIFFERENTIAL_CRDS="$(CRDS)" $(CARGO) test --test differential -- $(SUBJECTS)
	@bash scripts/check-no-leftovers

.PHONY: differential-2.19
differential-2.19: kube-bin ansible-venv ## The differential with both sides on ansible-core 2.19: upstream's Python side on 2.19, enka in 2.19 mode with its worker on 2.19 (target/differential-2.19/).
	@echo "==> differential on ansible-core 2.19: upstream ansible-operator on 2.19, then enka in 2.19 mode"
	@bash scripts/upstream-ansible-operator.sh 2.19 >/dev/null
	$(TEST_ENV) ENKA_DIFFERENTIAL_LINE=2.19 ENKA_DIFFERENTIAL_FULL=1 $(CARGO) test --test differential -- $(SUBJECTS)
	@bash scripts/check-no-leftovers

.PHONY: e2e
e2e: kube-bin ansible-venv ## End-to-end tests only: the seed's Zundoko operator and the runtime, on a real control plane.
	$(TEST_ENV) $(CARGO) test --test integration -- zundoko:: runtime:: deploy::
	@bash scripts/check-no-leftovers

.PHONY: test
test: host-packages fmt-check lint shape image-check kube-bin ansible-venv ## Format check, clippy and every test, real-control-plane ones included.
	@echo "==> cargo test (unit + integration against a real kube-apiserver)"
	$(TEST_ENV) $(CARGO) test --workspace
	@$(MAKE) --no-print-directory ansible-tests
	@echo "==> bench smoke: the operators bench, enka only, small counts"
	$(TEST_ENV) ENKA_BENCH_SMOKE=1 $(CARGO) bench --profile dev --bench operators
	@echo "==> fuzz smoke: each cargo-fuzz target for $(FUZZ_SMOKE_SECONDS) s"
	bash scripts/fuzz.sh $(FUZZ_SMOKE_SECONDS)
	@$(MAKE) --no-print-directory image-test
	@bash scripts/check-no-leftovers
