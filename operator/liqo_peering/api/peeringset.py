"""LiqoPeeringSet v1alpha1: one LiqoPeering per provider a label selector picks in its namespace: a kubeconfig
Secret, a Cluster API Cluster or a ClusterProfile (spec.source).

The same rules as model.py: this pydantic model is the one source of the CRD (crdgen), the chart's copy
and docs/reference/liqopeeringset-fields.md; CEL rules sit next to the fields they constrain, and the
validators repeat them for input that bypassed admission.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from liqo_peering.api.model import Condition, LiqoPeeringTemplate, PeerStatus, _cel, _Model

KIND = "LiqoPeeringSet"
PLURAL = "liqopeeringsets"
SINGULAR = "liqopeeringset"
SHORT_NAMES = ("lps",)
# The set's name is a label value on its children (peering.liqo-operator.io/set).
NAME_MAX_LENGTH = 63
# Bounds on the selector (every string, list and map of a spec has one: tests/unit/test_crd_bounds.py).
MAX_SELECTOR_TERMS = 32
MAX_SELECTOR_VALUES = 64
# A label value is at most 63 characters: a longer one never matches.
SelectorValue = Annotated[str, Field(max_length=63)]

# On the object's root, without fieldPath: the API server takes no path into metadata there.
NAME_RULE = {
    "rule": f"self.metadata.name.size() <= {NAME_MAX_LENGTH}",
    "message": f"a LiqoPeeringSet's name is at most {NAME_MAX_LENGTH} characters: its peerings carry it as a"
    " label value",
}
VALUES_RULE = _cel(
    "(self.operator == 'In' || self.operator == 'NotIn') == (has(self.values) && size(self.values) > 0)",
    "values must be non-empty with In and NotIn, and empty with Exists and DoesNotExist",
    ".values",
)
SELECTOR_RULE = _cel(
    "(has(self.matchLabels) && size(self.matchLabels) > 0)"
    " || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",
    "selector must name at least one label: an empty selector would take every object of its kind in the namespace",
    ".matchLabels",
)


class LabelSelectorRequirement(_Model):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [VALUES_RULE]})
    key: str = Field(min_length=1, max_length=317, description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[SelectorValue] = Field(
        default_factory=list, max_length=MAX_SELECTOR_VALUES, description="Values for In and NotIn; empty otherwise."
    )

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> LabelSelectorRequirement:
        if (self.operator in ("In", "NotIn")) != bool(self.values):
            raise ValueError(VALUES_RULE["message"])
        return self


class LabelSelector(_Model):
    """A metav1.LabelSelector: every term must hold."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [SELECTOR_RULE]})
    match_labels: dict[str, SelectorValue] = Field(
        default_factory=dict, max_length=MAX_SELECTOR_TERMS, description="Labels an object must carry, exactly."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=MAX_SELECTOR_TERMS, description="Set-based requirements on an object's labels."
    )

    @model_validator(mode="after")
    def _selects_something(self) -> LabelSelector:
        if not self.match_labels and not self.match_expressions:
            raise ValueError(SELECTOR_RULE["message"])
        return self


Source = Literal["Secret", "Cluster", "ClusterProfile"]
# A ClusterProfile's LiqoPeering takes neither (model.PROFILE_MINT_RULE, PROFILE_CONTEXT_RULE): refused on the set,
# not on each LiqoPeering it would make.
PROFILE_TEMPLATE_RULE = _cel(
    "!has(self.source) || self.source != 'ClusterProfile' || !has(self.template) ||"
    " (!has(self.template.remoteContext) && (!has(self.template.credentials) ||"
    " !has(self.template.credentials.mint) || !self.template.credentials.mint))",
    "with source ClusterProfile, the template takes neither remoteContext nor credentials.mint: a ClusterProfile's"
    " access provider is the credential",
    ".template",
)

# A proxy's address names one provider's API server: a set would give it to every provider.
TEMPLATE_API_SERVER_RULE = _cel(
    "!has(self.template) || !has(self.template.authentication) || !has(self.template.authentication.apiServer)",
    "template.authentication.apiServer names one provider's API server: set it on that provider's LiqoPeering",
    ".template.authentication.apiServer",
)


class LiqoPeeringSetSpec(_Model):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [PROFILE_TEMPLATE_RULE, TEMPLATE_API_SERVER_RULE]}
    )
    source: Source = Field(
        default="Secret",
        description="What the selector picks in this namespace, one provider each: Secret, a kubeconfig Secret"
        " (key kubeconfig); Cluster, a Cluster API Cluster (cluster.x-k8s.io), peered through its kubeconfig"
        " Secret <cluster>-kubeconfig (key value) once it is Provisioned; ClusterProfile, a ClusterProfile"
        " (multicluster.x-k8s.io), reached through the operator's access providers once its ControlPlaneHealthy"
        " condition is True. The chart grants reading Clusters with clusterAPI.enabled=true.",
    )
    selector: LabelSelector = Field(
        description="Which objects of spec.source's kind in this namespace to peer with: one LiqoPeering each. One"
        " that stops matching, or is deleted, has its LiqoPeering deleted: it unpeers."
    )
    template: LiqoPeeringTemplate = Field(
        default_factory=LiqoPeeringTemplate,
        description="The spec of every LiqoPeering, but the provider's reference (the set fills it in). A change"
        " updates every LiqoPeering; a LiqoPeering's own edits are overwritten.",
    )
    deletion_policy: Literal["Delete", "Orphan"] = Field(
        default="Delete",
        description="When the set is deleted: Delete unpeers and deletes its LiqoPeerings (the set goes once"
        " they are gone); Orphan leaves them, without their owner reference.",
    )
    max_concurrent: int | None = Field(
        default=None,
        ge=1,
        description="How many LiqoPeerings may be establishing (created or updated, not yet ready or failed)"
        " at once; the others wait. Unset: no limit.",
    )

    @model_validator(mode="after")
    def _template_fits(self) -> LiqoPeeringSetSpec:
        _profile_template_fits(self)
        if self.template.authentication.api_server is not None:
            raise ValueError(TEMPLATE_API_SERVER_RULE["message"])
        return self


class PeeringLine(_Model):
    """One LiqoPeering of the set."""

    name: str = Field(description="The LiqoPeering's name.")
    secret: str | None = Field(default=None, description="The kubeconfig Secret it peers through.")
    cluster: str | None = Field(
        default=None, description="The Cluster or ClusterProfile it peers with (source Cluster or ClusterProfile)."
    )
    remote_cluster_id: str | None = Field(default=None, alias="remoteClusterID", description="The provider's ID.")
    peer_status: PeerStatus | None = Field(default=None, description="Its peerStatus (unset: not created yet).")
    reason: str = Field(
        description="Its Ready reason; or the set's: Waiting (maxConcurrent), Removing (unpeering),"
        " NameConflict (a LiqoPeering of that name the set does not own), NotProvisioned (a Cluster whose phase"
        " is not Provisioned yet), ControlPlaneUnhealthy (a ClusterProfile whose ControlPlaneHealthy is not True)."
    )
    overwritten_at: str | None = Field(
        default=None, description="When the set last overwrote edits made to this LiqoPeering's spec (RFC 3339)."
    )


class LiqoPeeringSetStatus(_Model):
    observed_generation: int | None = Field(default=None, description="The generation this status describes.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, Reconciling, Stalled.")
    desired: int = Field(
        default=0,
        description="Providers the selector picks (its unavailable ones too): the LiqoPeerings there should be.",
    )
    ready: int = Field(default=0, description="LiqoPeerings ready.")
    establishing: int = Field(default=0, description="LiqoPeerings being created, updated or established.")
    waiting: int = Field(default=0, description="LiqoPeerings held back by maxConcurrent.")
    error: int = Field(default=0, description="LiqoPeerings in error or timeout, or that cannot be made.")
    unavailable: int = Field(
        default=0,
        description="Providers picked but not peered with yet: a Cluster not Provisioned, a ClusterProfile whose"
        " control plane is not healthy.",
    )
    peerings: list[PeeringLine] = Field(
        default_factory=list, description="One line per LiqoPeering, by name (those being removed included)."
    )


def _profile_template_fits(spec: LiqoPeeringSetSpec) -> None:
    if spec.source == "ClusterProfile" and (spec.template.remote_context is not None or spec.template.credentials.mint):
        raise ValueError(PROFILE_TEMPLATE_RULE["message"])


def parse_set_spec(spec: dict[str, Any]) -> LiqoPeeringSetSpec:
    """Validate a LiqoPeeringSet spec as the API server would (for input that bypassed admission)."""
    return LiqoPeeringSetSpec.model_validate(spec)
