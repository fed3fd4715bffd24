// A real `rofmd serve`, the mock DSH host and the bridge applied to it, connected: the
// setup of every test that drives the bridge against a real daemon.
import { apply } from '../../index.js'
import { MockHost } from './mock-host.mjs'
import { removeBase, startDaemon, within } from './daemon.mjs'

/** Start a daemon and a host whose bridge (`options`: `apply`'s, beside `socketPath`) has connected. */
export async function startBridged(options = {}) {
  const d = await startDaemon()
  const host = new MockHost()
  const bridge = apply(host.ctx, { socketPath: d.socket, ...options })
  await within(bridge.link.whenReady(), 10000, 'the bridge to connect')
  return { d, host, bridge }
}

/** Undo `startBridged` (either part may be missing when the start failed): the bridge
 * first, then the daemon with `signal`, then its directory. */
export async function stopBridged({ d, bridge }, signal = 'SIGTERM') {
  bridge?.dispose()
  await d?.stop(signal)
  if (d) removeBase(d.base)
}
