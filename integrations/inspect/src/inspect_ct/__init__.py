"""ct's sandbox engine as an Inspect AI sandbox provider (``--sandbox ct``)."""

from ._sandbox import CtSandboxEnvironment

__all__ = ["CtSandboxEnvironment"]
