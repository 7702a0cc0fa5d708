#!/usr/bin/env python3
"""Write a seed corpus for fuzz_arm64_unwind into the directory argv[1].

Each seed is 4 bytes of a packed .pdata word followed by an .xdata-like
section: tinyvm's shim record as clang 22 writes it, the ARM64
exception-handling documentation's examples, and records with every unwind
code a shim's prolog may use (save_next chains, alloc_l, add_fp,
pac_sign_lr, homed-parameter nops), and packed words of every CR.
"""
import os
import struct
import sys

RECORDS = {
    "tinyvm_shim": bytes.fromhex("1a00a028e20ad992d910d88ed80c4ae6e6e6e634e4e3e3e3"),
    "docs_example_2": bytes.fromhex("3d0040103800000" "1e19122e4e19122e4"),
    "docs_example_3": bytes.fromhex("12004018" "0f000002" "e3e3e3e3d6000" "5e4e3e3e3e3"),
    "every_code": bytes.fromhex("10002050") + bytes([
        0xe2, 0x02, 0x42, 0xd9, 0x92, 0xd8, 0x0c, 0xdc, 0x04, 0xde, 0x21, 0xda, 0x01,
        0xd6, 0x02, 0xd4, 0x21, 0xd0, 0x82, 0xce, 0x41, 0xcc, 0x01, 0xc8, 0x82, 0xe6,
        0x24, 0xe0, 0x00, 0x01, 0x00, 0xc0, 0x20, 0x05, 0xe3, 0xfc, 0xe4, 0xe3, 0xe3, 0xe3]),
    "extended_header": bytes.fromhex("10000000" "00000200") + bytes([0xe1, 0x81, 0xe4, 0xe3,
                                                                      0xe3, 0xe3, 0xe3, 0xe3]),
}
PACKED = {"cr3": 0x00600021, "cr2_saves": 0x02c3a051, "cr1_large": 0x96220191,
          "docs_example_1": 0x416101ed}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, rec in RECORDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(struct.pack("<I", PACKED["cr3"]) + rec)
    for name, word in PACKED.items():
        with open(os.path.join(out, "packed_" + name), "wb") as f:
            f.write(struct.pack("<I", word) + RECORDS["tinyvm_shim"])


if __name__ == "__main__":
    main()
