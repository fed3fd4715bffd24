// Settings: the socket path rule is the daemon's own.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { resolveConfig, defaultSocketPath, DEFAULTS } from '../lib/config.js'
import { ROFMD_BIN, tempBase, removeBase } from './support/daemon.mjs'

function daemonDefault(env) {
  const python = path.join(path.dirname(ROFMD_BIN), 'python')
  return execFileSync(python, ['-c', 'from rofmd.server.settings import DaemonSettings; print(DaemonSettings().socket_path)'], {
    env: { PATH: process.env.PATH, HOME: os.homedir(), ...env },
    encoding: 'utf8',
  }).trim()
}

describe('config', () => {
  it('the default socket path is the one rofmd serve uses', () => {
    for (const env of [{ XDG_RUNTIME_DIR: '/run/user/4242' }, {}, { ROFMD_SOCKET_PATH: '/srv/r/rofmd.sock' }]) {
      const { config } = resolveConfig({ env })
      assert.equal(config.socketPath, daemonDefault(env), JSON.stringify(env))
    }
    assert.equal(defaultSocketPath({}, 1000), '/tmp/rofmd-1000/rofmd.sock')
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/7' }), '/run/user/7/rofmd/rofmd.sock')
  })

  it('layers: defaults ← config.json ← config.local.json ← host row config', () => {
    const base = tempBase('rofmd-c-')
    try {
      fs.writeFileSync(path.join(base, 'config.json'), JSON.stringify({ timeouts: { inboxMs: 111, toolMs: 222 }, autostart: true }))
      fs.writeFileSync(path.join(base, 'config.local.json'), JSON.stringify({ timeouts: { toolMs: 333 }, socketPath: '~/x.sock' }))
      const { config, warnings } = resolveConfig({ pluginDir: base, hostConfig: { timeouts: { preStepMs: 444 }, __proto__: { polluted: 1 } }, env: {} })
      assert.deepEqual(warnings, [])
      assert.equal(config.timeouts.inboxMs, 111)
      assert.equal(config.timeouts.toolMs, 333)
      assert.equal(config.timeouts.preStepMs, 444)
      assert.equal(config.timeouts.reportMs, DEFAULTS.timeouts.reportMs)
      assert.equal(config.autostart, true)
      assert.equal(config.socketPath, path.join(os.homedir(), 'x.sock'))
      assert.equal({}.polluted, undefined)
      // a broken file is reported and skipped, never fatal
      fs.writeFileSync(path.join(base, 'config.local.json'), '{ nope')
      const again = resolveConfig({ pluginDir: base, env: {} })
      assert.equal(again.warnings.length, 1)
      assert.equal(again.config.timeouts.toolMs, 222)
    } finally {
      removeBase(base)
    }
  })

  it('bad values fall back to the defaults', () => {
    const { config } = resolveConfig({ hostConfig: { timeouts: { inboxMs: -1, toolMs: 'x' }, reconnect: { maxDelayMs: 0 }, autostartArgs: 'no' }, env: {} })
    assert.equal(config.timeouts.inboxMs, DEFAULTS.timeouts.inboxMs)
    assert.equal(config.timeouts.toolMs, DEFAULTS.timeouts.toolMs)
    assert.equal(config.reconnect.maxDelayMs, DEFAULTS.reconnect.maxDelayMs)
    assert.deepEqual(config.autostartArgs, [])
    assert.equal(Object.isFrozen(DEFAULTS.timeouts), true)
  })
})
