"""Entry point: `python -m lrg_mlx_sidecar --model DIR`.

Loads the model, says `ready` (or `fatal` and exits), then serves requests
until stdin closes. See `protocol.py` for the messages.
"""

from __future__ import annotations

import argparse
import platform
import sys
import traceback
from pathlib import Path

from . import PROTOCOL_VERSION, __version__
from .protocol import Channel

# Exit codes, also visible to the Rust side when the `fatal` line is lost.
EXIT_MISSING_PACKAGE = 3
EXIT_BAD_MODEL = 4


def main() -> None:
    ap = argparse.ArgumentParser(prog="lrg-mlx-sidecar", description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="an MLX model directory")
    ap.add_argument("--parallel", type=int, default=4, help="prompt caches always kept")
    ap.add_argument("--kv-cache-mem", type=int, default=2 << 30,
                    help="bytes of caches kept past --parallel")
    args = ap.parse_args()
    ch = Channel()
    loading = lambda fraction: ch.send({"type": "loading", "progress": fraction})
    loading(0.0)

    try:
        # mlx first: it is the one most often missing.
        import mlx.core as mx
        import mlx_lm
        import llguidance

        from .engine import Engine, TurnError
        loading(0.2)
    except ImportError as e:
        ch.send({
            "type": "fatal",
            "kind": "missing_package",
            "package": e.name or "mlx",
            "message": f"cannot import {e.name or 'a package'}: {e}",
        })
        sys.exit(EXIT_MISSING_PACKAGE)

    model_dir = args.model
    try:
        if not (model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{model_dir} has no config.json: not a model directory")
        engine = Engine(model_dir, args.parallel, args.kv_cache_mem, loading)
    except Exception as e:  # any load failure is the model's: say which and why
        traceback.print_exc()
        ch.send({"type": "fatal", "kind": "bad_model",
                 "message": f"cannot load {model_dir}: {type(e).__name__}: {e}"})
        sys.exit(EXIT_BAD_MODEL)

    ch.send({
        "type": "ready",
        "protocol": PROTOCOL_VERSION,
        "sidecar": __version__,
        "versions": {
            "python": platform.python_version(),
            "mlx": mx.__version__,
            "mlx_lm": mlx_lm.__version__,
            "llguidance": llguidance.__version__,
        },
        "device": str(mx.default_device()),
        "model": engine.info(),
    })
    ch.start_reader()

    while (req := ch.next_request()) is not None:
        rid = req.get("id")
        op = req.get("op")
        try:
            if op == "generate":
                engine.generate(req, ch)
            elif op == "ping":
                ch.send({"type": "pong", "id": rid})
            elif op == "release":
                # No reply: the chat is gone and waits for nothing.
                engine.release(int(req.get("sequence") or 0))
            elif op == "clear_cache":
                engine.reset_cache()
                ch.send({"type": "pong", "id": rid})
            elif op == "tokenize":
                ch.send({"type": "tokens", "id": rid, "tokens": engine.render(req["messages"])})
            else:
                ch.send({"type": "error", "id": rid, "kind": "bad_request",
                         "message": f"unknown op {op!r}"})
        except TurnError as e:
            ch.forget(rid)
            ch.send({"type": "error", "id": rid, "kind": e.kind, "message": str(e)})
        except Exception as e:
            traceback.print_exc()
            # The cache may hold half a turn: start the next one clean.
            engine.reset_cache()
            ch.forget(rid)
            ch.send({"type": "error", "id": rid, "kind": "internal",
                     "message": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
