// The bundle as DSH installs it: manifest, locale, zero dependencies, one adapter module, and a
// README whose install line matches the manifest.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import * as plugin from '../index.js'

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8')
const pkg = JSON.parse(read('package.json'))
const readme = read('README.md')
const libFiles = fs.readdirSync(path.join(dir, 'lib')).filter((f) => f.endsWith('.js')).map((f) => path.join('lib', f))

// Every host API the adapter uses; README "What the bridge assumes of the host" lists each.
const HOST_CALLS = [
  'ctx.on(',
  'ctx.logger(',
  'ctx.version',
  'ctx.systemPrompt.section(',
  'ctx.tokenMeter.measure(',
  'ctx.tools.register(',
  'ctx.attachments.imageHostPath(',
  '.surface()',
  '.append(',
]

describe('the bundle', () => {
  it('package.json is the manifest the install steps expect', () => {
    assert.equal(pkg.name, 'dsh-rofm')
    assert.equal(pkg.type, 'module')
    assert.equal(pkg.main, 'index.js')
    assert.ok(fs.existsSync(path.join(dir, pkg.main)))
    assert.deepEqual(pkg.dsh.title, { zh: '记忆回忆', en: 'Memory Recall' })
    for (const key of ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies', 'engines']) {
      assert.equal(pkg[key], undefined, `${key}: zero dependencies, no DSH version pin (reference §3.1)`)
    }
    for (const f of pkg.files) assert.ok(fs.existsSync(path.join(dir, f)), f)
  })

  it('locale and mount declaration name the same plugin', () => {
    const zh = JSON.parse(read('locale/zh.json'))
    const en = JSON.parse(read('locale/en.json'))
    assert.equal(zh.name, pkg.name)
    assert.equal(en.name, pkg.name)
    assert.equal(zh.title, '记忆回忆')
    assert.equal(en.title, 'Memory Recall')
    const patch = read('cordis.patch.yml')
    assert.match(patch, /^ {2}dsh-rofm:$/m)
    assert.match(patch, /\$entry: \.\/index\.js/)
  })

  it('the entry is a Cordis-style plugin module', () => {
    assert.equal(plugin.name, pkg.name)
    assert.equal(typeof plugin.apply, 'function')
    assert.deepEqual(plugin.inject.optional, ['systemPrompt', 'tokenMeter', 'tools', 'attachments'])
    assert.equal(plugin.default.apply, plugin.apply)
  })

  it('imports only node: built-ins and its own files', () => {
    for (const f of ['index.js', ...libFiles]) {
      const src = read(f)
      for (const m of src.matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)) {
        assert.ok(m[1].startsWith('node:') || m[1].startsWith('./') || m[1].startsWith('../'), `${f} imports ${m[1]}`)
      }
      assert.doesNotMatch(src, /\brequire\(/, `${f}: ESM only`)
    }
  })

  it('the host API is used in lib/host.js only, and the README lists each call', () => {
    const adapter = read('lib/host.js').replaceAll('?.', '.')
    for (const call of HOST_CALLS) {
      assert.ok(adapter.includes(call), `lib/host.js uses ${call}`)
      const name = call.replace(/[(.]+$/, '').replace(/^\./, 'session.')
      assert.ok(readme.includes(name), `README lists ${name}`)
    }
    for (const f of libFiles.filter((f) => f !== path.join('lib', 'host.js'))) {
      const src = read(f)
      assert.doesNotMatch(src, /\bctx\b/, `${f} must not touch the host context`)
      assert.doesNotMatch(src, /\.(surface|append)\(/, `${f} must not call session methods`)
    }
    assert.doesNotMatch(read('index.js').replace(/createHost\(ctx\)|apply\(ctx, config\)/g, ''), /\bctx\./)
  })

  it("the README's install lines match the manifest", () => {
    const install = readme.match(/plugin_manager\(action: "install_bundle", target: "([^"]+)"\)/)
    assert.ok(install, 'plugin_manager install line')
    assert.ok(install[1].startsWith('/'), 'an absolute target')
    assert.ok(install[1].endsWith(`/bridge/${pkg.name}`), install[1])
    const cli = readme.match(/dsh plugin --profile desktop add "link:([^"]+)"/)
    assert.ok(cli, 'dsh CLI install line')
    assert.equal(cli[1], install[1])
    assert.ok(readme.includes(`plugin_manager(action: "remove_bundle", target: "${pkg.name}")`))
    assert.ok(readme.includes(pkg.dsh.title.zh) && readme.includes(pkg.dsh.title.en))
    // the directory the install line names is this one
    assert.equal(path.basename(dir), pkg.name)
    assert.equal(path.basename(path.dirname(dir)), 'bridge')
  })
})
