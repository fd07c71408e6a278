#!/usr/bin/env python3
"""Verify a Gantry audit export without Gantry (docs/audit-format.md).

    python3 audit-verify.py EXPORT_FILE SHA256:FINGERPRINT

Checks the manifest's Ed25519 signature and key fingerprint, every event's hash over
its exact bytes, the chain from the anchor (unfiltered exports), the count and the
end of the chain, and the file's sha256. Prints one line (OK ... or FAIL line N: ...)
and exits 0 or 1. Needs Python 3 and the `cryptography` package.
"""
import base64
import csv
import hashlib
import io
import json
import sys
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

HEADER = ["seq", "occurred_at", "actor", "action", "target_type", "target_id", "prev_hash", "hash", "body"]


def fail(line, message):
    print(f"FAIL line {line}: {message}" if line else f"FAIL {message}")
    sys.exit(1)


def when(text):
    # RFC 3339 with up to nanoseconds; Python reads microseconds.
    text = text.replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    return datetime.fromisoformat(text)


def main(path, pinned):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.splitlines(keepends=True)
    if not lines:
        fail(0, "the file is empty")
    last, body_lines = lines[-1].rstrip(b"\r\n"), lines[:-1]
    is_csv = last.startswith(b"#gantry-manifest,")
    if is_csv:
        row = next(csv.reader(io.StringIO(last.decode("utf-8"))))
        signed, signature = row[1], row[2]
    else:
        trailer = json.loads(last)
        signed, signature = trailer["signed"], trailer["signature"]
    manifest = json.loads(signed)
    public = base64.b64decode(manifest["public_key"])
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(public).digest()).decode().rstrip("=")
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(base64.b64decode(signature), signed.encode("utf-8"))
    except InvalidSignature:
        fail(len(lines), "signature: does not verify over the manifest")
    if fingerprint != manifest["key_fingerprint"] or fingerprint != pinned:
        fail(len(lines), f"signature: key {fingerprint} is not the pinned key")

    start, end = when(manifest["from"]), when(manifest["to"])
    chain = manifest["mode"] == "chain"
    count, prev_seq, prev_hash = 0, None, None
    for number, raw in enumerate(body_lines, start=1):
        if is_csv and number == 1:
            if next(csv.reader(io.StringIO(raw.decode("utf-8")))) != HEADER:
                fail(number, "not the export's CSV header")
            continue
        if is_csv:
            row = next(csv.reader(io.StringIO(raw.decode("utf-8"))))
            seq, line_prev, line_hash, body = int(row[0]), row[6], row[7], row[8]
        else:
            event = json.loads(raw)
            seq, line_prev, line_hash = event["seq"], event["prev_hash"], event["hash"]
            # The hashed bytes stand in the line as they were hashed: between ',"body":'
            # and the line's last '}'.
            text = raw.rstrip(b"\r\n")
            body = text[text.index(b',"body":') + len(b',"body":'):-1]
        body_bytes = body if isinstance(body, bytes) else body.encode("utf-8")
        if hashlib.sha256(bytes.fromhex(line_prev) + body_bytes).hexdigest() != line_hash:
            fail(number, f"seq {seq}: the event's hash does not match its bytes (the event was edited)")
        fields = json.loads(body_bytes)
        if fields["seq"] != seq or fields["organization_id"] != manifest["organization_id"]:
            fail(number, f"seq {seq}: the line's sequence or organization is not its event's")
        if not (start <= when(fields["occurred_at"]) < end):
            fail(number, f"seq {seq}: outside the export's range")
        if count == 0:
            if chain and line_prev != manifest["anchor"]:
                fail(number, f"seq {seq} does not follow the anchor")
            if seq != manifest["first_seq"]:
                fail(number, f"seq {seq} where the manifest starts at seq {manifest['first_seq']}")
        elif chain and (seq != prev_seq + 1 or line_prev != prev_hash):
            fail(number, f"seq {seq} does not follow seq {prev_seq}")
        elif seq <= prev_seq:
            fail(number, f"seq {seq} after seq {prev_seq}")
        prev_seq, prev_hash, count = seq, line_hash, count + 1
    if count != manifest["events"] or (count and (prev_seq != manifest["last_seq"] or prev_hash != manifest["last_hash"])):
        fail(len(body_lines) + 1, f"the file ends after {count} events; the manifest says {manifest['events']}")
    if hashlib.sha256(b"".join(body_lines)).hexdigest() != manifest["sha256"]:
        fail(0, "the file's sha256 differs from the signed manifest's")
    print(f"OK {count} events, mode {manifest['mode']}, signed by {manifest['key_id']} ({fingerprint})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip())
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
