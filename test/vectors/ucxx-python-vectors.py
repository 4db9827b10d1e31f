#!/usr/bin/env python3
"""Writes ucxx-python.json: test vectors for src/ucxx-python, computed the way ucxx Python computes them.

hash64bits is python/ucxx/ucxx/_lib_async/utils.py; the peer information is the struct.pack("QQ", ...)
of exchange_peer_info.py; the tag of a user-tagged message is hash64bits(endpoint_tag, hash(tag)) as in
endpoint.py; the tagMulti header is ucxx::Header::serialize() (cpp/src/header.cpp): bool, size_t,
int[100], size_t[100], written one after the other with no padding. Run: python3 ucxx-python-vectors.py
"""
import hashlib
import json
import os
import struct


def hash64bits(*args):
    h = hashlib.sha1(bytes(repr(args), "utf-8")).hexdigest()[:16]
    return int(h, 16)


out = {}
ints = [0, 1, 5, 2**32, 2**63, 2**64 - 1, 0x0123456789ABCDEF, -1, -12345678901234567890]
out["int"] = [[str(i), repr((i,)), hex(hash64bits(i))] for i in ints]
tags = [0, 1, 0xFEDCBA9876543210, 2**64 - 1]
out["peer"] = [[hex(t), struct.pack("<QQ", t, hash64bits(t)).hex()] for t in tags]
seeds = [bytes(range(16)), b"'" * 16, b"'\"" + bytes(range(240, 254)), b'\\\t\n\r\x7f\x80\xff abcXYZ~"']
handles = [0x55D0C0A1B2C0, 0x7F00DEADBEEF, 1, 0]
out["msgtag"] = [
    [s.hex(), hex(h), repr(("msg_tag", s, h)), hex(hash64bits("msg_tag", s, h))] for s, h in zip(seeds, handles)
]
out["allbytes"] = repr(bytes(range(256)))
out["strs"] = [[s, repr((s,))] for s in ["msg_tag", "it's", 'say "hi"', "both ' and \"", "tab\there\\ \x01\x7f"]]
P = 2**61 - 1
utags = [0, 1, 42, -1, -2, P, P + 5, -P - 1, 2**64 - 1, -(2**61), 10**30]
out["pyhash"] = [[str(t), str(hash(t))] for t in utags]
base = 0x0123456789ABCDEF
out["usertag"] = [[hex(base), str(t), hex(hash64bits(base, hash(t)))] for t in utags]


def header(nxt, sizes):
    pad = 100 - len(sizes)
    return struct.pack("<?Q100i100Q", nxt, len(sizes), *([0] * 100), *(sizes + [0] * pad))


out["header"] = [
    [False, [0, 5, 1 << 40], header(False, [0, 5, 1 << 40]).hex()],
    [True, list(range(100)), header(True, list(range(100))).hex()],
]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ucxx-python.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
