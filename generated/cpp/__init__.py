"""The C++ target's output for examples/: symgrad gen examples --target cpp."""
