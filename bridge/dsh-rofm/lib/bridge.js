// The bridge proper: forwards host hooks to the daemon as PROTOCOL.md says and applies what the
// daemon answers. It talks to the host only through the adapter (`host.js`) and to the daemon
// only through the link (`link.js`). Rule one: never break the host. A daemon that is down,
// slow or erroring means "no memory for this step", with one warning, and the context untouched.

import { DaemonLink, PROTOCOL_VERSION } from './link.js'
import { RpcError, Unavailable, CANCELLED } from './rpc.js'
import { HOOKS } from './host.js'

const UNAVAILABLE_TEXT =
  '记忆服务暂不可用（rofmd 未连接），本次无法使用记忆工具，请直接继续对话。 / The memory daemon (rofmd) is not available right now; continue without this tool.'
const MAX_QUEUED_REPORTS = 256

export class Bridge {
  constructor(host, config) {
    this.host = host
    this.config = config
    this.log = host.log
    this.sessions = new Map() // id → { info, sections: Map<name, text>, newSeries, lastSurface }
    this.reg = { sections: new Map(), tools: new Map(), listeners: new Map() } // name → { key, dispose }
    this.reports = [] // undelivered archive/commit, archive/abort: [{ method, params }]
    this.flushing = null
    this.disabledLogged = false
    this.disposed = false
    this.link = new DaemonLink(config, {
      log: this.log,
      initParams: () => ({
        protocolVersion: PROTOCOL_VERSION,
        host: this.host.info(),
        capabilities: this.host.capabilities(),
      }),
    })
    this.link.on('ready', (init) => this._onReady(init))
  }

  start() {
    this.link.start()
    return this
  }

  dispose() {
    if (this.disposed) return
    this.disposed = true
    this.link.close()
    for (const kind of Object.values(this.reg)) {
      for (const { dispose } of kind.values()) safe(dispose)
      kind.clear()
    }
    this.host.disposeAll()
  }

  // ---- registration: exactly what `initialize` lists ------------------------------------

  _onReady(init) {
    if (this.disposed) return
    if (!init || init.enabled === false) {
      if (!this.disabledLogged) this.log.info('rofmd reports memory disabled (enabled:false): nothing registered')
      this.disabledLogged = true
      this._reconcile('sections', [], () => null)
      this._reconcile('tools', [], () => null)
      this._reconcile('listeners', [], () => null)
      return
    }
    const sections = Array.isArray(init.sections) ? init.sections.filter((s) => s && typeof s.name === 'string') : []
    const tools = Array.isArray(init.tools) ? init.tools.filter((t) => t && typeof t.name === 'string') : []
    const listeners = (Array.isArray(init.listeners) ? init.listeners : []).filter((n) => HOOKS.includes(n))
    this._reconcile(
      'sections',
      sections.map((s) => ({ name: s.name, key: String(s.order ?? 0), item: s })),
      (s) => this.host.registerSection(s.name, Number(s.order ?? 0), (sid) => this._sectionText(sid, s.name)),
    )
    this._reconcile(
      'tools',
      tools.map((t) => ({ name: t.name, key: JSON.stringify(t), item: t })),
      (t) => this.host.registerTool(t, (call) => this._tool(t.name, call)),
    )
    this._reconcile(
      'listeners',
      listeners.map((n) => ({ name: n, key: n, item: n })),
      (n) => this.host.on(n, this._handlers()[n]),
    )
    this._afterReconnect()
  }

  _reconcile(kind, wanted, register) {
    const table = this.reg[kind]
    const names = new Set(wanted.map((w) => w.name))
    for (const [name, entry] of table) {
      if (!names.has(name)) {
        safe(entry.dispose)
        table.delete(name)
      }
    }
    for (const w of wanted) {
      const have = table.get(w.name)
      if (have && have.key === w.key) continue
      if (have) safe(have.dispose)
      try {
        table.set(w.name, { key: w.key, dispose: register(w.item) || (() => {}) })
      } catch (err) {
        this.log.warn(`cannot register ${kind.slice(0, -1)} ${w.name}: ${err?.message ?? err}`)
        table.delete(w.name)
      }
    }
  }

  _handlers() {
    return {
      'agent/inbox/inserted': (p) => this.inbox(p),
      'agent/pre-step': (p) => this.preStep(p),
      'agent/disposed': (p) => this.disposedSession(p),
      'session/event': (p) => this.sessionEvent(p),
    }
  }

  /** After every (re)connection: deliver queued reports (hooks wait for that, so a report
   * precedes the session's next request), then refresh the known sessions' sections. */
  _afterReconnect() {
    this.flushing = this._flushReports().finally(() => {
      this.flushing = null
    })
    this.flushing
      .then(async () => {
        for (const s of [...this.sessions.values()]) {
          if (!this.link.ready) return
          try {
            const answer = await this.link.call('prompt/sections', { session: s.info }, { timeoutMs: this.config.timeouts.sectionsMs })
            this._absorb(s, answer)
          } catch (err) {
            this._degraded('prompt/sections', err)
          }
        }
      })
      .catch(() => {})
  }

  // ---- per-session cache ----------------------------------------------------------------

  _session(handle) {
    const info = this.host.sessionInfo(handle)
    if (!info) return null
    let s = this.sessions.get(info.id)
    if (!s) {
      s = { info, sections: new Map(), newSeries: false, lastSurface: new Map() }
      this.sessions.set(info.id, s)
    } else {
      s.info = info
    }
    return s
  }

  _sectionText(sessionId, name) {
    return this.sessions.get(sessionId)?.sections.get(name) ?? ''
  }

  /** Take `sections`, `startsRequestSeries` and `warnings` from any session answer. */
  _absorb(s, answer) {
    if (!answer || typeof answer !== 'object') return
    if (Array.isArray(answer.sections)) {
      for (const sec of answer.sections) {
        if (sec && typeof sec.name === 'string') s.sections.set(sec.name, typeof sec.text === 'string' ? sec.text : '')
      }
    }
    if (answer.startsRequestSeries === true) s.newSeries = true
    if (Array.isArray(answer.warnings)) {
      for (const w of answer.warnings) this.log.warn(`rofmd (${s.info.id}): ${typeof w === 'string' ? w : JSON.stringify(w)}`)
    }
  }

  /** The pre-step listener's answer: consumes the session's "new request series" flag. */
  _series(s) {
    if (!s || !s.newSeries) return undefined
    s.newSeries = false
    return { startsRequestSeries: true }
  }

  /** One readable line for a call that got no usable answer. */
  _degraded(method, err) {
    if (err instanceof Unavailable) {
      if (err.reason === 'not-connected' || err.reason === 'closed') {
        this.link.warnOutage(err.reason === 'closed' ? 'the connection closed' : 'not connected')
      } else if (err.reason === 'timeout' || err.reason === 'too-large') {
        this.log.warn(`${err.message}: this step goes on without memory`)
      } else {
        this.log.debug(`${method}: ${err.message}`)
      }
      return
    }
    if (err instanceof RpcError) {
      if (err.code === CANCELLED) return
      this.log.warn(`${method} failed: ${err.message}; this step goes on without memory`)
      return
    }
    this.log.warn(`${method}: ${err?.stack || err}`)
  }

  /** Connected now, or within `connectMs` when a (re)connection attempt is in progress. */
  async _ensure() {
    if (this.link.ready) return true
    if (this.link.state === 'connecting') {
      let timer
      const wait = new Promise((resolve) => {
        timer = setTimeout(resolve, this.config.timeouts.connectMs)
      })
      await Promise.race([this.link.whenReady(), wait])
      clearTimeout(timer)
      if (this.link.ready) return true
    }
    this.link.warnOutage('not connected')
    return false
  }

  async _call(method, params, options) {
    if (this.flushing) await this.flushing
    return this.link.call(method, params, options)
  }

  // ---- hooks ------------------------------------------------------------------------------

  /** `agent/inbox/inserted` → recall; sections cached, new series flagged for the next step. */
  async inbox({ handle, message, time, turn }) {
    const s = this._session(handle)
    if (!s || !message || typeof message !== 'object') return undefined
    if (!(await this._ensure())) return undefined
    const params = { session: s.info, message, time }
    if (turn !== undefined) params.turn = turn
    try {
      this._absorb(s, await this._call('agent/inbox/inserted', params, { timeoutMs: this.config.timeouts.inboxMs }))
    } catch (err) {
      this._degraded('agent/inbox/inserted', err)
    }
    return undefined
  }

  /** `agent/pre-step` → archive: the compaction goes through the host's transaction, then
   * `archive/commit` (or `archive/abort` when the host refuses it). */
  async preStep({ handle, turn, step, contextWindow, messages, signal }) {
    const s = this._session(handle)
    if (!s) return undefined
    if (!(await this._ensure())) return this._series(s)
    let surface
    let context
    try {
      surface = await this.host.readSurface(handle)
      context = await this.host.measure(handle, surface)
    } catch (err) {
      this.log.warn(`agent/pre-step: cannot read the session surface or token meter: ${err?.message ?? err}`)
      return this._series(s)
    }
    s.lastSurface = new Map(surface.map((n) => [n.seq, n]))
    const params = {
      session: s.info,
      turn,
      messages: messages ?? lastUserMessage(surface),
      surface,
    }
    if (step !== undefined) params.step = step
    if (context) params.context = { totalTokens: context.totalTokens, contextWindow, nodes: context.nodes }
    let answer
    try {
      answer = await this._call('agent/pre-step', params, {
        timeoutMs: this.config.timeouts.preStepMs,
        signal,
        onLate: (late) => this._late(s, late),
      })
    } catch (err) {
      this._degraded('agent/pre-step', err)
      return this._series(s)
    }
    this._absorb(s, answer)
    const compaction = answer && answer.compaction
    if (compaction && typeof compaction.token === 'string') {
      await this._applyCompaction(s, handle, compaction, turn, signal)
    }
    return this._series(s)
  }

  async _applyCompaction(s, handle, compaction, turn, signal) {
    const { token } = compaction
    if (signal && signal.aborted) {
      await this._report('archive/abort', { session: s.info, token, reason: 'the host cancelled the step' })
      return
    }
    if (!compaction.replace || !Number.isInteger(compaction.replace.startSeq) || !Number.isInteger(compaction.replace.endSeq)) {
      await this._report('archive/abort', { session: s.info, token, reason: 'malformed compaction (no replace span)' })
      return
    }
    const result = await this.host.applyCompaction(handle, compaction, { turn })
    if (result.landed) {
      if (result.error) this.log.warn(`checkpoint ${token} landed but compaction/end failed: ${result.error?.message ?? result.error}`)
      await this._report('archive/commit', { session: s.info, token })
      return
    }
    const why = result.error?.message ?? String(result.error ?? 'unknown')
    this.log.warn(`the host refused archive ${token} (${why}): rolled back, the context is unchanged`)
    await this._report('archive/abort', { session: s.info, token, reason: `host refused the compaction: ${why}` })
  }

  /** A pre-step answered after its deadline / the host's abort: it was not applied, so abort it. */
  _late(s, answer) {
    if (answer && answer.compaction && typeof answer.compaction.token === 'string') {
      this._report('archive/abort', { session: s.info, token: answer.compaction.token, reason: 'answered after the step went on' }).catch(() => {})
    }
  }

  /** `archive/commit` / `archive/abort`: delivered now, or queued until the link is back. */
  async _report(method, params) {
    try {
      await this.link.call(method, params, { timeoutMs: this.config.timeouts.reportMs })
    } catch (err) {
      if (err instanceof Unavailable) {
        if (this.reports.length < MAX_QUEUED_REPORTS) this.reports.push({ method, params })
        this._degraded(method, err)
        return
      }
      this.log.warn(`${method} ${params.token}: ${err?.message ?? err}`)
    }
  }

  async _flushReports() {
    while (this.reports.length && this.link.ready) {
      const { method, params } = this.reports.shift()
      try {
        await this.link.call(method, params, { timeoutMs: this.config.timeouts.reportMs })
      } catch (err) {
        if (err instanceof Unavailable && err.reason !== 'timeout') {
          this.reports.unshift({ method, params })
          return
        }
        this.log.debug(`${method} ${params.token} (queued): ${err?.message ?? err}`)
      }
    }
  }

  /** `agent/disposed` → the daemon releases the session's in-memory state. */
  disposedSession({ handle }) {
    const info = this.host.sessionInfo(handle)
    if (!info) return undefined
    this.link.notify('agent/disposed', { session: info })
    this.sessions.delete(info.id)
    return undefined
  }

  /** `session/event` → foreign `compaction/summary` events with the originals they shadow. */
  async sessionEvent({ handle, event }) {
    const ev = this.host.eventOf(event)
    if (!ev || ev.type !== 'compaction/summary') return undefined
    const data = ev.data && typeof ev.data === 'object' ? ev.data : {}
    if (data.provider === 'dsh-rofm') return undefined
    const s = this._session(handle)
    if (!s || !this.link.ready) return undefined
    let seqs = Array.isArray(data.shadowedSeqs) ? data.shadowedSeqs.filter(Number.isInteger) : []
    if (!seqs.length && data.shadowedRange && Number.isInteger(data.shadowedRange.start) && Number.isInteger(data.shadowedRange.end)) {
      seqs = []
      for (let q = data.shadowedRange.start; q <= data.shadowedRange.end; q++) seqs.push(q)
    }
    const known = new Map(s.lastSurface)
    try {
      for (const n of await this.host.readSurface(handle)) known.set(n.seq, n)
    } catch {
      // the cached surface of the last pre-step is what we have
    }
    const shadowed = seqs.filter((q) => known.has(q)).map((q) => this.host.nodeEvent(known.get(q)))
    this.link.notify('session/event', { session: s.info, event: ev, shadowed })
    return undefined
  }

  // ---- tools ---------------------------------------------------------------------------

  async _tool(name, { handle, turn, callId, signal, args }) {
    const s = this._session(handle)
    if (!s) return { content: [{ type: 'text', text: 'no session' }], isError: true }
    if (!(await this._ensure())) return { content: [{ type: 'text', text: UNAVAILABLE_TEXT }], isError: true }
    const params = { session: s.info, name, arguments: args ?? {} }
    if (turn !== undefined) params.turn = turn
    if (callId !== undefined) params.callId = String(callId)
    try {
      const answer = await this._call('tools/call', params, { timeoutMs: this.config.timeouts.toolMs, signal })
      this._absorb(s, answer)
      const content = Array.isArray(answer?.content) && answer.content.length
        ? answer.content
        : [{ type: 'text', text: JSON.stringify(answer?.value ?? null) }]
      return { content, isError: answer?.isError === true, value: answer?.value }
    } catch (err) {
      this._degraded('tools/call', err)
      const text = err instanceof RpcError ? `${name} failed: ${err.rpcMessage}` : UNAVAILABLE_TEXT
      return { content: [{ type: 'text', text }], isError: true }
    }
  }
}

function lastUserMessage(surface) {
  for (let i = surface.length - 1; i >= 0; i--) {
    const n = surface[i]
    if (n.type === 'user/message' && n.message?.source?.kind !== 'compact-checkpoint') return [n.message]
  }
  return []
}

function safe(dispose) {
  try {
    if (typeof dispose === 'function') dispose()
  } catch {
    // a host that fails to unregister must not stop the rest
  }
}
