"""symgrad's version: stamped into every generated file's header and read by the build."""

__version__ = "0.1.0"
