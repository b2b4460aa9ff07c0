"""TensorBoard event files read as TensorBoard reads them (tests of ``metrics.tensorboard``)."""

from __future__ import annotations

import struct
from pathlib import Path


def scalars(logdir: Path) -> list[tuple[str, int, float]]:
    """Every scalar in ``logdir``'s event files, read as TensorBoard reads them: TFRecord
    frames (length, its CRC, the Event protobuf, its CRC) parsed with the Event proto."""
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    out = []
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            header, (size,) = data[pos : pos + 8], struct.unpack("<Q", data[pos : pos + 8])
            body = data[pos + 12 : pos + 12 + size]
            crcs = struct.unpack(
                "<II", data[pos + 8 : pos + 12] + data[pos + 12 + size : pos + 16 + size]
            )
            assert crcs == (masked_crc32c(header), masked_crc32c(body)), path
            event = event_pb2.Event.FromString(body)
            pos += 12 + size + 4
            out += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
    return out
