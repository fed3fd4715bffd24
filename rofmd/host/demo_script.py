"""The conversation `rofmd demo` plays: Chinese and English, tools, an image, pinned context.

It is generated deterministically from a short script rather than stored as a
big JSON file: the facts worth remembering are written by hand, and the bulk
that fills the context window (logs, listings, test output) is produced by
small generators, the way tool output fills a real agent's context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# 2026-11-02 09:00:00 UTC, a Monday; each turn advances the clock.
START_MS = 1_793_610_000_000
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Step:
    """One model step: what the assistant says and the tools it calls."""

    text: str
    tools: tuple[tuple[str, dict[str, Any], str], ...] = ()


@dataclass(frozen=True)
class Turn:
    """One user turn and the model steps that answer it."""

    user: str
    steps: tuple[Step, ...]
    image: str | None = None  # file name of an image the user attaches
    pinned: str | None = None  # a runtime-context note the host pins before the turn


@dataclass(frozen=True)
class Question:
    """A later question whose answer was archived; `expect` must come back in the recall block."""

    text: str
    expect: str


@dataclass(frozen=True)
class Script:
    """The whole demo conversation."""

    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    context_window: int = 32_768
    notes: dict[str, str] = field(default_factory=dict)


def nginx_log_text(n: int, seed: int) -> str:
    lines = []
    for i in range(n):
        code = (502, 504, 499, 404)[(i * 7 + seed) % 4]
        lines.append(
            f"2026/11/02 09:{(i + seed) % 60:02d}:{(i * 13) % 60:02d} [error] 1187#1187: *{4000 + i} "
            f"upstream returned {code} while reading response header from upstream, client: "
            f'10.0.{seed % 8}.{i % 250}, server: starport.local, request: "GET /api/v2/items/{i} '
            f'HTTP/1.1", upstream: "http://127.0.0.1:8443/api/v2/items/{i}"'
        )
    return "\n".join(lines)


def pytest_output_text(n: int, seed: int) -> str:
    lines = [
        f"============================= test session starts ({seed}) =============================="
    ]
    for i in range(n):
        status = "PASSED" if (i + seed) % 9 else "FAILED"
        lines.append(
            f"tests/test_api_{i % 17}.py::test_case_{i:03d}_{seed} {status} [{(i * 100) // n:3d}%]"
        )
    lines.append(
        f"=========== {n - n // 9} passed, {n // 9} failed in {3.2 + seed:.2f}s ==========="
    )
    return "\n".join(lines)


def listing_text(n: int, seed: int) -> str:
    return "\n".join(
        f"-rw-r--r-- 1 dev dev {1000 + (i * 37 + seed) % 9000:6d} Nov  2 09:{i % 60:02d} "
        f"src/starport/module_{seed}_{i:03d}.py"
        for i in range(n)
    )


def demo_script() -> Script:
    """The conversation, deterministic."""
    turns = (
        Turn(
            "我们在做一个叫「星港」(Starport)的项目,部署在 Ubuntu 24.04 上。我决定把 API 端口定为 8443,"
            "以后都用这个端口,不要再用 8080。先帮我看一下仓库结构。",
            (
                Step(
                    "好的,记下了:星港项目的 API 端口统一用 8443。我先列一下仓库。",
                    (("bash", {"cmd": "ls -l src/starport"}, listing_text(90, 1)),),
                ),
                Step("仓库结构清楚了:核心代码在 src/starport 下,共 90 个模块。"),
            ),
            pinned="运行环境:工作目录 /home/dev/starport,shell=bash,时区 Asia/Shanghai。",
        ),
        Turn(
            "Please check the nginx error log, the staging server keeps returning 502.",
            (
                Step(
                    "Let me read the last lines of the error log.",
                    (
                        (
                            "bash",
                            {"cmd": "tail -n 120 /var/log/nginx/error.log"},
                            nginx_log_text(120, 2),
                        ),
                    ),
                ),
                Step(
                    "The upstream on 127.0.0.1:8443 times out under load: the 502s come from the "
                    "worker pool being exhausted. Raising `worker_connections` to 4096 should help."
                ),
            ),
        ),
        Turn(
            "我喜欢川菜,尤其是水煮鱼;以后帮我订团队午餐都按这个口味来,不要订日料。",
            (Step("明白:您的口味偏好是川菜(尤其水煮鱼),以后订团队午餐都按川菜来,不订日料。"),),
        ),
        Turn(
            "Run the API test suite and tell me what fails.",
            (
                Step(
                    "Running the suite.",
                    (("bash", {"cmd": "pytest tests -q"}, pytest_output_text(160, 3)),),
                ),
                Step("17 cases fail, all in the retry path of the items endpoint."),
            ),
        ),
        Turn(
            "My sister Alice lives in Lisbon, and her birthday is on March 14. Remind me a week "
            "before, I always forget.",
            (
                Step(
                    "Noted: your sister Alice lives in Lisbon and her birthday is March 14; I will "
                    "remind you on March 7."
                ),
            ),
        ),
        Turn(
            "这是监控面板的截图,帮我看看 CPU 曲线有没有异常。",
            (Step("截图里 CPU 在 09:40 左右有一个到 92% 的尖峰,和 502 的时间点吻合。"),),
            image="dashboard.png",
        ),
        Turn(
            "把 nginx 日志再看一遍,这次看 504。",
            (
                Step(
                    "再读一次日志。",
                    (
                        (
                            "bash",
                            {"cmd": "grep 504 /var/log/nginx/error.log | tail -n 150"},
                            nginx_log_text(150, 5),
                        ),
                    ),
                ),
                Step("504 集中在 /api/v2/items 的长查询上,建议给这个接口加 30 秒超时和分页。"),
            ),
        ),
        Turn(
            "We agreed: code freeze for release 2.3 is on Friday, November 20. No new "
            "features after that, only fixes.",
            (
                Step(
                    "Agreed and noted: Starport 2.3 code freeze is Friday, November 20; after that "
                    "only bug fixes go in."
                ),
            ),
        ),
        Turn(
            "再跑一次测试,看看修完之后还有多少失败。",
            (
                Step(
                    "再跑一遍测试。",
                    (("bash", {"cmd": "pytest tests -q"}, pytest_output_text(180, 6)),),
                ),
                Step("还剩 20 个失败,都在分页相关的用例里。"),
            ),
        ),
        Turn(
            "List the migration files so we can check the order.",
            (
                Step(
                    "Listing them.", (("bash", {"cmd": "ls -l migrations"}, listing_text(140, 7)),)
                ),
                Step("The migrations are in order; 0140 is the newest."),
            ),
        ),
        Turn(
            "最后再看一次错误日志,确认一下上游是否恢复。",
            (
                Step(
                    "读取最新日志。",
                    (
                        (
                            "bash",
                            {"cmd": "tail -n 160 /var/log/nginx/error.log"},
                            nginx_log_text(160, 9),
                        ),
                    ),
                ),
                Step("上游已经恢复,最近十分钟没有新的 502。"),
            ),
        ),
    )
    questions = (
        Question("星港项目的 API 端口是多少?", "8443"),
        Question("Where does my sister Alice live?", "Lisbon"),
        Question("我喜欢吃什么口味的菜?", "川菜"),
        Question("When is the code freeze for release 2.3?", "November 20"),
    )
    return Script(turns, questions)
