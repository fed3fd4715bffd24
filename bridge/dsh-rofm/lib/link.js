// The bridge's link to the daemon: connect, `initialize`, reconnect with backoff, optional
// autostart. One connection serves every session of the host. Timers are unref'd: the link
// never keeps a host process alive.

import fs from 'node:fs'
import { spawn } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { connectRpc, Unavailable } from './rpc.js'

export const PROTOCOL_VERSION = 1
const MISSING = new Set(['ENOENT', 'ECONNREFUSED'])

export class DaemonLink extends EventEmitter {
  /**
   * `initParams()` gives the `initialize` params (capabilities are the host's, read at each
   * connect). Events: 'ready' (initialize result, on every (re)connection), 'down' (reason).
   */
  constructor(config, { initParams, log }) {
    super()
    this.config = config
    this.initParams = initParams
    this.log = log
    this.rpc = null
    this.state = 'idle' // idle | connecting | ready | waiting | closed
    this.init = null
    this.delay = config.reconnect.initialDelayMs
    this.timer = null
    this.outageWarned = false
    this.everReady = false
    this.attempts = 0
    this.autostarted = null // the ChildProcess launched by autostart, if any
    this.lastAutostartAt = -Infinity
    this.autostartUntil = 0
    this._readyWaiters = []
  }

  get ready() {
    return this.state === 'ready'
  }

  start() {
    if (this.state === 'idle') this._attempt()
  }

  /** Resolves on the next (or current) ready state; for tools and tests. */
  whenReady() {
    if (this.state === 'ready') return Promise.resolve(this.init)
    return new Promise((resolve) => this._readyWaiters.push(resolve))
  }

  async _attempt() {
    if (this.state === 'closed') return
    this.state = 'connecting'
    this.attempts += 1
    const { socketPath, timeouts, maxMessageBytes } = this.config
    let rpc
    try {
      rpc = await connectRpc(socketPath, { timeoutMs: timeouts.connectMs, maxMessageBytes })
    } catch (err) {
      this._failed(err)
      return
    }
    if (this.state === 'closed') {
      rpc.close()
      return
    }
    let init
    try {
      init = await rpc.request('initialize', this.initParams(), { timeoutMs: timeouts.initializeMs })
    } catch (err) {
      rpc.close()
      this._failed(err)
      return
    }
    if (this.state === 'closed') {
      rpc.close()
      return
    }
    this.rpc = rpc
    this.init = init
    this.state = 'ready'
    this.delay = this.config.reconnect.initialDelayMs
    this.autostartUntil = 0
    rpc.once('close', () => this._lost())
    if (this.outageWarned || this.everReady) {
      this.log.info(`rofmd reconnected at ${socketPath} (server ${init?.server?.version ?? '?'})`)
    } else {
      this.log.info(`connected to rofmd ${init?.server?.version ?? '?'} at ${socketPath}`)
    }
    this.everReady = true
    this.outageWarned = false
    this.emit('ready', init)
    const waiters = this._readyWaiters.splice(0)
    for (const resolve of waiters) resolve(init)
  }

  _failed(err) {
    if (this.state === 'closed') return
    const code = err && err.code
    if (this.config.autostart && MISSING.has(code)) this._autostart()
    this.warnOutage(describe(err))
    this._schedule()
    this.emit('attempt-failed', err)
  }

  _lost() {
    if (this.state === 'closed') return
    this.rpc = null
    this.state = 'waiting'
    this.emit('down', 'connection closed')
    this.warnOutage('the connection closed')
    this.delay = this.config.reconnect.initialDelayMs
    this._schedule()
  }

  _schedule() {
    if (this.state === 'closed') return
    this.state = 'waiting'
    // right after an autostart, poll quickly until the new daemon binds its socket
    const fast = Date.now() < this.autostartUntil
    const wait = fast ? 100 : this.delay
    if (!fast) {
      const { factor, maxDelayMs } = this.config.reconnect
      this.delay = Math.min(maxDelayMs, Math.round(this.delay * factor))
    }
    clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      this.timer = null
      this._attempt()
    }, wait)
    this.timer.unref?.()
  }

  /** One warning per outage (memory is paused, the host goes on). */
  warnOutage(reason) {
    if (this.outageWarned) return
    this.outageWarned = true
    this.log.warn(
      `rofmd unavailable at ${this.config.socketPath} (${reason}): memory recall and archiving are paused, the conversation continues unchanged; reconnecting in the background`,
    )
  }

  _autostart() {
    const now = Date.now()
    if (now - this.lastAutostartAt < this.config.autostartCooldownMs) return
    this.lastAutostartAt = now
    const { rofmdCommand, autostartArgs, socketPath, autostartLogFile } = this.config
    const args = ['serve', '--socket', socketPath, ...autostartArgs]
    let out = 'ignore'
    let fd = null
    try {
      if (autostartLogFile) out = fd = fs.openSync(autostartLogFile, 'a')
      const child = spawn(rofmdCommand, args, { detached: true, stdio: ['ignore', out, out] })
      child.once('error', (err) => this.log.warn(`autostart: cannot run ${rofmdCommand}: ${err.message}`))
      child.once('exit', (code, signal) => {
        if (this.autostarted === child) this.autostarted = null
        if (code) this.log.warn(`autostart: rofmd serve exited with ${code}${signal ? ` (${signal})` : ''}`)
      })
      child.unref()
      this.autostarted = child
      this.autostartUntil = now + this.config.autostartWaitMs
      this.log.info(`autostart: launched ${rofmdCommand} ${args.join(' ')} (pid ${child.pid})`)
      this.emit('autostarted', child)
    } catch (err) {
      this.log.warn(`autostart: cannot run ${rofmdCommand}: ${err.message}`)
    } finally {
      if (fd !== null) fs.closeSync(fd)
    }
  }

  /** A request over the current connection; Unavailable at once when there is none. */
  call(method, params, options = {}) {
    if (this.state !== 'ready' || !this.rpc) {
      return Promise.reject(new Unavailable('not-connected', `rofmd is not connected (${method})`))
    }
    return this.rpc.request(method, params, options)
  }

  notify(method, params) {
    if (this.state !== 'ready' || !this.rpc) return false
    return this.rpc.notify(method, params)
  }

  close() {
    this.state = 'closed'
    clearTimeout(this.timer)
    this.timer = null
    if (this.rpc) this.rpc.close()
    this.rpc = null
    this._readyWaiters.splice(0)
  }
}

function describe(err) {
  if (!err) return 'unknown error'
  if (err.code === 'ENOENT') return 'no socket: is `rofmd serve` running?'
  if (err.code === 'ECONNREFUSED') return 'nobody listens on the socket'
  if (err.code === 'EACCES') return 'permission denied on the socket'
  if (err.name === 'RpcError') return `initialize refused: ${err.message}`
  return err.message || String(err)
}
