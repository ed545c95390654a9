"""The chart's RBAC proven minimal from the API servers' audit logs.

Every `helm install|upgrade` of the chart the tests make is noted (`installs`); when a cluster is torn down,
the requests the chart's ServiceAccount made there (the operator's user agents only) are read from its audit
log and kept per install in the tier's part (`collect`, .local/rbac/<tier>.json). After every tier,
`python -m testenv.rbacproof check` renders each install's RBAC with helm (`grants`) and fails on every grant
no request used (but the few `check.EXCEPTIONS`, each with its reason) and on every request refused (403).
"""
