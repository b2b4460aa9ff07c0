"""TensorBoard scalars of ``tau.log``, when tau.yaml asks (``metrics.tensorboard: true``).

Every finite logged value also goes, as it is logged, to an event file under
``<output_dir>/artifacts/tensorboard/`` (TFRecord frames of ``Event`` protobufs, built
with tensorboardX's protos and CRC, written synchronously: no writer thread outlives the
job, nothing waits in a queue when it crashes), so the run's artifacts hold a log
directory ``tensorboard --logdir`` opens. Rank 0 only, like ``tau.log``.
"""

from __future__ import annotations

import atexit
import os
import socket
import struct
import threading
import time
from typing import IO, Any

from taugrid.record import jobenv
from taugrid.sdk.job import injob_artifacts

__all__ = ["LOG_DIR", "enabled", "write"]

LOG_DIR = "tensorboard"
"""The folder under the run's artifacts."""

_lock = threading.Lock()
_files: dict[str, IO[bytes]] = {}


@atexit.register
def _close() -> None:
    with _lock:
        for fh in _files.values():
            fh.close()
        _files.clear()


def enabled() -> bool:
    return os.environ.get(jobenv.TENSORBOARD) == "1"


def write(records: list[dict[str, object]]) -> None:
    """Append the finite values of ``records`` (``tau.log``'s lines) as scalar events."""
    from tensorboardX.proto import event_pb2  # loaded on first use only
    from tensorboardX.summary import scalar

    frames = [
        _frame(
            event_pb2.Event(
                wall_time=float(str(r["wall_time"])),
                step=int(str(r["step"])),
                summary=scalar(str(r["name"]), r["value"]),
            )
        )
        for r in records
        if isinstance(r.get("value"), float)
    ]
    with _lock:
        fh = _file()
        fh.write(b"".join(frames))
        fh.flush()


def _file() -> IO[bytes]:
    logdir = injob_artifacts.artifacts_dir() / LOG_DIR
    key = str(logdir)
    if key not in _files:
        from tensorboardX.proto import event_pb2

        logdir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        fh = _files[key] = (logdir / name).open("ab")
        fh.write(_frame(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")))
    return _files[key]


def _frame(event: Any) -> bytes:
    from tensorboardX.record_writer import masked_crc32c

    data: bytes = event.SerializeToString()
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )
