// THE host adapter: every call into DeepSeek Harness (DSH) lives in this file, so that a DSH
// API change touches nothing else. The rest of the bridge speaks only protocol objects
// (PROTOCOL.md): `session` infos, v4 messages, surface nodes, `Sections`, compactions.
//
// The DSH plugin API is not published with the reference; the shapes below are the ones the
// reference describes the original in-process plugin using (§3.1 "版本与兼容性", §5, §9):
// Cordis-style `apply(ctx, config)`, the `agent/inbox/inserted`, `agent/pre-step` and
// `agent/disposed` hooks (+ `session/event`), `systemPrompt.section()`, `tokenMeter.measure()`,
// `tools.register()`, `ctx.attachments` (optional), the session's `surface()` / `append()`, and
// the compaction transaction. README.md ("What the bridge assumes of the host") lists each call
// and what it is assumed to do; tests/support/mock-host.mjs implements exactly that.

export const PLUGIN_NAME = 'dsh-rofm'
export const CHECKPOINT_PROVIDER = 'dsh-rofm'

/** Cordis service declaration: every host service is optional and probed at run time. */
export const INJECT = Object.freeze({
  optional: ['systemPrompt', 'tokenMeter', 'tools', 'attachments'],
})

/** The host hooks the bridge can forward (the daemon's `initialize.listeners` picks). */
export const HOOKS = Object.freeze(['agent/inbox/inserted', 'agent/pre-step', 'agent/disposed', 'session/event'])

const fn = (v) => typeof v === 'function'

function toWellFormed(text) {
  if (typeof text !== 'string') return ''
  if (fn(text.toWellFormed)) return text.toWellFormed()
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD')
}

function makeLog(ctx) {
  let logger = null
  try {
    if (fn(ctx?.logger)) logger = ctx.logger(PLUGIN_NAME)
  } catch {
    logger = null
  }
  const pick = (level) => {
    if (logger && fn(logger[level])) return (msg) => logger[level](msg)
    const out = level === 'warn' ? console.warn : level === 'debug' ? () => {} : console.log
    return (msg) => out(`[${PLUGIN_NAME}] ${msg}`)
  }
  return { info: pick('info'), warn: pick('warn'), debug: pick('debug') }
}

/** The v4 message of a surface node or of a v4 event (`user/message`: data IS the message). */
function nodeMessage(raw) {
  if (raw && typeof raw.message === 'object' && raw.message) return raw.message
  const data = raw?.data
  if (!data || typeof data !== 'object') return null
  if (raw.type === 'user/message') return data
  return typeof data.message === 'object' ? data.message : null
}

function nodeTurn(raw) {
  if (Number.isInteger(raw?.turn)) return raw.turn
  if (Number.isInteger(raw?.data?.turn)) return raw.data.turn
  return undefined
}

/**
 * Wrap a DSH `ctx`. Returns the only object the bridge uses to talk to the host.
 */
export function createHost(ctx) {
  const log = makeLog(ctx)
  const disposers = []

  const capabilities = () => ({
    tokenMeter: fn(ctx?.tokenMeter?.measure),
    systemPrompt: fn(ctx?.systemPrompt?.section),
    tools: fn(ctx?.tools?.register),
    attachments: fn(ctx?.attachments?.imageHostPath),
  })

  /** A Cordis registration's disposer (a function, or an object with dispose()). */
  const disposerOf = (ret) => {
    if (fn(ret)) return ret
    if (ret && fn(ret.dispose)) return () => ret.dispose()
    return () => {}
  }

  /** The protocol `session` for a host session handle (PROTOCOL.md §3). */
  const sessionInfo = (handle) => {
    if (!handle || (typeof handle.id !== 'string' && typeof handle.id !== 'number')) return null
    const info = { id: String(handle.id) }
    if (typeof handle.origin === 'string') info.origin = handle.origin
    if (Number.isInteger(handle.delegationDepth)) info.delegationDepth = handle.delegationDepth
    if (typeof handle.agentPreset === 'string') info.agentPreset = handle.agentPreset
    if (typeof handle.cwd === 'string') info.cwd = handle.cwd
    return info
  }

  // Hook payload → what the bridge needs. The host awaits a listener's promise before it goes
  // on (inbox: before the agent thinks; pre-step: before the model request).
  const payloads = {
    'agent/inbox/inserted': (e) => ({
      handle: e.session,
      message: e.message,
      time: Math.trunc([e.time, e.message?.time].find(Number.isFinite) ?? Date.now()),
      turn: Number.isInteger(e.turn) ? e.turn : undefined,
    }),
    'agent/pre-step': (e) => ({
      handle: e.session,
      turn: Number.isInteger(e.turn) ? e.turn : 0,
      step: Number.isInteger(e.step) ? e.step : undefined,
      contextWindow: [e.contextWindow, e.request?.contextWindow, e.model?.contextWindow].find(Number.isFinite) ?? 0,
      messages: Array.isArray(e.messages) ? e.messages : undefined,
      signal: e.signal,
    }),
    'agent/disposed': (e) => ({ handle: e.session }),
    'session/event': (e) => ({ handle: e.session, event: e.event }),
  }

  // The bridge's answer → the listener's return value. Only pre-step returns something:
  // `{ startsRequestSeries: true }` asks the host to rewrite the system-prompt head node.
  const returns = {
    'agent/pre-step': (r) => (r && r.startsRequestSeries ? { startsRequestSeries: true } : undefined),
  }

  return {
    log,
    capabilities,
    sessionInfo,

    /** `initialize.host`. */
    info() {
      const version = [ctx?.version, ctx?.host?.version].find((v) => typeof v === 'string')
      return { name: 'dsh', version: version ?? 'unknown' }
    },

    /** `ctx.on(hook, listener)`; the listener never throws into the host. */
    on(hook, handler) {
      const toPayload = payloads[hook]
      const toReturn = returns[hook] ?? (() => undefined)
      const listener = async (event) => {
        try {
          const p = toPayload(event ?? {})
          if (!p.handle) return undefined
          return toReturn(await handler(p))
        } catch (err) {
          log.warn(`${hook}: ${err?.stack || err}`)
          return undefined
        }
      }
      const dispose = disposerOf(ctx.on(hook, listener))
      return dispose
    },

    /** `ctx.on('dispose', fn)`: the plugin row is disabled or the host shuts down. */
    onDispose(cb) {
      if (fn(ctx?.on)) disposers.push(disposerOf(ctx.on('dispose', cb)))
    },

    /** `ctx.systemPrompt.section(name, { order, render })`; render is synchronous. */
    registerSection(name, order, render) {
      const ret = ctx.systemPrompt.section(name, {
        order,
        render: (scope) => {
          try {
            const id = scope?.session?.id ?? scope?.id
            return toWellFormed(id === undefined || id === null ? '' : render(String(id)))
          } catch {
            return ''
          }
        },
      })
      return disposerOf(ret)
    },

    /** `ctx.tools.register({ name, description, parameters, execute(args, call) })`. */
    registerTool(schema, execute) {
      const ret = ctx.tools.register({
        name: schema.name,
        description: schema.description,
        parameters: schema.parameters,
        execute: async (args, call = {}) => {
          const out = await execute({
            handle: call.session,
            turn: Number.isInteger(call.turn) ? call.turn : undefined,
            callId: call.callId ?? call.toolCallId ?? call.id,
            signal: call.signal,
            args,
          })
          return { content: out.content, isError: out.isError === true }
        },
      })
      return disposerOf(ret)
    },

    /**
     * The model-visible surface in order, as PROTOCOL.md `SurfaceNode`s
     * (`{seq, type, time, turn, message}`). Image blocks get `attachment.hostPath` from
     * `ctx.attachments.imageHostPath()` when the host has it.
     */
    async readSurface(handle) {
      const raw = await handle.surface()
      const canResolve = capabilities().attachments
      const nodes = []
      for (const r of Array.isArray(raw) ? raw : []) {
        let message = nodeMessage(r)
        if (!Number.isInteger(r?.seq) || !message || typeof r.type !== 'string') continue
        if (canResolve && Array.isArray(message.content)) {
          message = await withHostPaths(message, handle)
        }
        const node = { seq: r.seq, type: r.type, time: Number.isFinite(r.time) ? r.time : 0, message }
        const turn = nodeTurn(r)
        if (turn !== undefined) node.turn = turn
        nodes.push(node)
      }
      return nodes
    },

    /** `ctx.tokenMeter.measure({ session, surface })` → `{ totalTokens, nodes }` (or a number). */
    async measure(handle, surface) {
      if (!capabilities().tokenMeter) return null
      const m = await ctx.tokenMeter.measure({ session: handle, surface })
      if (Number.isFinite(m)) return { totalTokens: Math.max(0, Math.round(m)), nodes: [] }
      if (!m || typeof m !== 'object') return null
      const total = [m.totalTokens, m.total, m.tokens].find(Number.isFinite)
      if (total === undefined) return null
      const nodes = Array.isArray(m.nodes)
        ? m.nodes.filter((n) => Number.isInteger(n?.seq) && Number.isFinite(n?.tokens)).map((n) => ({ seq: n.seq, tokens: Math.max(0, Math.round(n.tokens)) }))
        : []
      return { totalTokens: Math.max(0, Math.round(total)), nodes }
    },

    /**
     * The host's compaction transaction (PROTOCOL.md §4/§6), with `session.append(event)`:
     * `compaction/start` → `compaction/summary` (provider dsh-rofm) → `user/message`
     * (source compact-checkpoint, surfaceOp replace) → `compaction/end`. A refusal (append
     * throws) before the replacement lands closes the bracket with `compaction/end {error}`.
     * Returns `{ landed, error? }`: landed = the replacement is on the surface.
     */
    async applyCompaction(handle, compaction, { turn }) {
      const { token, replace, checkpoint } = compaction
      const compactionId = `${PLUGIN_NAME}-${token}`
      const content = checkpoint?.content ?? []
      const start = replace.startSeq
      const end = replace.endSeq
      let opened = false
      let landed = false
      try {
        await handle.append({ type: 'compaction/start', data: { compactionId, turn } })
        opened = true
        await handle.append({
          type: 'compaction/summary',
          data: {
            compactionId,
            summary: content,
            shadowedRange: { start, end },
            shadowedSeqs: compaction.shadowedSeqs ?? [],
            shadowedTokenCount: compaction.shadowedTokenCount ?? 0,
            provider: CHECKPOINT_PROVIDER,
            model: null,
          },
        })
        await handle.append({
          type: 'user/message',
          data: { id: `ckpt-${token}`, role: 'user', content, source: { kind: 'compact-checkpoint' } },
          surfaceOp: { op: 'replace', startSeq: start, endSeq: end },
        })
        landed = true
        await handle.append({ type: 'compaction/end', data: { compactionId, turn } })
        return { landed: true }
      } catch (error) {
        if (opened && !landed) {
          try {
            await handle.append({ type: 'compaction/end', data: { compactionId, turn, error: String(error?.message ?? error) } })
          } catch {
            // the host refuses even the closing event: nothing more we can do
          }
        }
        return { landed, error }
      }
    },

    /** A `session/event` payload's event, as a v4 event (`{type, seq, time, data}`). */
    eventOf(event) {
      return event && typeof event === 'object' && typeof event.type === 'string' ? event : null
    },

    /** A surface node back as the v4 event it came from (for `session/event.shadowed`). */
    nodeEvent(node) {
      const data = node.type === 'user/message' ? node.message : { message: node.message, ...(node.turn !== undefined ? { turn: node.turn } : {}) }
      return { type: node.type, seq: node.seq, time: node.time, data }
    },

    disposeAll() {
      for (const d of disposers.splice(0)) {
        try {
          d()
        } catch {
          // ignore
        }
      }
    },
  }

  async function withHostPaths(message, handle) {
    let changed = false
    const content = []
    for (const block of message.content) {
      if (block && block.type === 'image' && block.attachment && typeof block.attachment === 'object' && !block.attachment.hostPath) {
        let hostPath = null
        try {
          hostPath = await ctx.attachments.imageHostPath(block.attachment, { session: handle })
        } catch {
          hostPath = null
        }
        if (typeof hostPath === 'string' && hostPath) {
          content.push({ ...block, attachment: { ...block.attachment, hostPath } })
          changed = true
          continue
        }
      }
      content.push(block)
    }
    return changed ? { ...message, content } : message
  }
}
