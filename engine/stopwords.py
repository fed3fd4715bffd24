"""Built-in stopword tables for dictionary-free keyword extraction.

The reference tokenizer (``engine/tokenize.js``, "中英文关键词抽取(无词典)") extracts
keywords without a dictionary and removes stopwords; ``keywords.extraStopwords`` appends
user stopwords "for extraction and matching". The reference does not publish its word
lists, so the tables below are ours. They are small and closed on purpose: the same
input must give the same keywords on every machine, with no data files to download.

Chinese has no spaces, so CJK stopwords do two jobs. They are removed from the output,
and they are the *cut points* that segment a run of Han characters into terms. That is
why the Chinese tables come in four kinds:

* ``CJK_STOPWORDS`` - function words and generic conversational words (我们, 什么, 上次,
  记得 ...). They cut a run wherever they occur and are never keywords.
* ``CJK_SPLIT_CHARS`` - single-character particles and pronouns that are almost never part
  of a content word (的, 了, 吗, 是, 在, 我, 你 ...). They cut a run wherever they occur.
* ``CJK_EDGE_CHARS`` - single characters that are often function words (说, 要, 会, 能,
  一, 不, 有 ...) but also often start or end a content word (会议, 功能, 一致, 不同). Cutting
  at them everywhere would shred real words, so they are only trimmed from the two ends
  of a segment ("要部署端口" -> "部署端口"), never cut out of its middle.
* ``CJK_PROTECTED`` - a short list of common words that contain one of the characters
  above as a lexical part (目的, 了解, 存在, 会议, 功能, 地址 ...). A protected word is kept
  whole; when a stopword and a protected word start at the same position, the longer one
  wins (so 为了 is a stopword but 了解 survives in 了解情况).

English stopwords are compared case-insensitively (after NFKC and ``casefold``).

Deliberately *time-relative* words (今天, 上次, 昨天, ...) are stopwords: they carry no
stable meaning across sessions (time is handled by the relative-time engine) and as
keywords they would match every memory that mentions "today".
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from engine.charclass import is_cjk_char


def _words(blob: str) -> frozenset[str]:
    """A whitespace-separated word list as a frozenset (keeps the tables readable)."""
    return frozenset(blob.split())


# --------------------------------------------------------------------------------------
# Chinese
# --------------------------------------------------------------------------------------

CJK_STOPWORDS: Final[frozenset[str]] = _words(
    """
    我们 你们 他们 她们 它们 咱们 您们 大家 自己 人家 别人
    什么 怎么 怎样 怎么样 为什么 为何 如何 哪里 哪儿 哪个 哪些 哪种 多少 几个 几次 何时
    这个 那个 这些 那些 这样 那样 这里 那里 这儿 那儿 这么 那么 这种 那种 这次 那次 这边 那边
    一个 一些 一下 一点 一样 一种 一直 一般 有点 有些 有的 很多 许多 各种 某些 任何 所有 每个
    因为 所以 但是 可是 不过 而且 并且 或者 还是 如果 要是 假如 虽然 尽管 然后 然而 于是 因此
    就是 不是 只是 也是 都是 还有 没有 有没有 是不是 对不对 好不好 行不行 能不能 会不会 要不要
    可以 可能 应该 应当 已经 曾经 正在 一定 肯定 非常 比较 特别 真的 其实 其他 其它 其中 另外
    之前 之后 以前 以后 以上 以下 之间 之类 等等 的话 时候 现在 刚才 刚刚 后来 最近 当前 当时
    今天 明天 昨天 后天 前天 今年 去年 明年 今晚 昨晚 明晚 上次 下次 上回 下回
    好像 似乎 大概 也许 或许 估计 知道 记得 还记得 记不记得 觉得 认为 以为 告诉 说过 讲过
    提到 提过 问过 请问 麻烦 帮我 帮忙 谢谢 多谢 你好 您好 好的 好吧 对的 是的 没错 当然
    嗯嗯 哈哈 呵呵 嘿嘿 啊啊 哦哦 为了 除了 关于 对于 由于 通过 根据 按照 以及 而是 只要 只有
    即使 无论 不管 并不 不会 不要 不能 不用 不行 不对 是否 在于 总之 此外 否则 比如 例如 譬如
    还要 还会 还能 就要 就会 都会 都要 也会 也要 得到了 起来 下来 上来 出来 过来 过去 回来
    """
)

CJK_SPLIT_CHARS: Final[frozenset[str]] = frozenset(
    "的了吗呢吧啊呀嘛哦啦呗么和与及或是在把被我你他她它您咱们很也都就还又着这那哪谁嗯哈诶哎喔噢"
)

CJK_EDGE_CHARS: Final[frozenset[str]] = frozenset(
    "说讲问想要会能去来到让给对从向过地得之其而并但个些为于以等将已才再只每各某该此则一不有没做用看叫当"
)

CJK_PROTECTED: Final[frozenset[str]] = _words(
    """
    的确 了解 和平 和谐 总和 温和 存在 实在 所在 自在 在线 把握 被子 被动 他人 自我
    首都 成都 都市 京都 就业 成就 还原 归还 偿还 执着 着陆 着手 着重 显著 酒吧 网吧 吧台
    及时 及格 涉及 普及 参与 与会 哪吒
    会议 会员 开会 社会 机会 学会 大会 协会 聚会 说明 小说 想法 思想 理想 要求 重要 主要
    需要 要点 能力 功能 性能 智能 技能 到达 来源 未来 给予 对象 对比 对应 对话 过程 地址
    地点 地方 地图 地区 得到 获得 个人 个性 一致 一起 统一 唯一 不同 有效 拥有 用户 使用
    作用 费用 看法 做法 叫做 每天 规则 原则 等级 平等 将来 才能 人才 再见 为止 之一 来自
    问题 提问 讲座 向导 方向 从事 而已 并发 合并 但愿 某人 说话 会话 同意 意见
    """
)

# --------------------------------------------------------------------------------------
# English
# --------------------------------------------------------------------------------------

EN_STOPWORDS: Final[frozenset[str]] = _words(
    """
    a an the and or but if then else when while of at by for with about against between into
    through during before after above below to from up down in out on off over under again
    further once here there where why how all any both each few more most other some such no
    nor not only own same so than too very can will just should now is are was were be been
    being have has had having do does did doing would could might must shall may i me my myself
    we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that
    these those am as until because also yes yeah yep ok okay oh hi hello hey please thanks
    thank sorry well really actually just like get got let lets us said say says tell told
    know think remember remembered recall don doesn didn isn aren wasn weren won wouldn
    couldn shouldn haven hasn hadn ll re ve http https www etc via per vs today tomorrow
    yesterday tonight last next ago
    """
)


def _norm(term: str) -> str:
    """NFKC + trim + casefold: the form every stopword lookup compares in."""
    return unicodedata.normalize("NFKC", term).strip().casefold()


@dataclass(frozen=True, slots=True)
class StopwordTable:
    """The effective stopword configuration for one ``extraStopwords`` value.

    ``words`` holds every stopword in compare form (NFKC, casefold). ``cjk_first`` maps the
    first character of every CJK entry to ``(entry, kind)`` pairs sorted longest first, and
    ``cjk_starts`` is a character class of those first characters: the segmenter jumps
    between possible entry starts in C and only runs ``startswith`` checks there (a
    600-way regex alternation was measured 5x slower). ``kind`` is ``"stop"`` (cut and
    drop), ``"keep"`` (protected word, kept whole) or ``"edge"`` (trim at a segment end).
    """

    words: frozenset[str]
    cjk_first: dict[str, tuple[tuple[str, str], ...]]
    cjk_starts: re.Pattern[str]


def _has_cjk(term: str) -> bool:
    return any(is_cjk_char(c) for c in term)


@functools.lru_cache(maxsize=64)
def stopword_table(extra: tuple[str, ...] = ()) -> StopwordTable:
    """Build (and cache) the stopword table for a tuple of extra stopwords.

    Cached because the config value changes rarely while extraction runs per message;
    the tuple is the cache key, so callers pass ``tuple(cfg.keywords.extraStopwords)``.
    Extra CJK stopwords also become cut points, like the built-in ones: a user who adds
    "星港" expects it to disappear from "星港项目", leaving "项目".
    """
    extras = sorted({w for w in (_norm(e) for e in extra if isinstance(e, str)) if w})
    words = set(CJK_STOPWORDS) | set(CJK_SPLIT_CHARS) | set(EN_STOPWORDS) | set(extras)
    entries: dict[str, str] = {}
    for w in CJK_PROTECTED:
        entries[w] = "keep"
    for c in CJK_EDGE_CHARS:
        entries[c] = "edge"
    for w in CJK_STOPWORDS | CJK_SPLIT_CHARS:
        entries[w] = "stop"
    for w in extras:
        if _has_cjk(w):
            entries[w] = "stop"  # a user stopword beats a protected word
    by_first: dict[str, list[tuple[str, str]]] = {}
    for w, kind in entries.items():
        by_first.setdefault(w[0], []).append((w, kind))
    cjk_first = {
        c: tuple(sorted(lst, key=lambda e: (-len(e[0]), e[1] != "stop", e[0])))
        for c, lst in sorted(by_first.items())
    }
    starts = re.compile("[" + "".join(re.escape(c) for c in cjk_first) + "]")
    return StopwordTable(words=frozenset(words), cjk_first=cjk_first, cjk_starts=starts)


def is_stopword(term: str, extra_stopwords: Iterable[str] = ()) -> bool:
    """True when ``term`` (any case, any Unicode width) is a built-in or extra stopword.

    The recall index uses this to ignore folder keywords that a user has since declared
    stopwords ("关键词抽取/匹配用": extra stopwords apply to matching too).
    """
    return _norm(term) in stopword_table(tuple(extra_stopwords)).words
