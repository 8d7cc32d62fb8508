"""A Ray cluster on 127.0.0.1 for the cluster tests (``make test-cluster``)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def ray_head(temp_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A one-node Ray cluster (``ray start --head``, 2 CPUs) with its processes' environment
    ``env`` over this one's; yields its address and stops it afterwards.

    Ray binds its services to the machine's interface address whatever ``--node-ip-address``
    says, so the cluster starts only where loopback is the sole interface: ``make test-cluster``
    runs these tests in a network namespace of their own (``unshare --net``). The head is the
    Ray of the interpreter running the tests (``python -m ray.scripts.scripts``), so its version
    is the drivers'. Ray's token authentication (on by default since Ray 2.5x) is off for this
    loopback cluster, for the head and for every driver this process or its children start (Ray
    would otherwise keep a token in ``~/.ray``).
    """
    interfaces = sorted(name for _, name in socket.if_nameindex() if name != "lo")
    if interfaces:
        pytest.skip(f"interfaces besides loopback ({', '.join(interfaces)}): `make test-cluster`")
    pytest.importorskip("ray")
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        environment = {**os.environ, **(env or {})}
        start = [*ray, "start", "--head", "--node-ip-address=127.0.0.1", "--port=0"]
        start += ["--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
        start += [f"--temp-dir={temp_dir}"]
        started = subprocess.run(
            start, capture_output=True, text=True, timeout=180, env=environment
        )
        assert started.returncode == 0, started.stderr[-3000:]
        address = re.search(r"--address='(127\.0\.0\.1:\d+)'", started.stdout + started.stderr)
        assert address, started.stderr[-3000:]
        try:
            yield address.group(1)
        finally:
            subprocess.run(
                [*ray, "stop", "--force"], capture_output=True, timeout=120, env=environment
            )
