"""The Kubernetes manifests render (kubectl kustomize) and validate against the Kubernetes schemas.

Each overlay is rendered and every resource checked by ``kubernetes-validate``
(strict: unknown fields fail); then what docs/deploy.md promises is asserted:
one worker Deployment per Celery queue, probes, requests, non-root pods, the
migration job running ``createroles``, disruption budgets and queue-depth
autoscaling. Docker Compose and the manifests both carry every environment
variable docs/configuration.md names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("production", "small")
#: The oldest Kubernetes the manifests target (autoscaling/v2, policy/v1).
KUBERNETES_VERSION = "1.30.0"


def _render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("COUNTERSIGN_REQUIRE_SERVICES") == "1":
            pytest.fail(
                "kubectl is required to render the manifests (apt install kubectl)"
            )
        pytest.skip("kubectl is not installed")
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _pods(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        r["metadata"]["name"]: r["spec"]["template"]["spec"]
        for r in resources
        if r["kind"] in ("Deployment", "Job")
    }


def _documented_variables() -> set[str]:
    """The variables of docs/configuration.md's Environment table (wildcards left out)."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    table = text.split("## Environment", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell))
    return names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_resource_validates_against_the_kubernetes_schema(overlay):
    resources = _render(overlay)
    kinds = sorted({r["kind"] for r in resources})
    assert {"ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service"} <= set(
        kinds
    )
    for resource in resources:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def test_a_resource_with_a_typo_fails_validation():
    """The validation can fail: an unknown field is refused in strict mode."""
    [job] = [r for r in _render("small") if r["kind"] == "Job"]
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


def test_workers_per_queue_probes_requests_and_non_root_pods():
    resources = _render("production")
    pods = _pods(resources)
    queues = sorted({route["queue"] for route in settings.CELERY_TASK_ROUTES.values()})
    assert queues == ["countersign", "runs", "tools"]
    for queue in queues:
        command = " ".join(
            pods[f"countersign-worker-{queue}"]["containers"][0]["command"]
        )
        assert f"worker -Q {queue} --pool prefork" in command
        # The node name the liveness probe pings (Celery expands %h, the pod's name).
        assert command.endswith(f"-n {queue}@%h")
        probe = pods[f"countersign-worker-{queue}"]["containers"][0]["livenessProbe"]
        assert f"ping -d {queue}@$HOSTNAME" in probe["exec"]["command"][-1]
    beat = pods["countersign-beat"]["containers"][0]["command"]
    assert beat[:4] == ["celery", "-A", "config", "beat"]
    [deployment] = [r for r in resources if r["metadata"]["name"] == "countersign-beat"]
    assert (deployment["spec"]["replicas"], deployment["spec"]["strategy"]["type"]) == (
        1,
        "Recreate",
    )
    web = pods["countersign-web"]["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    migrate = pods["countersign-migrate"]["containers"][0]["command"]
    assert migrate[-1] == (
        "python manage.py migrate --noinput && python manage.py createroles"
    )
    for name, pod in pods.items():
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == 10001, name
        for container in pod.get("initContainers", []) + pod["containers"]:
            where = f"{name}/{container['name']}"
            assert container["image"] == "registry.example.com/countersign:0.1.0", where
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert set(container["resources"]["requests"]) == {"cpu", "memory"}, where
    budgets = {
        r["metadata"]["name"] for r in resources if r["kind"] == "PodDisruptionBudget"
    }
    assert budgets == {
        "countersign-web",
        "countersign-worker-runs",
        "countersign-worker-tools",
    }


def test_workers_autoscale_on_queue_depth():
    scalers = {
        r["metadata"]["name"]: r["spec"]
        for r in _render("production")
        if r["kind"] == "HorizontalPodAutoscaler"
    }
    tools = scalers["countersign-worker-tools"]["metrics"][0]["external"]["metric"]
    assert tools == {
        "name": "countersign_queue_depth",
        "selector": {"matchLabels": {"queue": "tools"}},
    }
    assert scalers["countersign-worker-runs"]["scaleTargetRef"]["name"] == (
        "countersign-worker-runs"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_manifests_carry_every_documented_setting(overlay):
    """Each variable docs/configuration.md names reaches every app container."""
    resources = _render(overlay)
    [config] = [r for r in resources if r["kind"] == "ConfigMap"]
    documented = _documented_variables()
    assert {
        "COUNTERSIGN_AGENTS_JSON",
        "COUNTERSIGN_PUBLIC_URL",
        "EMAIL_HOST",
    } <= documented
    for name, pod in _pods(resources).items():
        for container in pod.get("initContainers", []) + pod["containers"]:
            assert container["envFrom"] == [
                {"configMapRef": {"name": "countersign-config"}}
            ]
            carried = set(config["data"]) | {e["name"] for e in container["env"]}
            assert documented <= carried, (name, documented - carried)


def test_compose_carries_every_documented_setting_and_creates_the_roles():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    documented = _documented_variables()
    environment = set(compose["x-app"]["environment"])
    assert documented <= environment, documented - environment
    migrate = " ".join(compose["services"]["migrate"]["command"])
    assert "manage.py migrate --noinput" in migrate
    assert "manage.py createroles" in migrate
