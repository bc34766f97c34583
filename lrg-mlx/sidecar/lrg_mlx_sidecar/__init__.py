"""The MLX sidecar of lrg.

One process serves one model to one `lrg_mlx::MlxEngine` (shared by every
chat on that model), speaking JSON lines over stdio (see `protocol.py` for
the messages). It keeps a prompt cache per chat and the compiled answer
grammar between turns.
"""

__version__ = "0.1.0"

# Bumped whenever a message changes shape; the Rust side refuses any other.
PROTOCOL_VERSION = 2
