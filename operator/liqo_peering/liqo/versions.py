"""Which Liqo runs on a cluster, and whether two of them can peer (pure).

The version comes from the label Liqo's chart puts on every object it installs
(``app.kubernetes.io/version`` on the cluster-ID ConfigMap, which discovery lists anyway). Development
installs carry a commit SHA there instead: then the API's shape says what it can (an ``authentication.liqo.io``
group exists from v1.0; ForeignCluster ``status.observedGeneration`` from v1.2).

Liqo's rule, quoted in the skew condition: peering clusters that run different versions, net of patch
releases, is not supported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from liqo_peering.errors import LiqoVersionSkew, LiqoVersionUnsupported

VERSION_LABEL = "app.kubernetes.io/version"
# The one place that says which Liqo versions the operator accepts and which it was tested with.
SUPPORTED_MIN = (1, 0)
TESTED_MINORS = ((1, 0), (1, 1), (1, 2))
# The releases the end-to-end suites run: hack/versions.env's LIQO_VERSION and LIQO_MATRIX (a unit test checks).
TESTED_RELEASES = ("v1.0.3", "v1.1.2", "v1.2.0")
SUPPORTED_RANGE = "v1.0.x to v1.2.x"
LIQO_SKEW_RULE = (
    "The establishment of a peering with a remote cluster leveraging a different version of Liqo, net of patch"
    " releases, is currently not supported, and could lead to unexpected results."
)

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$")


@dataclass(frozen=True)
class LiqoVersion:
    """What is known of one cluster's Liqo.

    ``release``: the version the chart's label names. Without one, ``floor`` is the lowest (major, minor) the
    API's shape proves, and ``below_one`` says the API lacks what v1.0 brought.
    """

    label: str | None = None
    release: tuple[int, int, int] | None = None
    floor: tuple[int, int] | None = None
    below_one: bool = False

    @property
    def minor(self) -> tuple[int, int] | None:
        return self.release[:2] if self.release is not None else None

    @property
    def known(self) -> bool:
        return self.release is not None

    def at_least(self, major: int, minor: int) -> bool | None:
        """Whether this is (major, minor) or newer; None when neither the label nor the API's shape says."""
        if self.release is not None:
            return self.release[:2] >= (major, minor)
        if self.below_one:
            return False
        if self.floor is not None and self.floor >= (major, minor):
            return True
        return None

    def describe(self) -> str:
        if self.release is not None:
            return "v{}.{}.{}".format(*self.release)
        build = f"development build {self.label}" if self.label else "no version label"
        if self.below_one:
            return f"older than v1.0 ({build})"
        if self.floor is not None:
            return f"unknown, v{self.floor[0]}.{self.floor[1]} or newer ({build})"
        return f"unknown ({build})"


def from_label(label: str | None) -> LiqoVersion:
    """The version a chart label names; a SHA, a custom tag or no label leaves it unknown."""
    found = _RELEASE.match(label or "")
    if found is None:
        return LiqoVersion(label=label or None)
    major, minor, patch = (int(g) for g in found.groups())
    return LiqoVersion(label=label, release=(major, minor, patch))


def from_shape(label: str | None, has_authentication_group: bool, fc_observed_generation: bool) -> LiqoVersion:
    """What the API's shape proves when the label does not say: authentication.liqo.io exists from v1.0,
    ForeignCluster status.observedGeneration from v1.2."""
    if not has_authentication_group:
        return LiqoVersion(label=label or None, below_one=True)
    return LiqoVersion(label=label or None, floor=(1, 2) if fc_observed_generation else (1, 0))


# -- the decision -----------------------------------------------------------------------------------------
SKEW_CONDITION = "LiqoVersionSkew"
UNTESTED_CONDITION = "LiqoVersionUntested"


@dataclass(frozen=True)
class Notice:
    """A condition to show (status True: the notice holds), and whether it warrants a Warning Event."""

    type: str
    reason: str
    message: str
    warn: bool = True


@dataclass(frozen=True)
class Verdict:
    refusal: LiqoVersionSkew | None
    notices: tuple[Notice, ...]


def unsupported(side: str, where: str, version: LiqoVersion) -> LiqoVersionUnsupported | None:
    """A refusal when this cluster runs Liqo older than v1.0 (another API: nothing the operator makes exists)."""
    if version.at_least(*SUPPORTED_MIN) is not False:
        return None
    return LiqoVersionUnsupported(
        f"the {side} cluster ({where}) runs Liqo {version.describe()}; this operator supports Liqo"
        f" {SUPPORTED_RANGE}; upgrade Liqo on the {side} cluster",
        side=side,
        found=version.describe(),
        supported=SUPPORTED_RANGE,
    )


def judge(
    consumer: LiqoVersion, provider: LiqoVersion, allow_skew: bool, established: bool, skew_field: str
) -> Verdict:
    """Whether a peering between these two versions may proceed, and what its status should say.

    ``established``: the peering was Ready before the sides diverged (one side upgraded first); it carries on,
    as tearing down a working peering would hurt more than the skew. ``skew_field``: the spec field that allows
    a skew, named in the message.
    """
    notices: list[Notice] = []
    refusal: LiqoVersionSkew | None = None
    sides = (("consumer", consumer), ("provider", provider))
    if consumer.minor is not None and provider.minor is not None and consumer.minor != provider.minor:
        found = f"consumer {consumer.describe()}, provider {provider.describe()}"
        if allow_skew:
            reason, tail = "Allowed", f"{skew_field} is true: going on"
        elif established:
            reason, tail = "AppearedWhileReady", f"the peering was Ready before: it carries on; set {skew_field}"
        else:
            reason, tail = "Refused", f"upgrade one side to the other's minor version, or set {skew_field}: true"
        message = f"Liqo versions differ: {found}. Liqo says: {LIQO_SKEW_RULE!r} {tail}"
        # A refusal's own Warning Event (the error) says it already.
        notices.append(Notice(SKEW_CONDITION, reason, message, warn=reason != "Refused"))
        if reason == "Refused":
            refusal = LiqoVersionSkew(message, side=None, found=found, supported="the same minor version on both sides")
    untested = [
        f"the {side} runs Liqo {v.describe()}" for side, v in sides if v.minor is None or v.minor not in TESTED_MINORS
    ]
    if untested:
        newer = all(v.minor is not None for _, v in sides)
        notices.append(
            Notice(
                UNTESTED_CONDITION,
                "NewerThanTested" if newer else "UnknownVersion",
                f"{'; '.join(untested)}: not tested with this operator (accepted: Liqo {SUPPORTED_RANGE}; tested:"
                f" {', '.join(TESTED_RELEASES)}); going on",
            )
        )
    return Verdict(refusal, tuple(notices))
