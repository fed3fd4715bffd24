// A mock DeepSeek Harness host implementing exactly the host API that lib/host.js assumes
// (README.md "What the bridge assumes of the host"): Cordis-style ctx.on hooks, a logger,
// systemPrompt.section, tokenMeter.measure, tools.register, attachments.imageHostPath, and
// sessions with surface() / append() whose append enforces the compaction transaction.
// A listener that throws (or rejects) is a failed host step: it is recorded in `failures`.

import { START_MS, MINUTE_MS } from './conversation.mjs'

const SURFACE_TYPES = new Set(['system/message', 'developer/message', 'user/message', 'assistant/message', 'tool/result'])
const ID_RE = /id=(mem-\d{8}T\d{6}Z-\d{4,})/g
const REVIEW_HEADING = '### 待复核'

export function estimateTokens(message) {
  let chars = 0
  for (const b of message?.content ?? []) {
    if (!b || typeof b !== 'object') continue
    for (const key of ['text', 'arguments']) if (typeof b[key] === 'string') chars += b[key].length
    if (b.type === 'image') chars += 255 * 3
  }
  return Math.max(1, Math.floor(chars / 3))
}

function textOf(message) {
  return (message?.content ?? []).filter((b) => b?.type === 'text').map((b) => b.text).join('\n')
}

export class MockHost {
  /** `capabilities`: which optional services exist (all by default). */
  constructor({ capabilities = {}, version = '0.2.1' } = {}) {
    const caps = { tokenMeter: true, systemPrompt: true, tools: true, attachments: true, ...capabilities }
    this.hooks = new Map()
    this.sections = new Map()
    this.tools = new Map()
    this.logs = []
    this.failures = []
    this.sessionsById = new Map()
    this.files = new Map() // attachmentId → host path
    this.measureCalls = 0
    const host = this
    const ctx = {
      version,
      on(name, listener) {
        if (!host.hooks.has(name)) host.hooks.set(name, new Set())
        host.hooks.get(name).add(listener)
        return () => host.hooks.get(name)?.delete(listener)
      },
      logger(name) {
        const at = (level) => (msg) => host.logs.push({ level, name, msg: String(msg) })
        return { info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') }
      },
    }
    if (caps.systemPrompt) {
      ctx.systemPrompt = {
        section(name, { order, render }) {
          if (host.sections.has(name)) throw new Error(`section ${name} registered twice`)
          const entry = { order, render }
          host.sections.set(name, entry)
          return () => host.sections.get(name) === entry && host.sections.delete(name)
        },
      }
    }
    if (caps.tokenMeter) {
      ctx.tokenMeter = {
        async measure({ session }) {
          host.measureCalls += 1
          return session.meter()
        },
      }
    }
    if (caps.tools) {
      ctx.tools = {
        register(def) {
          if (host.tools.has(def.name)) throw new Error(`tool ${def.name} registered twice`)
          for (const key of ['name', 'description', 'parameters', 'execute']) {
            if (def[key] === undefined) throw new Error(`tool definition without ${key}`)
          }
          host.tools.set(def.name, def)
          return () => host.tools.get(def.name) === def && host.tools.delete(def.name)
        },
      }
    }
    if (caps.attachments) {
      ctx.attachments = {
        async imageHostPath(attachment) {
          return host.files.get(attachment?.attachmentId) ?? null
        },
      }
    }
    this.ctx = ctx
  }

  get warnings() {
    return this.logs.filter((l) => l.level === 'warn').map((l) => l.msg)
  }

  listeners(name) {
    return [...(this.hooks.get(name) ?? [])]
  }

  /** Call every listener of `name` and await it, as the host does before it goes on. */
  async emit(name, payload) {
    const out = []
    for (const listener of this.listeners(name)) {
      try {
        out.push(await listener(payload))
      } catch (err) {
        this.failures.push({ hook: name, error: err })
        out.push(undefined)
      }
    }
    return out
  }

  session(id, options = {}) {
    const s = new MockSession(this, { id, ...options })
    this.sessionsById.set(id, s)
    return s
  }

  /** Rendered system prompt for a session: sections by order, empty ones dropped. */
  systemPrompt(session) {
    return [...this.sections.entries()]
      .sort((a, b) => a[1].order - b[1].order)
      .map(([, s]) => s.render({ session }))
      .filter((t) => typeof t === 'string' && t.length)
      .join('\n\n')
  }

  async disposePlugin() {
    await this.emit('dispose', undefined)
  }
}

export class MockSession {
  constructor(host, { id, contextWindow = 32768, origin, cwd = '/home/dev/starport', scorer = null }) {
    this.host = host
    this.id = id
    if (origin) this.origin = origin
    this.cwd = cwd
    this.contextWindow = contextWindow
    this.scorer = scorer
    this.events = [{ type: 'session', version: 4, id, createdAt: START_MS }]
    this.nodes = []
    this.turn = 0
    this.step = 0
    this.clock = START_MS
    this.counter = 0
    this.bracket = null // the open compaction transaction
    this.refuse = null // 'start' | 'replace' | null: the host refuses that append
    this.requests = [] // what each model request carried
    this.judges = [] // memory_judge results
  }

  nextId(prefix) {
    this.counter += 1
    return `${prefix}-${String(this.counter).padStart(5, '0')}`
  }

  // ---- the public session API the bridge uses -----------------------------------------

  async surface() {
    return this.nodes.map((n) => ({ seq: n.seq, type: n.type, time: n.time, turn: n.turn, message: n.message }))
  }

  /** Durable append with the host's strict rules; surface events apply their surfaceOp. */
  async append(ev) {
    if (!ev || typeof ev.type !== 'string' || !ev.data || typeof ev.data !== 'object') throw new Error('append: malformed event')
    const { type, data, surfaceOp } = ev
    if (type === 'compaction/start') {
      if (this.refuse === 'start') throw new Error('compaction refused: the session is busy')
      if (this.bracket) throw new Error('compaction/start inside an open compaction')
      if (typeof data.compactionId !== 'string') throw new Error('compaction/start without compactionId')
      this.bracket = { id: data.compactionId, summary: false, replaced: false }
    } else if (type === 'compaction/summary') {
      if (!this.bracket || this.bracket.id !== data.compactionId || this.bracket.summary) throw new Error('compaction/summary outside its transaction')
      if (!Array.isArray(data.summary) || !Array.isArray(data.shadowedSeqs)) throw new Error('compaction/summary: malformed')
      this.bracket.summary = true
    } else if (type === 'compaction/end') {
      if (!this.bracket || this.bracket.id !== data.compactionId) throw new Error('compaction/end outside its transaction')
      this.bracket = null
    } else if (SURFACE_TYPES.has(type)) {
      const message = type === 'user/message' ? data : data.message
      if (!message || typeof message.id !== 'string' || !message.id) throw new Error(`${type}: message without id`)
      if (surfaceOp && typeof surfaceOp === 'object' && surfaceOp.op === 'replace') {
        if (!this.bracket || !this.bracket.summary || this.bracket.replaced) throw new Error('replace outside a compaction transaction')
        if (message.source?.kind !== 'compact-checkpoint') throw new Error('replace: not a compact-checkpoint message')
        const seqs = this.nodes.map((n) => n.seq)
        const a = seqs.indexOf(surfaceOp.startSeq)
        const b = seqs.indexOf(surfaceOp.endSeq)
        if (a < 0 || b < 0 || b < a) throw new Error(`replace ${surfaceOp.startSeq}..${surfaceOp.endSeq}: not on the surface`)
        if (this.refuse === 'replace') throw new Error('replace refused by the host')
        this.bracket.replaced = true
      } else if (surfaceOp !== 'append') {
        throw new Error(`${type}: unknown surfaceOp`)
      } else if (this.bracket) {
        throw new Error(`${type}: append inside an open compaction`)
      }
    }
    this.clock += 1000
    const seq = this.events.length - 1 // the header is not an event
    const event = { type, seq, time: this.clock, data, ...(surfaceOp ? { surfaceOp } : {}) }
    this.events.push(event)
    if (SURFACE_TYPES.has(type)) {
      const message = type === 'user/message' ? data : data.message
      const node = { seq, type, time: event.time, turn: this.turn, message, tokens: estimateTokens(message) }
      if (surfaceOp === 'append') {
        this.nodes.push(node)
      } else {
        const seqs = this.nodes.map((n) => n.seq)
        const a = seqs.indexOf(surfaceOp.startSeq)
        const b = seqs.indexOf(surfaceOp.endSeq)
        this.nodes.splice(a, b - a + 1, node)
      }
    }
    await this.host.emit('session/event', { session: this, event })
    return { seq }
  }

  /** The host token meter: per-node estimates plus the system-prompt sections. */
  meter() {
    const nodes = this.nodes.map((n) => ({ seq: n.seq, tokens: n.tokens }))
    const sectionTokens = Math.floor(this.host.systemPrompt(this).length / 3)
    return { totalTokens: nodes.reduce((a, n) => a + n.tokens, 0) + sectionTokens, nodes }
  }

  // ---- the host's own flow ------------------------------------------------------------

  async system(text) {
    const message = { id: this.nextId('sys'), role: 'system', content: [{ type: 'text', text }], source: { kind: 'system-prompt' } }
    await this.append({ type: 'system/message', data: { message, turn: this.turn }, surfaceOp: 'append' })
  }

  /** A user message lands in the inbox; the host awaits the listeners before thinking. */
  async userSays(text, { image } = {}) {
    this.turn += 1
    this.step = 0
    this.clock += 7 * MINUTE_MS
    const content = [{ type: 'text', text }]
    if (image) {
      const attachmentId = this.nextId('att')
      this.host.files.set(attachmentId, image.path)
      content.push({ type: 'image', attachment: { attachmentId, mediaType: 'image/png', bytes: image.bytes, width: 4, height: 4, name: image.name } })
    }
    const message = { id: this.nextId('u'), role: 'user', content, source: { kind: 'user' } }
    await this.append({ type: 'user/message', data: message, surfaceOp: 'append' })
    await this.host.emit('agent/inbox/inserted', { session: this, message, time: this.clock, turn: this.turn })
    return message
  }

  /** One model step: pre-step hooks, the model request, the model's answer and tool results. */
  async modelStep({ text = '', tools = [], abortAfterMs } = {}) {
    this.step += 1
    const controller = new AbortController()
    let timer = null
    if (abortAfterMs !== undefined) timer = setTimeout(() => controller.abort(), abortAfterMs)
    const results = await this.host.emit('agent/pre-step', {
      session: this,
      turn: this.turn,
      step: this.step,
      contextWindow: this.contextWindow,
      signal: controller.signal,
    })
    clearTimeout(timer)
    const startsRequestSeries = results.some((r) => r && r.startsRequestSeries === true)
    const request = {
      turn: this.turn,
      step: this.step,
      system: this.host.systemPrompt(this),
      startsRequestSeries,
      tokens: this.meter().totalTokens,
    }
    this.requests.push(request)
    if (this.scorer) await this.answerTasks()
    const content = text ? [{ type: 'text', text }] : []
    const results2 = []
    for (const [name, args, output] of tools) {
      const id = this.nextId('call')
      content.push({ type: 'tool-call', id, name, arguments: JSON.stringify(args) })
      results2.push([id, output])
    }
    const message = { id: this.nextId('a'), role: 'assistant', content, source: { kind: 'model' } }
    await this.append({ type: 'assistant/message', data: { message, turn: this.turn, step: this.step }, surfaceOp: 'append' })
    for (const [callId, output] of results2) {
      const m = { id: this.nextId('t'), role: 'tool', toolCallId: callId, content: [{ type: 'text', text: output }], source: { kind: 'tool' } }
      await this.append({ type: 'tool/result', data: { message: m, turn: this.turn, step: this.step }, surfaceOp: 'append' })
    }
    return request
  }

  /** A whole scripted turn. */
  async playTurn(turn) {
    await this.userSays(turn.user, turn.image ? { image: turn.image } : {})
    const out = []
    for (const step of turn.steps) out.push(await this.modelStep(step))
    return out
  }

  /** The model's part: score every item the memory task block lists, via memory_judge. */
  async answerTasks() {
    const block = this.host.sections.get('dsh-rofm:memory-tasks')?.render({ session: this }) ?? ''
    const tool = this.host.tools.get('memory_judge')
    if (!tool || !block.includes('id=mem-')) return null
    const reviewAt = block.indexOf(REVIEW_HEADING)
    const items = [...block.matchAll(ID_RE)]
    const updates = items.map((m, i) => {
      const end = i + 1 < items.length ? items[i + 1].index : block.length
      const review = reviewAt !== -1 && m.index > reviewAt
      return this.scorer(m[1], block.slice(m.index + m[0].length, end), review)
    })
    const callId = this.nextId('judge')
    const result = await tool.execute({ updates }, { session: this, turn: this.turn, callId })
    this.judges.push({ ids: updates.map((u) => u.id), result })
    return result
  }

  /** The host disposes the agent of this session. */
  async dispose() {
    await this.host.emit('agent/disposed', { session: this })
  }

  checkpoints() {
    return this.nodes.filter((n) => n.message?.source?.kind === 'compact-checkpoint')
  }
}
