// Start and stop a real `rofmd serve` on a private socket and memory root.
import { spawn, execFile } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
export const REPO = path.resolve(here, '../../../..')
export const ROFMD_BIN = process.env.ROFMD_BIN || path.join(REPO, '.venv', 'bin', 'rofmd')

const live = new Set()
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL')
    } catch {
      // already gone
    }
  }
})

/** `promise`, or a failure naming `what` after `ms` (a test never hangs). */
export function within(promise, ms, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** A short temp dir (Unix socket paths are limited to ~108 bytes). */
export function tempBase(prefix = 'rofmd-b-') {
  return fs.mkdtempSync(path.join('/tmp', prefix))
}

export function cleanEnv(extra = {}) {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('ROFMD_') || k.startsWith('NOTIFY_') || k.startsWith('LISTEN_')) continue
    env[k] = v
  }
  return { ...env, ROFMD_WATCH_CONFIG: 'false', PYTHONUNBUFFERED: '1', ...extra }
}

export function daemonPaths(base) {
  return {
    base,
    socket: path.join(base, 'run', 'rofmd.sock'),
    memoryRoot: path.join(base, 'mem'),
    configDir: path.join(base, 'cfg'),
    log: path.join(base, 'daemon.log'),
  }
}

/** Connect and ping until the daemon answers (bounded polling), or fail with its log. */
export async function waitReady(socket, child, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`rofmd exited early with ${child.exitCode}`)
    if (await pingOnce(socket)) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`rofmd did not answer on ${socket} within ${timeoutMs} ms`)
}

function pingOnce(socket) {
  return new Promise((resolve) => {
    const s = net.createConnection({ path: socket })
    let buf = ''
    const done = (ok) => {
      s.destroy()
      resolve(ok)
    }
    s.setTimeout(2000, () => done(false))
    s.on('error', () => done(false))
    s.on('connect', () => s.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n'))
    s.on('data', (d) => {
      buf += d
      if (buf.includes('\n')) done(buf.includes('"pong":true'))
    })
  })
}

/** `rofmd serve` on `base` (created when absent); resolves once it answers ping. */
export async function startDaemon({ base = tempBase(), config } = {}) {
  const p = daemonPaths(base)
  fs.mkdirSync(p.configDir, { recursive: true })
  if (config) fs.writeFileSync(path.join(p.configDir, 'config.json'), JSON.stringify(config))
  const out = fs.openSync(p.log, 'a')
  const child = spawn(
    ROFMD_BIN,
    // its own (absent) session logs to tail, never the machine user's
    ['serve', '--socket', p.socket, '--memory-root', p.memoryRoot, '--config-dir', p.configDir, '--sessions-dir', path.join(base, 'sessions'), '--log-format', 'json'],
    { stdio: ['ignore', out, out], env: cleanEnv() },
  )
  fs.closeSync(out)
  live.add(child)
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    live.delete(child)
    resolve({ code, signal })
  }))
  try {
    await waitReady(p.socket, child)
  } catch (err) {
    child.kill('SIGKILL')
    await exited
    throw new Error(`${err.message}\n--- daemon log ---\n${fs.readFileSync(p.log, 'utf8')}`)
  }
  return {
    ...p,
    child,
    exited,
    /** SIGTERM (graceful) or any signal; resolves with the exit. */
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}

/** Track a process started elsewhere (autostart) so the exit handler kills it too. */
export function track(child) {
  live.add(child)
  child.once('exit', () => live.delete(child))
}

/** `rofmd <args>` → { code, stdout, stderr }. */
export function rofmd(args) {
  return new Promise((resolve) => {
    execFile(ROFMD_BIN, args, { env: cleanEnv(), timeout: 20000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr })
    })
  })
}

export function removeBase(base) {
  fs.rmSync(base, { recursive: true, force: true })
}

// ---- what the daemon wrote ------------------------------------------------------------

export function sessionDir(memoryRoot, sid) {
  return path.join(memoryRoot, 'sessions', sid)
}

export function diskFolders(memoryRoot, sid) {
  const dir = sessionDir(memoryRoot, sid)
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir).filter((n) => n.startsWith('mem-')).sort()
}

export function indexIds(memoryRoot, sid) {
  const file = path.join(sessionDir(memoryRoot, sid), 'index.json')
  if (!fs.existsSync(file)) return []
  return JSON.parse(fs.readFileSync(file, 'utf8')).folders.map((f) => f.id).sort()
}

export function journals(memoryRoot, sid) {
  const dir = sessionDir(memoryRoot, sid)
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir).filter((n) => n.startsWith('.commit-'))
}

export function meta(memoryRoot, sid, folder) {
  return JSON.parse(fs.readFileSync(path.join(sessionDir(memoryRoot, sid), folder, 'meta.json'), 'utf8'))
}
