"""Backends: each turns the IR of a spec (`Derived`) into files; `registry` names them."""
