#!/usr/bin/env python3
"""Regenerate the golden headers: python3 tests/golden/update.py BUILD_DIR

Writes tests/golden/jit_stencils*.h from golden.yaml with BUILD_DIR's stencilgen.
Review `git diff tests/golden` before committing: every line that changed is a
change to what users' builds will contain."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    stencilgen = os.path.join(sys.argv[1], "generator", "stencilgen")
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([stencilgen, "build", "--manifest", os.path.join(HERE, "golden.yaml"),
                        "--outdir", out], check=True, timeout=600)
        for old in glob.glob(os.path.join(HERE, "jit_stencils*.h")):
            os.unlink(old)
        for h in sorted(glob.glob(os.path.join(out, "jit_stencils*.h"))):
            shutil.copy(h, HERE)
            print("wrote", os.path.relpath(os.path.join(HERE, os.path.basename(h))))


if __name__ == "__main__":
    main()
