#!/usr/bin/env python3
"""Write a seed corpus for fuzz_fp_chain into the directory argv[1]: 32-bit
x86 prologs as clang 22 compiles shims for i686-pc-windows-msvc (tinyvm's,
one that saves three registers), and hand-made ones with both encodings of
mov ebp, esp and both forms of sub esp."""
import os
import sys

SEEDS = {
    "tinyvm_shim": "5589e5578b4508",
    "three_saves": "5589e55357568b4508",
    "encodings": "558bec535683ec1081ec0010000031c0",
    "no_chain": "5789e5",
}


def main():
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, hexbytes in SEEDS.items():
        with open(os.path.join(sys.argv[1], name), "wb") as f:
            f.write(bytes.fromhex(hexbytes))


if __name__ == "__main__":
    main()
