// autostart: the socket is missing, so the bridge launches `rofmd serve` itself.
import { describe, it, after } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'

import { apply } from '../index.js'
import { MockHost } from './support/mock-host.mjs'
import { ROFMD_BIN, tempBase, removeBase, daemonPaths, track, within } from './support/daemon.mjs'

describe('autostart', { timeout: 60000 }, () => {
  const base = tempBase('rofmd-a-')
  const p = daemonPaths(base)
  let bridge
  let child

  after(async () => {
    bridge?.dispose()
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
    removeBase(base)
  })

  it('launches rofmd serve when the socket is missing, then works normally', { timeout: 30000 }, async () => {
    const host = new MockHost()
    const launched = []
    bridge = apply(host.ctx, {
      socketPath: p.socket,
      autostart: true,
      rofmdCommand: ROFMD_BIN,
      autostartArgs: ['--memory-root', p.memoryRoot, '--config-dir', p.configDir, '--log-format', 'json'],
      autostartLogFile: path.join(base, 'autostart.log'),
    })
    bridge.link.on('autostarted', (c) => {
      launched.push(c)
      track(c)
      c.ref() // the test owns it now: wait for it to exit at the end
      child = c
    })
    // the link's timers and the detached daemon are unref'd (they never keep a host alive):
    // hold the test's event loop open while waiting
    const keepAlive = setInterval(() => {}, 1000)
    await within(bridge.link.whenReady(), 10000, 'the bridge to connect').finally(() => clearInterval(keepAlive))
    assert.equal(launched.length, 1, 'launched once, on the first failed attempt')
    assert.equal(bridge.link.autostarted, child)
    assert.deepEqual(child.spawnargs.slice(1, 4), ['serve', '--socket', p.socket])
    assert.equal(host.sections.size, 3)
    const s = host.session('auto')
    await s.userSays('hello')
    await s.modelStep({ text: 'hi' })
    assert.deepEqual(host.failures, [])
    assert.equal(host.warnings.length, 1, 'the one warning of the initial outage')
  })
})
