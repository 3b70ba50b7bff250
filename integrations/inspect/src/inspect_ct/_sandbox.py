"""The `ct` sandbox: Inspect's SandboxEnvironment methods mapped onto `ct sandbox serve`."""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any, Literal, Union, overload

import anyio
import yaml
from typing_extensions import override

from inspect_ai.util import (
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    sandboxenv,
)
from inspect_ai.util._subprocess import ExecResult

from ._client import CtServeError, server

# The file names Inspect's docker sandbox looks for (a compose file, else a Dockerfile).
_CONFIG_FILES = ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml", "Dockerfile"]
_REMOTE = re.compile(r"^(ssh://|ec2$)")


@sandboxenv(name="ct")
class CtSandboxEnvironment(SandboxEnvironment):
    """A service of a sample, run by ct's docker engine (exec channels inside the container)."""

    def __init__(self, handle: str, service: str, container: str, sample: int, working_dir: str) -> None:
        super().__init__()
        self._handle = handle
        self._service = service
        self._container = container
        self._sample = sample
        self._working_dir = working_dir

    @classmethod
    def config_files(cls) -> list[str]:
        return list(_CONFIG_FILES)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return 2 * (os.cpu_count() or 1)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        await _call("task_init", {"config": _config_path(config), "cwd": os.getcwd(), "task": task_name})

    @override
    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        path = _config_path(config)
        header, _ = await _call(
            "sample_init",
            {"config": path, "cwd": os.getcwd(), "task": task_name, "label": _sample_label(), "env": _metadata_env(path, metadata)},
        )
        sample = int(header["sample"])
        # `default` comes first (ct orders it so), as Inspect expects.
        return {
            s["service"]: CtSandboxEnvironment(s["handle"], s["service"], s["container"], sample, s["working_dir"])
            for s in header["services"]
        }

    @override
    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        # Removed at once even when interrupted: ct's removal takes well under a second.
        samples = {e.as_type(CtSandboxEnvironment)._sample for e in environments.values()}
        with anyio.CancelScope(shield=True):
            for sample in samples:
                await _call("sample_cleanup", {"sample": sample})

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        with anyio.CancelScope(shield=True):
            await _call("task_cleanup", {"task": task_name, "cleanup": cleanup})

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        header, _ = await _call("cleanup", {"project": id or "", "all": False})
        for project in header.get("removed", []):
            print(f"removed {project}")
        kept = header.get("kept", [])
        print(
            f"{len(header.get('removed', []))} ct sandbox project(s) removed"
            + (f", {len(kept)} kept (their Inspect or ct process is still running)" if kept else "")
        )

    @override
    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        body = input.encode("utf-8") if isinstance(input, str) else (input or b"")
        args: dict[str, Any] = {
            "handle": self._handle,
            "cmd": list(cmd),
            "input": input is not None,
            "max_output": SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE,
        }
        if cwd is not None:
            args["cwd"] = cwd
        if env:
            args["env"] = env
        if user is not None:
            args["user"] = user
        if timeout is not None:
            args["timeout"] = timeout
        try:
            header, out = await _call("exec", args, body)
        except CtServeError as ex:
            if ex.type == "timeout":
                error = TimeoutError(f"Command timed out after {timeout} seconds")
                partial = ex.body.decode("utf-8", errors="replace")
                if partial:
                    setattr(error, "truncated_output", partial)
                raise error from None
            raise
        split = int(header.get("stdout_bytes", len(out)))
        result = ExecResult(
            success=header["returncode"] == 0,
            returncode=int(header["returncode"]),
            stdout=out[:split].decode("utf-8", errors="replace"),
            stderr=out[split:].decode("utf-8", errors="replace"),
        )
        if _not_executable(result):
            raise PermissionError(f"Permission denied executing command: {result}")
        return result

    @override
    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        await _call("write_file", {"handle": self._handle, "path": file}, data)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    @override
    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        _, data = await _call(
            "read_file",
            {"handle": self._handle, "path": file, "limit": SandboxEnvironmentLimits.MAX_READ_FILE_SIZE},
        )
        return data.decode("utf-8") if text else data

    @override
    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        command = ["docker", "exec", "-it", *(["--user", user] if user else []), self._container, "bash", "-l"]
        return SandboxConnection(type="docker", command=shlex.join(command), container=self._container)

    def container_file(self, file: str) -> str:
        path = Path(file)
        return path.as_posix() if path.is_absolute() else (Path(self._working_dir) / path).as_posix()


async def _call(op: str, args: dict[str, Any], body: bytes = b"") -> tuple[dict[str, Any], bytes]:
    """One request, with ct's errors raised as the exceptions Inspect expects."""
    srv = await server()
    try:
        return await srv.request(op, args, body)
    except CtServeError as ex:
        if ex.type == "timeout":
            raise
        path = args.get("path")
        match ex.type:
            case "not_found":
                raise FileNotFoundError(2, "No such file or directory", path) from None
            case "permission":
                raise PermissionError(13, "Permission denied", path) from None
            case "is_directory":
                raise IsADirectoryError(21, "Is a directory", path) from None
            case "output_limit":
                raise OutputLimitExceededError(
                    limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR
                    if op == "read_file"
                    else SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                    truncated_output=None,
                ) from None
            case "unavailable":
                raise SandboxUnavailableError(str(ex)) from None
            case "config":
                raise ValueError(str(ex)) from None
            case _:
                raise RuntimeError(f"ct sandbox: {ex}") from None


def _not_executable(result: ExecResult[str]) -> bool:
    """The command could not be started, not being executable: exit 126 and one line saying so
    on one stream only (the engine's own report is on stdout, the exec agent's on stderr)."""
    if result.returncode != 126 or (result.stdout.strip() and result.stderr.strip()):
        return False
    lines = (result.stdout or result.stderr).strip().splitlines()
    return len(lines) == 1 and "permission denied" in lines[0].lower()


def _config_path(config: SandboxEnvironmentConfigType | None) -> str | None:
    """The config as a file path ct can read (absolute), or None for the default environment."""
    if config is None:
        return None
    if isinstance(config, str):
        if _REMOTE.match(config):
            raise ValueError(
                f"the ct sandbox does not support remote hosts yet (ct:{config}); run ct's own "
                "`ct run eval --sandbox ...` for ssh and ec2, or use a compose file or Dockerfile here"
            )
        return os.path.abspath(config)
    dump = getattr(config, "model_dump", None)
    if dump is None:
        raise ValueError(f"the ct sandbox takes a compose file, a Dockerfile or a compose config, not {type(config).__name__}")
    # A ComposeConfig object: written out as the compose file it describes.
    data = dump(exclude_none=True, by_alias=True)
    handle, path = tempfile.mkstemp(prefix="inspect-ct-", suffix=".yaml")
    with os.fdopen(handle, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return path


def _metadata_env(path: str | None, metadata: dict[str, str]) -> dict[str, str]:
    """SAMPLE_METADATA_<KEY> for each key the compose file mentions, as Inspect's docker sandbox sets them."""
    if path is None or not os.path.isfile(path):
        return {}
    with open(path, "r") as f:
        text = f.read()
    env: dict[str, str] = {}
    for key, value in metadata.items():
        name = f"SAMPLE_METADATA_{key.replace(' ', '_').upper()}"
        if name in text:
            env[name] = str(value)
    return env


def _sample_label() -> str:
    try:
        from inspect_ai.log._samples import sample_active

        active = sample_active()
        if active is not None:
            return f"{active.sample.id}-{active.epoch}"
    except Exception:
        pass
    return "sample"
