"""Long fuzz run of the member-kubeconfig boundary: mutate valid kubeconfigs at random and count
inputs that end in anything but a client built from them or a precise KubeconfigRefused.

Each input goes the way a member's Secret goes in the controller: the policy (`kubeconfig_policy`),
the client built from its canonical document (TLS material loaded), a sync client for the health
checks, and helm's kubeconfig file.

Run: .venv/bin/python bench/fuzz_kubeconfigs.py [--inputs 200000] [--seed 1]
Reports inputs tried, how many were accepted, and each distinct escape (exception type, file, line).
"""

from __future__ import annotations

import argparse
import base64
import collections
import copy
import datetime
import json
import random
import traceback
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fleetwave.delivery.target import CredentialsRefused, MemberTarget
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kubeconfig_policy as policy


def _pem_pair() -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuzz")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return base64.b64encode(cert_pem).decode(), base64.b64encode(key_pem).decode()


def _seeds() -> list[dict[str, Any]]:
    cert, key = _pem_pair()
    token_user = {"token": "abc.def"}
    cert_user = {"client-certificate-data": cert, "client-key-data": key}
    cluster = {"server": "https://10.0.0.1:6443", "certificate-authority-data": cert}
    seeds = []
    for user in (token_user, cert_user):
        seeds.append(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": dict(cluster)},
                    {"name": "d", "cluster": {"server": "https://x"}},
                ],
                "users": [{"name": "u", "user": dict(user)}, {"name": "v", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "default"}},
                    {"name": "other", "context": {"cluster": "d", "user": "v"}},
                ],
                "current-context": "ctx",
                "preferences": {},
            }
        )
    return seeds


VALUES: list[Any] = [
    *(0, -1, True, False, None, "", "x", "c", "u", "ctx", "d", "v", "other", "a" * 300, "\x00", "é"),
    *([], {}, [1], [None], [{}], {"name": "c"}, {"name": "u"}, {"name": 3}, [[[]]], 1.5, 10**40),
    *("https://h:99999", "https://[::1", "https://h/\x00", "http://10.0.0.1", "https://u:p@h", "ftp://h"),
    *(
        "https://h?x=1",
        "https://%zz",
        "https://h:0",
        "https://",
        "//h",
        "https://h#f",
        "https://[fe80::1%eth0]",
    ),
    *("Q0E=", "%%", "not base64", "Zm9v\nYmFy", "two words", "tok\r\nX-Injected: 1"),
    *({"command": "/bin/sh"}, {"apiVersion": "v1", "command": "/bin/sh"}, {"name": "oidc"}),
    *({"server": "https://h"}, {"token": "t"}, {"cluster": "c", "user": "u"}, {"cluster": "zz"}),
]
KEYS = [
    *("exec", "tokenFile", "auth-provider", "client-certificate", "client-key", "username", "password"),
    *("proxy-url", "certificate-authority", "insecure-skip-tls-verify", "tls-server-name", "namespace"),
    *("token", "client-certificate-data", "client-key-data", "certificate-authority-data", "server"),
    *("name", "cluster", "user", "context", "extensions"),
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _mutate(rnd: random.Random, doc: Any) -> Any:
    for _ in range(rnd.randint(1, 3)):
        path = rnd.choice(_paths(doc))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        value = copy.deepcopy(rnd.choice(VALUES))
        if not path:
            continue
        node = parent[path[-1]]
        roll = rnd.random()
        if roll < 0.25 and isinstance(node, dict):
            node[rnd.choice(KEYS)] = value  # add or replace a field
        elif roll < 0.45 and isinstance(node, list) and node:
            node.append(copy.deepcopy(rnd.choice(node)))  # repeat an entry: duplicate names
        elif roll < 0.55 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return doc


def _escape(doc: Any) -> tuple[str, str, int] | None:
    data = json.dumps(doc, default=str)
    try:
        config = kubeclient.member_config(data)
        kubeclient.client(config).close()
        kubeclient.async_client(config)
        with MemberTarget("fuzz", data.encode()).kubeconfig_file():
            pass
    except (policy.KubeconfigRefused, CredentialsRefused):
        return None
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return type(e).__name__, Path(frame.filename).name, frame.lineno or 0
    return ("accepted", "", 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    seeds = _seeds()
    rnd = random.Random(args.seed)
    escapes: collections.Counter[tuple[str, str, int]] = collections.Counter()
    accepted = 0
    for _ in range(args.inputs):
        found = _escape(_mutate(rnd, copy.deepcopy(rnd.choice(seeds))))
        if found is not None and found[0] == "accepted":
            accepted += 1
        elif found is not None:
            escapes[found] += 1
    print(f"inputs tried: {args.inputs}; accepted: {accepted}; uncaught: {sum(escapes.values())}")
    for (kind, where, line), count in escapes.most_common():
        print(f"  {count:>7}  {kind}  {where}:{line}")


if __name__ == "__main__":
    main()
