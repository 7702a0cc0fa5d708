#!/usr/bin/env python3
"""Regenerate the golden headers: python3 tests/golden/update.py BUILD_DIR

Writes tests/golden/jit_stencils*.h from golden.yaml with BUILD_DIR's stencilgen,
and tests/golden/no-hot-cold/jit_stencils*.h the same with --no-hot-cold.
Review `git diff tests/golden` before committing: every line that changed is a
change to what users' builds will contain."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


# Where each setting's headers go, and the options that make them.
SETTINGS = [(HERE, []), (os.path.join(HERE, "no-hot-cold"), ["--no-hot-cold"])]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    stencilgen = os.path.join(sys.argv[1], "generator", "stencilgen")
    for dest, options in SETTINGS:
        os.makedirs(dest, exist_ok=True)
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([stencilgen, "build", "--manifest", os.path.join(HERE, "golden.yaml"),
                            "--outdir", out] + options, check=True, timeout=600)
            for old in glob.glob(os.path.join(dest, "jit_stencils*.h")):
                os.unlink(old)
            for h in sorted(glob.glob(os.path.join(out, "jit_stencils*.h"))):
                shutil.copy(h, dest)
                print("wrote", os.path.relpath(os.path.join(dest, os.path.basename(h))))


if __name__ == "__main__":
    main()
