// The daemon is SIGKILLed and restarted mid-conversation: the host never fails a step.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'

import { startBridged, stopBridged } from './support/bridged.mjs'
import { TURNS, scorer, nginxLog, testOutput } from './support/conversation.mjs'
import { startDaemon, diskFolders, indexIds, journals, within } from './support/daemon.mjs'

const SID = 'bridge-restart'

function heavy(i) {
  return {
    user: `第 ${i} 次:再看一次日志和测试。`,
    steps: [
      { text: '读取日志。', tools: [['bash', { cmd: 'tail -n 150 error.log' }, nginxLog(150, 20 + i)]] },
      { text: '再跑测试。', tools: [['bash', { cmd: 'pytest -q' }, testOutput(150, 20 + i)]] },
      { text: '日志和测试都看完了。' },
    ],
  }
}

function unavailableWarnings(host) {
  return host.warnings.filter((w) => w.includes('rofmd unavailable'))
}

describe('the daemon dies and comes back mid-conversation', { timeout: 60000 }, () => {
  let d, host, bridge, s

  before(async () => {
    ;({ d, host, bridge } = await startBridged({ reconnect: { initialDelayMs: 50, maxDelayMs: 400 } }))
    s = host.session(SID, { scorer })
    await s.system('You are a helpful coding agent.')
  })

  after(async () => {
    await stopBridged({ d, bridge }, 'SIGKILL')
  })

  it('before the crash: archives committed and scored', async () => {
    for (const turn of TURNS.slice(0, 6)) await s.playTurn(turn)
    assert.ok(s.checkpoints().length === 1)
    assert.ok(s.judges.length >= 1)
    assert.deepEqual(journals(d.memoryRoot, SID), [])
    assert.deepEqual(host.failures, [])
    assert.deepEqual(host.warnings, [])
  })

  let foldersBefore
  let eventsBefore
  it('SIGKILL between steps: the host goes on, context untouched, one warning', async () => {
    foldersBefore = diskFolders(d.memoryRoot, SID)
    const exit = await d.stop('SIGKILL')
    assert.equal(exit.signal, 'SIGKILL')
    eventsBefore = s.events.length
    const tokensBefore = s.meter().totalTokens
    for (const turn of [TURNS[6], TURNS[7], heavy(1)]) await s.playTurn(turn)
    assert.deepEqual(host.failures, [])
    const during = s.events.slice(eventsBefore)
    assert.equal(during.filter((e) => e.type.startsWith('compaction/')).length, 0, 'no archive while down')
    assert.ok(s.meter().totalTokens > tokensBefore, 'nothing removed from the context')
    assert.equal(unavailableWarnings(host).length, 1, host.warnings.join('\n'))
    // the recall/task sections keep rendering from the cache
    assert.ok(s.requests.at(-1).system.includes('记忆'))
    // a tool call while down is a readable tool error, not a host failure
    const res = await host.tools.get('memory_judge').execute({ updates: [] }, { session: s, turn: s.turn, callId: 'c-down' })
    assert.equal(res.isError, true)
    assert.match(res.content[0].text, /rofmd/)
  })

  it('restarted on the same socket: reconnects, recalls old memories, archives again', async () => {
    d = await startDaemon({ base: d.base })
    await within(bridge.link.whenReady(), 10000, 'the bridge to connect')
    assert.deepEqual(diskFolders(d.memoryRoot, SID), foldersBefore, 'nothing lost, nothing added')
    // the registrations survived the reconnection, once each
    assert.deepEqual([...host.tools.keys()].sort(), ['memory_control', 'memory_forget', 'memory_image', 'memory_judge', 'memory_recall'])
    assert.equal(host.sections.size, 3)
    assert.equal(host.listeners('agent/pre-step').length, 1)
    await s.userSays('星港项目的 API 端口是多少?')
    const r = await s.modelStep({ text: '8443。' })
    assert.ok(r.system.includes('8443'), 'recall from the archive written before the crash')
    const since = s.events.length
    await s.playTurn(heavy(2))
    const applied = s.events.slice(since).filter((e) => e.type === 'compaction/end')
    assert.ok(applied.length >= 1, 'the grown context is archived after the restart')
    assert.ok(applied.every((e) => e.data.error === undefined))
    assert.ok(diskFolders(d.memoryRoot, SID).length > foldersBefore.length)
    assert.deepEqual(indexIds(d.memoryRoot, SID), diskFolders(d.memoryRoot, SID))
    assert.deepEqual(journals(d.memoryRoot, SID), [], 'every archive after the restart committed')
    assert.deepEqual(host.failures, [])
  })

  it('SIGKILL while a step is in flight, then a second restart', async () => {
    const warned = unavailableWarnings(host).length
    const step = s.playTurn(heavy(3))
    await d.stop('SIGKILL')
    await step
    await s.playTurn(heavy(4))
    assert.deepEqual(host.failures, [])
    assert.equal(unavailableWarnings(host).length, warned + 1, 'one warning for this outage')
    assert.equal(s.bracket, null, 'no transaction left open on the host')
    d = await startDaemon({ base: d.base })
    await within(bridge.link.whenReady(), 10000, 'the bridge to connect')
    const since = s.events.length
    await s.playTurn(heavy(5))
    assert.ok(s.events.slice(since).some((e) => e.type === 'compaction/end' && e.data.error === undefined))
    assert.deepEqual(indexIds(d.memoryRoot, SID), diskFolders(d.memoryRoot, SID))
    assert.deepEqual(host.failures, [])
  })
})
