"""Seeded secrets and look-alike ordinary text, for the secrets tests (engine and end to end).

The secret values are generated from a fixed seed (never real keys, and nothing a
repository scanner flags in this file), each planted in a realistic context: English and
Chinese chat, a config paste, a code block, tool output, the JSON arguments of a tool
call. ``ORDINARY`` is text of similar shape that must come through archiving unchanged:
commit SHAs, checksums, UUIDs, base64 images, paths, URLs, identifiers, code that merely
names passwords and tokens, prose about them.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

_rng = random.Random(19)
_ALNUM = string.ascii_letters + string.digits
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"


def _pick(alphabet: str, n: int) -> str:
    # every class present, so a value is never accidentally a plain word
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        if n < 8 or (
            any(c.isdigit() for c in value)
            and any(c.islower() for c in value) == any(c.islower() for c in alphabet)
        ):
            return value


@dataclass(frozen=True)
class Planted:
    """One secret: its kind (as the placeholder names it), the value, the text around it."""

    kind: str
    value: str
    text: str
    role: str = "user"  # user | assistant | tool | tool-call


def _pem_body() -> str:
    return "\n".join(_pick(_B64, 64) for _ in range(6)) + "\n" + _pick(_B64, 20) + "=="


AWS_KEY = "AKIA" + _pick(string.ascii_uppercase + string.digits, 16)
AWS_SECRET = _pick(_B64, 40)
GITHUB = "ghp_" + _pick(_ALNUM, 36)
GITLAB = "glpat-" + _pick(_URLSAFE, 20)
SLACK = f"xoxb-{_pick(string.digits, 12)}-{_pick(string.digits, 13)}-{_pick(_ALNUM, 24)}"
STRIPE = "sk_live_" + _pick(_ALNUM, 24)
GOOGLE = "AIza" + _pick(_URLSAFE, 35)
OPENAI = "sk-proj-" + _pick(_URLSAFE, 48)
NPM = "npm_" + _pick(_ALNUM, 36)
HF = "hf_" + _pick(_ALNUM, 34)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJ"
    + _pick(_URLSAFE, 40)
    + "."
    + _pick(_URLSAFE, 43)
)
PEM_BODY = _pem_body()
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
OPENSSH_BODY = _pick(_B64, 70)
DB_PASSWORD = "Tr0ub4dor&3x"
DSN_PASSWORD = "pgS3cret2024"
BEARER = _pick(_URLSAFE, 32)
BLOB = _pick(_B64, 44)
CJK_PASSWORD = "Mima2024xyz"
YAML_PASSWORD = "correcthorsebatterystaple9"
JSON_KEY = _pick(_ALNUM, 32)
BASIC = "YWRtaW46" + _pick(_B64, 16)

PLANTED: tuple[Planted, ...] = (
    Planted("aws-key", AWS_KEY, f"my AWS access key id is {AWS_KEY}, region us-east-1"),
    Planted(
        "api-key",
        AWS_SECRET,
        f"[default]\naws_access_key_id = {AWS_KEY}\naws_secret_access_key = {AWS_SECRET}\n",
        "tool",
    ),
    Planted("github-token", GITHUB, f"用这个 token 推送：{GITHUB} 用完就删"),
    Planted("gitlab-token", GITLAB, f"CI 变量 GITLAB_TOKEN={GITLAB}", "assistant"),
    Planted("slack-token", SLACK, f"```\nSLACK_BOT={SLACK}\n```"),
    Planted("stripe-key", STRIPE, f"stripe.api_key = '{STRIPE}'  # live!", "tool"),
    Planted("google-api-key", GOOGLE, f"地图接口的 key：{GOOGLE}"),
    Planted("api-key", OPENAI, f"export OPENAI_API_KEY={OPENAI}"),
    Planted("npm-token", NPM, f"//registry.npmjs.org/:_authToken={NPM}", "tool"),
    Planted("huggingface-token", HF, f"huggingface-cli login --token {HF}"),
    Planted("jwt", JWT, f"会话 cookie 里是 {JWT} ，过期时间一小时", "assistant"),
    Planted("private-key", PEM_BODY.split("\n")[0], f"这是服务器的私钥：\n{PEM}\n别外传"),
    Planted(
        "private-key",
        OPENSSH_BODY,
        '{"path":"id_ed25519","content":"-----BEGIN OPENSSH PRIVATE KEY-----\\n'
        + OPENSSH_BODY
        + '\\n-----END OPENSSH PRIVATE KEY-----\\n"}',
        "tool-call",
    ),
    Planted(
        "password", DB_PASSWORD, f"# .env\nDB_HOST=db.internal\nDB_PASSWORD={DB_PASSWORD}\n", "tool"
    ),
    Planted(
        "password",
        DSN_PASSWORD,
        f"连接串是 postgres://app_user:{DSN_PASSWORD}@db.example.com:5432/orders",
    ),
    Planted(
        "bearer-token",
        BEARER,
        f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com/v1/me',
        "assistant",
    ),
    Planted("basic-auth", BASIC, f"Authorization: Basic {BASIC}", "tool"),
    Planted("high-entropy", BLOB, f"the signing salt is {BLOB} (keep it safe)"),
    Planted("password", CJK_PASSWORD, f"我的邮箱密码是 {CJK_PASSWORD}，帮我记一下"),
    Planted(
        "password",
        YAML_PASSWORD,
        f"```yaml\ndatabase:\n  user: app\n  password: {YAML_PASSWORD}\n```",
    ),
    Planted("api-key", JSON_KEY, f'{{"service": "weather", "api_key": "{JSON_KEY}"}}', "tool"),
)
"""At least twelve kinds, in English and Chinese, in chat, config, code and tool output."""

SECRET_VALUES: tuple[str, ...] = tuple(dict.fromkeys(p.value for p in PLANTED))

_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAGXRFWHRTb2Z0d2FyZQBBZG9iZSBJbWFnZVJlYWR5"
    "ccllPAAAAyRpVFh0WE1MOmNvbS5hZG9iZS54bXAAAAAAADw/eHBhY2tldCBiZWdpbj0i77u/IiBpZD0iVzVNME1w"
)

PLACEHOLDER_LINE = "[secret:api-key …c9f2] was rotated; password=[secret:password] stays"
"""Placeholders of an earlier redaction: never redacted again."""

ORDINARY: tuple[str, ...] = (
    "fixed in commit 3f2a9c1e5b7d4a6f8e0c2b4d6a8f0e1c3b5d7a9f, see 9fceb02 and a1b2c3d",
    "sha256sum: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt",
    "request id 123e4567-e89b-12d3-a456-426614174000 failed; retry with 550e8400-e29b-41d4-a716-446655440000",
    f"头像：data:image/png;base64,{_PNG}",
    f'<img src="data:image/png;base64,{_PNG}">',
    "library at /usr/lib/x86_64-linux-gnu/libssl.so.3 and src/components/UserProfile/index.tsx",
    "see https://github.com/example/project/blob/main/docs/Configuration.md#tokens",
    "GET http://localhost:8080/api/v1/users/12345/Profile?id=42&page=2",
    "```python\ntoken = tokenizer.encode(text)\npassword = getpass.getpass()\n"
    'api_key = os.environ["OPENAI_API_KEY"]\nsecret = None\nmax_tokens = 4096\n'
    "if password == confirm:\n    pass\n```",
    "def check_password(password: str) -> bool:\n    return bool(password)",
    "interface Login { username: string; password: string; token?: Token }",
    "The password must be at least 8 characters long, and the token expires in 1 hour.",
    "Basic authentication is deprecated; use a token-based flow instead.",
    "password: please choose something long",
    "请输入密码。密码是什么？我忘了密码，能重置吗",
    "类名 AbstractSingletonProxyFactoryBean 和方法 getUserAccountDetailsFromDatabase2",
    "pod nginx-deployment-66b6c48dd5-4jlzp restarted; image sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1",
    "integrity sha512-7fV3pLk2q9ZxR1mN8bT4cY6uW0eH5jD3gA2sK7lP9oQ1rE4tI6yU8wB0vC2xZ5nM3hJ7fG1dS9aL4kP6qR8tY==",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host",
    "订单号 2024112300012345，快递单号 SF1234567890123",
    "version v1.2.3-beta.4+build.567 of @scope/package-name",
    PLACEHOLDER_LINE,
    "第3个问题：请帮我看看配置文件。" + "内容" * 40,
)
"""Ordinary text of similar shape: archived exactly as written."""
