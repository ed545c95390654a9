"""Writes an SPDX 2.3 JSON SBOM of the Python distributions the running interpreter sees, to stdout.

hack/release.sh runs it with the image's own interpreter (inside the image, `buildah run`), so the SBOM lists
exactly what the image's python imports from: every installed distribution with its version. Standard
library only: the image has nothing else to run it with.
Usage: python sbom.py NAME VERSION IMAGE_DIGEST
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import sys
from datetime import UTC, datetime


def spdx_id(name: str, version: str) -> str:
    return "SPDXRef-Package-" + re.sub(r"[^A-Za-z0-9.-]", "-", f"{name}-{version}")


def sbom(name: str, version: str, digest: str, dists: list[tuple[str, str]]) -> dict[str, object]:
    packages = [
        {
            "name": dist,
            "SPDXID": spdx_id(dist, ver),
            "versionInfo": ver,
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": f"pkg:pypi/{dist.lower().replace('_', '-')}@{ver}",
                }
            ],
        }
        for dist, ver in dists
    ]
    image = {
        "name": name,
        "SPDXID": "SPDXRef-Image",
        "versionInfo": version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "checksums": [{"algorithm": "SHA256", "checksumValue": digest.removeprefix("sha256:")}],
    }
    # The same inputs give the same document: its namespace is derived from them, not random.
    namespace = hashlib.sha256(json.dumps([name, version, digest, dists]).encode()).hexdigest()
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{name}-{version}",
        "documentNamespace": f"https://spdx.org/spdxdocs/{name}-{version}-{namespace}",
        "creationInfo": {
            "created": datetime.fromtimestamp(0, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "creators": ["Tool: liqo-peering-operator-hack-sbom"],
        },
        "packages": [image, *packages],
        "relationships": [
            {
                "spdxElementId": "SPDXRef-DOCUMENT",
                "relationshipType": "DESCRIBES",
                "relatedSpdxElement": "SPDXRef-Image",
            }
        ]
        + [
            {"spdxElementId": "SPDXRef-Image", "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]}
            for p in packages
        ],
    }


def installed(path: list[str] | None = None) -> list[tuple[str, str]]:
    """(name, version) of every distribution the interpreter sees, or of those in the directories `path`."""
    dists = importlib.metadata.distributions() if path is None else importlib.metadata.distributions(path=path)
    found = {(d.metadata["Name"], d.version) for d in dists}
    return sorted(found, key=lambda nv: (nv[0].lower(), nv[1]))


if __name__ == "__main__":
    name, version, digest = sys.argv[1:4]
    json.dump(sbom(name, version, digest, installed()), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
