# Imported by Inspect through the `inspect_ai` entry point: registers the `ct` sandbox.
from ._sandbox import CtSandboxEnvironment  # noqa: F401
