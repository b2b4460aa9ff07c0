"""The agent's record sync inside a Kubernetes pod: the entrypoint of a run's pod.

On a Ray region the agent runs beside the job and copies its scratch into the record
store (``recordsync``). A pod runs on another machine, so the same work runs in the pod,
as its main process: ``python -m taugrid.agent.records.podsync -- <the run's command>``.

1. The attempt (``ATTEMPT_ENV``: the agent's ``payloads.Assignment`` as JSON; the store's
   credentials come from a Secret as the environment variables the platform names)
   says where the run's record is; the code the hub stored there (``CODE_ARCHIVE``) is
   unpacked into ``<root>/code`` (``root``: the pod's ``ROOT_ENV`` emptyDir).
2. ``RecordSync.stage``: the run's latest complete checkpoint and its metrics file are
   downloaded into ``<root>/out`` (the job's ``TAU_OUTPUT_DIR``), so a retried or
   requeued attempt resumes from its checkpoint, wherever it was written.
3. The command runs in the code directory with the attempt's environment; its output is
   the pod's log (the agent reads it through the API server). SIGTERM (Kubernetes
   deleting the pod: a reclaim, a preemption, a cancel) is the job's notice: ``NOTICE``
   (``states.NOTICE_FILE``, as the agent writes it on Ray regions) goes into its
   ``TAU_OUTPUT_DIR``, so ``tau.preemption_notice()`` returns it and the job can
   checkpoint; the SIGTERM is passed on ``NOTICE_S`` later (at once on a second SIGTERM
   or a SIGINT). The pods' termination grace (``GRACE_S``) covers the notice and the final
   upload of the checkpoint it wrote.
4. While it runs and once it ended, ``RecordSync`` uploads metrics, committed
   checkpoints and (on success) artifacts, fenced by the record's ``FENCE``. The pod
   exits with the command's status once the final round is stored; when the store did
   not take it within ``SETTLE_S``, with ``EXIT_NOT_STORED`` and the reason on stderr.

A store that does not answer before the command starts: retried ``STAGE_TRIES`` times,
then the pod exits ``EXIT_NOT_STORED`` saying which store and why (the run fails with
that line in its log; nothing ran).

``--notice`` (no command): a RayJob's Ray containers' preStop hook. There the wrapper is
the Ray job's driver, not the pod's main process, so the kubelet's SIGTERM would reach
``ray start`` only and the driver would die with Ray, unwarned: the hook sends every
wrapper in its container the SIGTERM of step 3 and waits until they have stored their
outputs and exited (within ``GRACE_S``), and the kubelet stops Ray after it.

``--prepare`` (no command): a serving run's init container. The pods of a RayService are
Ray nodes whose Serve replicas import the app, so nothing wraps a command there: before
the Ray container starts, the code goes into ``<root>/code`` as above and the model
(``MODEL_RECORD`` in the run's environment: a key of the same record store, one file or
a folder) into ``<root>/model/<its name>`` (``model_path``, the pods' ``TAU_MODEL_PATH``);
then it exits 0. A model that is not in the store exits ``EXIT_NOT_STORED`` saying so.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from types import FrameType

from taugrid import errors
from taugrid import payloads as wire
from taugrid.agent.records import recordsync
from taugrid.backends import base
from taugrid.lifecycle import states as st
from taugrid.platform import models as pm
from taugrid.record import files, jobenv, layout
from taugrid.record import store as recordstore

__all__ = [
    "ATTEMPT_ENV",
    "ENDPOINT_ENV",
    "EXIT_NOT_STORED",
    "GRACE_S",
    "MODEL_DIR",
    "NOTICE_S",
    "ROOT",
    "ROOT_ENV",
    "main",
    "model_path",
    "pod_attempt",
]

ATTEMPT_ENV = "TAU_POD_ATTEMPT"
ENDPOINT_ENV = "TAU_POD_STORE_ENDPOINT"
"""How the pod reaches an S3 record store when not by the platform's ``endpoint_url``."""
ROOT_ENV = "TAU_POD_ROOT"
ROOT = "/tau"
"""Where the pod's scratch volume is mounted (code in ``code/``, outputs in ``out/``)."""
EXIT_NOT_STORED = 75
"""The command's outputs could not be stored (EX_TEMPFAIL)."""
SETTLE_S = 300.0
STAGE_TRIES = 5
NOTICE_S = 15.0
"""From the pod's first SIGTERM (its ``NOTICE`` to the job) to the SIGTERM passed on."""
GRACE_S = 60
"""The pods' terminationGracePeriodSeconds: ``NOTICE_S``, then the job's exit and the
final upload of what it wrote (a checkpoint on the notice)."""
_MODULE = __spec__.name if __spec__ is not None else __name__  # also under ``python -m``
NOTICE_HOOK_MARGIN_S = 5
"""What ``--notice`` (a preStop hook) leaves of ``GRACE_S`` for Ray's own exit."""
NOTICE_REASON = "the pod is being stopped (a spot reclaim, a preemption or a cancel)"
PREPARE = "--prepare"
NOTICE = "--notice"
MODEL_DIR = "model"
"""Where ``--prepare`` puts a serving run's model, under the scratch volume."""


def pod_attempt(a: wire.Assignment, endpoint: str | None) -> base.PodAttempt | None:
    """What the agent gives the pods of attempt ``a`` so that they run this program;
    None when its record store is not an object store (a pod cannot reach a directory
    on the agent's machine). ``endpoint``: how the region reaches the store."""
    if not a.records or not a.record_key:
        return None
    spec = pm.RecordStoreSpec.model_validate(a.records)
    if not spec.in_object_store:
        return None
    env = {ATTEMPT_ENV: a.model_dump_json(), ROOT_ENV: ROOT}
    if endpoint:
        env[ENDPOINT_ENV] = endpoint
    names = (spec.access_key_env, spec.secret_key_env)
    secret = {n: os.environ[n] for n in names if os.environ.get(n)}
    argv = ("python", "-m", _MODULE)
    model = model_path(a, ROOT)
    return base.PodAttempt(
        command=argv,
        prepare=(*argv, PREPARE),
        notice=(*argv, NOTICE),
        env=env,
        secret_env=secret,
        root=ROOT,
        grace_s=GRACE_S,
        model_path=model,
    )


def _model_key(a: wire.Assignment) -> str | None:
    env = a.spec.get("env") or {}
    return str(env[jobenv.MODEL_RECORD]) if env.get(jobenv.MODEL_RECORD) else None


def model_path(a: wire.Assignment, root: str) -> str | None:
    """Where ``--prepare`` puts attempt ``a``'s model under ``root``; None without one."""
    key = _model_key(a)
    return f"{root}/{MODEL_DIR}/{PurePosixPath(key).name}" if key else None


def _say(message: str) -> None:
    print(f"tau podsync: {message}", file=sys.stderr, flush=True)


def _unpack_code(store: recordstore.RecordStore, a: wire.Assignment, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    blob = store.read(f"{a.record_key}/{layout.CODE_ARCHIVE}")
    if blob:
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            zf.extractall(dest)


def _fetch_model(store: recordstore.RecordStore, a: wire.Assignment, root: Path) -> None:
    """The model (one file, or every file under a folder's key) into ``model_path``."""
    key = _model_key(a)
    if key is None:
        return
    dest = Path(model_path(a, str(root)) or "")
    listed = store.list(key)
    for rel, _size in listed:
        store.get_file(f"{key}/{rel}", dest / rel)
    if not listed and not store.get_file(key, dest):
        raise errors.UserError(
            f"the model {store.url}/{key} is not in the record store (deleted, or the "
            "source run's workspace keeps its records elsewhere)",
            "deploy a model that exists: tau serve deploy NAME --from-run RUN",
        )


def _tries(what: Callable[[], None]) -> None:
    """``what``, retrying a store that does not answer (``STAGE_TRIES`` times)."""
    for n in range(STAGE_TRIES):
        try:
            what()
            return
        except recordstore.RecordStoreError as exc:
            if n == STAGE_TRIES - 1:
                raise
            _say(f"{exc.message}; trying again in {2**n} s")
            time.sleep(2**n)


def _prepare(a: wire.Assignment, store: recordstore.RecordStore, root: Path) -> int:
    """``--prepare``: code and model into the scratch volume, nothing run."""

    def fetch() -> None:
        _unpack_code(store, a, root / "code")
        _fetch_model(store, a, root)

    try:
        _tries(fetch)
    except (errors.TauError, OSError) as exc:
        _say(f"cannot prepare the serving pod: {exc}")
        return EXIT_NOT_STORED
    _say(f"code and model are in {root}")
    return 0


def _stage(sync: recordsync.RecordSync, store: recordstore.RecordStore, code: Path) -> None:
    """Code and resume state into the pod, retrying a store that does not answer."""

    def fetch() -> None:
        _unpack_code(store, sync.a, code)
        sync.stage()

    _tries(fetch)


def job_env(a: wire.Assignment, out: Path) -> dict[str, str]:
    """The command's environment: the pod's, with this attempt's outputs in ``out``."""
    env = dict(os.environ)
    env.pop(ATTEMPT_ENV, None)
    own_output = a.spec.get("output_dir")
    if not own_output or "://" in str(own_output):
        env[jobenv.OUTPUT_DIR] = str(out)
    if not a.spec.get("checkpoint_path"):
        env[jobenv.CHECKPOINT_PATH] = str(out / layout.CHECKPOINTS_DIR)
    env[jobenv.ATTEMPT] = str(a.attempt)
    env[jobenv.FENCING_TOKEN] = str(a.token)
    return env


def _notice(out: Path, token: int) -> None:
    """``NOTICE`` for the job, as the agent writes it on Ray regions (written whole)."""
    doc = {"token": token, "reason": NOTICE_REASON, "stop_at": time.time() + NOTICE_S}
    files.write_json_atomic(out / st.NOTICE_FILE, doc)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], out: Path, token: int) -> int:
    """The command's exit status; a first SIGTERM is a notice, passed on ``NOTICE_S``
    later (see the module docstring)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env)
    noticed = threading.Event()

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum != signal.SIGTERM or noticed.is_set():
            proc.send_signal(signum)
            return
        noticed.set()
        _notice(out, token)
        timer = threading.Timer(NOTICE_S, proc.send_signal, (signal.SIGTERM,))
        timer.daemon = True
        timer.start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    return proc.wait()


def _notice_wrappers() -> int:
    """``--notice``: a Ray pod's preStop hook. Where the wrapper is not the pod's main
    process (a RayJob's driver, on whichever Ray node Ray placed it) nothing would tell it
    the pod is going: the kubelet's SIGTERM reaches ``ray start`` only, and the driver
    dies with Ray. So before that SIGTERM, every wrapper in this container (its own
    processes; none on the other Ray nodes) gets one, its notice (``_run``), and the hook
    waits until they have stored their outputs and exited, within the pod's grace."""
    me = os.getpid()
    wrappers = [pid for pid, argv in _processes() if pid != me and _wraps(argv)]
    for pid in wrappers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S - NOTICE_HOOK_MARGIN_S
    while any(_running(pid) for pid in wrappers) and time.monotonic() < deadline:
        time.sleep(0.5)
    return 0


def _processes() -> list[tuple[int, list[str]]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                out.append((int(entry.name), [a.decode(errors="replace") for a in argv]))
    return out


def _wraps(argv: list[str]) -> bool:
    """Whether ``argv`` is this program wrapping a command (``python -m <this> -- ...``;
    not --prepare or --notice, nor a process that only names it among its arguments)."""
    return argv[1:4] == ["-m", _MODULE, "--"]


def _running(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def _settle(sync: recordsync.RecordSync, rc: int) -> int:
    sync.finish(rc == 0)
    if not sync.settled.wait(SETTLE_S):
        sync.pending = sync.pending or f"the final upload did not end within {SETTLE_S:g} s"
    sync.stop()
    if sync.pending:
        _say(f"outputs not stored in the record: {sync.pending}")
        return rc or EXIT_NOT_STORED
    return rc


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cmd = args[args.index("--") + 1 :] if "--" in args else args
    prepare = args == [PREPARE]
    if args == [NOTICE]:
        return _notice_wrappers()
    if not (cmd or prepare) or ATTEMPT_ENV not in os.environ:
        usage = f"{ATTEMPT_ENV}=<assignment JSON> python -m {__name__}"
        _say(f"usage: {usage} -- COMMAND ...  or  {usage} {PREPARE}")
        return 2
    a = wire.Assignment.model_validate_json(os.environ[ATTEMPT_ENV])
    root = Path(os.environ.get(ROOT_ENV) or ROOT)
    store = recordsync.open_for(a, os.environ.get(ENDPOINT_ENV) or None)
    if prepare:
        return _prepare(a, store, root)
    sync = recordsync.RecordSync(a, root / "out", store)
    try:
        _stage(sync, store, root / "code")
    except (errors.TauError, OSError) as exc:
        _say(f"cannot prepare the attempt: {exc}")
        return EXIT_NOT_STORED
    sync.start()
    rc = _run(cmd, root / "code", job_env(a, sync.scratch), sync.scratch, a.token)
    return _settle(sync, rc)


if __name__ == "__main__":
    sys.exit(main())
