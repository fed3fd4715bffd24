// dsh-rofm: the DeepSeek Harness bridge to the rofmd memory daemon (DSH host plugin entry).
// Zero dependencies, Node ESM. Everything host-specific is in lib/host.js.

import { fileURLToPath } from 'node:url'
import { Bridge } from './lib/bridge.js'
import { resolveConfig } from './lib/config.js'
import { createHost, INJECT, PLUGIN_NAME } from './lib/host.js'

export const name = PLUGIN_NAME
export const inject = INJECT
const pluginDir = fileURLToPath(new URL('.', import.meta.url))

/**
 * Cordis-style entry: `apply(ctx, config)`. `config` is the plugin row's config in the DSH
 * profile (merged over `config.json` / `config.local.json` in this directory). Returns the
 * running bridge (or null when disabled); the host's `dispose` event stops it.
 */
export function apply(ctx, config) {
  const host = createHost(ctx)
  const { config: cfg, warnings } = resolveConfig({ pluginDir, hostConfig: config })
  for (const w of warnings) host.log.warn(w)
  if (!cfg.enabled) {
    host.log.info('disabled (enabled:false): nothing registered, no connection')
    return null
  }
  const bridge = new Bridge(host, cfg)
  host.onDispose(() => bridge.dispose())
  host.log.info(`activated: platform=${process.platform}/${process.arch} node=${process.version} socket=${cfg.socketPath}`)
  return bridge.start()
}

export default { name, inject, apply }
