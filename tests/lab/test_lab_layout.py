"""The lab's roots and record store without Ray: the platform it writes, the topology's
``records``/``ray_base`` checks, and ``roots.confine`` hiding directories for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from taugrid import errors
from taugrid.lab import lab, roots, topology


def _topology(tmp_path: Path, text: str) -> topology.Topology:
    (tmp_path / "topo.yaml").write_text(text)
    return topology.load(tmp_path / "topo.yaml")


def test_the_platform_names_the_topologys_object_store_or_the_shared_records_dir(
    tmp_path: Path,
) -> None:
    s3 = _topology(
        tmp_path,
        "regions: [a, b]\nrecords: {url: s3://bkt/lab, endpoint_url: 'http://127.0.41.5:9'}\n",
    )
    the_lab = lab.Lab(tmp_path / "lab", contexts_home=tmp_path, confined=False)
    the_lab.roots.make(s3.names())
    doc = yaml.safe_load(the_lab._write_platform(s3).read_text())
    assert doc["records"]["url"] == "s3://bkt/lab"
    assert doc["records"]["endpoint_url"] == "http://127.0.41.5:9"
    plain = the_lab._write_platform(topology.load(None, 2))
    assert yaml.safe_load(plain.read_text())["records"] == {"url": str(the_lab.roots.records)}
    assert [s3.ray_ip(i) for i in range(2)] == ["127.0.0.60", "127.0.0.61"]


@pytest.mark.parametrize("ip", ["127.0.0.1", "10.0.0.5"])
def test_ray_base_must_be_a_loopback_address_of_its_own(tmp_path: Path, ip: str) -> None:
    with pytest.raises(errors.UserError, match="ray_base"):
        _topology(tmp_path, f"ray_base: {ip}\n")


def test_a_region_is_provisioned_with_its_own_copies(tmp_path: Path) -> None:
    r = roots.Roots(tmp_path)
    r.make(["a", "b"])
    (r.hub / "agents").mkdir()
    (r.hub / "agents" / "a.token").write_text("tok-a")
    (tmp_path / "platform.yaml").write_text("x: 1\n")
    (r.hub / "data.token").write_text("data")
    platform = r.provision("a", tmp_path / "platform.yaml", r.hub / "data.token")
    assert platform == r.region("a") / "platform.yaml" and platform.read_text() == "x: 1\n"
    assert (r.region("a") / "agents" / "a.token").read_text() == "tok-a"
    assert (r.region("a") / "data.token").read_text() == "data"
    assert r.hidden_from_region("a", ["a", "b"]) == [r.hub, r.region("b")]
    assert r.hidden_from_hub(["a", "b"]) == [r.region("a"), r.region("b")]


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare"
)
def test_confine_hides_a_root_and_refuses_writes_there(tmp_path: Path) -> None:
    hidden, own = tmp_path / "hub", tmp_path / "mine"
    hidden.mkdir()
    own.mkdir()
    (hidden / "secret").write_text("s")
    probe = (
        f"ls -A {hidden}; touch {hidden}/x 2>&1 | grep -c 'Read-only' ; "
        f"touch {own}/y && echo own-ok"
    )
    out = subprocess.run(
        roots.confine(["sh", "-c", probe], [hidden]),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    assert out == ["1", "own-ok"], out
    assert (hidden / "secret").exists() and (own / "y").exists()  # outside: untouched
    assert not (hidden / "x").exists()
