// The mock DSH host drives the bridge against a real `rofmd serve` through a whole conversation.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'

import { connectRpc } from '../lib/rpc.js'
import { estimateTokens } from './support/mock-host.mjs'
import { startBridged, stopBridged } from './support/bridged.mjs'
import { TURNS, scorer } from './support/conversation.mjs'
import { writePng } from './support/png.mjs'
import { diskFolders, indexIds, journals, meta, rofmd, sessionDir } from './support/daemon.mjs'

const FAST = { reconnect: { initialDelayMs: 50, maxDelayMs: 500 } }

function statsOf(memoryRoot, sid) {
  const file = path.join(sessionDir(memoryRoot, sid), 'stats.jsonl')
  if (!fs.existsSync(file)) return []
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

/** `status` over a connection of our own (the CLI is checked once, below). */
async function status(socket) {
  const rpc = await connectRpc(socket)
  try {
    return await rpc.request('status', undefined, { timeoutMs: 5000 })
  } finally {
    rpc.close()
  }
}

/** Bounded polling on the daemon's status, for effects of notifications (no answer to await). */
async function until(socket, predicate, what) {
  for (let i = 0; i < 100; i++) {
    const st = await status(socket)
    if (predicate(st)) return st
    await new Promise((r) => setTimeout(r, 20))
  }
  assert.fail(`status never showed ${what}`)
}

describe('bridge ↔ real rofmd daemon: a whole conversation', { timeout: 60000 }, () => {
  let d, host, bridge, s

  before(async () => {
    ;({ d, host, bridge } = await startBridged(FAST))
  })

  after(async () => {
    await stopBridged({ d, bridge })
  })

  it('registers exactly what initialize lists, and rofmd status shows the connection', async () => {
    assert.deepEqual(
      [...host.sections.entries()].map(([n, v]) => [n, v.order]),
      [['dsh-rofm:recall', 100], ['dsh-rofm:memory-tasks', 101], ['dsh-rofm:memory-rules', 102]],
    )
    const judge = host.tools.get('memory_judge')
    assert.ok(judge, 'memory_judge registered')
    assert.equal(typeof judge.description, 'string')
    assert.equal(judge.parameters.type, 'object')
    for (const hook of ['agent/inbox/inserted', 'agent/pre-step', 'agent/disposed']) {
      assert.equal(host.listeners(hook).length, 1, hook)
    }
    // passive archiving is on by default (rofmd's passive_scope "all"): listed, registered once
    assert.equal(host.listeners('session/event').length, 1, 'session/event, as the daemon lists it')
    assert.deepEqual(bridge.link.init.listeners.includes('session/event'), true)
    const cli = await rofmd(['status', '--socket', d.socket, '--json'])
    assert.equal(cli.code, 0, cli.stderr)
    const st = JSON.parse(cli.stdout)
    assert.ok(st.connections >= 2, `the bridge plus this status call: ${st.connections}`)
  })

  it('archives: applied through the host transaction, then committed', async () => {
    s = host.session('bridge-e2e', { scorer })
    await s.system('You are a helpful coding agent.')
    const imageFile = path.join(d.base, 'dashboard.png')
    const bytes = writePng(imageFile)
    let raw
    for (const [i, turn] of TURNS.entries()) {
      const t = i === 2 ? { ...turn, image: { path: imageFile, bytes, name: 'dashboard.png' } } : turn
      await s.playTurn(t)
    }
    raw = s.events
      .filter((e) => e.surfaceOp === 'append')
      .reduce((a, e) => a + estimateTokens(e.type === 'user/message' ? e.data : e.data.message), 0)
    assert.deepEqual(host.failures, [])
    assert.deepEqual(host.warnings, [])

    // the transaction, bracket by bracket
    const starts = s.events.filter((e) => e.type === 'compaction/start')
    assert.ok(starts.length >= 2, `several archives (${starts.length})`)
    for (const start of starts) {
      const id = start.data.compactionId
      const i = s.events.indexOf(start)
      const [summary, checkpoint, end] = s.events.slice(i + 1, i + 4)
      assert.equal(summary.type, 'compaction/summary')
      assert.equal(summary.data.compactionId, id)
      assert.equal(summary.data.provider, 'dsh-rofm')
      assert.ok(summary.data.shadowedSeqs.length > 0)
      assert.equal(checkpoint.type, 'user/message')
      assert.equal(checkpoint.surfaceOp.op, 'replace')
      assert.equal(checkpoint.data.source.kind, 'compact-checkpoint')
      assert.match(checkpoint.data.content[0].text, /^\[memory\] \d+ 段更早的对话已归档到 memory\//)
      assert.equal(end.type, 'compaction/end')
      assert.equal(end.data.compactionId, id)
      assert.equal(end.data.error, undefined)
    }
    assert.equal(s.bracket, null)
    // the notes merge: one checkpoint of ours on the surface
    assert.equal(s.checkpoints().length, 1)
    // the context stayed inside the window although the conversation is bigger than it
    assert.ok(raw > s.contextWindow, `conversation ${raw} tokens > window ${s.contextWindow}`)
    for (const r of s.requests) assert.ok(r.tokens < s.contextWindow, `request at ${r.tokens} tokens`)
    // on disk: folders indexed, every archive committed (no journal left), the image copied
    const folders = diskFolders(d.memoryRoot, 'bridge-e2e')
    assert.ok(folders.length > 0)
    assert.deepEqual(indexIds(d.memoryRoot, 'bridge-e2e'), folders)
    assert.deepEqual(journals(d.memoryRoot, 'bridge-e2e'), [])
    const images = path.join(sessionDir(d.memoryRoot, 'bridge-e2e'), 'images')
    assert.ok(fs.readdirSync(images).some((f) => f.endsWith('.png')), 'archived image copied from its host path')
  })

  it('memory_judge is scored through the bridge', () => {
    assert.ok(s.judges.length >= 1)
    for (const j of s.judges) {
      assert.equal(j.result.isError, false, JSON.stringify(j.result))
      assert.match(j.result.content[0].text, /^已更新 \d+ 条/)
    }
    const scored = s.judges.flatMap((j) => j.ids)
    const metas = scored.map((id) => meta(d.memoryRoot, 'bridge-e2e', id))
    assert.ok(metas.every((m) => m.scored === true && m.alphaSource === 'llm' && m.keywords.length >= 3))
    assert.ok(metas.some((m) => m.keywords.includes('星港')))
  })

  it('recall sections are injected before the model request', async () => {
    await s.userSays('星港项目的 API 端口是多少?')
    const r1 = await s.modelStep({ text: '星港项目的 API 端口是 8443。' })
    assert.equal(r1.startsRequestSeries, true, 'a changed block rewrites the head node')
    assert.match(r1.system, /^## 记忆回忆/)
    assert.ok(r1.system.includes('8443'))
    await s.userSays('Where does my sister Alice live?')
    const r2 = await s.modelStep({ text: 'In Lisbon.' })
    assert.ok(r2.system.includes('Lisbon'))
    assert.deepEqual(host.failures, [])
  })

  for (const refuse of ['replace', 'start']) {
    it(`a transaction the host refuses (${refuse}) is aborted, nothing left on disk`, async () => {
      const sid = `bridge-refuse-${refuse}`
      const r = host.session(sid, { scorer })
      r.refuse = refuse
      await r.system('You are a helpful coding agent.')
      for (const turn of TURNS.slice(0, 7)) await r.playTurn(turn)
      assert.deepEqual(host.failures, [])
      assert.equal(r.checkpoints().length, 0, 'the context is untouched')
      assert.equal(r.nodes.length, r.events.filter((e) => e.surfaceOp === 'append').length)
      assert.equal(r.bracket, null, 'no transaction left open')
      const ends = r.events.filter((e) => e.type === 'compaction/end')
      if (refuse === 'replace') {
        assert.ok(ends.length >= 1 && ends.every((e) => typeof e.data.error === 'string'), 'bracket closed with the error')
      } else {
        assert.equal(ends.length, 0)
      }
      const aborts = statsOf(d.memoryRoot, sid).filter((x) => x.type === 'archive-abort')
      assert.ok(aborts.length >= 1, 'the daemon was told')
      assert.ok(aborts.every((a) => a.rolledBack.length > 0 && /host refused/.test(a.reason)))
      assert.deepEqual(diskFolders(d.memoryRoot, sid), [])
      assert.deepEqual(indexIds(d.memoryRoot, sid), [])
      assert.deepEqual(journals(d.memoryRoot, sid), [])
      assert.ok(host.warnings.some((w) => w.includes('refused')))
    })
  }

  it('agent/disposed releases the session in the daemon', async () => {
    const before = (await status(d.socket)).sessionsLoaded
    await host.sessionsById.get('bridge-refuse-start').dispose()
    await until(d.socket, (st) => st.sessionsLoaded === before - 1, `sessionsLoaded ${before - 1}`)
    assert.equal(bridge.sessions.has('bridge-refuse-start'), false)
  })

  it('disabling the plugin row unregisters everything and closes the connection', async () => {
    const before = (await status(d.socket)).connections
    await host.disposePlugin()
    assert.equal(host.sections.size, 0)
    assert.equal(host.tools.size, 0)
    for (const hook of ['agent/inbox/inserted', 'agent/pre-step', 'agent/disposed']) assert.equal(host.listeners(hook).length, 0)
    await until(d.socket, (st) => st.connections === before - 1, 'the bridge connection gone')
    // the host goes on without the plugin
    await s.userSays('还在吗?')
    await s.modelStep({ text: '在。' })
    assert.deepEqual(host.failures, [])
  })
})
