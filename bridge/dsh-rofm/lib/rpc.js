// JSON-RPC 2.0 over NDJSON on a Unix socket: the client side of PROTOCOL.md §1–§2.
// One connection, pipelined; answers matched on id; per-call deadlines; `$/cancelRequest` on a
// deadline or an abort signal. Knows nothing about the host or about memory.

import net from 'node:net'
import { EventEmitter } from 'node:events'

export class RpcError extends Error {
  constructor(code, message, data) {
    super(`${code}: ${message}`)
    this.name = 'RpcError'
    this.code = code
    this.rpcMessage = message
    this.data = data
  }
}

/** The call did not get an answer: deadline, abort, connection lost, not connected, too big. */
export class Unavailable extends Error {
  constructor(reason, message) {
    super(message)
    this.name = 'Unavailable'
    this.reason = reason // 'timeout' | 'aborted' | 'closed' | 'not-connected' | 'too-large'
  }
}

export const CANCELLED = -32800

/** Open a connection to `socketPath`; rejects with the socket error (err.code ENOENT, ...). */
export function connectRpc(socketPath, { timeoutMs = 1000, maxMessageBytes = 8 * 1024 * 1024 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path: socketPath })
    let settled = false
    const timer = setTimeout(() => {
      if (settled) return
      settled = true
      socket.destroy()
      const err = new Error(`connect to ${socketPath} timed out after ${timeoutMs} ms`)
      err.code = 'ETIMEDOUT'
      reject(err)
    }, timeoutMs)
    socket.once('connect', () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(new RpcConnection(socket, { maxMessageBytes }))
    })
    socket.once('error', (err) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      reject(err)
    })
  })
}

export class RpcConnection extends EventEmitter {
  constructor(socket, { maxMessageBytes }) {
    super()
    this.socket = socket
    this.maxMessageBytes = maxMessageBytes
    this.nextId = 1
    this.pending = new Map() // id → { resolve, reject, timer, onLate, method }
    this.abandoned = new Map() // id → onLate (answers that come after their deadline)
    this.closed = false
    this.buffer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => this._onData(chunk))
    socket.on('error', () => {}) // 'close' follows and does the work
    socket.on('close', () => this._onClose())
  }

  _onData(chunk) {
    this.buffer += chunk
    let nl
    while ((nl = this.buffer.indexOf('\n')) !== -1) {
      const line = this.buffer.slice(0, nl)
      this.buffer = this.buffer.slice(nl + 1)
      if (!line.trim()) continue
      let message
      try {
        message = JSON.parse(line)
      } catch {
        continue // not ours to fix; the daemon never sends this
      }
      for (const m of Array.isArray(message) ? message : [message]) this._deliver(m)
    }
  }

  _deliver(message) {
    if (!message || typeof message !== 'object' || message.id === undefined || message.id === null) {
      this.emit('unsolicited', message)
      return
    }
    const waiter = this.pending.get(message.id)
    if (waiter) {
      this.pending.delete(message.id)
      waiter.cleanup()
      if (message.error) {
        const e = message.error
        waiter.reject(new RpcError(e.code, e.message, e.data))
      } else {
        waiter.resolve(message.result)
      }
      return
    }
    const onLate = this.abandoned.get(message.id)
    if (onLate !== undefined) {
      this.abandoned.delete(message.id)
      if (typeof onLate === 'function' && !message.error) {
        try {
          onLate(message.result)
        } catch {
          // a late-answer handler never breaks the reader
        }
      }
    }
  }

  _onClose() {
    if (this.closed) return
    this.closed = true
    const waiters = [...this.pending.values()]
    this.pending.clear()
    this.abandoned.clear()
    for (const w of waiters) {
      w.cleanup()
      w.reject(new Unavailable('closed', `connection to rofmd closed before the answer to ${w.method}`))
    }
    this.emit('close')
  }

  _write(message) {
    const line = JSON.stringify(message) + '\n'
    if (Buffer.byteLength(line, 'utf8') > this.maxMessageBytes) {
      throw new Unavailable('too-large', `${message.method}: request of ${Buffer.byteLength(line)} bytes exceeds maxMessageBytes ${this.maxMessageBytes}`)
    }
    this.socket.write(line)
  }

  /**
   * Send a request; resolves with `result`, rejects with RpcError (an error answer) or
   * Unavailable. `timeoutMs` and `signal` cancel the request on the daemon; `onLate(result)`
   * receives an answer that arrives after that.
   */
  request(method, params, { timeoutMs, signal, onLate } = {}) {
    if (this.closed) {
      return Promise.reject(new Unavailable('closed', `connection to rofmd is closed (${method})`))
    }
    if (signal && signal.aborted) {
      return Promise.reject(new Unavailable('aborted', `${method} aborted by the host`))
    }
    const id = this.nextId++
    const message = { jsonrpc: '2.0', id, method }
    if (params !== undefined) message.params = params
    return new Promise((resolve, reject) => {
      let timer = null
      let onAbort = null
      const cleanup = () => {
        if (timer) clearTimeout(timer)
        if (onAbort && signal) signal.removeEventListener('abort', onAbort)
      }
      const giveUp = (reason, text) => {
        if (!this.pending.has(id)) return
        this.pending.delete(id)
        cleanup()
        this.abandoned.set(id, onLate || true)
        this.notify('$/cancelRequest', { id })
        reject(new Unavailable(reason, text))
      }
      this.pending.set(id, { resolve, reject, cleanup, method })
      if (timeoutMs) {
        timer = setTimeout(() => giveUp('timeout', `${method}: no answer from rofmd within ${timeoutMs} ms`), timeoutMs)
        timer.unref?.()
      }
      if (signal) {
        onAbort = () => giveUp('aborted', `${method} aborted by the host`)
        signal.addEventListener('abort', onAbort, { once: true })
      }
      try {
        this._write(message)
      } catch (err) {
        this.pending.delete(id)
        cleanup()
        reject(err instanceof Unavailable ? err : new Unavailable('closed', err.message))
      }
    })
  }

  /** A notification: no answer, ever. Never throws. */
  notify(method, params) {
    if (this.closed) return false
    const message = { jsonrpc: '2.0', method }
    if (params !== undefined) message.params = params
    try {
      this._write(message)
      return true
    } catch {
      return false
    }
  }

  close() {
    if (!this.closed) this.socket.destroy()
  }
}
