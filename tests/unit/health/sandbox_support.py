"""Members for sandbox tests without a fleet: a tiny plain-HTTP API server that serves one Namespace
(enough for a health check to list it and run its Lua on it), and a server that accepts connections
and never answers. Their kubeconfigs are http://, so jobs need `allow_insecure=True`."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fleetwave.api.sveltos import ValidateHealth

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
ANSWERS: dict[str, Any] = {
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "namespaces",
                "singularName": "namespace",
                "namespaced": False,
                "kind": "Namespace",
                "verbs": ["get", "list"],
            }
        ],
    },
    "/api/v1/namespaces": {"apiVersion": "v1", "kind": "NamespaceList", "metadata": {}, "items": [NAMESPACE]},
    "/api/v1/namespaces/default": NAMESPACE,
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = ANSWERS.get(self.path.split("?", 1)[0])
        body = json.dumps(found if found is not None else {"kind": "Status", "code": 404}).encode()
        self.send_response(200 if found is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def kubeconfig(port: int) -> bytes:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: x, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: x, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
    ).encode()


@contextmanager
def api_server() -> Iterator[bytes]:
    """A member that answers: its kubeconfig."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kubeconfig(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_server() -> Iterator[bytes]:
    """A member whose API server accepts connections (the kernel's backlog does) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield kubeconfig(listener.getsockname()[1])


def namespace_check(name: str = "probe", **fields: Any) -> ValidateHealth:
    """A check of the served Namespace `default` (Lua in `script`, CEL in `evaluateCEL`)."""
    return ValidateHealth.model_validate(
        {
            "name": name,
            "featureID": "Resources",
            "group": "",
            "version": "v1",
            "kind": "Namespace",
            "resourceName": "default",
            **fields,
        }
    )
