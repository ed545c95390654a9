"""The neighbour: marks each ConfigMap labelled neighbour.example.com/watch=yes with the Pod that saw it."""

import os

import kopf

LABELS = {"neighbour.example.com/watch": "yes"}
SEEN_BY = "neighbour.example.com/seen-by"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: object) -> None:
    settings.posting.enabled = False  # no Events: its RBAC grants none


@kopf.on.resume("", "v1", "configmaps", labels=LABELS)
@kopf.on.create("", "v1", "configmaps", labels=LABELS)
def seen(patch: kopf.Patch, **_: object) -> None:
    patch.metadata.annotations[SEEN_BY] = os.environ["POD_ID"]
