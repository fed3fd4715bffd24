// A deterministic conversation (after rofmd/demo_script.py): facts worth remembering written by
// hand, and bulky tool output that fills the context window.

export const START_MS = 1_793_610_000_000 // 2026-11-02 09:00 UTC
export const MINUTE_MS = 60_000

function pad(n, w = 2) {
  return String(n).padStart(w, '0')
}

export function nginxLog(n, seed) {
  const lines = []
  for (let i = 0; i < n; i++) {
    const code = [502, 504, 499, 404][(i * 7 + seed) % 4]
    lines.push(
      `2026/11/02 09:${pad((i + seed) % 60)}:${pad((i * 13) % 60)} [error] 1187#1187: *${4000 + i} upstream returned ${code} while reading response header from upstream, client: 10.0.${seed % 8}.${i % 250}, server: starport.local, request: "GET /api/v2/items/${i} HTTP/1.1", upstream: "http://127.0.0.1:8443/api/v2/items/${i}"`,
    )
  }
  return lines.join('\n')
}

export function testOutput(n, seed) {
  const lines = [`============================= test session starts (${seed}) ==============================`]
  for (let i = 0; i < n; i++) {
    const status = (i + seed) % 9 ? 'PASSED' : 'FAILED'
    lines.push(`tests/test_api_${i % 17}.py::test_case_${pad(i, 3)}_${seed} ${status} [${String(Math.floor((i * 100) / n)).padStart(3)}%]`)
  }
  lines.push(`=========== ${n - Math.floor(n / 9)} passed, ${Math.floor(n / 9)} failed in ${(3.2 + seed).toFixed(2)}s ===========`)
  return lines.join('\n')
}

export function listing(n, seed) {
  const lines = []
  for (let i = 0; i < n; i++) {
    lines.push(`-rw-r--r-- 1 dev dev ${String(1000 + ((i * 37 + seed) % 9000)).padStart(6)} Nov  2 09:${pad(i % 60)} src/starport/module_${seed}_${pad(i, 3)}.py`)
  }
  return lines.join('\n')
}

/** Turns: { user, steps: [{ text, tools: [[name, args, output]] }] }. */
export const TURNS = [
  {
    user: '我们在做一个叫「星港」(Starport)的项目,部署在 Ubuntu 24.04 上。我决定把 API 端口定为 8443,以后都用这个端口,不要再用 8080。先帮我看一下仓库结构。',
    steps: [
      { text: '好的,记下了:星港项目的 API 端口统一用 8443。我先列一下仓库。', tools: [['bash', { cmd: 'ls -l src/starport' }, listing(90, 1)]] },
      { text: '仓库结构清楚了:核心代码在 src/starport 下,共 90 个模块。' },
    ],
  },
  {
    user: 'Please check the nginx error log, the staging server keeps returning 502.',
    steps: [
      { text: 'Let me read the last lines of the error log.', tools: [['bash', { cmd: 'tail -n 120 /var/log/nginx/error.log' }, nginxLog(120, 2)]] },
      { text: 'The upstream on 127.0.0.1:8443 times out under load: the worker pool is exhausted.' },
    ],
  },
  {
    user: '我喜欢川菜,尤其是水煮鱼;以后帮我订团队午餐都按这个口味来,不要订日料。',
    steps: [{ text: '明白:您的口味偏好是川菜(尤其水煮鱼),以后订团队午餐都按川菜来,不订日料。' }],
  },
  {
    user: 'Run the API test suite and tell me what fails.',
    steps: [
      { text: 'Running the suite.', tools: [['bash', { cmd: 'pytest tests -q' }, testOutput(160, 3)]] },
      { text: '17 cases fail, all in the retry path of the items endpoint.' },
    ],
  },
  {
    user: 'My sister Alice lives in Lisbon, and her birthday is on March 14. Remind me a week before, I always forget.',
    steps: [{ text: 'Noted: your sister Alice lives in Lisbon and her birthday is March 14; I will remind you on March 7.' }],
  },
  {
    user: '把 nginx 日志再看一遍,这次看 504。',
    steps: [
      { text: '再读一次日志。', tools: [['bash', { cmd: 'grep 504 /var/log/nginx/error.log | tail -n 150' }, nginxLog(150, 5)]] },
      { text: '504 集中在 /api/v2/items 的长查询上,建议给这个接口加 30 秒超时和分页。' },
    ],
  },
  {
    user: '再跑一次测试,看看修完之后还有多少失败。',
    steps: [
      { text: '再跑一遍测试。', tools: [['bash', { cmd: 'pytest tests -q' }, testOutput(180, 6)]] },
      { text: '还剩 20 个失败,都在分页相关的用例里。' },
    ],
  },
  {
    user: 'List the migration files so we can check the order.',
    steps: [
      { text: 'Listing them.', tools: [['bash', { cmd: 'ls -l migrations' }, listing(140, 7)]] },
      { text: 'The migrations are in order; 0140 is the newest.' },
    ],
  },
  {
    user: '最后再看一次错误日志,确认一下上游是否恢复。',
    steps: [
      { text: '读取最新日志。', tools: [['bash', { cmd: 'tail -n 160 /var/log/nginx/error.log' }, nginxLog(160, 9)]] },
      { text: '上游已经恢复,最近十分钟没有新的 502。' },
    ],
  },
]

/** What a cooperative model submits for one task-block item (keywords from known facts). */
export function scorer(id, text, review) {
  if (review) return { id, keep: true, reason: '仍然成立' }
  const facts = [
    ['星港', 0.95, ['星港', 'API', '端口', '8443', 'Starport']],
    ['Lisbon', 0.9, ['Alice', 'Lisbon', 'sister', 'birthday']],
    ['川菜', 0.9, ['川菜', '口味', '午餐', '水煮鱼']],
  ]
  for (const [needle, alpha, keywords] of facts) {
    if (text.includes(needle)) return { id, alpha, beta: 5, keywords, reason: 'mock model: a durable fact' }
  }
  return { id, alpha: 0.2, beta: 1, keywords: ['日志', '测试', '输出'], reason: 'mock model: routine tool output' }
}
