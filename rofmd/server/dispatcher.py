"""Runs requests: one session strictly in order, different sessions concurrently.

Each session has a lane: a bounded FIFO drained by at most one task at a time.
A lane's task awaits the answer's write before it takes the next request, so
the answers of one session also leave the socket in arrival order. Requests that
name no session run at once. Every request runs under its own cancel scope with
the per-request deadline; `$/cancelRequest` cancels it unless it has entered its
commit guard (see `handlers.context.RequestContext.commit_guard`).

A session whose lane is gone (nothing queued or running) is idle: only then may the
daemon evict it (`lane_busy`, `on_lane_idle`; `rofmd.server.eviction`). Each request that
ends marks its session used at the daemon's clock (`SessionRegistry.touch`).

Params are validated where the handler runs, inside its deadline. A request whose line
is at least `OFF_LOOP_BYTES` long is validated in a worker thread, so checking one
session's megabytes never holds the event loop for all the others (the answer is the same
either way, errors included). Smaller ones stay on the loop: a pre-step's 500 KB surface
costs a few ms there, mostly nodes validated before (`handlers.validated_once`), and
about a third more in a thread, where the request's freshly parsed objects are cold.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup
from pydantic import BaseModel

from handlers.app import App
from handlers.context import ConnectionState, RequestContext
from handlers.errors import (
    INTERNAL_ERROR,
    MEMORY_DISABLED,
    METHOD_NOT_FOUND,
    OVERLOADED,
    REQUEST_CANCELLED,
    HandlerError,
    storage_failure,
)
from handlers.params import parse_params
from handlers.registry import lookup
from handlers.session_access import opens_lazily
from handlers.sessions import session_access
from handlers.validated_once import json_values
from rofmd.server.jsonrpc import CANCEL_METHOD, Call, error_response, result_response

Reply = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]
log = structlog.get_logger("rofmd.dispatch")

OFF_LOOP_BYTES = 1024 * 1024
"""Requests from this line length up are validated in a worker thread (module docstring):
tens of ms of checks for a surface never seen before."""


@dataclass(eq=False)
class Job:
    """One call on its way through the dispatcher."""

    call: Call
    conn: ConnectionState
    reply: Reply
    lane_key: str | None
    size: int = 0
    """Bytes of the line the call came in (0: not from a line)."""
    scope: anyio.CancelScope | None = None
    ctx: RequestContext | None = None
    started: bool = False
    cancel_requested: bool = False


@dataclass(eq=False)
class Lane:
    """A session's FIFO and whether a task is draining it."""

    pending: deque[Job] = field(default_factory=deque)
    running: bool = False
    current: Job | None = None

    def occupancy(self) -> int:
        """Requests held: the one running (if any) plus those waiting."""
        return len(self.pending) + (1 if self.current is not None else 0)


def _session_id(params: Any) -> str | None:
    if isinstance(params, dict):
        session = params.get("session")
        if isinstance(session, dict):
            sid = session.get("id")
            if isinstance(sid, str) and sid:
                return sid
    return None


class Dispatcher:
    """Routes calls to handlers under the ordering, limit and cancellation rules."""

    def __init__(
        self,
        app: App,
        task_group: TaskGroup,
        *,
        max_pending_per_session: int,
        request_timeout: float,
        clock_ms: Callable[[], int],
    ) -> None:
        self.app = app
        self._tg = task_group
        self._max_pending = max_pending_per_session
        self._timeout = request_timeout
        self._clock_ms = clock_ms
        self._lanes: dict[str, Lane] = {}
        self._jobs: dict[tuple[int, Any], Job] = {}
        self._active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.counters: Counter[str] = Counter()
        # request ids: unique per daemon run, cheap on the hot path (error ids stay uuid4)
        self._id_prefix = uuid.uuid4().hex[:6]
        self._request_seq = itertools.count(1)
        self._storage_logged: set[tuple[str, str, str]] = set()
        self.on_lane_idle: Callable[[str], None] | None = None
        """Called (synchronously) when a session's last queued request has ended."""

    # ---- submission -------------------------------------------------------------

    def submit(self, call: Call, conn: ConnectionState, reply: Reply, *, size: int = 0) -> None:
        """Accept a call synchronously, so arrival order is the order of submit calls.
        ``size``: the length of the line it came in (large ones are validated off the
        event loop)."""
        if call.method == CANCEL_METHOD:
            self._cancel(call, conn)
            if call.has_id:
                self.spawn(reply, result_response(call.id, None))
            return
        sid = _session_id(call.params)
        lane_key = self._lane_key(sid) if sid is not None else None
        job = Job(call=call, conn=conn, reply=reply, lane_key=lane_key, size=size)
        self.counters["requests"] += 1
        if lane_key is None:
            self._begin(job)
            self._tg.start_soon(self._run_and_reply, job)
            return
        lane = self._lanes.setdefault(lane_key, Lane())
        # one request may run while `max_pending` wait behind it
        if lane.occupancy() > self._max_pending:
            self.counters["overloaded"] += 1
            if call.has_id:
                self.spawn(
                    reply,
                    error_response(
                        call.id,
                        OVERLOADED,
                        "overloaded: the session's queue is full",
                        {"limit": self._max_pending, "session": sid},
                    ),
                )
            return
        self._begin(job)
        lane.pending.append(job)
        if not lane.running:
            lane.running = True
            self._tg.start_soon(self._drain, lane_key, lane)

    def _lane_key(self, sid: str) -> str:
        try:
            return self.app.sessions.key_for(sid)
        except ValueError:
            return sid  # refused later by params validation; still ordered per raw id

    def _begin(self, job: Job) -> None:
        self._active += 1
        if self._idle.is_set():
            self._idle = anyio.Event()
        if job.call.has_id:
            self._jobs[(job.conn.conn_id, _hashable(job.call.id))] = job

    def _end(self, job: Job) -> None:
        if job.call.has_id:
            key = (job.conn.conn_id, _hashable(job.call.id))
            if self._jobs.get(key) is job:
                del self._jobs[key]
        self._active -= 1
        if self._active == 0:
            self._idle.set()

    def spawn(self, reply: Reply, response: dict[str, Any]) -> None:
        """Send an answer decided without running a handler (parse errors, refusals)."""
        self._tg.start_soon(reply, response)

    # ---- cancellation -----------------------------------------------------------

    def _cancel(self, call: Call, conn: ConnectionState) -> None:
        params = call.params if isinstance(call.params, dict) else {}
        target = params.get("id")
        if target is None:
            return
        job = self._jobs.get((conn.conn_id, _hashable(target)))
        if job is None:
            return
        self.counters["cancelRequests"] += 1
        if not job.started:
            lane = self._lanes.get(job.lane_key) if job.lane_key is not None else None
            if lane is not None and job in lane.pending:
                lane.pending.remove(job)
                self.counters["cancelled"] += 1
                self._end(job)
                self.spawn(job.reply, self._cancelled(job))
                return
            job.cancel_requested = True
            return
        if job.ctx is not None and job.ctx.committed:
            return  # past the point of no return: the request completes
        job.cancel_requested = True
        if job.scope is not None:
            job.scope.cancel()

    @staticmethod
    def _cancelled(job: Job) -> dict[str, Any]:
        return error_response(job.call.id, REQUEST_CANCELLED, "request cancelled")

    # ---- execution --------------------------------------------------------------

    async def _drain(self, key: str, lane: Lane) -> None:
        try:
            while lane.pending:
                job = lane.current = lane.pending.popleft()
                try:
                    await self._run_and_reply(job)
                finally:
                    lane.current = None
                    self.app.sessions.touch(key, self._clock_ms())
        finally:
            lane.running = False
            lane.current = None
            if not lane.pending and self._lanes.get(key) is lane:
                del self._lanes[key]
                if self.on_lane_idle is not None:
                    self.on_lane_idle(key)

    async def _run_and_reply(self, job: Job) -> None:
        started = time.perf_counter()
        response: dict[str, Any] | None = None
        try:
            response = await self._run(job)
            if response is not None and job.call.has_id:
                await job.reply(response)
        finally:
            self._observe(job, response, time.perf_counter() - started)
            self._end(job)

    def _observe(self, job: Job, response: dict[str, Any] | None, seconds: float) -> None:
        """Count the request in the metrics: its method (`other` for a name no method
        answers, so the label set stays bounded), outcome and latency."""
        known = lookup(job.call.method, debug_methods=self.app.debug_methods) is not None
        error = response.get("error") if response is not None else None
        if not isinstance(error, dict):
            outcome = "ok"
        elif error.get("code") == REQUEST_CANCELLED:
            outcome = "cancelled"
        elif isinstance(error.get("data"), dict) and error["data"].get("reason") == "timeout":
            outcome = "timeout"
        else:
            outcome = "error"
        self.app.metrics.observe_request(job.call.method if known else "other", outcome, seconds)

    async def _run(self, job: Job) -> dict[str, Any] | None:
        call = job.call
        job.started = True
        request_id = f"{self._id_prefix}-{next(self._request_seq):x}"
        sid = _session_id(call.params)
        with structlog.contextvars.bound_contextvars(
            request_id=request_id, session_id=sid, method=call.method
        ):
            method = lookup(call.method, debug_methods=self.app.debug_methods)
            if method is None:
                self.counters["errors"] += 1
                return error_response(call.id, METHOD_NOT_FOUND, f"method not found: {call.method}")
            if method.needs_enabled and not self.app.enabled:
                return error_response(
                    call.id, MEMORY_DISABLED, "memory disabled (enabled:false at daemon start)"
                )
            ctx = RequestContext(
                request_id=request_id,
                method=call.method,
                session_id=sid,
                connection=job.conn,
                now_ms=self._clock_ms(),
            )
            job.ctx = ctx
            result: dict[str, Any] | None = None
            with anyio.CancelScope(deadline=anyio.current_time() + self._timeout) as scope:
                job.scope = scope
                ctx.scope = scope
                if job.cancel_requested:
                    scope.cancel()
                try:
                    params = await _validated(method.params, call.params, job.size, call.line)
                    lazy = opens_lazily(self.app, call.method, params, job.conn)
                    with session_access(read_only=lazy):
                        result = await method.handler(self.app, params, ctx)
                except HandlerError as exc:
                    self.counters["errors"] += 1
                    return {"jsonrpc": "2.0", "id": call.id, "error": exc.to_error()}
                except Exception as exc:  # handler boundary: logged and answered, never fatal
                    self.counters["errors"] += 1
                    storage = storage_failure(exc)
                    if storage is not None:
                        self._log_storage(sid, storage)
                        return {"jsonrpc": "2.0", "id": call.id, "error": storage.to_error()}
                    error_id = uuid.uuid4().hex[:12]
                    log.exception("handler failed", error_id=error_id)
                    return error_response(
                        call.id, INTERNAL_ERROR, "internal error", {"errorId": error_id}
                    )
            if scope.cancelled_caught:
                if job.cancel_requested:
                    self.counters["cancelled"] += 1
                    log.info("request cancelled")
                    return self._cancelled(job)
                self.counters["errors"] += 1
                self.counters["timeouts"] += 1
                error_id = uuid.uuid4().hex[:12]
                log.warning("request timed out", error_id=error_id, timeout_s=self._timeout)
                return error_response(
                    call.id,
                    INTERNAL_ERROR,
                    f"internal error: request timed out after {self._timeout:g} s",
                    {"errorId": error_id, "reason": "timeout"},
                )
            self._storage_recovered(sid)
            return result_response(call.id, result)

    def _log_storage(self, sid: str | None, err: HandlerError) -> None:
        """Log a storage failure once per (session, reason, path) until a request of
        that session succeeds again: a full disk fails every request, one line says it."""
        data = err.data or {}
        key = (sid or "", str(data.get("reason")), str(data.get("path")))
        if key in self._storage_logged:
            log.debug("storage unavailable", reason=key[1], path=key[2])
            return
        if len(self._storage_logged) >= 256:
            self._storage_logged.clear()
        self._storage_logged.add(key)
        log.error("storage unavailable", reason=key[1], path=key[2])

    def _storage_recovered(self, sid: str | None) -> None:
        if self._storage_logged:
            gone = {k for k in self._storage_logged if k[0] == (sid or "")}
            if gone:
                self._storage_logged -= gone
                log.info("storage available again")

    # ---- introspection ----------------------------------------------------------

    async def wait_idle(self) -> None:
        """Return once no request is queued or running."""
        while self._active:
            await self._idle.wait()

    def lane_busy(self, key: str) -> bool:
        """A request of the session (by memory key) is queued or running."""
        return key in self._lanes

    @property
    def active(self) -> int:
        """Requests queued or running."""
        return self._active

    def queue_depths(self) -> dict[str, int]:
        """Pending requests per session lane, for `status`."""
        return {k: len(lane.pending) for k, lane in sorted(self._lanes.items()) if lane.pending}


async def _validated(
    model: type[BaseModel], raw: Any, size: int, line: bytes | None = None
) -> BaseModel:
    """``parse_params`` of values read from a JSON line (`line` itself when the call
    was its only request); off the loop when the line is large (module docstring)."""

    def validate() -> BaseModel:
        with json_values(line):
            return parse_params(model, raw)

    if size >= OFF_LOOP_BYTES:
        return await anyio.to_thread.run_sync(validate)
    return validate()


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float) or value is None else repr(value)
