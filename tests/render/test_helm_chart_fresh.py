"""deploy/helm/taugrid is what ``python -m taugrid.render.chart`` generates from the
objects ``tau cluster install`` applies (no helm needed; tests/k8s/test_helm_chart.py
runs the real helm on it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from taugrid.render import chart

ROOT = Path(__file__).resolve().parents[2]


def _check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taugrid.render.chart", "--check", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_committed_chart_is_up_to_date() -> None:
    done = _check(ROOT / chart.CHART_DIR)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stale_or_extra_template_is_reported(tmp_path: Path) -> None:
    assert chart.main(["--write", str(tmp_path)]) == 0
    assert _check(tmp_path).returncode == 0
    agent = tmp_path / "templates" / "clusterrole-taugrid-agent.yaml"
    agent.write_text(agent.read_text().replace("- watch", "- wat"))
    (tmp_path / "templates" / "extra.yaml").write_text("kind: ConfigMap\n")
    done = _check(tmp_path)
    assert done.returncode == 1
    assert "templates/clusterrole-taugrid-agent.yaml, templates/extra.yaml" in done.stdout
    assert f"run: python -m taugrid.render.chart --write {tmp_path}" in done.stdout


def test_values_are_the_install_flags_with_their_defaults() -> None:
    values = yaml.safe_load(chart.files()["values.yaml"])
    assert values == {
        "image": "ghcr.io/taugrid/taugrid:0.1.0",
        "hubUrl": "http://taugrid-hub.taugrid-system.svc:8000",
        "cluster": "kubernetes",
        "createNamespace": True,
        "hostNetwork": False,  # the cluster's pods: settings, none by default
        "tolerations": [],
        "nodeSelector": {},
    }
    agent = chart.files()["templates/deployment-taugrid-agent.yaml"]
    assert "- {{ .Values.hubUrl | quote }}" in agent
    assert "image: {{ .Values.image | quote }}" in agent
