"""A Helm dry run's per-object changes: the rendered manifest against the installed one (ADR 0113)."""

from __future__ import annotations

import json

from fleetwave.delivery import helm_preview as hp

INSTALLED = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  message: hello
---
apiVersion: v1
kind: Secret
metadata:
  name: web-token
  namespace: other
data:
  token: b2xk
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web-old
"""

RENDERED = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  message: bonjour
---
apiVersion: v1
kind: Secret
metadata:
  name: web-token
  namespace: other
data:
  token: bmV3
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
---
apiVersion: batch/v1
kind: Job
metadata:
  name: web-migrate
"""


def test_each_object_is_created_updated_deleted_or_left_and_secrets_hide_their_data() -> None:
    found = {
        (c.kind, c.namespace, c.name): (c.action, c.paths) for c in hp.changes(INSTALLED, RENDERED, "apps")
    }
    assert found == {
        ("ConfigMap", "apps", "web-config"): ("Update", ("/data/message",)),
        ("Secret", "other", "web-token"): ("Update", ("/data",)),
        ("Deployment", "apps", "web"): ("No Action", ()),
        ("Service", "apps", "web-old"): ("Delete", ()),
        ("Job", "apps", "web-migrate"): ("Create", ()),
    }
    assert "bmV3" not in repr(hp.changes(INSTALLED, RENDERED, "apps"))


def test_a_first_install_creates_everything_and_bad_input_reports_nothing() -> None:
    stdout = json.dumps({"name": "web", "manifest": RENDERED})
    created = hp.changes("", hp.rendered_manifest(stdout), "apps")
    assert {c.action for c in created} == {"Create"}
    assert len(created) == 4
    assert hp.rendered_manifest("not json") == ""
    assert hp.changes("", "key: [unclosed", "apps") == ()
