"""The three Liqo stages, the condition each one reports, and what one pass of a stage found.

A bidirectional peering (spec.bidirectional) adds the reverse direction's two stages: the provider
consumes the consumer's resources over the same network, so there is no reverse networking stage.

Bottom layer: every other layer spells the stages through here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from liqo_peering.errors import PeeringError

StageState = Literal["disabled", "progressing", "ready", "error"]
STAGES = ("networking", "authentication", "offloading")
# The LiqoPeering condition type of each stage.
STAGE_CONDITIONS = MappingProxyType(
    {
        "networking": "NetworkReady",
        "authentication": "AuthenticationReady",
        "offloading": "OffloadingReady",
    }
)
# The reverse direction: the provider authenticates with the consumer and asks it for resources.
REVERSE_STAGES = ("reverse-authentication", "reverse-offloading")
REVERSE_STAGE_CONDITIONS = MappingProxyType(
    {
        "reverse-authentication": "ReverseAuthenticationReady",
        "reverse-offloading": "ReverseOffloadingReady",
    }
)
# The forward stage each reverse stage runs, with the clusters swapped.
REVERSE_OF = MappingProxyType({"authentication": "reverse-authentication", "offloading": "reverse-offloading"})


@dataclass(frozen=True)
class IdentityCertificate:
    """The certificate of one identity Liqo issued in a stage: ``held_by`` (the side whose Liqo uses it) on the
    other cluster's API server. ``resource_slice``: a ResourceSlice identity's slice; None: the ControlPlane one."""

    held_by: str
    not_before: datetime
    not_after: datetime
    resource_slice: str | None = None
    serial: str = ""  # hexadecimal: tells one certificate of the identity from the next

    @property
    def identity_type(self) -> str:
        return "ControlPlane" if self.resource_slice is None else "ResourceSlice"

    @property
    def renew_at(self) -> datetime:
        """Where Liqo's renewer asks for a new one: two thirds into its lifetime."""
        return self.not_before + (self.not_after - self.not_before) * 2 / 3

    @property
    def warn_at(self) -> datetime:
        """Half-way from the renewal point to expiry: a certificate not renewed by then is a warning."""
        return self.not_after - (self.not_after - self.not_before) / 6


@dataclass(frozen=True)
class StageResult:
    stage: str
    state: StageState
    reason: str
    message: str
    # For errors: whether retrying can help (an unreachable cluster) or only a change can (a denial).
    transient: bool = True
    # For errors: the error itself, which the Ready condition reports as it is (its class is its reason).
    error: PeeringError | None = field(default=None, compare=False)
    # The certificates of the identities the stage found (ControlPlane, ResourceSlices), for status.certificates.
    certificates: tuple[IdentityCertificate, ...] = field(default=(), compare=False)

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
    def failed(cls, stage: str, error: PeeringError, message: str) -> StageResult:
        """``error`` as the stage's result; ``message``: its message as the condition shows it (redacted)."""
        return cls(stage, "error", error.reason, message, error.transient, error)
