# make demo: the main job (a rollout of the shipped game); make test: the tests; make bench: benchmarks.
# Each target creates its own virtual environment (.venv) on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench lint screenshots clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip packaging
	# the trainer extra needs torch: the CPU build, never PyPI's default CUDA one (scripts/cpu_torch.py), first,
	# then everything in one pass
	$(PY) -m pip install --quiet $$($(PY) scripts/cpu_torch.py)
	$(PY) -m pip install --quiet -e ".[dev,trl,ray]"
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

lint: $(VENV)/.installed
	$(PY) -m ruff check openenv_gym openenv_gym_verifiers servers tests benchmarks examples scripts deploy

# System packages some tests need: the browser tests run Debian's Chromium (Playwright's own browser download is out
# of reach here); the DNS test resolves a name to several addresses through nss_wrapper and a hosts file of its own;
# the episodes of environments that run programs run in sandboxes made by bubblewrap; a server an ordinary user runs
# maps its subordinate uids with newuidmap (uidmap); a Go program shows that the memory bound lets runtimes reserve;
# a server in Docker's and Podman's containers (an image made by mmdebstrap, a seccomp profile from containers-common's).
CHROMIUM ?= /usr/bin/chromium
NSS_WRAPPER ?= /usr/lib/x86_64-linux-gnu/libnss_wrapper.so
BWRAP ?= /usr/bin/bwrap
NEWUIDMAP ?= /usr/bin/newuidmap
GO ?= /usr/bin/go
DOCKERD ?= /usr/sbin/dockerd
PODMAN ?= /usr/bin/podman
MMDEBSTRAP ?= /usr/bin/mmdebstrap
SECCOMP_DEFAULT ?= /usr/share/containers/seccomp.json
apt_install = command -v apt-get >/dev/null || { echo "the tests need $(2) at $(1): install it"; exit 1; }; \
	apt-get install -y -q $(2) >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $(2) >/dev/null; }

$(CHROMIUM):
	@$(call apt_install,$@,chromium)

$(NSS_WRAPPER):
	@$(call apt_install,$@,libnss-wrapper)

$(BWRAP):
	@$(call apt_install,$@,bubblewrap)

$(NEWUIDMAP):
	@$(call apt_install,$@,uidmap)

$(GO):
	@$(call apt_install,$@,golang-go)

$(DOCKERD):
	@$(call apt_install,$@,docker.io)

$(PODMAN):
	@$(call apt_install,$@,podman)

$(MMDEBSTRAP):
	@$(call apt_install,$@,mmdebstrap)

$(SECCOMP_DEFAULT):
	@$(call apt_install,$@,golang-github-containers-common)

# The project's own modules are compiled first, as pip compiles what it installs (an editable install is not):
# where bytecode is not written (PYTHONDONTWRITEBYTECODE), each of the suite's server processes would compile
# what it imports again, 0.13 s of a server's start.
# The suite runs on every core, each test file's tests together in one process (their module fixtures once).
test: lint $(CHROMIUM) $(NSS_WRAPPER) $(BWRAP) $(NEWUIDMAP) $(GO) $(DOCKERD) $(PODMAN) $(MMDEBSTRAP) \
	$(SECCOMP_DEFAULT)
	$(PY) -m compileall -q openenv_gym openenv_gym_verifiers servers benchmarks tests examples >/dev/null
	$(PY) -m pytest -n auto --dist loadfile

# The README's screenshots (docs/images/), taken by the browser tests.
screenshots: $(VENV)/.installed $(CHROMIUM)
	OPENENV_GYM_SCREENSHOTS=docs/images $(PY) -m pytest -q tests/test_web.py -k "guess_episode or chat_env or viewer_opens"

bench: $(VENV)/.installed $(BWRAP) $(CHROMIUM)
	$(PY) -m pytest -m bench -q tests/test_benchmarks_smoke.py tests/test_ray.py tests/test_servers.py tests/test_web.py \
		tests/test_import_checks.py tests/test_openenv.py tests/test_notebooks.py tests/test_validate.py tests/test_verifiers_v1.py \
		tests/test_sandbox_embedded.py tests/test_nemo.py tests/test_examples.py tests/test_verifiers_serve.py
	$(PY) -m pytest benchmarks --benchmark-only -q
	$(PY) -m benchmarks.latency
	$(PY) -m benchmarks.capacity
	$(PY) -m benchmarks.throughput
	$(PY) -m benchmarks.ors_compare
	$(PY) -m benchmarks.verifiers_compare
	$(PY) -m benchmarks.verifiers_groups
	$(PY) -m benchmarks.verifiers_v1_compare
	$(PY) -m benchmarks.agent_sessions
	$(PY) -m benchmarks.sandbox
	$(PY) -m benchmarks.sandbox_abuse
	$(PY) -m benchmarks.overlay
	$(PY) -m benchmarks.cli_agents
	$(PY) -m benchmarks.dialects
	$(PY) -m benchmarks.harbor
	$(PY) -m benchmarks.groups
	$(PY) -m benchmarks.stream
	$(PY) -m benchmarks.openenv_compare
	$(PY) -m benchmarks.awm_compare
	$(PY) -m benchmarks.nemo_compare
	$(PY) -m benchmarks.web
	$(PY) -m benchmarks.scaling
	$(PY) -m benchmarks.recovery
	$(PY) -m benchmarks.venv_build
	$(PY) -m benchmarks.trl_step
	$(PY) -m benchmarks.fuzz --frames 10000
	$(PY) -m benchmarks.abuse
	$(PY) -m benchmarks.resume
	$(PY) -m benchmarks.soak
	$(PY) -m benchmarks.newcomer
	$(PY) -m benchmarks.samplers
	$(PY) -m benchmarks.verifiers_serve

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .benchmarks
