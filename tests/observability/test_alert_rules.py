"""The shipped alert rules: valid (``promtool check rules``), their unit tests pass
(``promtool test rules``, the test files shipped beside them), and they cover the seed's
thresholds with the labels an operator needs to act."""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from taugrid import observability
from tests.observability import prom

# the seed's thresholds: alert → (the expression's comparison, labels its summary names)
SEED = {
    "TauSchedulingLatencyHigh": ("> 10", {"workspace", "region"}),
    "TauLinkUtilisationHigh": ("> 0.8", {"src", "dst"}),
    "TauCrossRegionFailureRateHigh": ("> 0.05", {"kind"}),
    "TauRegionGpuUtilisationLow": ("< 0.3", {"region", "source"}),
    "TauNodeUnhealthy": ("> 0", {"cluster", "region", "node", "reason"}),
    "TauRunStalled": ("> 900", {"run_id", "workspace", "region"}),
}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    rules = observability.data_dir() / "rules"
    return subprocess.run(
        [prom.binary("promtool"), *args], cwd=rules, capture_output=True, text=True, timeout=120
    )


def test_promtool_checks_the_rules_and_their_unit_tests_pass() -> None:
    out = _promtool("check", "rules", *observability.RULE_FILES)
    assert out.returncode == 0, out.stdout + out.stderr
    tests = observability.rule_test_files()
    assert [p.name for p in tests] == ["taugrid-alerts.test.yaml"]
    out = _promtool("test", "rules", *(p.name for p in tests))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_seed_threshold_has_an_alert_that_is_unit_tested() -> None:
    rules: dict[str, Any] = {}
    for name in observability.RULE_FILES:
        doc = yaml.safe_load((observability.data_dir() / "rules" / name).read_text())
        rules |= {r["alert"]: r for g in doc["groups"] for r in g["rules"]}
    tested = set()
    for path in observability.rule_test_files():
        doc = yaml.safe_load(path.read_text())
        for case in doc["tests"]:
            tested |= {t["alertname"] for t in case["alert_rule_test"] if t["exp_alerts"]}
    for alert, (comparison, labels) in SEED.items():
        assert alert in rules, f"no alert rule {alert}"
        assert rules[alert]["expr"].strip().endswith(comparison), rules[alert]["expr"]
        assert alert in tested, f"{alert} is never shown firing in the rule unit tests"
        summary = rules[alert]["annotations"]["summary"]
        for label in labels:
            assert f"$labels.{label}" in summary, f"{alert}: the summary does not name {label}"
    assert tested == set(rules), f"alerts never shown firing: {set(rules) - tested}"
