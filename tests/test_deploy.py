"""The Kubernetes recipe (deploy/): no cluster and no Docker run here, so the manifests are checked against the
Kubernetes API's own schemas, and every openenv-gym command the recipe runs is parsed by the real CLI."""

import copy
import re
import shlex

import kubernetes_validate
import pytest
import yaml
from conftest import ROOT

from openenv_gym.cli import build_parser, main

MANIFESTS = ROOT / "deploy" / "kubernetes" / "env-server.yaml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFESTS.read_text())}


def _container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_manifests_are_valid_kubernetes_objects():
    documents = _documents()
    assert set(documents) == {"Deployment", "Service"}
    for document in documents.values():
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)
    broken = copy.deepcopy(documents["Deployment"])  # the check bites: a misspelt field is refused
    _container(broken)["readinesProbe"] = _container(broken).pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_the_service_is_headless_over_the_deployments_ready_pods():
    documents = _documents()
    deployment, service = documents["Deployment"], documents["Service"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["clusterIP"] == "None"  # DNS answers with every pod's address
    assert not service["spec"].get("publishNotReadyAddresses", False)  # only pods whose /healthz answers
    container = _container(deployment)
    (port,) = container["ports"]
    assert service["spec"]["ports"][0]["targetPort"] in (port["name"], port["containerPort"])
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and probe["port"] in (port["name"], port["containerPort"])
    scrape = deployment["spec"]["template"]["metadata"]["annotations"]  # Prometheus' pod discovery reads these
    assert scrape == {"prometheus.io/scrape": "true", "prometheus.io/port": str(port["containerPort"]),
                      "prometheus.io/path": "/metrics"}  # (tests/test_metrics.py: what a server answers there)


# What a pod needs for the episodes' sandboxes (bubblewrap run as root, then programs joining its namespaces and
# dropping to a uid of their own): with only these, a sandbox opens, runs, is renewed and closes; without any one, it
# fails (tried on the test machine by shrinking the capability bounding set)
SANDBOX_CAPABILITIES = {"SYS_ADMIN", "NET_ADMIN", "SYS_CHROOT", "SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER",
                        "KILL", "NET_BIND_SERVICE"}


def test_the_pod_gets_what_the_sandbox_needs_and_nothing_more():
    spec = _documents()["Deployment"]["spec"]["template"]["spec"]
    context = _container(_documents()["Deployment"])["securityContext"]
    # a user namespace of the pod's own, so that its root and its capabilities are not the node's
    assert spec.get("hostUsers") is False
    assert not any(spec.get(field) for field in ("hostPID", "hostNetwork", "hostIPC"))  # (none with hostUsers false)
    assert "volumes" not in spec and spec["automountServiceAccountToken"] is False
    assert not context.get("privileged", False) and not spec.get("securityContext", {}).get("privileged", False)
    # root inside it: the server refuses to sandbox otherwise (it hands each episode a uid of its own)
    assert context["runAsUser"] == 0 and not context.get("runAsNonRoot", False)
    # every capability dropped but those the sandbox uses, named as Kubernetes names them
    assert context["capabilities"]["drop"] == ["ALL"]
    assert set(context["capabilities"]["add"]) == SANDBOX_CAPABILITIES
    assert len(context["capabilities"]["add"]) == len(SANDBOX_CAPABILITIES)
    # a new /proc per sandbox needs the container's /proc unmasked; pivot_root and mount need the profiles' leave
    assert context["procMount"] == "Unmasked"
    assert context["seccompProfile"]["type"] in ("Unconfined", "Localhost")
    assert context["appArmorProfile"]["type"] in ("Unconfined", "Localhost")
    # Kubernetes refuses allowPrivilegeEscalation false beside SYS_ADMIN (a rule its schemas do not carry)
    assert context.get("allowPrivilegeEscalation", True) is True


def test_the_image_has_bubblewrap_and_runs_as_root():
    final = DOCKERFILE.read_text().rsplit("\nFROM ", 1)[1]  # the stage that is the image
    assert re.search(r"^RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap\b", final,
                     re.MULTILINE)
    users = re.findall(r"^USER (\S+)", final, re.MULTILINE)
    assert users and users[-1] in ("0", "root")


def _expand(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\((\w+)\)", lambda match: variables[match.group(1)], text)


def test_the_pods_command_is_a_serve_the_cli_accepts_on_the_container_port():
    container = _container(_documents()["Deployment"])
    variables = {item["name"]: item.get("value", "4") for item in container["env"]}  # WORKERS: from the CPU limit
    argv = [_expand(part, variables) for part in container["command"][1:] + container["args"]]
    args = build_parser().parse_args(argv)
    port = container["ports"][0]["containerPort"]
    assert (args.env, args.host, args.port, args.workers) == ("echo", "0.0.0.0", port, 4)
    cpu = container["resources"]["limits"]["cpu"]
    assert container["env"][1]["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu" and int(cpu) == 4


def _dockerfile_commands() -> list[list[str]]:
    """The openenv-gym commands the Dockerfile runs (RUN and CMD lines), as words, its ARGs filled in."""
    text = DOCKERFILE.read_text()
    arguments = dict(re.findall(r"^ARG (\w+)=(\S*)", text, re.MULTILINE))
    variables = arguments | {"OPENENV_GYM_ENV": arguments["ENV"], "WORKERS": "1", "IMPORT": "envs/my_env"}
    commands = []
    for line in text.splitlines():
        if line.startswith(("RUN ", "CMD ")):
            line = line.replace('\\"', '"').removesuffix('"]')
            for command in re.findall(r"(?<![/\w-])openenv-gym ([^;]*)", line):
                commands.append(shlex.split(re.sub(r"\$(\w+)", lambda match: variables[match.group(1)], command)))
    return commands


def test_every_openenv_gym_command_of_the_dockerfile_parses():
    ran = [build_parser().parse_args(words) for words in _dockerfile_commands()]
    assert [args.run.__name__ for args in ran] == ["_run_import", "_run_build", "_run_serve"]
    serve = ran[-1]
    assert (serve.env, serve.host, serve.port) == ("echo", "0.0.0.0", 8000)


def test_venvs_build_says_what_it_did_and_refuses_an_unknown_env(capsys):
    main(["venvs", "build", "echo"])
    assert "needs no venv of its own" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no environment named 'no-such-env'"):
        main(["venvs", "build", "no-such-env"])
