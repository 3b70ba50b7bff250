"""Runs Inspect's sandbox conformance checks (inspect_ai/util/_sandbox/self_check.py) against one
sandbox provider and prints one JSON line: {"provider", "passed": [...], "failed": {name: why},
"seconds"}.

    python3 self_check.py PROVIDER COMPOSE_FILE [--backend asyncio|trio] [--only NAME,...]

One sample's sandboxes serve every check, as Inspect's own runner shares one. For `docker` on a
Docker Engine older than Inspect's minimum (24.0.6), set INSPECT_CT_MIN_DOCKER_ENGINE to the
local version: the features the checks use work there, only the version check refuses it.
"""

import argparse
import inspect
import json
import os
import sys
import time

import anyio

from inspect_ai._util.entrypoints import ensure_entry_points
from inspect_ai.util._sandbox import self_check
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv


def _relax_docker_engine_check() -> None:
    version = os.environ.get("INSPECT_CT_MIN_DOCKER_ENGINE")
    if not version:
        return
    import inspect_ai.util._sandbox.docker.docker as docker
    import inspect_ai.util._sandbox.docker.prereqs as prereqs

    async def validate_prereqs() -> None:
        await prereqs.validate_docker_engine(version=version)
        await prereqs.validate_docker_compose()

    docker.validate_prereqs = validate_prereqs


async def run(provider: str, config: str, only: list[str]) -> dict:
    ensure_entry_points()
    _relax_docker_engine_check()
    cls = registry_find_sandboxenv(provider)
    checks = [
        (name, fn)
        for name, fn in inspect.getmembers(self_check, inspect.iscoroutinefunction)
        if name.startswith("test_") and (not only or name in only)
    ]
    started = time.monotonic()
    task = "self_check"
    await cls.task_init(task, config)
    envs = await cls.sample_init(task, config, {})
    env = next(iter(envs.values()))
    passed, failed = [], {}
    try:
        for name, fn in checks:
            try:
                await fn(env)
                passed.append(name)
            except BaseException as ex:  # noqa: BLE001 - a check's failure of any kind is recorded
                if isinstance(ex, (KeyboardInterrupt, SystemExit)):
                    raise
                failed[name] = f"{type(ex).__name__}: {ex}"[:300]
    finally:
        await cls.sample_cleanup(task, config, envs, False)
        await cls.task_cleanup(task, config, True)
    return {"provider": provider, "passed": passed, "failed": failed, "seconds": round(time.monotonic() - started, 2)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("provider")
    p.add_argument("config")
    p.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    p.add_argument("--only", default="")
    a = p.parse_args()
    only = [x for x in a.only.split(",") if x]
    result = anyio.run(run, a.provider, os.path.abspath(a.config), only, backend=a.backend)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
