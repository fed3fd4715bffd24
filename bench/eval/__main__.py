"""`python -m bench.eval` (`make eval`): generate, play, ask, compare, print.

A measurement, not a gate: the exit status is 0 whatever the scores, 2 when the run
itself is broken (nothing archived, a reset that did not reset, a daemon error).
Progress goes to stderr, one line per conversation; the tables go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
import typing
from pathlib import Path
from typing import Any

import anyio
import orjson

from bench.eval.generate import DEFAULT_SIZE, LANGS, QUICK_SIZE, Lang, generate_all
from bench.eval.play import HOST_TOKENS, WINDOW, EvalError, Options, play_all
from bench.eval.report import render, render_losses, summarise
from rofmd.host.client import RpcError

DEFAULT_SEED = 20260105
DEFAULT_CONVERSATIONS = 10


def recall_modes() -> tuple[str, ...]:
    """The values `recall.mode` accepts, from the engine's config model."""
    from engine.config.model import RecallConfig

    return tuple(typing.get_args(typing.get_type_hints(RecallConfig)["mode"]))


def packaged_mode() -> str:
    """`recall.mode` when the user config does not set it."""
    from engine.config import load_config

    return load_config(None, {}).config.recall.mode


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__)
    p.add_argument("--quick", action="store_true", help="one small conversation per language")
    p.add_argument("--json", type=Path, help="write everything to this file")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--lang", choices=["en", "zh", "both"], default="both")
    p.add_argument(
        "--conversations",
        type=int,
        help=f"conversations per language (default {DEFAULT_CONVERSATIONS}, --quick 1)",
    )
    p.add_argument(
        "--mode",
        choices=recall_modes(),
        help="recall.mode (default: not set, the packaged default)",
    )
    p.add_argument(
        "--config",
        type=_json_object,
        default={},
        help='more user config, merged over the eval\'s own (e.g. \'{"recall": {"ranked": '
        '{"keepRounds": 0}}}\'): what a user would write in config.json',
    )
    p.add_argument(
        "--diagnose",
        action="store_true",
        help="also print where the sequence regime loses evidence found fresh, and why",
    )
    p.add_argument(
        "--host-tokens",
        type=int,
        default=HOST_TOKENS,
        help=f"the host's system prompt and tool schemas in tokens (default {HOST_TOKENS})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; see `--help`."""
    args = _parser().parse_args(argv)
    from rofmd.server.logs import configure_logging

    configure_logging("console", "warning", stream=sys.stderr)
    langs: tuple[Lang, ...] = LANGS if args.lang == "both" else (args.lang,)
    count = args.conversations or (1 if args.quick else DEFAULT_CONVERSATIONS)
    if count < 1:
        print("eval: --conversations must be at least 1", file=sys.stderr)
        return 2
    size = QUICK_SIZE if args.quick else DEFAULT_SIZE
    opts = Options(window=WINDOW, host_tokens=args.host_tokens, mode=args.mode, config=args.config)
    started = time.monotonic()
    try:
        conversations = generate_all(args.seed, langs, count, size)
        runs = anyio.run(play_all, conversations, opts)
    except (EvalError, RpcError, ValueError) as exc:
        print(f"eval: broken run: {exc}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - started
    summary = summarise(runs)
    render(summary, sys.stdout)
    if args.diagnose:
        render_losses(summary, sys.stdout)
    mode = args.mode or f"{packaged_mode()} (packaged default)"
    print(
        f"\nseed {args.seed}, {count} conversation(s) per language, recall.mode {mode},"
        f" window {WINDOW} tokens + host {args.host_tokens}, {seconds:.1f} s"
        + (f", config {orjson.dumps(args.config).decode()}" if args.config else "")
    )
    if args.json:
        result: dict[str, Any] = {
            "seed": args.seed,
            "langs": list(langs),
            "conversationsPerLanguage": count,
            "quick": args.quick,
            "mode": args.mode,
            "effectiveMode": args.mode or packaged_mode(),
            "config": args.config,
            "window": WINDOW,
            "hostTokens": args.host_tokens,
            "seconds": round(seconds, 2),
            "summary": summary,
            "runs": [r.to_json() for r in runs],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
