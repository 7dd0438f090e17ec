"""Measured speed of the generator on this machine, for the Models page.

Nothing here is estimated: a speed exists only after the model has answered a question.
:class:`SpeedMeter` times one answer as the person experiences it (``RagService.answer``):

* **prompt** tokens/s: the prompt's tokens divided by the time from the request to the first
  visible token (llama.cpp reads the prompt, then writes; a cached prefix makes it faster, and
  a thinking model's hidden reasoning makes it slower — what the person waits either way);
* **answer** tokens/s: the answer's tokens after the first, divided by the time from the first
  visible token to the last.

The last measurement of each model (keyed by the generator's ``identity``, e.g.
``llama_cpp:Qwen3-4B-Q4_K_M.gguf``) is kept in ``model_speeds.json`` in the app's data folder,
so the page shows it after a restart; an unreadable file reads as "nothing measured yet".
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rag_desktop.app.config import data_dir

log = logging.getLogger(__name__)

SPEEDS_FILE = "model_speeds.json"
MIN_DECODE_TOKENS = 4  # fewer answer tokens time the first-token latency, not the decoding


@dataclass(frozen=True)
class Speed:
    prompt_tok_s: float
    answer_tok_s: float
    prompt_tokens: int
    answer_tokens: int
    measured_at: float  # time.time() of the measurement


def speeds_path() -> Path:
    return data_dir() / SPEEDS_FILE


class SpeedMeter:
    """Times one streamed answer; :meth:`result` is None when it was too short to measure."""

    def __init__(self, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.t0 = time.perf_counter()
        self.t_first: float | None = None
        self.t_last: float | None = None

    def token(self) -> None:
        now = time.perf_counter()
        if self.t_first is None:
            self.t_first = now
        self.t_last = now

    def result(self, answer_tokens: int) -> Speed | None:
        if self.t_first is None or self.t_last is None or answer_tokens < MIN_DECODE_TOKENS:
            return None
        prefill = self.t_first - self.t0
        decode = self.t_last - self.t_first
        if prefill <= 0 or decode <= 0 or self.prompt_tokens <= 0:
            return None
        return Speed(self.prompt_tokens / prefill, (answer_tokens - 1) / decode, self.prompt_tokens,
                     answer_tokens, time.time())


def load_speeds(path: Path | None = None) -> dict[str, Speed]:
    p = path or speeds_path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        return {str(k): Speed(**v) for k, v in data.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        log.warning("ignoring unreadable %s: %s", p, exc)
        return {}


def record_speed(identity: str, speed: Speed, path: Path | None = None) -> None:
    """Keep ``speed`` as the last measurement of ``identity`` (written by rename: never half a file)."""
    p = path or speeds_path()
    speeds = load_speeds(p)
    speeds[identity] = speed
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({k: asdict(v) for k, v in speeds.items()}, fh, indent=1)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
