#!/bin/sh
# The layout of user/, checked (make unit runs it before the unit tests): a folder includes
# only itself and the folders tests/layout.py's graph lets it include; a subsystem folder
# (leak/) is used from outside only through its public header; no modules use each other;
# no file is over 800 lines and no function over 80 unless tests/layout_allow.txt says why.
# See tests/layout.py and doc/ARCHITECTURE.md (Layers). Prints each problem as FILE:LINE:
# what; exits 1 on any.
exec python3 "$(dirname "$0")/layout.py" "$@"
