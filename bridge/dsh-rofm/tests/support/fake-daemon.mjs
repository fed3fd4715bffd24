// A scripted stand-in for rofmd on a Unix socket, for protocol edges the real daemon cannot be
// made to show on demand (a hung request, a late answer, a listed session/event, a dropped
// connection at a chosen moment). Every received message is recorded; tests await them.
import net from 'node:net'
import fs from 'node:fs'
import { EventEmitter } from 'node:events'

export const HOLD = Symbol('hold') // a handler result: never answer (the test may answer later)
export const DROP = Symbol('drop') // a handler result: close the connection without answering

export function initResult(over = {}) {
  return {
    protocolVersion: 1,
    server: { name: 'fake-rofmd', version: '0' },
    enabled: true,
    tools: [{ name: 'memory_judge', description: 'score', parameters: { type: 'object', properties: {} } }],
    sections: [
      { name: 'dsh-rofm:recall', order: 100 },
      { name: 'dsh-rofm:memory-tasks', order: 101 },
    ],
    listeners: ['agent/inbox/inserted', 'agent/pre-step', 'agent/disposed'],
    ...over,
  }
}

export class FakeDaemon extends EventEmitter {
  constructor(socketPath, handlers = {}) {
    super()
    this.socketPath = socketPath
    this.handlers = handlers
    this.received = []
    this.conns = new Set()
    this.connections = 0
  }

  start() {
    fs.rmSync(this.socketPath, { force: true })
    this.server = net.createServer((sock) => this._serve(sock))
    return new Promise((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.socketPath, () => resolve(this))
    })
  }

  _serve(sock) {
    this.connections += 1
    this.conns.add(sock)
    sock.on('close', () => this.conns.delete(sock))
    sock.on('error', () => {})
    let buf = ''
    sock.setEncoding('utf8')
    sock.on('data', async (chunk) => {
      buf += chunk
      let nl
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        const msg = JSON.parse(line)
        msg.conn = sock
        this.received.push(msg)
        this.emit('message', msg)
        if (msg.id === undefined) continue
        const handler = this.handlers[msg.method] ?? defaultHandler
        const result = await handler(msg.params, msg)
        if (result === HOLD) continue
        if (result === DROP) {
          sock.destroy()
          return
        }
        this.answer(msg, result)
      }
    })
  }

  /** Answer `msg` now (a held request, or a late answer). `{ error }` sends an error. */
  answer(msg, result) {
    if (msg.conn.destroyed) return
    const out = result && result.error ? { jsonrpc: '2.0', id: msg.id, error: result.error } : { jsonrpc: '2.0', id: msg.id, result }
    msg.conn.write(JSON.stringify(out) + '\n')
  }

  /** The first received message (past or future) that satisfies `pred`; fails after `ms`. */
  waitFor(pred, ms = 5000) {
    const have = this.received.find(pred)
    if (have) return Promise.resolve(have)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('message', on)
        reject(new Error(`the fake daemon never received the expected message (${pred})`))
      }, ms)
      const on = (m) => {
        if (pred(m)) {
          clearTimeout(timer)
          this.off('message', on)
          resolve(m)
        }
      }
      this.on('message', on)
    })
  }

  methods() {
    return this.received.map((m) => m.method)
  }

  async stop() {
    for (const c of this.conns) c.destroy()
    await new Promise((resolve) => this.server.close(() => resolve()))
  }
}

function defaultHandler(params, msg) {
  switch (msg.method) {
    case 'initialize':
      return initResult()
    case 'agent/inbox/inserted':
      return { recalled: [], sections: [], startsRequestSeries: false, warnings: [] }
    case 'agent/pre-step':
      return { compaction: null, sections: [], startsRequestSeries: false, warnings: [] }
    case 'prompt/sections':
      return { sections: [], startsRequestSeries: false }
    case 'archive/commit':
      return { ok: true }
    case 'archive/abort':
      return { ok: true, rolledBack: [] }
    case 'tools/call':
      return { value: {}, content: [{ type: 'text', text: 'ok' }], isError: false, sections: [], startsRequestSeries: false }
    default:
      return { error: { code: -32601, message: `method not found: ${msg.method}` } }
  }
}
