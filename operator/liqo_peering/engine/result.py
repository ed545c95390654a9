"""What a stage reports after one non-blocking pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StageState = Literal["disabled", "progressing", "ready", "error"]
STAGES = ("networking", "authentication", "offloading")


@dataclass(frozen=True)
class StageResult:
    stage: str
    state: StageState
    reason: str
    message: str

    @classmethod
    def ready(cls, stage: str, message: str) -> StageResult:
        return cls(stage, "ready", "Established", message)

    @classmethod
    def waiting(cls, stage: str, reason: str, message: str) -> StageResult:
        return cls(stage, "progressing", reason, message)

    @classmethod
    def disabled(cls, stage: str, message: str) -> StageResult:
        return cls(stage, "disabled", "Disabled", message)

    @classmethod
    def failed(cls, stage: str, reason: str, message: str) -> StageResult:
        return cls(stage, "error", reason, message)
