"""Writes a pytest.ini holding a TCK's [tool.pytest.ini_options] with the installed pytest as its
minversion.

The 1.0 TCK asks for pytest >= 8 (minversion in its pyproject.toml); Debian bookworm has 7.2,
which runs the suite, but pytest reads minversion from the ini file itself (-o cannot override
it). The run passes this file with -c; every other option is the TCK's.

usage: pytestini.py PYPROJECT OUT
"""

import sys
import tomllib

import pytest


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1], "rb") as f:
        options = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    options["minversion"] = pytest.__version__
    lines = ["[pytest]"]
    for key, value in options.items():
        if isinstance(value, list):
            lines.append(key + " =")
            lines.extend("    " + str(v) for v in value)
        else:
            lines.append(f"{key} = {value}")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
