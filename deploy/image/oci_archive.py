"""Write an OCI image archive from layer tars, streaming (standard library only).

    python3 deploy/image/oci_archive.py OUT.tar NAME CONFIG.json LAYER.tar [LAYER.tar ...]

``OUT.tar`` is an ``oci-layout`` archive (``index.json``, ``blobs/sha256/...``) that
``ctr images import`` loads and a registry accepts; ``NAME`` is the image reference it
carries (``io.containerd.image.name``), ``CONFIG.json`` the image's ``config`` section
(Env, Cmd, WorkingDir...). Layers stay uncompressed (no CPU spent on gzip; they travel
on loopback only) and are read twice, once to hash and once to copy, never held in
memory: the project image's base layer is over a gigabyte.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

__all__ = ["write"]

_MEDIA = "application/vnd.oci.image."


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _json(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _desc(media: str, digest: str, size: int) -> dict[str, object]:
    return {"mediaType": _MEDIA + media, "digest": digest, "size": size}


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def write(out: Path, name: str, config: dict[str, object], layers: list[Path]) -> str:
    """Writes the archive (atomically) and returns the manifest's digest."""
    digests = [_sha256(p) for p in layers]
    cfg = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": digests},
        }
    )
    cfg_digest = "sha256:" + hashlib.sha256(cfg).hexdigest()
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MEDIA + "manifest.v1+json",
            "config": _desc("config.v1+json", cfg_digest, len(cfg)),
            "layers": [
                _desc("layer.v1.tar", d, p.stat().st_size)
                for d, p in zip(digests, layers, strict=True)
            ],
        }
    )
    man_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                **_desc("manifest.v1+json", man_digest, len(manifest)),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                },
            }
        ],
    }
    tmp = out.with_name(out.name + ".part")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _add_bytes(tar, "index.json", _json(index))
        _add_bytes(tar, f"blobs/sha256/{cfg_digest[7:]}", cfg)
        _add_bytes(tar, f"blobs/sha256/{man_digest[7:]}", manifest)
        for digest, path in zip(digests, layers, strict=True):
            info = tar.gettarinfo(str(path), arcname=f"blobs/sha256/{digest[7:]}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with path.open("rb") as f:
                tar.addfile(info, f)
    tmp.replace(out)
    return man_digest


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, name, config, *layers = argv
    digest = write(Path(out), name, json.loads(Path(config).read_text()), [Path(p) for p in layers])
    print(digest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
