// Bridge settings: where the daemon is and how long the host waits for it.
// Nothing here is memory behaviour: that is the daemon's config (rofmd's config.json).
// Zero dependencies: node: built-ins only.

import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export const DEFAULTS = Object.freeze({
  // false: the plugin registers nothing and never connects (an activation-time switch).
  enabled: true,
  // null: ROFMD_SOCKET_PATH, else the daemon's own default (see defaultSocketPath).
  socketPath: null,
  // Launch `rofmdCommand serve --socket <socketPath> ...autostartArgs` when the socket is missing.
  autostart: false,
  rofmdCommand: 'rofmd',
  autostartArgs: [],
  autostartLogFile: null,
  autostartCooldownMs: 60000,
  autostartWaitMs: 10000,
  // Per-call deadlines (ms). Past a deadline the request is cancelled ($/cancelRequest) and the
  // step goes on without memory; a late answer is discarded (a late archive is aborted).
  timeouts: Object.freeze({
    connectMs: 1000,
    initializeMs: 5000,
    inboxMs: 5000,
    preStepMs: 15000,
    toolMs: 20000,
    reportMs: 5000,
    sectionsMs: 5000,
  }),
  // Reconnection after the daemon goes away: exponential backoff between these bounds.
  reconnect: Object.freeze({ initialDelayMs: 250, maxDelayMs: 15000, factor: 2 }),
  // A request line larger than this is not sent (the daemon would close the connection).
  maxMessageBytes: 8 * 1024 * 1024,
})

/** PROTOCOL.md §1, as `rofmd serve` resolves it: `$XDG_RUNTIME_DIR/rofmd/rofmd.sock`, else
 * `/tmp/rofmd-<uid>/rofmd.sock`. */
export function defaultSocketPath(env = process.env, uid = currentUid()) {
  const runtime = env.XDG_RUNTIME_DIR
  if (runtime) return path.join(runtime, 'rofmd', 'rofmd.sock')
  return path.join('/tmp', `rofmd-${uid}`, 'rofmd.sock')
}

function currentUid() {
  return typeof process.getuid === 'function' ? process.getuid() : os.userInfo().uid
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function merge(base, over) {
  if (!isObject(over)) return base
  const out = { ...base }
  for (const [k, v] of Object.entries(over)) {
    if (k === '__proto__' || k === 'constructor' || k === 'prototype') continue
    out[k] = isObject(v) ? merge(isObject(base[k]) ? base[k] : {}, v) : Array.isArray(v) ? [...v] : v
  }
  return out
}

function readJson(file, warnings) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (err) {
    if (err && err.code === 'ENOENT') return undefined
    warnings.push(`ignored ${file}: ${err.message}`)
    return undefined
  }
}

function expandHome(p) {
  if (typeof p !== 'string') return p
  if (p === '~') return os.homedir()
  if (p.startsWith('~/') || p.startsWith('~\\')) return path.join(os.homedir(), p.slice(2))
  return p
}

function positive(value, fallback) {
  return Number.isFinite(value) && value > 0 ? value : fallback
}

/**
 * The effective settings: defaults ← `<pluginDir>/config.json` ← `<pluginDir>/config.local.json`
 * ← the host's plugin-row config. `socketPath`: that result, else `ROFMD_SOCKET_PATH`, else the
 * daemon's default rule. Returns `{ config, warnings }`.
 */
export function resolveConfig({ pluginDir, hostConfig, env = process.env } = {}) {
  const warnings = []
  let cfg = merge({}, DEFAULTS)
  if (pluginDir) {
    cfg = merge(cfg, readJson(path.join(pluginDir, 'config.json'), warnings))
    cfg = merge(cfg, readJson(path.join(pluginDir, 'config.local.json'), warnings))
  }
  cfg = merge(cfg, hostConfig)
  const socket = cfg.socketPath || env.ROFMD_SOCKET_PATH || defaultSocketPath(env)
  cfg.socketPath = path.resolve(expandHome(socket))
  cfg.enabled = cfg.enabled !== false
  cfg.autostart = cfg.autostart === true
  cfg.rofmdCommand = expandHome(String(cfg.rofmdCommand || 'rofmd'))
  cfg.autostartArgs = Array.isArray(cfg.autostartArgs) ? cfg.autostartArgs.map(String) : []
  cfg.autostartLogFile = cfg.autostartLogFile ? path.resolve(expandHome(cfg.autostartLogFile)) : null
  for (const key of Object.keys(DEFAULTS.timeouts)) {
    cfg.timeouts[key] = positive(cfg.timeouts[key], DEFAULTS.timeouts[key])
  }
  for (const key of Object.keys(DEFAULTS.reconnect)) {
    cfg.reconnect[key] = positive(cfg.reconnect[key], DEFAULTS.reconnect[key])
  }
  cfg.autostartCooldownMs = positive(cfg.autostartCooldownMs, DEFAULTS.autostartCooldownMs)
  cfg.autostartWaitMs = positive(cfg.autostartWaitMs, DEFAULTS.autostartWaitMs)
  cfg.maxMessageBytes = positive(cfg.maxMessageBytes, DEFAULTS.maxMessageBytes)
  return { config: cfg, warnings }
}
