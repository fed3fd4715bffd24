"""The process: sockets, the root task group, signals, reload, systemd, shutdown.

Shutdown order matters for "nothing torn": stop accepting, stop reading new
requests, let queued and running requests finish until the deadline, then
cancel what is left. A request inside its commit guard is shielded, and store
writes run in worker threads that are never abandoned, so a transaction is
either completed or (on its own error) rolled back, never left half-written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import SocketListener, SocketStream, TaskGroup

from engine import json_spans
from engine.compiled import use_compiled
from engine.relevance.kernels import state as kernels_state
from engine.store import dir_listing
from handlers.app import App, Paths
from handlers.config_state import ConfigState
from handlers.context import ConnectionState
from handlers.system import metrics_exposition
from rofmd.server import sdnotify
from rofmd.server.connection import Connection
from rofmd.server.dispatcher import Dispatcher
from rofmd.server.eviction import SessionEviction
from rofmd.server.memory_release import MemoryRelease
from rofmd.server.metrics_http import metrics_listeners, serve_metrics
from rofmd.server.settings import DaemonSettings
from rofmd.server.sockets import (
    InstanceLock,
    StartupError,
    acquire_instance_lock,
    bind_unix_socket,
    clear_stale_socket,
    ensure_private_dir,
    peer_allowed,
    peer_credentials,
)
from rofmd.server.tailer import SessionLogTailer
from rofmd.version import version

log = structlog.get_logger("rofmd")
CONFIG_FILES = frozenset({"config.json", "config.local.json"})
COMPAT_POLL_S = 5.0
"""How often the DSH profile's files are checked for a change (a few stat calls, in a
worker thread); a change re-detects the QQ plugins (`handlers.compat`)."""


def wall_clock_ms() -> int:
    """The daemon's clock; handlers receive time as an input (`RequestContext.now_ms`)."""
    return time.time_ns() // 1_000_000


class Daemon:
    """One running rofmd."""

    def __init__(
        self,
        settings: DaemonSettings,
        environ: Mapping[str, str] | None = None,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.settings = settings
        self.environ = dict(os.environ if environ is None else environ)
        self.clock_ms = clock_ms
        self.started_monotonic = time.monotonic()
        self.notifier = sdnotify.Notifier(self.environ)
        self.connections: dict[int, Connection] = {}
        self._next_conn = 0
        self._refused = 0
        self._lock: InstanceLock | None = None
        self._bound_path: Path | None = None
        self._listeners: list[SocketListener] = []
        self._metrics_path: Path | None = None
        self._shutdown: anyio.Event | None = None
        self.dispatcher: Dispatcher | None = None
        self.config = ConfigState.start(settings.config_dir, self.environ)
        use_compiled(settings.kernels)
        self.app = App(
            self.config,
            Paths(
                memory_root_override=settings.memory_root,
                state_dir=settings.state_dir,
                home=Path(self.environ.get("HOME") or Path.home()),
            ),
            self,
            debug_methods=settings.debug_methods,
            passive_scope=settings.passive_scope,
            dsh_profile=settings.dsh_profile_dir,
        )
        # unloaded sessions (dispose, eviction) give their memory back to the OS
        self.memory = MemoryRelease()
        self.app.sessions.on_release = self.memory.request
        self.app.sessions.on_loaded = self.memory.request_trim  # a load's peak goes back
        self.eviction: SessionEviction | None = None
        self.tailer: SessionLogTailer | None = None

    # ---- DaemonInfo -------------------------------------------------------------

    def status_snapshot(self) -> dict[str, Any]:
        """Process facts for `status` (PROTOCOL.md §4)."""
        d = self.dispatcher
        return {
            "version": version(),
            "pid": os.getpid(),
            "uptimeSeconds": round(time.monotonic() - self.started_monotonic, 3),
            "socket": str(self.settings.socket_path),
            "connections": len(self.connections),
            "clients": self._clients(),
            "refusedPeers": self._refused,
            "counters": dict(d.counters) if d else {},
            "inFlight": d.active if d else 0,
            "queueDepths": d.queue_depths() if d else {},
            "memory": self.memory.status(),
            "tailer": self._tailer_status(),
            "kernels": kernels_state(self.settings.kernels),
            "compiled": self._compiled(),
        }

    def _compiled(self) -> dict[str, str]:
        """Each compiled module's state (`engine.compiled`); ``kernels`` above is the
        recall loops' alone, as it always was."""
        wanted = self.settings.kernels
        return {
            "recallLoops": kernels_state(wanted),
            "surfaceLookup": json_spans.state(wanted),
            "storeListing": dir_listing.state(wanted),
        }

    def _tailer_status(self) -> dict[str, Any]:
        if self.tailer is not None:
            return self.tailer.status()
        why = "passive_scope is off" if self.settings.passive_scope == "off" else "not running"
        if not self.app.enabled:
            why = "memory disabled"
        return {"enabled": False, "dir": str(self.settings.sessions_dir), "why": why, "files": []}

    def _clients(self) -> list[dict[str, Any]]:
        """The initialized connections: who they say they are (`initialize`'s `host`)
        and what they can do, so an operator sees that a host's bridge is connected."""
        out: list[dict[str, Any]] = []
        for conn_id, conn in sorted(self.connections.items()):
            st = conn.state
            if st.initialized:
                out.append(
                    {
                        "connection": conn_id,
                        "host": dict(st.host),
                        "pid": st.peer_pid,
                        "capabilities": sorted(k for k, v in st.capabilities.items() if v),
                    }
                )
        return out

    # ---- sockets ----------------------------------------------------------------

    def _open_sockets(self) -> list[socket.socket]:
        inherited = sdnotify.listen_fds(self.environ, os.getpid())
        if inherited:
            sdnotify.unset_listen_env(os.environ)
            log.info("using sockets handed over by systemd", count=len(inherited))
            return inherited
        launchd = sdnotify.launchd_sockets("Listeners")
        if launchd:
            log.info("using sockets handed over by launchd", count=len(launchd))
            return launchd
        path = self.settings.socket_path
        ensure_private_dir(path.parent)
        self._lock = acquire_instance_lock(path)
        clear_stale_socket(path)
        sock = bind_unix_socket(path)
        self._bound_path = path
        return [sock]

    def _cleanup(self) -> None:
        for path in (self._bound_path, self._metrics_path):
            if path is not None:
                with contextlib.suppress(OSError):
                    path.unlink()
        if self._lock is not None:
            self._lock.release()

    # ---- serving ----------------------------------------------------------------

    async def _serve_listener(self, listener: SocketListener, tg: TaskGroup) -> None:
        own_uid = os.getuid()
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:
                log.warning("accept failed", error=str(exc))
                await anyio.sleep(0.05)
                continue
            raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            try:
                pid, uid = peer_credentials(raw)
            except OSError:
                pid, uid = None, None
            if not peer_allowed(uid, own_uid):
                self._refused += 1
                log.warning("peer refused: foreign uid", peer_uid=uid, peer_pid=pid)
                await stream.aclose()
                continue
            if len(self.connections) >= self.settings.max_connections:
                log.warning("connection refused: too many connections")
                await stream.aclose()
                continue
            tg.start_soon(self._handle, stream, pid, uid)

    async def _handle(self, stream: SocketStream, pid: int | None, uid: int | None) -> None:
        assert self.dispatcher is not None
        self._next_conn += 1
        state = ConnectionState(conn_id=self._next_conn, peer_pid=pid, peer_uid=uid)
        conn = Connection(
            stream, state, self.dispatcher, max_message_bytes=self.settings.max_message_bytes
        )
        self.connections[state.conn_id] = conn
        try:
            with structlog.contextvars.bound_contextvars(conn=state.conn_id):
                await conn.serve()
        finally:
            del self.connections[state.conn_id]
            with contextlib.suppress(Exception):
                await stream.aclose()

    async def _signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
            async for signum in sigs:
                if signum == signal.SIGHUP:
                    await self.reload("SIGHUP")
                else:
                    log.info("shutdown requested", signal=signal.Signals(signum).name)
                    self.request_shutdown()
                    return

    async def reload(self, reason: str) -> None:
        """Reload the memory config, telling systemd (Type=notify-reload) while it runs."""
        self.notifier.reloading(time.monotonic_ns() // 1000)
        result = await self.app.reload_config(self.clock_ms())
        if result.ok:
            log.info(
                "config reloaded",
                reason=reason,
                generation=result.generation,
                changed=result.changed,
                warnings=list(result.warnings),
            )
        else:
            log.error(
                "config reload failed; keeping the last good config",
                reason=reason,
                errors=list(result.errors),
            )
        self.notifier.ready(self._status_line())

    async def _refresh_compat(self) -> None:
        """Re-detect the QQ plugins when the profile's files changed (§3.2.1; a reload
        re-detects too, `App.reload_config`); the autopatch self-heals then."""
        if self.app.enabled:
            await self.app.compat.refresh(
                self.config.config, self.app.memory_root(), self.clock_ms()
            )

    async def _watch_compat(self) -> None:
        while True:
            await anyio.sleep(COMPAT_POLL_S)
            await self._refresh_compat()

    async def _watch_config(self, done: anyio.Event) -> None:
        try:
            await self._watch_config_files()
        finally:
            done.set()

    async def _watch_config_files(self) -> None:
        from watchfiles import awatch

        directory = self.settings.config_dir
        try:
            # create it, so a config file written later is picked up without a restart
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning(
                "config directory unusable; not watching", dir=str(directory), error=str(exc)
            )
            return

        def interesting(_change: object, path: str) -> bool:
            return Path(path).name in CONFIG_FILES

        async for _changes in awatch(
            directory, watch_filter=interesting, debounce=200, step=50, stop_event=self._shutdown
        ):
            await self.reload("file change")

    async def _run_tailer(self, tailer: SessionLogTailer, done: anyio.Event) -> None:
        try:
            await tailer.run()
        finally:
            done.set()

    async def _watchdog(self) -> None:
        interval = sdnotify.watchdog_interval(self.environ, os.getpid())
        if interval is None:
            return
        while True:
            self.notifier.watchdog()
            await anyio.sleep(interval)

    def _status_line(self) -> str:
        return (
            f"serving on {self.settings.socket_path}; config generation "
            f"{self.config.generation}; {len(self.connections)} connections"
        )

    async def run(self, on_ready: Callable[[], Coroutine[Any, Any, None]] | None = None) -> int:
        """Serve until SIGTERM/SIGINT; return the exit code.

        `on_ready` runs as a task once the daemon serves (`serve --demo` plays the demo
        against it); shutdown cancels it like any other task.
        """
        _route_loop_errors()
        shutdown = self._shutdown = anyio.Event()
        watcher_done = anyio.Event()
        if not self.settings.watch_config:
            watcher_done.set()
        socks = self._open_sockets()
        try:
            metrics_socks = metrics_listeners(
                self.settings.metrics_socket, self.settings.metrics_port
            )
            if self.settings.metrics_socket is not None:
                self._metrics_path = self.settings.metrics_socket
            self._listeners = [await SocketListener.from_socket(s) for s in socks]
            await self._refresh_compat()
            async with anyio.create_task_group() as root:
                async with anyio.create_task_group() as work:
                    self.dispatcher = Dispatcher(
                        self.app,
                        work,
                        max_pending_per_session=self.settings.max_pending_per_session,
                        request_timeout=self.settings.request_timeout,
                        clock_ms=self.clock_ms,
                    )
                    self.eviction = SessionEviction(
                        self.app.sessions,
                        self.dispatcher.lane_busy,
                        self.clock_ms,
                        idle_seconds=self.settings.session_idle_seconds,
                        max_loaded=self.settings.max_loaded_sessions,
                    )
                    self.dispatcher.on_lane_idle = self.eviction.lane_idle
                    tailer_done = anyio.Event()
                    if self.app.enabled and self.settings.passive_scope != "off":
                        self.tailer = SessionLogTailer(
                            self.settings.sessions_dir,
                            self.app,
                            self.dispatcher,
                            clock_ms=self.clock_ms,
                            request_timeout=self.settings.request_timeout,
                        )
                        root.start_soon(self._run_tailer, self.tailer, tailer_done)
                    else:
                        tailer_done.set()
                    async with anyio.create_task_group() as conns:
                        for listener in self._listeners:
                            conns.start_soon(self._serve_listener, listener, conns)
                        root.start_soon(self._signals, root)
                        if self.settings.watch_config:
                            root.start_soon(self._watch_config, watcher_done)
                        root.start_soon(self._watchdog)
                        if metrics_socks:
                            root.start_soon(
                                serve_metrics, metrics_socks, lambda: metrics_exposition(self.app)
                            )
                        root.start_soon(self.eviction.run)
                        root.start_soon(self.memory.run)
                        root.start_soon(self._watch_compat)
                        log.info(
                            "rofmd serving",
                            socket=str(self.settings.socket_path),
                            memory_root=str(self.app.memory_root()),
                            config_dir=str(self.settings.config_dir),
                            enabled=self.app.enabled,
                            version=version(),
                        )
                        self.notifier.ready(self._status_line())
                        if on_ready is not None:
                            root.start_soon(on_ready)
                        await shutdown.wait()
                        self.notifier.stopping()
                        if self.tailer is not None:
                            # no new archives from the logs; its read steps end first
                            self.tailer.stop()
                            with anyio.move_on_after(self.settings.shutdown_deadline):
                                await tailer_done.wait()
                        await self._drain(conns)
                    await self.app.shutdown(self.settings.shutdown_deadline)
                    work.cancel_scope.cancel()
                # The watcher polls in a worker thread and returns within one step once
                # the shutdown event is set; waiting for it (rather than cancelling it)
                # leaves no thread to finish after the loop is gone.
                with anyio.move_on_after(2):
                    await watcher_done.wait()
                root.cancel_scope.cancel()
        finally:
            self._cleanup()
        log.info("rofmd stopped")
        return 0

    async def _drain(self, conns: TaskGroup) -> None:
        for listener in self._listeners:
            with contextlib.suppress(Exception):
                await listener.aclose()
        for conn in list(self.connections.values()):
            if conn.read_scope is not None:
                conn.read_scope.cancel()
        assert self.dispatcher is not None
        with anyio.move_on_after(self.settings.shutdown_deadline) as scope:
            await self.dispatcher.wait_idle()
        if scope.cancelled_caught:
            log.warning(
                "shutdown deadline passed; cancelling what is left",
                in_flight=self.dispatcher.active,
            )
        conns.cancel_scope.cancel()

    def request_shutdown(self) -> None:
        """Stop serving (signals, tests and embedding callers)."""
        if self._shutdown is not None:
            self._shutdown.set()


def _route_loop_errors() -> None:
    """Send the event loop's own error reports through structlog (one JSON line, not a
    bare traceback on stderr), and drop one known-benign race.

    The race: anyio's raw Unix socket stream waits for readability with
    `loop.add_reader(sock, future.set_result, None)`; when a read is cancelled (we
    cancel the readers at shutdown) and data arrives in the same loop iteration, the
    reader fires on the already-cancelled future before its done-callback removed it,
    and asyncio reports `InvalidStateError` from `Future.set_result`. Nothing is lost
    or half-done: the read was being abandoned anyway.
    """
    loop = asyncio.get_running_loop()
    loop_log = structlog.get_logger("rofmd.loop")

    def handler(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, asyncio.InvalidStateError) and "set_result" in repr(
            context.get("handle")
        ):
            loop_log.debug(
                "ignored a cancelled socket wait woken late", handle=repr(context.get("handle"))
            )
            return
        loop_log.error(
            "event loop error",
            message=context.get("message"),
            exc_info=exc if isinstance(exc, BaseException) else None,
        )

    loop.set_exception_handler(handler)


def serve(
    settings: DaemonSettings,
    on_ready: Callable[[DaemonSettings], Coroutine[Any, Any, None]] | None = None,
) -> int:
    """Run a daemon to completion; StartupError becomes a one-line message, exit 1."""
    try:
        daemon = Daemon(settings)
        if on_ready is None:
            return anyio.run(daemon.run)
        hook = on_ready
        return anyio.run(lambda: daemon.run(lambda: hook(settings)))
    except StartupError as exc:
        log.error("rofmd cannot start", reason=str(exc))
        return 1
