"""Container images for the real test node, assembled here: no registry, no download.

``pause`` (the pod sandbox: ``tests/k8s/pause.c`` built with ``gcc -static``) and
``busybox`` (Debian's ``busybox-static`` and its applets) each become a one-layer OCI
image archive (``oci-layout``, ``index.json``, ``blobs/sha256/...``) that ``ctr images
import`` loads into the node's containerd under ``IMAGES``' names. Layers are
reproducible (fixed times, sorted entries). Archives are cached in ``CACHE``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

from tests.workers import CACHE as TEST_CACHE

__all__ = ["BUSYBOX", "IMAGES", "PAUSE", "archives", "missing_tools"]

PAUSE = "taugrid.local/pause:test"
BUSYBOX = "taugrid.local/busybox:test"
IMAGES = (PAUSE, BUSYBOX)
CACHE = TEST_CACHE / "k8s" / "node-images"
HERE = Path(__file__).resolve().parent
_BUSYBOX_BIN = Path("/bin/busybox")


def missing_tools() -> list[str]:
    """What building the images needs and this machine lacks (Debian package names)."""
    out = [] if shutil.which("gcc") else ["gcc"]
    status = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "busybox-static"], capture_output=True, text=True
    )
    return out if "install ok installed" in status.stdout else [*out, "busybox-static"]


def archives() -> list[Path]:
    """The two image archives (built once, then reused from ``CACHE``)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    pause = CACHE / "pause.oci.tar"
    if not pause.exists():
        binary = CACHE / "pause"
        subprocess.run(
            ["gcc", "-static", "-O2", "-o", str(binary), str(HERE / "pause.c")], check=True
        )
        _write(pause, PAUSE, _layer({"pause": binary.read_bytes()}), {"Entrypoint": ["/pause"]})
    busybox = CACHE / "busybox.oci.tar"
    if not busybox.exists():
        _write(busybox, BUSYBOX, _busybox_layer(), {"Cmd": ["sh"]})
    return [pause, busybox]


def _busybox_layer() -> bytes:
    applets = subprocess.run(
        [str(_BUSYBOX_BIN), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    files = {
        "bin/busybox": _BUSYBOX_BIN.read_bytes(),
        "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
        "etc/group": b"root:x:0:\nnogroup:x:65534:\n",
    }
    links = {f"bin/{a}": "busybox" for a in sorted(set(applets)) if a != "busybox"}
    return _layer(files, links, dirs=("bin", "etc", "root", "tmp"))


def _layer(
    files: dict[str, bytes], links: dict[str, str] | None = None, dirs: tuple[str, ...] = ()
) -> bytes:
    """An uncompressed layer tar with fixed times (the same bytes every build)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in dirs:
            _add(tar, d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755)
        for name, data in files.items():
            _add(tar, name, tarfile.REGTYPE, 0o644 if name.startswith("etc/") else 0o755, data)
        for name, target in (links or {}).items():
            _add(tar, name, tarfile.SYMTYPE, 0o777, link=target)
    return buf.getvalue()


def _add(
    tar: tarfile.TarFile, name: str, kind: bytes, mode: int, data: bytes = b"", link: str = ""
) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def _write(out: Path, name: str, layer: bytes, config: dict[str, object]) -> None:
    """One image archive: a gzip layer, its config, manifest and index naming ``name``."""
    layer_gz = _blob(gzip.compress(layer, mtime=0))
    cfg = _blob(
        _json(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], **config},
                "rootfs": {"type": "layers", "diff_ids": [_blob(layer)[0]]},
            }
        )
    )
    manifest = _blob(
        _json(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": _descriptor("config", cfg),
                "layers": [_descriptor("layer.v1.tar+gzip", layer_gz)],
            }
        )
    )
    entry = {
        **_descriptor("manifest", manifest),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"io.containerd.image.name": name},
    }
    index = {"schemaVersion": 2, "manifests": [entry]}
    tmp = out.with_suffix(".part")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "oci-layout", tarfile.REGTYPE, 0o644, _json({"imageLayoutVersion": "1.0.0"}))
        _add(tar, "index.json", tarfile.REGTYPE, 0o644, _json(index))
        for digest, data in (cfg, layer_gz, manifest):
            _add(tar, f"blobs/sha256/{digest[7:]}", tarfile.REGTYPE, 0o644, data)
    tmp.replace(out)


def _descriptor(kind: str, blob: tuple[str, bytes]) -> dict[str, object]:
    media = "application/vnd.oci.image." + (
        f"{kind}.v1+json" if kind in ("config", "manifest") else kind
    )
    return {"mediaType": media, "digest": blob[0], "size": len(blob[1])}


def _json(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
