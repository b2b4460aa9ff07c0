"""Push an OCI image archive to a registry over the Distribution API (standard library
only): each blob once (skipped when the registry has it), then the manifest under a tag.

    python3 deploy/image/push.py ARCHIVE REGISTRY_URL REPOSITORY:TAG

``REGISTRY_URL`` is ``http://host:port`` (a local registry on loopback, as the tests run
Debian's ``docker-registry``) or ``https://...``; pods then name the image
``host:port/REPOSITORY:TAG``. Blobs stream from the archive, never whole into memory.
Prints the pushed manifest's digest.
"""

from __future__ import annotations

import json
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from typing import IO, Any

__all__ = ["push"]


def _request(method: str, url: str, body: bytes | IO[bytes] | None = None, **headers: str) -> Any:
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    return urllib.request.urlopen(req, timeout=300)


def _has_blob(base: str, repo: str, digest: str) -> bool:
    try:
        _request("HEAD", f"{base}/v2/{repo}/blobs/{digest}").close()
        return True
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return False
        raise


def _upload(base: str, repo: str, digest: str, data: IO[bytes], size: int) -> None:
    """One blob: start an upload session, stream it in one PUT with its digest."""
    with _request("POST", f"{base}/v2/{repo}/blobs/uploads/", b"") as r:
        location = urllib.parse.urljoin(base, r.headers["Location"])
    sep = "&" if "?" in location else "?"
    url = f"{location}{sep}digest={urllib.parse.quote(digest)}"
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
    _request("PUT", url, data, **headers).close()


def push(archive: str, base: str, ref: str) -> str:
    repo, _, tag = ref.rpartition(":")
    base = base.rstrip("/")
    with tarfile.open(archive) as tar:

        def read(name: str) -> bytes:
            member = tar.extractfile(name)
            if member is None:
                raise SystemExit(f"{archive}: no {name}; is it an OCI archive (make image)?")
            return member.read()

        index = json.loads(read("index.json"))
        manifest_desc = index["manifests"][0]
        manifest = read(f"blobs/sha256/{manifest_desc['digest'][7:]}")
        doc = json.loads(manifest)
        for desc in [doc["config"], *doc["layers"]]:
            digest = desc["digest"]
            if _has_blob(base, repo, digest):
                continue
            member = tar.extractfile(f"blobs/sha256/{digest[7:]}")
            assert member is not None
            _upload(base, repo, digest, member, int(desc["size"]))
        headers = {"Content-Type": manifest_desc["mediaType"]}
        _request("PUT", f"{base}/v2/{repo}/manifests/{tag}", manifest, **headers).close()
    return str(manifest_desc["digest"])


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    print(push(*argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
