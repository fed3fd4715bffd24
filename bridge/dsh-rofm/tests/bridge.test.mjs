// Protocol edges against a scripted fake daemon: deadlines, cancellation, late answers, errors,
// session/event, reconnection with backoff, queued reports, oversized requests.
import { describe, it, beforeEach, afterEach } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'

import { apply } from '../index.js'
import { MockHost } from './support/mock-host.mjs'
import { FakeDaemon, HOLD, DROP, initResult } from './support/fake-daemon.mjs'
import { tempBase, removeBase, within } from './support/daemon.mjs'

function compaction(token, startSeq, endSeq) {
  return {
    token,
    replace: { startSeq, endSeq },
    shadowedSeqs: Array.from({ length: endSeq - startSeq + 1 }, (_, i) => startSeq + i),
    shadowedTokenCount: 10,
    checkpoint: { content: [{ type: 'text', text: '[memory] 1 段更早的对话已归档到 memory/' }] },
    folders: ['mem-20261102T090000Z-0001'],
  }
}

async function conversation(s, n = 3) {
  await s.system('sys')
  for (let i = 0; i < n; i++) {
    await s.userSays(`question ${i}`)
    await s.modelStep({ text: `answer ${i}` })
  }
}

describe('bridge against a scripted daemon', { timeout: 60000 }, () => {
  let base
  let sock
  let fake
  let host
  let bridge

  beforeEach(() => {
    base = tempBase('rofmd-f-')
    sock = path.join(base, 'fake.sock')
  })

  afterEach(async () => {
    bridge?.dispose()
    bridge = null
    await fake?.stop()
    fake = null
    removeBase(base)
  })

  async function connect(handlers = {}, { hostOptions, config } = {}) {
    fake = await new FakeDaemon(sock, handlers).start()
    host = new MockHost(hostOptions)
    bridge = apply(host.ctx, { socketPath: sock, reconnect: { initialDelayMs: 20, maxDelayMs: 200 }, ...config })
    await within(bridge.link.whenReady(), 10000, 'the bridge to connect')
    return host
  }

  it('initialize carries the capabilities the host actually has', async () => {
    await connect({}, { hostOptions: { capabilities: { tokenMeter: false, attachments: false }, version: '0.2.1' } })
    const init = await fake.waitFor((m) => m.method === 'initialize')
    assert.deepEqual(init.params, {
      protocolVersion: 1,
      host: { name: 'dsh', version: '0.2.1' },
      capabilities: { tokenMeter: false, systemPrompt: true, tools: true, attachments: false },
    })
    const s = host.session('caps')
    await s.userSays('hi')
    await s.modelStep({ text: 'hello' })
    const pre = await fake.waitFor((m) => m.method === 'agent/pre-step')
    assert.equal(pre.params.context, undefined, 'no token meter: no context, so no archiving')
    assert.equal(pre.params.surface.length, 1)
    assert.deepEqual(pre.params.messages, [s.nodes[0].message])
    assert.equal(host.measureCalls, 0)
  })

  it('a pre-step carries the surface, the meter and image host paths', async () => {
    await connect()
    const s = host.session('surface', { contextWindow: 50000 })
    await s.system('sys')
    await s.userSays('look', { image: { path: '/tmp/shot.png', bytes: 10, name: 'shot.png' } })
    await s.modelStep({ text: 'seen' })
    const pre = await fake.waitFor((m) => m.method === 'agent/pre-step')
    assert.deepEqual(pre.params.session, { id: 'surface', cwd: '/home/dev/starport' })
    assert.equal(pre.params.turn, 1)
    assert.equal(pre.params.step, 1)
    assert.equal(pre.params.context.contextWindow, 50000)
    const seen = s.nodes.slice(0, 2) // the assistant message came after the pre-step
    assert.deepEqual(pre.params.context.nodes, seen.map((n) => ({ seq: n.seq, tokens: n.tokens })))
    assert.equal(pre.params.context.totalTokens, seen.reduce((a, n) => a + n.tokens, 0))
    assert.deepEqual(pre.params.surface.map((n) => [n.seq, n.type]), [[0, 'system/message'], [1, 'user/message']])
    const image = pre.params.surface[1].message.content[1]
    assert.equal(image.attachment.hostPath, '/tmp/shot.png')
    assert.equal(s.nodes[1].message.content[1].attachment.hostPath, undefined, 'the host message is not mutated')
  })

  it('a slow daemon: the step goes on at the deadline, the request is cancelled, a late archive is aborted', async () => {
    let held = null
    await connect(
      { 'agent/pre-step': (p, msg) => ((held = msg), HOLD) },
      { config: { timeouts: { preStepMs: 100 } } },
    )
    const s = host.session('slow')
    await s.system('sys')
    await s.userSays('q')
    const before = s.nodes.length
    await s.modelStep({ text: 'a' })
    assert.deepEqual(host.failures, [])
    const cancel = await fake.waitFor((m) => m.method === '$/cancelRequest')
    assert.equal(cancel.params.id, held.id)
    assert.equal(host.warnings.length, 1)
    assert.match(host.warnings[0], /no answer from rofmd within 100 ms/)
    // the late answer names an archive the host never applied: it is aborted
    fake.answer(held, { compaction: compaction('arc-late', 0, 1), sections: [], startsRequestSeries: false, warnings: [] })
    const abort = await fake.waitFor((m) => m.method === 'archive/abort')
    assert.equal(abort.params.token, 'arc-late')
    assert.equal(s.checkpoints().length, 0)
    assert.equal(s.nodes.length, before + 1)
  })

  it('the host abort signal cancels the pre-step', async () => {
    await connect({ 'agent/pre-step': () => HOLD })
    const s = host.session('abort')
    await s.userSays('q')
    const started = Date.now()
    await s.modelStep({ text: 'a', abortAfterMs: 20 })
    assert.ok(Date.now() - started < 5000, 'did not wait for the deadline')
    const pre = await fake.waitFor((m) => m.method === 'agent/pre-step')
    const cancel = await fake.waitFor((m) => m.method === '$/cancelRequest')
    assert.equal(cancel.params.id, pre.id)
    assert.deepEqual(host.failures, [])
  })

  it('error answers degrade to "no memory" with a readable warning', async () => {
    await connect({
      'agent/pre-step': () => ({ error: { code: -32003, message: 'storage unavailable', data: { reason: 'ENOSPC' } } }),
      'tools/call': () => ({ error: { code: -32602, message: 'invalid params' } }),
    })
    const s = host.session('errors')
    await s.userSays('q')
    await s.modelStep({ text: 'a' })
    assert.deepEqual(host.failures, [])
    assert.match(host.warnings[0], /agent\/pre-step failed: -32003: storage unavailable/)
    const res = await host.tools.get('memory_judge').execute({ updates: [] }, { session: s, turn: 1, callId: 'c1' })
    assert.equal(res.isError, true)
    assert.match(res.content[0].text, /memory_judge failed: invalid params/)
  })

  it('a compaction is applied, committed, and its sections and new series reach the host', async () => {
    let steps = 0
    await connect({
      'agent/pre-step': (p) => {
        steps += 1
        if (steps === 3) {
          return {
            compaction: compaction('arc-1', p.surface[1].seq, p.surface[4].seq),
            sections: [{ name: 'dsh-rofm:memory-tasks', order: 101, text: '## 记忆评分任务 …' }],
            startsRequestSeries: true,
            warnings: ['archived 4 nodes'],
          }
        }
        return { compaction: null, sections: [], startsRequestSeries: false, warnings: [] }
      },
    })
    const s = host.session('apply')
    await conversation(s, 3)
    const commit = await fake.waitFor((m) => m.method === 'archive/commit')
    assert.deepEqual(commit.params, { session: { id: 'apply', cwd: '/home/dev/starport' }, token: 'arc-1' })
    assert.equal(s.checkpoints().length, 1)
    assert.deepEqual(s.nodes.map((n) => n.type), ['system/message', 'user/message', 'user/message', 'assistant/message'])
    const third = s.requests[2]
    assert.equal(third.startsRequestSeries, true)
    assert.match(third.system, /记忆评分任务/)
    assert.equal(s.requests.filter((r) => r.startsRequestSeries).length, 1, 'the flag is consumed')
    assert.ok(host.warnings.some((w) => w.includes('archived 4 nodes')))
  })

  it('startsRequestSeries from the inbox is returned by the next pre-step only', async () => {
    await connect({
      'agent/inbox/inserted': () => ({
        recalled: ['mem-1'],
        sections: [{ name: 'dsh-rofm:recall', order: 100, text: '## 记忆回忆 recalled' }],
        startsRequestSeries: true,
        warnings: [],
      }),
    })
    const s = host.session('series')
    await s.userSays('q')
    const a = await s.modelStep({ text: 'a' })
    const b = await s.modelStep({ text: 'b' })
    assert.equal(a.startsRequestSeries, true)
    assert.equal(b.startsRequestSeries, false)
    assert.match(a.system, /记忆回忆 recalled/)
  })

  it('session/event: foreign compactions are forwarded with their originals, our own are not', async () => {
    await connect({}, {})
    bridge.dispose()
    await fake.stop()
    fake = await new FakeDaemon(sock, {
      initialize: () => initResult({ listeners: ['agent/inbox/inserted', 'agent/pre-step', 'agent/disposed', 'session/event'] }),
    }).start()
    host = new MockHost()
    bridge = apply(host.ctx, { socketPath: sock })
    await within(bridge.link.whenReady(), 10000, 'the bridge to connect')
    assert.equal(host.listeners('session/event').length, 1)
    const s = host.session('foreign')
    await conversation(s, 2)
    const [a, b] = [s.nodes[1], s.nodes[2]]
    // another compressor runs its transaction
    await s.append({ type: 'compaction/start', data: { compactionId: 'cmp-1', turn: 2 } })
    await s.append({ type: 'compaction/summary', data: { compactionId: 'cmp-1', summary: [{ type: 'text', text: 'summary' }], shadowedRange: { start: a.seq, end: b.seq }, shadowedSeqs: [a.seq, b.seq], shadowedTokenCount: 5, provider: 'compact', model: 'm' } })
    await s.append({ type: 'user/message', data: { id: 'ck-1', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'compact-checkpoint' } }, surfaceOp: { op: 'replace', startSeq: a.seq, endSeq: b.seq } })
    await s.append({ type: 'compaction/end', data: { compactionId: 'cmp-1', turn: 2 } })
    const ev = await fake.waitFor((m) => m.method === 'session/event')
    assert.equal(ev.id, undefined, 'a notification')
    assert.equal(ev.params.event.type, 'compaction/summary')
    assert.equal(ev.params.event.data.provider, 'compact')
    assert.deepEqual(ev.params.shadowed.map((e) => e.seq), [a.seq, b.seq])
    assert.deepEqual(ev.params.shadowed[0], { type: 'user/message', seq: a.seq, time: a.time, data: a.message })
    assert.deepEqual(ev.params.shadowed[1].data.message, b.message)
    // our own provider is never forwarded: the next request follows without one in between
    const own = s.events.length
    await s.append({ type: 'compaction/start', data: { compactionId: 'dsh-rofm-x', turn: 2 } })
    await s.append({ type: 'compaction/summary', data: { compactionId: 'dsh-rofm-x', summary: [], shadowedRange: { start: 0, end: 0 }, shadowedSeqs: [0], shadowedTokenCount: 1, provider: 'dsh-rofm', model: null } })
    await s.append({ type: 'compaction/end', data: { compactionId: 'dsh-rofm-x', turn: 2 } })
    assert.ok(s.events.length > own)
    await s.userSays('after')
    await fake.waitFor((m) => m.method === 'agent/inbox/inserted' && m.params.message.content[0].text === 'after')
    assert.equal(fake.received.filter((m) => m.method === 'session/event').length, 1)
  })

  it('enabled:false from the daemon: nothing registered', async () => {
    await connect({ initialize: () => initResult({ enabled: false, tools: [], sections: [], listeners: [] }) })
    assert.equal(host.sections.size, 0)
    assert.equal(host.tools.size, 0)
    assert.equal(host.listeners('agent/pre-step').length, 0)
  })

  it('enabled:false in the bridge config: no connection at all', async () => {
    fake = await new FakeDaemon(sock).start()
    host = new MockHost()
    const r = apply(host.ctx, { socketPath: sock, enabled: false })
    assert.equal(r, null)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(fake.connections, 0)
    assert.equal(host.hooks.size, 0)
  })

  it('reconnects with backoff: registrations reconciled once, queued reports first, sections restored', async () => {
    let commitSeen = 0
    await connect({
      'agent/pre-step': (p) => ({ compaction: p.surface.length >= 4 ? compaction('arc-q', p.surface[1].seq, p.surface[2].seq) : null, sections: [], startsRequestSeries: false, warnings: [] }),
      // the connection dies before the commit is answered
      'archive/commit': () => ((commitSeen += 1), DROP),
    })
    const s = host.session('recon')
    await conversation(s, 2)
    assert.equal(commitSeen, 1)
    assert.equal(s.checkpoints().length, 1, 'the replacement landed')
    await fake.stop()
    // while down: the host goes on, one warning
    await s.userSays('down')
    await s.modelStep({ text: 'still here' })
    assert.deepEqual(host.failures, [])
    assert.equal(host.warnings.filter((w) => w.includes('rofmd unavailable')).length, 1)
    // back, with one more tool and one section fewer
    fake = await new FakeDaemon(sock, {
      initialize: () =>
        initResult({
          tools: [...initResult().tools, { name: 'memory_recall', description: 'recall', parameters: { type: 'object' } }],
          sections: [{ name: 'dsh-rofm:recall', order: 100 }],
        }),
      'prompt/sections': () => ({ sections: [{ name: 'dsh-rofm:recall', order: 100, text: 'restored block' }], startsRequestSeries: true }),
    }).start()
    await within(bridge.link.whenReady(), 10000, 'the bridge to connect')
    const restored = await fake.waitFor((m) => m.method === 'prompt/sections')
    assert.deepEqual(restored.params.session.id, 'recon')
    const after = fake.methods()
    assert.deepEqual(after.slice(0, 2), ['initialize', 'archive/commit'], 'the queued commit goes first')
    assert.equal(fake.received[1].params.token, 'arc-q')
    assert.deepEqual([...host.tools.keys()].sort(), ['memory_judge', 'memory_recall'])
    assert.deepEqual([...host.sections.keys()], ['dsh-rofm:recall'])
    assert.equal(host.listeners('agent/pre-step').length, 1)
    assert.ok(!host.warnings.some((w) => w.includes('cannot register')))
    const r = await s.modelStep({ text: 'back' })
    assert.equal(r.system, 'restored block')
    assert.equal(r.startsRequestSeries, true)
    assert.ok(host.logs.some((l) => l.level === 'info' && l.msg.includes('reconnected')))
  })

  it('a hook during a reconnection attempt waits for it instead of going without memory', async () => {
    await connect()
    const s = host.session('wait')
    await fake.stop()
    let held = null
    fake = await new FakeDaemon(sock, { initialize: (p, msg) => ((held = msg), HOLD) }).start()
    await fake.waitFor((m) => m.method === 'initialize')
    assert.equal(bridge.link.state, 'connecting')
    const turn = s.userSays('while connecting')
    fake.answer(held, initResult())
    await turn
    const inbox = await fake.waitFor((m) => m.method === 'agent/inbox/inserted')
    assert.equal(inbox.params.message.content[0].text, 'while connecting')
    assert.deepEqual(host.failures, [])
  })

  it('a request larger than maxMessageBytes is not sent; the connection stays up', async () => {
    await connect({}, { config: { maxMessageBytes: 4096 } })
    const s = host.session('big')
    await s.userSays('x'.repeat(5000))
    await s.modelStep({ text: 'y' })
    assert.deepEqual(host.failures, [])
    assert.ok(host.warnings.some((w) => w.includes('exceeds maxMessageBytes')))
    await s.userSays('small')
    await fake.waitFor((m) => m.method === 'agent/inbox/inserted' && m.params.message.content[0].text === 'small')
    assert.equal(fake.connections, 1)
    assert.ok(!fake.methods().includes('agent/pre-step'))
  })

  it('agent/disposed is a notification and drops the session cache', async () => {
    await connect()
    const s = host.session('gone')
    await s.userSays('q')
    await s.dispose()
    const n = await fake.waitFor((m) => m.method === 'agent/disposed')
    assert.equal(n.id, undefined)
    assert.deepEqual(n.params, { session: { id: 'gone', cwd: '/home/dev/starport' } })
    assert.equal(bridge.sessions.has('gone'), false)
  })

  it('never throws into the host, even when the host API misbehaves', async () => {
    await connect()
    const s = host.session('broken')
    s.surface = async () => {
      throw new Error('surface exploded')
    }
    await s.userSays('q')
    await s.modelStep({ text: 'a' })
    assert.deepEqual(host.failures, [])
    assert.ok(host.warnings.some((w) => w.includes('surface exploded')))
    // a hook payload without a session is ignored
    await host.emit('agent/pre-step', {})
    await host.emit('agent/inbox/inserted', { session: { nope: 1 } })
    // a session handle that throws: the adapter's last line of defence logs it
    const evil = {
      get id() {
        throw new Error('handle exploded')
      },
    }
    for (const hook of ['agent/inbox/inserted', 'agent/pre-step', 'agent/disposed']) await host.emit(hook, { session: evil, message: {} })
    assert.deepEqual(host.failures, [])
    assert.equal(host.warnings.filter((w) => w.includes('handle exploded')).length, 3)
  })

  it('no socket at all: one warning, and the host runs as if the plugin were absent', async () => {
    host = new MockHost()
    bridge = apply(host.ctx, { socketPath: path.join(base, 'nobody.sock'), reconnect: { initialDelayMs: 20, maxDelayMs: 40 } })
    // three attempts, backing off, still one warning (the link's timers are unref'd: hold the
    // test's event loop open meanwhile)
    const keepAlive = setInterval(() => {}, 1000)
    await new Promise((resolve) => {
      let n = 0
      bridge.link.on('attempt-failed', () => ++n === 3 && resolve())
    })
    clearInterval(keepAlive)
    assert.equal(host.sections.size, 0)
    assert.equal(host.warnings.length, 1)
    assert.match(host.warnings[0], /no socket/)
    assert.ok(!fs.existsSync(path.join(base, 'nobody.sock')))
  })
})
