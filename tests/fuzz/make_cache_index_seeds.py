#!/usr/bin/env python3
"""Write a seed corpus for fuzz_cache_index into the directory argv[1].

Each seed is a records3.idx as generator/cache.c writes it: file lists ("L
<n>", paths, ".") before the records ("R <args> <absent> <list> <slot>") that
name them; one list shared by several slots, an empty list, a slot kept
under several argument hashes, one index torn in the middle of a record, and
parts a run appended ("S <n>", then lists numbered afresh and records newer
than the same keys' before them).
"""
import os
import sys

HEADERS = ["/usr/include/stdint.h", "/usr/include/features.h", "/work/vm/template.h"]


def record(args, absent, lst, slot):
    return "R %064x %064x %d %s\n" % (args, absent, lst, slot)


def index(lists, records):
    text = ""
    for n, paths in enumerate(lists):
        text += "L %d\n" % n + "".join(p + "\n" for p in paths) + ".\n"
    return text + "".join(record(*r) for r in records)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        "shared-list": index([HEADERS], [(0x9dc88033fd4527b6, 0x826a7abe643f8ee9f2fba282b283b6fd,
                                          0, "x86_64-unknown-linux-gnu/op_%s.o" % op)
                                         for op in ("add", "sub", "load__in1_out2")]),
        "two-lists": index([HEADERS, HEADERS[:1] + ["/work/vm/ops.h"], []],
                           [(1, 2, 0, "aarch64-unknown-linux-gnu/shim.o"),
                            (3, 4, 1, "aarch64-unknown-linux-gnu/op_add.o"),
                            (5, 6, 2, "discover/00112233445566778899")]),
        "slot-per-args": index([HEADERS], [(k, k, 0, "x86_64-w64-windows-gnu/op_add.o")
                                           for k in range(1, 7)]),
    }
    seeds["torn"] = seeds["two-lists"][:-17]
    seeds["appended"] = (seeds["shared-list"] + "S 1\n" +
                         index([HEADERS[1:]], [(0x9dc88033fd4527b6, 0x826a7abe643f8ee9f2fba282b283b6fd,
                                                0, "x86_64-unknown-linux-gnu/op_add.o")]) +
                         "S 2\n" + index([[]], [(7, 8, 0, "discover/00112233445566778899")]))
    for name, text in seeds.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
