#!/bin/sh
# The layout of user/, checked (make unit runs it before the unit tests): a layer includes
# only itself and the layers below, no modules use each other, no file is over 800 lines and
# no function over 80 unless tests/layout_allow.txt says why. See tests/layout.py and
# doc/ARCHITECTURE.md (Layers). Prints each problem as FILE:LINE: what; exits 1 on any.
exec python3 "$(dirname "$0")/layout.py" "$@"
