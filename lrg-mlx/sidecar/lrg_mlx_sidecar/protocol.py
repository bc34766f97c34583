"""JSON lines over stdio: one object per line each way.

Requests (stdin), every one but `shutdown` with an integer `id`:
  {"op": "generate", "id", "sequence", "messages": [{"role", "content"}], "schema",
   "max_tokens", "temperature", "top_p"?, "seed"}   (schema null: unconstrained, for benches)
  {"op": "release", "sequence"}           (no reply: free that chat's prompt cache)
  {"op": "tokenize", "id", "messages"}   -> {"type": "tokens", "id", "tokens"}
  {"op": "ping", "id"}                    -> {"type": "pong", "id"}  (round-trip cost)
  {"op": "clear_cache", "id"}             -> {"type": "pong", "id"}  (forget the KV cache)
  {"op": "cancel", "id"}                  (read at once, even mid-turn)
  {"op": "shutdown"}                      (or end of stdin)

Replies (stdout):
  {"type": "loading", "progress"}                                  while loading, 0 to 1
  {"type": "ready", "protocol", "sidecar", "versions", "model"}   after the loading lines
  {"type": "fatal", "kind", "message", "package"?}                 instead of ready
  {"type": "progress", "id", "evaluated", "total"}                 prefill heartbeat
  {"type": "prefilled", "id", "kept", "restored", "evaluated", "dropped"}  the prompt is in
  {"type": "delta", "id", "text"}
  {"type": "done", "id", "stop", "usage", "grammar_reused", "timings"}
  {"type": "error", "id", "kind", "message"}

stdout carries nothing else: the original descriptor is kept for replies and
fd 1 is pointed at stderr, so a library's stray print cannot corrupt a line.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from typing import Any, Optional


class Channel:
    """The reply stream and the request reader."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._out = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._write_lock = threading.Lock()
        self._requests: "queue.Queue[Optional[dict]]" = queue.Queue()
        self._lock = threading.Lock()
        # id -> tokens generated when the cancel arrived.
        self._cancelled: dict[int, int] = {}
        self.closed = False
        # Tokens generated so far in the running turn (for after-cancel counts).
        self.generated = 0

    def send(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._write_lock:
            self._out.write(line.encode("utf-8"))

    def start_reader(self) -> None:
        threading.Thread(target=self._read, name="requests", daemon=True).start()

    def _read(self) -> None:
        for raw in sys.stdin.buffer:
            try:
                req = json.loads(raw)
                if not isinstance(req, dict):
                    raise ValueError("a request must be a JSON object")
            except ValueError as e:
                self.send({"type": "error", "id": None, "kind": "bad_request",
                           "message": f"unreadable request line: {e}"})
                continue
            op = req.get("op")
            if op == "cancel":
                with self._lock:
                    self._cancelled.setdefault(req.get("id"), self.generated)
            elif op == "shutdown":
                break
            else:
                self._requests.put(req)
        self.closed = True
        self._requests.put(None)

    def next_request(self) -> Optional[dict]:
        """The next request, or None when stdin closed or shutdown came."""
        return self._requests.get()

    def cancelled_at(self, req_id: int) -> Optional[int]:
        """Tokens generated when `req_id` was cancelled, or None if it was not."""
        with self._lock:
            return self._cancelled.get(req_id)

    def forget(self, req_id: int) -> None:
        with self._lock:
            self._cancelled.pop(req_id, None)
