"""Worker-process isolation for verifiers that run native code.

xTB and DFT are C/Fortran libraries: a bad geometry can segfault, an SCF can
spin forever, a large basis can eat the machine's memory. None of that may
take the training run down with it, so such verifiers run their work in a
small pool of long-lived worker processes:

- each candidate has a hard wall-clock timeout; a worker that overruns is
  killed and replaced, and that candidate gets a ``timeout`` verdict;
- each worker runs under ``RLIMIT_AS`` (address-space limit), so a runaway
  allocation raises ``MemoryError`` (or kills the worker) instead of the host;
- a worker that dies (``os.abort``, segfault) costs only the candidate it was
  working on: the reason ("worker died with signal SIGABRT") becomes that
  candidate's ``failed`` verdict, a new worker takes its place, and the batch
  goes on;
- workers are reused across candidates (importing PySCF takes longer than a
  small xTB calculation), and thread counts (OpenMP, OpenBLAS, PySCF) are set
  explicitly in each worker, because native libraries default to all cores and
  two workers on two cores then oversubscribe the machine by orders of
  magnitude.

``concurrent.futures.ProcessPoolExecutor`` is not used on purpose: one dead
worker marks the whole executor broken. The pool here is a few worker
subprocesses, each with its own socket.

Work functions must be top-level (picklable) functions taking one picklable
argument and returning a picklable result.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storage.records import Status, Verdict, VerifierSpec
from storage.records import params_hash
from verifiers.base import Candidate, Verifier

__all__ = [
    "IsolatedVerifier",
    "IsolationParams",
    "TaskOutcome",
    "WorkerPool",
    "thread_env",
]

OutcomeKind = Literal["ok", "error", "crashed", "timeout", "out_of_memory"]

_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


_STARTED = "started"
# How long a fresh worker may take to start and import the work function's
# module before its first task counts as timed out.
STARTUP_TIMEOUT_S = 300.0


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that pin OpenMP/BLAS thread pools to ``threads``."""
    return {var: str(threads) for var in _THREAD_VARS}


@dataclass(frozen=True)
class TaskOutcome:
    """What happened to one task in the pool."""

    kind: OutcomeKind
    result: Any = None
    error: str = ""
    cpu_s: float = 0.0  # CPU seconds of the worker (all its threads) on this task
    wall_s: float = 0.0
    worker_pid: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


# --------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _exit_with_parent(parent: int, period_s: float = 1.0) -> None:
    """Kill this worker as soon as its parent process is gone (the worker has been re-parented).

    A worker reads its socket only between tasks, so without this a worker whose run was killed (SIGKILL, a
    crashed Dask worker, a SLURM job's end) would go on computing its task, minutes of DFT nobody will read,
    before it noticed. A daemon thread polls ``getppid`` instead: the native libraries release the GIL, so it
    runs during a calculation. ``PR_SET_PDEATHSIG`` is not used: it fires when the parent *thread* that
    started the worker exits, and pools are started from task threads that come and go.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period_s)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="arl-exit-with-parent", daemon=True).start()


def _worker_main(fd: int, threads: int, memory_mb: int | None, preload: Sequence[str] = (),
                 parent: int | None = None) -> None:
    """Loop of one worker: receive ``(fn, arg)``, send back an outcome tuple.

    ``parent``: the pid of the process that started it; the worker dies with it (:func:`_exit_with_parent`).
    """
    if parent is not None:
        _exit_with_parent(parent)
    conn = Connection(fd)
    # Thread pools read these when the native library loads (below, or when
    # the first work function's module is unpickled).
    os.environ.update(thread_env(threads))
    if memory_mb is not None:
        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # Import heavy libraries now, so that their import time is not charged
    # to the first candidate's cost.
    for module in preload:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the task that needs it reports the error
            pass
    # The parent handles Ctrl-C; a worker must not die mid-task on it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            task = pickle.loads(message)  # imports the work function's module on first use
        except BaseException as exc:  # noqa: BLE001 - e.g. the module is not importable here
            conn.send(("error", None, f"cannot load the task: {type(exc).__name__}: {exc}", 0.0, 0.0))
            continue
        if task is None:
            return
        fn, arg = task
        # The parent's timeout clock starts now: start-up and imports are not the candidate's fault.
        conn.send(_STARTED)
        cpu0, wall0 = _cpu_seconds(), time.perf_counter()
        try:
            _apply_thread_limits(threads)
            result = fn(arg)
            outcome: tuple[str, Any, str] = ("ok", result, "")
        except MemoryError:
            outcome = ("out_of_memory", None, "out of memory")
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as this task's failure
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
            outcome = ("error", None, f"{type(exc).__name__}: {exc}{where}")
        cpu_s, wall_s = _cpu_seconds() - cpu0, time.perf_counter() - wall0
        try:
            conn.send((*outcome, cpu_s, wall_s))
        except MemoryError:
            conn.send(("out_of_memory", None, "out of memory", cpu_s, wall_s))
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
            conn.send(("error", None, f"cannot send result back: {type(exc).__name__}: {exc}", cpu_s, wall_s))


def _apply_thread_limits(threads: int) -> None:
    """Set thread counts of libraries that ignore the environment once loaded."""
    pyscf_lib = sys.modules.get("pyscf.lib")
    if pyscf_lib is not None:
        pyscf_lib.num_threads(threads)


# --------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------


class _Worker:
    """One worker: a fresh interpreter running :func:`_worker_main`, talking over a socket pair.

    A plain subprocess rather than ``multiprocessing.Process``: spawn and
    forkserver re-import the parent's ``__main__`` in the child, which breaks
    scripts without an ``if __name__ == "__main__"`` guard; fork would copy a
    parent that may hold threads and open native-library state.
    """

    def __init__(self, threads: int, memory_mb: int | None, preload: Sequence[str] = ()) -> None:
        parent_sock, child_sock = socket.socketpair()
        env = {**os.environ, **thread_env(threads)}
        # The child must import what the parent can (tests, plugins, scripts' folders).
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        code = (f"from verifiers.isolation import _worker_main; _worker_main({child_sock.fileno()}, {threads}, "
                f"{memory_mb!r}, {tuple(preload)!r}, {os.getpid()})")
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], pass_fds=[child_sock.fileno()], env=env, stdin=subprocess.DEVNULL
        )
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self.task: int | None = None
        self.running = False  # the current task's work function has been called
        self.deadline = 0.0
        self.started = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def exitcode(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.exitcode()
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send_bytes(pickle.dumps(None))
        except (OSError, ValueError):
            pass
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.exitcode()
        self.conn.close()


def _death_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"worker died with signal {name}"
    return f"worker exited with code {exitcode}"


_live_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


@atexit.register
def _close_live_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


class WorkerPool:
    """A few long-lived worker processes that survive their tasks' crashes.

    ``preload`` names modules each worker imports when it starts (so a heavy
    import is not charged to the first candidate). ``run(fn, args, timeout_s)`` returns one :class:`TaskOutcome` per argument,
    in order. Workers start lazily on the first call and are reused; a worker
    that crashes or overruns is replaced. Use as a context manager, or call
    :meth:`close`; pools still open at interpreter exit are closed by
    ``atexit``.
    """

    def __init__(
        self,
        workers: int = 1,
        threads: int = 1,
        memory_mb: int | None = None,
        preload: Sequence[str] = (),
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.workers = workers
        self.threads = threads
        self.memory_mb = memory_mb
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []
        self._closed = False
        _live_pools.add(self)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the idle workers (all of them between calls)."""
        return [w.pid for w in self._idle]

    def _spawn(self) -> _Worker:
        return _Worker(self.threads, self.memory_mb, self.preload)

    def run(self, fn: Callable[[Any], Any], args: Sequence[Any], timeout_s: float | Sequence[float]) -> list[TaskOutcome]:
        """Run ``fn(arg)`` for every arg in the workers; one outcome per arg, in order.

        ``timeout_s`` is one limit for every arg, or one per arg (a call sized by its own input).
        """
        if self._closed:
            raise RuntimeError("worker pool is closed")
        limits = [float(timeout_s)] * len(args) if isinstance(timeout_s, (int, float)) else [float(t) for t in timeout_s]
        if len(limits) != len(args):
            raise ValueError(f"{len(limits)} timeouts for {len(args)} tasks: give one timeout, or one per task")
        # Pickled once, here: an unpicklable argument is the caller's error, raised before any work starts.
        payloads = [pickle.dumps((fn, arg)) for arg in args]
        outcomes: list[TaskOutcome | None] = [None] * len(args)
        queue = deque(range(len(args)))
        busy: list[_Worker] = []
        try:
            while queue or busy:
                # Hand out tasks to idle workers, starting workers up to the pool size.
                while queue and (self._idle or len(busy) < self.workers):
                    worker = self._idle.pop() if self._idle else self._spawn()
                    index = queue.popleft()
                    try:
                        worker.conn.send_bytes(payloads[index])
                    except (BrokenPipeError, OSError):
                        # A worker that died while idle: replace it and retry the task.
                        worker.kill()
                        queue.appendleft(index)
                        continue
                    worker.task = index
                    worker.running = False
                    worker.started = time.perf_counter()
                    worker.deadline = worker.started + STARTUP_TIMEOUT_S + limits[index]
                    busy.append(worker)
                now = time.perf_counter()
                wait_for = max(min(w.deadline for w in busy) - now, 0.0)
                ready = wait([w.conn for w in busy], timeout=wait_for)
                now = time.perf_counter()
                for worker in list(busy):
                    index = worker.task
                    assert index is not None
                    if worker.conn in ready:
                        try:
                            message = worker.conn.recv()
                        except (EOFError, OSError):
                            pass  # died while sending: handled as a crash below
                        else:
                            if message == _STARTED:
                                worker.running = True
                                worker.started = now
                                worker.deadline = now + limits[index]
                                continue
                            kind, result, error, cpu_s, wall_s = message
                            outcomes[index] = TaskOutcome(kind, result, error, cpu_s, wall_s, worker.pid)
                            worker.task = None
                            worker.running = False
                            busy.remove(worker)
                            self._idle.append(worker)
                            continue
                    if worker.conn in ready or worker.process.poll() is not None:
                        reason = _death_reason(worker.exitcode())
                        outcomes[index] = TaskOutcome(
                            "crashed", error=reason, wall_s=now - worker.started, worker_pid=worker.pid
                        )
                        busy.remove(worker)
                        worker.kill()
                    elif now >= worker.deadline:
                        outcomes[index] = TaskOutcome(
                            "timeout",
                            error=f"no answer within {limits[index]:g} s; worker killed"
                            if worker.running
                            else f"worker did not start within {STARTUP_TIMEOUT_S:g} s; worker killed",
                            wall_s=now - worker.started,
                            worker_pid=worker.pid,
                        )
                        busy.remove(worker)
                        worker.kill()
        except BaseException:
            # Interrupted (Ctrl-C) or a bug: never leave workers half-way through a task.
            for worker in busy:
                worker.kill()
            raise
        return [o for o in outcomes if o is not None]


# --------------------------------------------------------------------------
# Verifier base class
# --------------------------------------------------------------------------


class IsolationParams(BaseModel):
    """Execution settings shared by every isolated verifier (extend it in ``Params``)."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(default=300.0, gt=0, description="Hard wall-clock limit per candidate, in seconds.")
    memory_mb: int | None = Field(
        default=4096, ge=256, description="Address-space limit per worker process in MiB (None: no limit)."
    )
    workers: int = Field(default=1, ge=1, description="Worker processes (keep workers * threads <= cores).")
    threads: int = Field(default=1, ge=1, description="OpenMP/BLAS threads per worker.")


def _describe(exc: ValidationError) -> str:
    """One line for a verdict that ``interpret`` could not build, e.g. "value is nan: input should be a finite number"."""
    parts = []
    for error in exc.errors():
        message = error["msg"][:1].lower() + error["msg"][1:]
        if error["loc"]:
            field = ".".join(str(p) for p in error["loc"])
            message = f"{field} is {repr(error.get('input'))[:60]}: {message}"
        parts.append(message)
    return "; ".join(parts).replace("\n", " ")


class IsolatedVerifier(Verifier[Any]):
    """A verifier whose work runs in a :class:`WorkerPool`.

    Subclasses set ``work_function`` (a top-level function, wrapped in
    ``staticmethod``), optionally ``preload_modules``, give ``Params`` the fields of :class:`IsolationParams`,
    and implement:

    - :meth:`prepare`: candidate -> argument of the work function, or a
      :class:`Verdict` straight away (e.g. ``invalid`` input: no worker needed);
    - :meth:`interpret`: the work function's result -> verdict.

    Crashes, timeouts, out-of-memory and exceptions of the work function
    become ``failed``/``timeout`` verdicts here, with the reason as feedback.
    ``workers`` and ``threads`` do not change results, so they are left out of
    the params hash (changing them keeps the verdict cache).
    """

    Params: ClassVar[type[BaseModel]] = IsolationParams
    work_function: ClassVar[Callable[[Any], Any]]
    preload_modules: ClassVar[tuple[str, ...]] = ()
    execution_fields: ClassVar[frozenset[str]] = frozenset({"workers", "threads"})

    @classmethod
    def check_definition(cls) -> None:
        if not callable(getattr(cls, "work_function", None)):
            raise TypeError(f"verifier class {cls.__qualname__} must set work_function = staticmethod(a top-level "
                            "function): the function its worker processes run")
        missing = [f for f in IsolationParams.model_fields if f not in cls.Params.model_fields]
        if missing:
            raise TypeError(f"verifier class {cls.__qualname__}: its Params lacks {', '.join(missing)}; derive it from "
                            "verifiers.isolation.IsolationParams (class Params(IsolationParams): ...)")

    def __init__(self, params: BaseModel | dict[str, Any] | None = None) -> None:
        super().__init__(params)
        self._pool: WorkerPool | None = None

    @property
    def params_hash(self) -> str:
        return params_hash(self.params.model_dump(mode="json", exclude=set(self.execution_fields)))

    def spec(self) -> VerifierSpec:
        # The spec's params hash must match the verdicts': leave the execution fields out of both.
        spec = super().spec()
        params = {k: v for k, v in spec.params.items() if k not in self.execution_fields}
        return spec.model_copy(update={"params": params})

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None or self._pool._closed:
            p = self.params
            self._pool = WorkerPool(
                workers=p.workers, threads=p.threads, memory_mb=p.memory_mb, preload=self.preload_modules  # type: ignore[attr-defined]
            )
        return self._pool

    def close(self) -> None:
        """Stop the worker processes (they also stop at interpreter exit)."""
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> IsolatedVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self, candidate: Candidate) -> Any:
        """Argument for the work function, or a finished :class:`Verdict`."""
        return candidate.payload

    def timeout_for(self, candidate: Candidate) -> float:
        """Wall-clock limit of one candidate's call (default: ``timeout_s`` for every candidate)."""
        return float(self.params.timeout_s)  # type: ignore[attr-defined]

    def interpret(self, candidate: Candidate, result: Any, outcome: TaskOutcome) -> Verdict:
        """Turn a successful work-function result into a verdict."""
        return self.verdict(candidate, Status.ok, value=float(result), cost_s=outcome.cpu_s, wall_s=outcome.wall_s)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(candidates)
        todo: list[tuple[int, Any]] = []
        for i, candidate in enumerate(candidates):
            prepared = self.prepare(candidate)
            if isinstance(prepared, Verdict):
                verdicts[i] = prepared
            else:
                todo.append((i, prepared))
        if todo:
            fn = type(self).work_function
            limits = [self.timeout_for(candidates[i]) for i, _ in todo]
            outcomes = self.pool.run(fn, [arg for _, arg in todo], timeout_s=limits)
            for (i, _), outcome in zip(todo, outcomes, strict=True):
                verdicts[i] = self._verdict_from(candidates[i], outcome)
        return [v for v in verdicts if v is not None]

    def _verdict_from(self, candidate: Candidate, outcome: TaskOutcome) -> Verdict:
        costs = {"cost_s": max(outcome.cpu_s, 0.0), "wall_s": max(outcome.wall_s, 0.0)}
        if outcome.kind == "ok":
            # A malformed result is this candidate's failure, never the batch's. That includes
            # a NaN or infinite value, which Verdict refuses ("could not verify").
            try:
                return self.interpret(candidate, outcome.result, outcome)
            except ValidationError as exc:
                return self.verdict(candidate, Status.failed, feedback=f"bad result: {_describe(exc)}", **costs)
            except Exception as exc:  # noqa: BLE001
                return self.verdict(candidate, Status.failed, feedback=f"bad result: {type(exc).__name__}: {exc}", **costs)
        if outcome.kind == "timeout":
            # A killed worker's CPU time is unknown; charge the wall time it held a core.
            return self.verdict(candidate, Status.timeout, feedback=outcome.error, cost_s=outcome.wall_s, wall_s=outcome.wall_s)
        if outcome.kind == "crashed":
            return self.verdict(candidate, Status.failed, feedback=outcome.error, cost_s=outcome.wall_s, wall_s=outcome.wall_s)
        return self.verdict(candidate, Status.failed, feedback=outcome.error, **costs)
